"""The cluster overview and a job end to end. (The dashboards' table: definitions.py.)"""

from __future__ import annotations

from grafanalib import core as g

from dashboards.common import (
    FINDINGS_IN_RANGE,
    build_dashboard,
    counter_rate,
    job_nodes,
    job_pods,
    v_job,
    v_tenant,
)
from dashboards.panels import (
    CLUSTER,
    annotation,
    prom,
    stat,
    table,
    tbl,
    ts,
)


# --- cluster overview ----------------------------------------------------------------------------
def overview() -> g.Dashboard:
    return build_dashboard(
        "railscope-overview",
        "railscope / Cluster overview",
        "Incidents, findings, GPUs and fabric of one cluster at a glance.",
        [],
        [
            stat(
                "Critical findings",
                f"SELECT count() FROM {tbl('finding', final=True)} WHERE {FINDINGS_IN_RANGE} "
                "AND severity = 'critical'",
            ),
            stat(
                "Warnings",
                f"SELECT count() FROM {tbl('finding', final=True)} WHERE {FINDINGS_IN_RANGE} "
                "AND severity = 'warning'",
            ),
            stat(
                "GPUs reporting",
                f"SELECT uniqExact(node, gpu) FROM {tbl('gpu_sample')} WHERE {CLUSTER} AND $__timeFilter(ts)",
            ),
            stat(
                "GPUs lost",
                f"SELECT uniqExactIf((node, gpu), up = 0) FROM {tbl('gpu_sample')} "
                f"WHERE {CLUSTER} AND $__timeFilter(ts)",
            ),
            ts(
                "Findings by category",
                f"SELECT $__timeInterval(window_start) AS time, category, count() AS findings "
                f"FROM {tbl('finding', final=True)} WHERE {FINDINGS_IN_RANGE} "
                "GROUP BY time, category ORDER BY time, category",
            ),
            ts(
                "GPU utilization by tenant",
                f"SELECT $__timeInterval(ts) AS time, if(namespace = '', '(no pod)', namespace) "
                f"AS tenant, avg(utilization_ratio) AS utilization FROM {tbl('gpu_sample')} "
                f"WHERE {CLUSTER} AND $__timeFilter(ts) GROUP BY time, tenant ORDER BY time, tenant",
                unit="percentunit",
            ),
            ts(
                "Busiest port per switch role (tx utilization)",
                f"SELECT $__timeInterval(ts) AS time, role, max(tx_utilization_ratio) AS utilization "
                f"FROM {tbl('switch_port_sample')} WHERE {CLUSTER} AND $__timeFilter(ts) "
                "GROUP BY time, role ORDER BY time, role",
                unit="percentunit",
            ),
            prom(
                "railscope exporters up",
                [('sum by (job) (up{job=~"railscope.*"})', "{{job}}")],
            ),
            table(
                "Incidents (findings grouped by root cause)",
                f"SELECT severity, state, root_kind, root_subject, findings, jobs, tenants, "
                f"round(gpu_hours, 1) AS gpu_hours, first_seen, last_seen, summary, remediation, "
                f"runbook, incident_id "
                f"FROM {tbl('incident', final=True)} WHERE {FINDINGS_IN_RANGE} AND merged_into = '' "
                "ORDER BY state = 'open' DESC, severity = 'critical' DESC, last_seen DESC LIMIT 200",
                h=10,
            ),
            table(
                "Current findings",
                f"SELECT severity, kind, subject, summary, first_seen, last_seen "
                f"FROM {tbl('finding', final=True)} WHERE {FINDINGS_IN_RANGE} "
                "ORDER BY severity = 'critical' DESC, last_seen DESC LIMIT 200",
                h=10,
            ),
        ],
    )


# --- job end to end ------------------------------------------------------------------------------
def job() -> g.Dashboard:
    one = "concat({ns}, '/', {job}) = ${{job:sqlstring}}"
    hops = f"""
WITH hops AS (
  SELECT switch, out_port AS port, sum(bytes) AS job_bytes, max(lca_tier) AS tier
  FROM {tbl("attributed_flow")}
  WHERE {CLUSTER} AND $__timeFilter(ts)
    AND ({one.format(ns="src_namespace", job="src_job")} OR {one.format(ns="dst_namespace", job="dst_job")})
  GROUP BY switch, port
)
SELECT h.switch AS switch, h.port AS port, h.tier AS lca_tier, h.job_bytes AS job_bytes,
       p.role AS role, p.max_util AS max_tx_utilization, p.pfc_rx AS pfc_rx_pauses,
       p.discards AS discards, q.ecn_marked AS ecn_marked_packets, q.watermark AS max_watermark_bytes
FROM hops AS h
LEFT JOIN (
  SELECT switch, port, any(role) AS role, max(tx_utilization_ratio) AS max_util,
         max(pfc_rx_pause_total) - min(pfc_rx_pause_total) AS pfc_rx,
         max(tx_discards_total) - min(tx_discards_total) AS discards
  FROM {tbl("switch_port_sample")} WHERE {CLUSTER} AND $__timeFilter(ts) GROUP BY switch, port
) AS p ON p.switch = h.switch AND p.port = h.port
LEFT JOIN (
  SELECT switch, port, sum(m) AS ecn_marked, max(w) AS watermark FROM (
    SELECT switch, port, queue,
           max(ecn_marked_packets_total) - min(ecn_marked_packets_total) AS m,
           max(watermark_bytes) AS w
    FROM {tbl("switch_queue_sample")} WHERE {CLUSTER} AND $__timeFilter(ts) GROUP BY switch, port, queue)
  GROUP BY switch, port
) AS q ON q.switch = h.switch AND q.port = h.port
ORDER BY max_tx_utilization DESC, job_bytes DESC
LIMIT 100"""
    # findings about the job, its pods (JOB-...), its nodes (NODE/...) or a fabric port its
    # traffic took (SWITCH:PORT, the hops `railscope report --job` ranks)
    on_job = (
        f"{FINDINGS_IN_RANGE} AND (subject = ${{job:sqlstring}} "
        "OR position(subject, concat(${job:sqlstring}, '-')) > 0 "
        "OR startsWith(subject, concat(${job:sqlstring}, '/')) "
        f"OR splitByChar('/', subject)[1] IN ({job_nodes()}) "
        f"OR subject IN (SELECT concat(switch, ':', out_port) FROM {tbl('attributed_flow')} "
        f"WHERE {CLUSTER} AND $__timeFilter(ts) AND ({one.format(ns='src_namespace', job='src_job')} "
        f"OR {one.format(ns='dst_namespace', job='dst_job')})))"
    )
    return build_dashboard(
        "railscope-job",
        "railscope / Job end to end",
        "One job: its pods and where they sit, the fabric ports its traffic took with the "
        "evidence on each (utilization, PFC, ECN, discards), its GPUs and NICs, its findings. "
        "`railscope report --job NS/JOB` ranks the same hops.",
        [v_tenant(), v_job(include_all=False)],
        [
            table(
                "Job and its networkTopology constraint",
                f"SELECT namespace, job, queue, replicas, topology_mode, highest_tier_allowed, "
                f"highest_tier_name, allocated_hypernode FROM {tbl('job', final=True)} "
                f"WHERE {CLUSTER} AND {one.format(ns='namespace', job='job')}",
                w=12,
                h=5,
            ),
            table(
                "Pods per scalable unit and IDC",
                f"SELECT n.idc AS idc, n.su AS su, count() AS pods, "
                f"arrayStringConcat(groupArray(p.node), ', ') AS nodes "
                f"FROM {tbl('pod', final=True, alias='p')} LEFT JOIN (SELECT node, idc, su FROM {tbl('node', final=True)} "
                f"WHERE {CLUSTER}) AS n ON n.node = p.node "
                f"WHERE p.{CLUSTER} AND {one.format(ns='p.namespace', job='p.job')} "
                "AND p.valid_from <= $__toTime AND (p.valid_to IS NULL OR p.valid_to >= $__fromTime) "
                "GROUP BY idc, su ORDER BY idc, su",
                w=12,
                h=5,
            ),
            table(
                "Pods",
                f"SELECT pod, node, phase, valid_from, valid_to FROM {tbl('pod', final=True)} "
                f"WHERE {CLUSTER} AND {one.format(ns='namespace', job='job')} "
                "AND valid_from <= $__toTime AND (valid_to IS NULL OR valid_to >= $__fromTime) "
                "ORDER BY pod",
                w=12,
            ),
            table(
                "Bytes by the tier they crossed (lowest common HyperNode)",
                f"SELECT lca_tier, lca_hypernode, sum(bytes) AS bytes, count() AS samples "
                f"FROM {tbl('attributed_flow')} WHERE {CLUSTER} AND $__timeFilter(ts) AND "
                f"{one.format(ns='src_namespace', job='src_job')} "
                "GROUP BY lca_tier, lca_hypernode ORDER BY lca_tier DESC, bytes DESC",
                w=12,
            ),
            table(
                "Path: fabric ports the job's traffic took, with per-hop evidence",
                hops,
                h=10,
                description="Counter spreads (max - min) over the range; the correlation engine "
                "computes reset-safe increases per window.",
            ),
            ts(
                "GPU utilization of the job's nodes",
                f"SELECT $__timeInterval(ts) AS time, node, avg(utilization_ratio) AS utilization "
                f"FROM {tbl('gpu_sample')} WHERE {CLUSTER} AND $__timeFilter(ts) "
                f"AND (namespace, pod) IN ({job_pods()}) "
                "GROUP BY time, node ORDER BY time, node",
                unit="percentunit",
            ),
            ts(
                "RDMA transmit of the job's nodes",
                counter_rate(
                    "nic_sample",
                    "node, device, port",
                    "tx_bytes_total",
                    "node",
                    f"node IN ({job_nodes()})",
                ),
                unit="Bps",
            ),
            ts(
                "Bus bandwidth per collective (NCCL Inspector)",
                "SELECT $__timeInterval(ts) AS time, concat(collective, ' ', msg_size_bucket) "
                "AS collective, median(bus_bandwidth_gbs) AS bus_bandwidth "
                f"FROM {tbl('collective_sample')} WHERE {CLUSTER} AND $__timeFilter(ts) "
                f"AND {one.format(ns='namespace', job='job')} "
                "GROUP BY time, collective ORDER BY time, collective",
                unit="GBs",
                w=24,
                description="Median over the job's ranks per collective and message size; "
                "the findings on the job, its nodes and the fabric ports its traffic took "
                "(collective_slowdown / collective_straggler among them) are drawn as regions "
                "and listed in the table below (`railscope nccl`, docs/nccl.md).",
            ),
            ts(
                "Bus bandwidth by algorithm and protocol (NCCL Inspector)",
                "SELECT $__timeInterval(ts) AS time, concat(collective, ' ', msg_size_bucket, ' ', "
                "if(algorithm = '', 'algorithm not reported', concat(algorithm, '/', protocol))) "
                "AS how, median(bus_bandwidth_gbs) AS bus_bandwidth "
                f"FROM {tbl('collective_sample')} WHERE {CLUSTER} AND $__timeFilter(ts) "
                f"AND {one.format(ns='namespace', job='job')} "
                "GROUP BY time, how ORDER BY time, how",
                unit="GBs",
                w=16,
                description="Median over the job's ranks per collective, size, and the NCCL "
                "algorithm/protocol it ran with (Inspector v4.2 coll_algo / coll_proto; older "
                "captures say none). A forced algorithm that reaches well below another at the "
                "same shape is a collective_algorithm_underperforms finding (docs/nccl.md).",
            ),
            table(
                "NCCL settings of the job's pods",
                f"SELECT name, value, source, ref, uniqExact(pod) AS pods "
                f"FROM {tbl('nccl_setting', final=True)} "
                f"WHERE {CLUSTER} AND {one.format(ns='namespace', job='job')} "
                "AND valid_from <= $__toTime AND (valid_to IS NULL OR valid_to >= $__fromTime) "
                "GROUP BY name, value, source, ref ORDER BY name, pods DESC",
                w=8,
                description="NCCL_* environment variables of the pods' containers as the "
                "inventory read them (ConfigMap values resolved where the ConfigMap was at hand; "
                "secrets are never stored).",
            ),
            table(
                "Log events of the job's pods and nodes",
                f"SELECT ts, kind, node, pod, fields, excerpt FROM {tbl('log_event')} "
                f"WHERE {CLUSTER} AND $__timeFilter(ts) AND ((namespace, pod) IN ({job_pods()}) "
                f"OR (pod = '' AND node IN ({job_nodes()}))) "
                "ORDER BY ts DESC LIMIT 500",
                w=24,
                description="Lines of the job's pod logs and its nodes' kernel logs that railscope's "
                "grammar recognised (`railscope logs`: NCCL init and IB errors, PyTorch watchdog "
                "timeouts, Xids), with their fields; unmatched lines are never stored. The "
                "log-born findings (nccl_network_error, collective_timeout, ...) judge them.",
            ),
            table(
                "Findings on the job, its pods, its nodes and its path",
                f"SELECT severity, kind, subject, summary, first_seen, last_seen "
                f"FROM {tbl('finding', final=True)} WHERE {on_job} "
                "ORDER BY last_seen DESC LIMIT 200",
            ),
        ],
        annotations=[
            annotation(
                "Findings on the job and its path",
                "SELECT first_seen AS time, last_seen AS timeEnd, "
                "concat(severity, ' ', kind, ' on ', subject, ': ', summary) AS text, "
                f"concat(kind, ',', severity) AS tags FROM {tbl('finding', final=True)} "
                f"WHERE {on_job} ORDER BY time LIMIT 500",
            )
        ],
    )
