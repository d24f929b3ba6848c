"""The railscope dashboards. SQL names tables only through `tbl(kind)` (the store's one table
helper): unqualified in the built JSON (the datasource's default database is the store's),
qualified when `build_all(database=)` renders them to run on a store; versioned kinds
(inventory, findings) are read FINAL. Every query here is run on a simulated store by tests/integration/dashboards."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grafanalib import core as g

from dashboards.clickhouse import ALL, variable
from dashboards.panels import (
    CLUSTER,
    annotation,
    any_of,
    job_of,
    layout,
    prom,
    stat,
    table,
    tbl,
    ts,
)
from telemetry.records import KINDS


# --- template variables (built per call: table names depend on build_all's database) -----------
def v_cluster() -> dict[str, Any]:
    return variable(
        "cluster",
        f"SELECT DISTINCT cluster FROM {tbl('node', final=True)} ORDER BY cluster",
        include_all=False,
        refresh=1,
    )


def v_tenant() -> dict[str, Any]:
    return variable(
        "tenant",
        f"SELECT DISTINCT namespace FROM {tbl('pod', final=True)} WHERE {CLUSTER} ORDER BY namespace",
    )


def v_job(include_all: bool = True) -> dict[str, Any]:
    v = variable(
        "job",
        f"SELECT DISTINCT concat(namespace, '/', job) FROM {tbl('job', final=True)} "
        f"WHERE {CLUSTER} AND {any_of('tenant', 'namespace')} ORDER BY 1",
        include_all=include_all,
    )
    return v


def v_node() -> dict[str, Any]:
    return variable(
        "node",
        f"SELECT DISTINCT node FROM {tbl('node', final=True)} WHERE {CLUSTER} ORDER BY node",
    )


def v_switch() -> dict[str, Any]:
    return variable(
        "switch",
        f"SELECT DISTINCT switch FROM {tbl('switch_port_sample')} WHERE {CLUSTER} "
        "AND $__timeFilter(ts) ORDER BY switch",
    )


def counter_rate(kind: str, keys: str, counter: str, series: str, where: str = "1") -> str:
    """Per-second rate of a counter per `series`: increases between consecutive samples of one
    key (a decrease is a reset: the increase counts from zero, never negative), summed per bucket."""
    return f"""
SELECT time, series, sum(inc) / $__interval_s AS value
FROM (
  SELECT $__timeInterval(ts) AS time, {series} AS series,
         toFloat64({counter}) AS cur,
         lagInFrame(cur, 1, cur) OVER (
           PARTITION BY {keys} ORDER BY ts ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS prev,
         if(cur >= prev, cur - prev, cur) AS inc
  FROM {tbl(kind)}
  WHERE {CLUSTER} AND $__timeFilter(ts) AND {where}
)
GROUP BY time, series ORDER BY time, series"""


FINDINGS_IN_RANGE = f"{CLUSTER} AND last_seen >= $__fromTime AND first_seen <= $__toTime"


def job_pods() -> str:
    return f"SELECT namespace, pod FROM {tbl('pod', final=True)} WHERE {CLUSTER} AND {job_of('namespace', 'job')}"


def job_nodes() -> str:
    return f"SELECT node FROM {tbl('pod', final=True)} WHERE {CLUSTER} AND {job_of('namespace', 'job')}"


def _dashboard(
    uid: str,
    title: str,
    description: str,
    variables: list[dict[str, object]],
    panels: list,
    annotations: list[dict[str, Any]] | None = None,
) -> g.Dashboard:
    """A railscope dashboard: scoped to one cluster ($cluster first), narrowed by `variables`,
    with `annotations` drawn on its time series."""
    return g.Dashboard(
        title=title,
        uid=uid,
        description=description,
        tags=["railscope"],
        timezone="utc",
        refresh="1m",
        schemaVersion=39,
        time=g.Time("now-1h", "now"),
        templating=g.Templating(list=[v_cluster(), *variables]),
        panels=layout(panels),
        annotations=g.Annotations(list=annotations or []),
        links=[
            g.DashboardLink(
                title="railscope",
                tags=["railscope"],
                type="dashboards",
                asDropdown=True,
                includeVars=True,
                keepTime=True,
            )
        ],
    ).auto_panel_ids()


# --- cluster overview ----------------------------------------------------------------------------
def overview() -> g.Dashboard:
    return _dashboard(
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
    return _dashboard(
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


# --- fabric --------------------------------------------------------------------------------------
def fabric() -> g.Dashboard:
    sw = any_of("switch", "switch")
    uplinks = f"""
SELECT switch, count() AS members, round(max(u) / nullIf(avg(u), 0), 2) AS max_over_mean,
       round(max(u), 3) AS hottest_utilization, argMax(port, u) AS hottest_member,
       round(stddevPop(u) / nullIf(avg(u), 0), 3) AS cv
FROM (
  SELECT switch, port, avg(tx_utilization_ratio) AS u
  FROM {tbl("switch_port_sample")}
  WHERE {CLUSTER} AND $__timeFilter(ts) AND {sw} AND role = 'leaf'
    AND (switch, port) IN (
      SELECT local_device, local_port FROM {tbl("lldp_link")}
      WHERE {CLUSTER} AND remote_device IN (
        SELECT DISTINCT switch FROM {tbl("switch_port_sample")}
        WHERE {CLUSTER} AND $__timeFilter(ts) AND role = 'spine'))
  GROUP BY switch, port
)
GROUP BY switch HAVING members > 1
ORDER BY max_over_mean DESC LIMIT 50"""
    return _dashboard(
        "railscope-fabric",
        "railscope / Fabric",
        "Switch ports and queues: utilization, PFC per priority, ECN marks and CNPs, ECMP "
        "member spread, buffer watermarks, errors and flaps.",
        [v_switch(), v_node()],
        [
            ts(
                "Port tx utilization (busiest port per switch)",
                f"SELECT $__timeInterval(ts) AS time, switch, max(tx_utilization_ratio) AS utilization "
                f"FROM {tbl('switch_port_sample')} WHERE {CLUSTER} AND $__timeFilter(ts) AND {sw} "
                "GROUP BY time, switch ORDER BY time, switch",
                unit="percentunit",
            ),
            ts(
                "Switch PFC pause frames received per priority",
                counter_rate(
                    "switch_priority_sample",
                    "switch, port, priority",
                    "rx_pause_total",
                    "concat('prio ', toString(priority))",
                    sw,
                ),
                unit="pps",
            ),
            ts(
                "NIC PFC pause frames sent per priority (ethtool)",
                counter_rate(
                    "nic_priority_sample",
                    "node, netdev, priority",
                    "tx_pause_total",
                    "concat('prio ', toString(priority))",
                    any_of("node", "node"),
                ),
                unit="pps",
            ),
            ts(
                "NIC PFC pause frames sent, all priorities (per node)",
                counter_rate(
                    "nic_sample",
                    "node, device, port",
                    "pfc_tx_pause_total",
                    "node",
                    any_of("node", "node"),
                ),
                unit="pps",
            ),
            ts(
                "ECN-marked packets (per switch)",
                counter_rate(
                    "switch_queue_sample",
                    "switch, port, queue, queue_type",
                    "ecn_marked_packets_total",
                    "switch",
                    sw,
                ),
                unit="pps",
            ),
            ts(
                "CNPs sent by receivers (per node)",
                counter_rate(
                    "nic_sample",
                    "node, device, port",
                    "cnp_sent_total",
                    "node",
                    any_of("node", "node"),
                ),
                unit="pps",
            ),
            table(
                "ECMP member spread: leaf uplinks to spines (from LLDP)",
                uplinks,
                w=12,
                description="Mean tx utilization of each uplink over the range; max/mean 1 = even.",
            ),
            table(
                "ECMP groups (switch exporter)",
                f"SELECT switch, `group`, max(max_mean_ratio) AS max_over_mean, "
                f"max(max_utilization_ratio) AS max_utilization, argMax(hottest_member, max_mean_ratio) "
                f"AS hottest_member, max(member_count) AS members FROM {tbl('ecmp_group_sample')} "
                f"WHERE {CLUSTER} AND $__timeFilter(ts) AND {sw} GROUP BY switch, `group` "
                "ORDER BY max_over_mean DESC LIMIT 50",
                w=12,
            ),
            ts(
                "Queue watermark (max per switch)",
                f"SELECT $__timeInterval(ts) AS time, switch, max(watermark_bytes) AS watermark "
                f"FROM {tbl('switch_queue_sample')} WHERE {CLUSTER} AND $__timeFilter(ts) AND {sw} "
                "GROUP BY time, switch ORDER BY time, switch",
                unit="bytes",
            ),
            table(
                "Ports with errors, discards or flaps",
                f"SELECT switch, port, any(role) AS role, "
                f"max(rx_errors_total) - min(rx_errors_total) AS rx_errors, "
                f"max(tx_discards_total) - min(tx_discards_total) AS tx_discards, "
                f"max(link_down_events_total) - min(link_down_events_total) AS flaps, "
                f"countIf(up = 0) AS down_samples FROM {tbl('switch_port_sample')} "
                f"WHERE {CLUSTER} AND $__timeFilter(ts) AND {sw} GROUP BY switch, port "
                "HAVING rx_errors > 0 OR tx_discards > 0 OR flaps > 0 OR down_samples > 0 "
                "ORDER BY flaps DESC, rx_errors DESC LIMIT 100",
                w=12,
            ),
            prom(
                "NIC PFC pauses sent (exporter, per node)",
                [
                    (
                        'sum by (node) (rate(railscope_nic_pfc_tx_pause_total{cluster="$cluster"}[2m]))',
                        "{{node}}",
                    )
                ],
                unit="pps",
            ),
            prom(
                "NIC link-level (802.3x) pauses, sent and received (exporter, per node)",
                [
                    (
                        'sum by (node) (rate(railscope_nic_global_tx_pause_total{cluster="$cluster"}[2m]))',
                        "{{node}} sent",
                    ),
                    (
                        'sum by (node) (rate(railscope_nic_global_rx_pause_total{cluster="$cluster"}[2m]))',
                        "{{node}} received",
                    ),
                ],
                unit="pps",
            ),
            prom(
                "ECMP max/mean (switch exporter)",
                [
                    (
                        'max by (switch, group) (railscope_ecmp_group_max_mean_ratio{cluster="$cluster"})',
                        "{{switch}} {{group}}",
                    )
                ],
            ),
        ],
    )


# --- GPUs ----------------------------------------------------------------------------------------
def gpus() -> g.Dashboard:
    gsel = (
        f"{CLUSTER} AND $__timeFilter(ts) AND {any_of('node', 'node')} "
        f"AND {any_of('tenant', 'namespace')} "
        f"AND (${{job:sqlstring}} = '{ALL}' OR (namespace, pod) IN ({job_pods()}))"
    )
    return _dashboard(
        "railscope-gpus",
        "railscope / GPUs",
        "GPU utilization, power, temperature, throttling and errors by node, job and tenant.",
        [v_tenant(), v_job(), v_node()],
        [
            ts(
                "GPU utilization by node",
                f"SELECT $__timeInterval(ts) AS time, node, avg(utilization_ratio) AS utilization "
                f"FROM {tbl('gpu_sample')} WHERE {gsel} GROUP BY time, node ORDER BY time, node",
                unit="percentunit",
            ),
            ts(
                "Power draw by node",
                # each GPU's mean over the bucket, summed per node: its samples' times are its
                # own (one exporter cycle may read the GPUs at different instants)
                f"SELECT time, node, sum(w) AS watts FROM (SELECT $__timeInterval(ts) AS time, "
                f"node, gpu, avg(power_watts) AS w FROM {tbl('gpu_sample')} WHERE {gsel} "
                f"GROUP BY time, node, gpu) GROUP BY time, node ORDER BY time, node",
                unit="watt",
            ),
            ts(
                "Hottest GPU per node",
                f"SELECT $__timeInterval(ts) AS time, node, max(temperature_celsius) AS celsius "
                f"FROM {tbl('gpu_sample')} WHERE {gsel} GROUP BY time, node ORDER BY time, node",
                unit="celsius",
            ),
            ts(
                "Throttled time (power + thermal), share of wall time",
                counter_rate(
                    "gpu_sample",
                    "node, gpu",
                    "power_violation_seconds_total + thermal_violation_seconds_total",
                    "concat(node, '/gpu', toString(gpu))",
                    gsel.replace(f"{CLUSTER} AND $__timeFilter(ts) AND ", ""),
                ),
                unit="percentunit",
            ),
            table(
                "GPUs by job and tenant",
                f"SELECT if(g.namespace = '', '(no pod)', g.namespace) AS tenant, "
                f"if(p.job = '', '(none)', p.job) AS job, uniqExact(g.node, g.gpu) AS gpus, "
                f"round(avg(g.utilization_ratio), 3) AS mean_utilization, "
                f"round(max(g.temperature_celsius), 1) AS max_celsius "
                f"FROM (SELECT node, gpu, namespace, pod, utilization_ratio, temperature_celsius "
                f"FROM {tbl('gpu_sample')} WHERE {gsel}) AS g "
                f"LEFT JOIN (SELECT namespace, pod, any(job) AS job FROM {tbl('pod', final=True)} "
                f"WHERE {CLUSTER} GROUP BY namespace, pod) AS p "
                f"ON p.namespace = g.namespace AND p.pod = g.pod "
                "GROUP BY tenant, job ORDER BY gpus DESC",
                w=12,
            ),
            table(
                "GPU events (XID, lost, throttling)",
                f"SELECT ts, node, gpu, event, xid, detail FROM {tbl('gpu_event')} "
                f"WHERE {CLUSTER} AND $__timeFilter(ts) AND {any_of('node', 'node')} "
                "ORDER BY ts DESC LIMIT 200",
                w=12,
            ),
            table(
                "GPU findings",
                f"SELECT severity, kind, subject, summary, first_seen, last_seen "
                f"FROM {tbl('finding', final=True)} WHERE {FINDINGS_IN_RANGE} AND category = 'node' "
                f"AND (${{node:sqlstring}} = '{ALL}' OR startsWith(subject, concat(${{node:sqlstring}}, '/'))) "
                "ORDER BY last_seen DESC LIMIT 200",
            ),
            prom(
                "GPU utilization (exporter, mean per node)",
                [
                    (
                        'avg by (node) (railscope_gpu_utilization_ratio{cluster="$cluster"})',
                        "{{node}}",
                    )
                ],
                unit="percentunit",
            ),
            prom(
                "XID errors (exporter)",
                [
                    (
                        'sum by (node, gpu) (increase(railscope_gpu_xid_errors_total{cluster="$cluster"}[10m]))',
                        "{{node}}/{{gpu}}",
                    )
                ],
            ),
        ],
    )


# --- HDFS and DCI --------------------------------------------------------------------------------
def hdfs_dci() -> g.Dashboard:
    return _dashboard(
        "railscope-hdfs-dci",
        "railscope / HDFS and DCI",
        "HDFS traffic per IDC pair, cross-IDC reads, the replica placement audit and DCI headroom.",
        [],
        [
            ts(
                "HDFS traffic per IDC pair",
                f"SELECT $__timeInterval(ts) AS time, concat(src_idc, ' -> ', dest_idc) AS pair, "
                f"sum(bytes) / $__interval_s AS bytes_per_second FROM {tbl('hdfs_transfer')} "
                f"WHERE {CLUSTER} AND $__timeFilter(ts) GROUP BY time, pair ORDER BY time, pair",
                unit="Bps",
            ),
            ts(
                "Cross-IDC HDFS traffic by operation",
                f"SELECT $__timeInterval(ts) AS time, if(write_mode = '', op, concat(op, ' ', write_mode)) "
                f"AS operation, sum(bytes) / $__interval_s AS bytes_per_second FROM {tbl('hdfs_transfer')} "
                f"WHERE {CLUSTER} AND $__timeFilter(ts) AND cross_idc "
                "GROUP BY time, operation ORDER BY time, operation",
                unit="Bps",
            ),
            table(
                "Cross-IDC reads: clients reading from another IDC",
                f"SELECT dest AS client, dest_idc AS client_idc, src_idc AS datanode_idc, "
                f"uniqExact(datanode) AS datanodes, uniqExact(block_id) AS blocks, sum(bytes) AS bytes "
                f"FROM {tbl('hdfs_transfer')} WHERE {CLUSTER} AND $__timeFilter(ts) AND cross_idc "
                "AND op = 'HDFS_READ' GROUP BY client, client_idc, datanode_idc "
                "ORDER BY bytes DESC LIMIT 100",
                w=12,
            ),
            table(
                "Replica audit: blocks that break the placement policy",
                f"SELECT path, block_id, replicas, expected_replicas, replicas_by_idc, reason, "
                f"max(ts) AS audited FROM {tbl('hdfs_block_placement')} "
                f"WHERE {CLUSTER} AND $__timeFilter(ts) AND violation "
                "GROUP BY path, block_id, replicas, expected_replicas, replicas_by_idc, reason "
                "ORDER BY audited DESC LIMIT 200",
                w=12,
            ),
            stat(
                "Blocks audited / in violation",
                f"SELECT uniqExact(block_id) AS audited, uniqExactIf(block_id, violation) AS violations "
                f"FROM {tbl('hdfs_block_placement')} WHERE {CLUSTER} AND $__timeFilter(ts)",
                w=8,
            ),
            ts(
                "DCI links: tx utilization (switch ports of role dci)",
                f"SELECT $__timeInterval(ts) AS time, concat(switch, ':', port) AS link, "
                f"max(tx_utilization_ratio) AS utilization FROM {tbl('switch_port_sample')} "
                f"WHERE {CLUSTER} AND $__timeFilter(ts) AND role = 'dci' "
                "GROUP BY time, link ORDER BY time, link",
                unit="percentunit",
                w=16,
            ),
            ts(
                "DCI budget headroom per direction (HDFS source)",
                f"SELECT $__timeInterval(ts) AS time, concat(src_idc, ' -> ', dest_idc) AS pair, "
                f"min(headroom_bytes_per_second) AS headroom FROM {tbl('dci_usage')} "
                f"WHERE {CLUSTER} AND $__timeFilter(ts) GROUP BY time, pair ORDER BY time, pair",
                unit="Bps",
            ),
            ts(
                "Placement audit totals per prefix",
                f"SELECT $__timeInterval(ts) AS time, prefix, max(violations) AS violations "
                f"FROM {tbl('hdfs_placement_total')} WHERE {CLUSTER} AND $__timeFilter(ts) "
                "GROUP BY time, prefix ORDER BY time, prefix",
            ),
            table(
                "Storage findings",
                f"SELECT severity, kind, subject, summary, first_seen, last_seen "
                f"FROM {tbl('finding', final=True)} WHERE {FINDINGS_IN_RANGE} AND category = 'storage' "
                "ORDER BY last_seen DESC LIMIT 200",
            ),
            prom(
                "DCI utilization of HDFS's budget (exporter)",
                [
                    (
                        'max by (src_idc, dest_idc) (railscope_dci_usage_utilization_ratio{cluster="$cluster"})',
                        "{{src_idc}} -> {{dest_idc}}",
                    )
                ],
                unit="percentunit",
            ),
        ],
    )


# --- placement and topology drift ----------------------------------------------------------------
def placement() -> g.Dashboard:
    return _dashboard(
        "railscope-placement",
        "railscope / Placement and topology",
        "Where jobs landed against their networkTopology constraints, the tiers their traffic "
        "crossed, GPUs without a direct NIC, and HyperNode drift against LLDP.",
        [v_tenant()],
        [
            table(
                "Placement findings",
                f"SELECT severity, kind, subject, summary, first_seen, last_seen "
                f"FROM {tbl('finding', final=True)} WHERE {FINDINGS_IN_RANGE} AND category = 'placement' "
                f"AND (${{tenant:sqlstring}} = '{ALL}' OR startsWith(subject, concat(${{tenant:sqlstring}}, '/'))) "
                "ORDER BY severity = 'critical' DESC, last_seen DESC LIMIT 200",
            ),
            table(
                "Jobs: constraint and the highest tier their traffic crossed",
                f"SELECT j.namespace AS tenant, j.job AS job, j.topology_mode AS mode, "
                f"j.highest_tier_allowed AS highest_tier_allowed, f.max_tier AS highest_tier_crossed, "
                f"f.bytes AS bytes FROM {tbl('job', final=True, alias='j')} LEFT JOIN ("
                f"SELECT src_namespace, src_job, max(lca_tier) AS max_tier, sum(bytes) AS bytes "
                f"FROM {tbl('attributed_flow')} WHERE {CLUSTER} AND $__timeFilter(ts) AND src_job != '' "
                "GROUP BY src_namespace, src_job) AS f "
                "ON f.src_namespace = j.namespace AND f.src_job = j.job "
                f"WHERE j.{CLUSTER} AND {any_of('tenant', 'j.namespace')} "
                "ORDER BY tenant, job",
                w=12,
            ),
            table(
                "Traffic between tenants (RDMA)",
                f"SELECT src_namespace, dst_namespace, sum(bytes) AS bytes, count() AS samples "
                f"FROM {tbl('attributed_flow')} WHERE {CLUSTER} AND $__timeFilter(ts) AND rdma "
                "AND src_namespace != '' AND dst_namespace != '' AND src_namespace != dst_namespace "
                "GROUP BY src_namespace, dst_namespace ORDER BY bytes DESC",
                w=12,
            ),
            table(
                "Topology drift findings (HyperNodes vs LLDP)",
                f"SELECT severity, kind, subject, summary, first_seen, last_seen "
                f"FROM {tbl('finding', final=True)} WHERE {FINDINGS_IN_RANGE} "
                "AND (category = 'topology' OR kind LIKE '%drift%') ORDER BY last_seen DESC",
                w=12,
            ),
            table(
                "HyperNodes declared (current)",
                f"SELECT hypernode, tier, member_type, selector, count() AS members, "
                f"arrayStringConcat(groupArray(member), ', ') AS member_list FROM {tbl('hypernode', final=True)} "
                f"WHERE {CLUSTER} AND valid_to IS NULL GROUP BY hypernode, tier, member_type, selector "
                "ORDER BY tier DESC, hypernode",
                w=12,
            ),
            table(
                "GPUs without a NIC on their PCIe switch",
                f"SELECT node, groupArray(gpu) AS gpus FROM (SELECT node, gpu, "
                f"argMax(direct_nic, ts) AS direct FROM {tbl('gpu_nic_affinity')} WHERE {CLUSTER} "
                "GROUP BY node, gpu) WHERE direct = 0 GROUP BY node ORDER BY node",
                w=12,
            ),
            table(
                "Bytes per tier crossed, per source tenant",
                f"SELECT src_namespace AS tenant, lca_tier, sum(bytes) AS bytes "
                f"FROM {tbl('attributed_flow')} WHERE {CLUSTER} AND $__timeFilter(ts) "
                f"AND {any_of('tenant', 'src_namespace')} "
                "GROUP BY tenant, lca_tier ORDER BY tenant, lca_tier",
                w=12,
            ),
        ],
    )


# --- GPU pool ------------------------------------------------------------------------------------
def _latest_of(kind: str, key: str, value: str) -> str:
    """The latest version of one value per key of an inventory kind."""
    return (
        f"SELECT {key}, argMax({value}, valid_from) AS v FROM {tbl(kind, final=True)} "
        f"WHERE {CLUSTER} GROUP BY {key}"
    )


def _held_gpus(by: str, join: str) -> str:
    """GPUs held by pods (the GPU samples' pod, from kubelet pod-resources) per interval and
    `by`, an expression over the pod alias `p` and what `join` adds."""
    return f"""
SELECT time, key, uniqExact(node, gpu) AS gpus
FROM (
  SELECT $__timeInterval(s.ts) AS time, s.node AS node, s.gpu AS gpu, {by} AS key
  FROM (SELECT ts, node, gpu, namespace, pod FROM {tbl("gpu_sample")}
        WHERE {CLUSTER} AND $__timeFilter(ts) AND pod != '' AND {any_of("tenant", "namespace")}) AS s
  LEFT JOIN (SELECT namespace, pod, argMax(podgroup, valid_from) AS podgroup,
                    argMax(job, valid_from) AS job, argMax(priority_class, valid_from) AS pc
             FROM {tbl("pod", final=True)} WHERE {CLUSTER} GROUP BY namespace, pod) AS p
    ON p.namespace = s.namespace AND p.pod = s.pod
  {join}
)
GROUP BY time, key ORDER BY time, key"""


def pool_dashboard() -> g.Dashboard:
    from telemetry.correlate.thresholds import default_thresholds
    from telemetry.pool import hypernode_of_sql

    floor = float(default_thresholds()["pool"]["busy_utilization_floor"])
    gsel = f"{CLUSTER} AND $__timeFilter(ts) AND pod != '' AND {any_of('tenant', 'namespace')}"
    queue_join = (
        f"LEFT JOIN ({_latest_of('podgroup', 'namespace, podgroup', 'queue')}) AS qp "
        "ON qp.namespace = p.namespace AND qp.podgroup = p.podgroup "
        f"LEFT JOIN ({_latest_of('job', 'namespace, job', 'queue')}) AS qj "
        "ON qj.namespace = p.namespace AND qj.job = p.job"
    )
    held_now = (
        f"SELECT node, namespace, pod, podgroup, job, coalesce(gpu_requests, 0) AS gpus, phase "
        f"FROM {tbl('pod', final=True)} WHERE {CLUSTER} AND valid_to IS NULL AND node != ''"
    )
    return _dashboard(
        "railscope-pool",
        "railscope / GPU pool",
        "Allocation and use of the shared GPU pool by tenant, queue and provisioning type, "
        "idle-allocated GPU-hours, quota against allocation, free GPUs per HyperNode "
        f"(busy = mean utilization >= {floor:.0%}; docs/pool.md).",
        [v_cluster(), v_tenant()],
        [
            table(
                "Pool findings (idle allocations, fragmentation-blocked gangs, starving queues)",
                f"SELECT severity, kind, subject, summary, first_seen, last_seen "
                f"FROM {tbl('finding', final=True)} WHERE {FINDINGS_IN_RANGE} AND category = 'pool' "
                "ORDER BY last_seen DESC LIMIT 200",
            ),
            ts(
                "GPUs held by tenant",
                _held_gpus("s.namespace", ""),
                description="GPUs a pod holds (kubelet pod-resources), per namespace.",
            ),
            ts(
                "Busy GPUs by tenant",
                f"SELECT time, namespace, countIf(u >= {floor}) AS busy_gpus FROM ("
                f"SELECT $__timeInterval(ts) AS time, namespace, node, gpu, "
                f"avg(utilization_ratio) AS u FROM {tbl('gpu_sample')} WHERE {gsel} "
                "GROUP BY time, namespace, node, gpu) GROUP BY time, namespace ORDER BY time, namespace",
            ),
            ts("GPUs held by queue", _held_gpus("if(qp.v != '', qp.v, qj.v)", queue_join)),
            ts(
                "GPUs held by provisioning type",
                _held_gpus(
                    "pv.v",
                    f"LEFT JOIN ({_latest_of('priority_class', 'priority_class', 'provisioning')}) "
                    "AS pv ON pv.priority_class = p.pc",
                ),
            ),
            table(
                "Idle-allocated GPU-hours by pod",
                f"SELECT namespace, pod, any(node) AS node, count() AS gpus, "
                f"round(sum(idle_s) / 3600, 2) AS idle_gpu_hours, round(max(peak), 3) AS peak_utilization "
                f"FROM (SELECT namespace, pod, node, gpu, max(utilization_ratio) AS peak, "
                f"countIf(utilization_ratio < {floor}) / count() * dateDiff('second', min(ts), max(ts)) "
                f"AS idle_s FROM {tbl('gpu_sample')} WHERE {gsel} GROUP BY namespace, pod, node, gpu) "
                "GROUP BY namespace, pod ORDER BY idle_gpu_hours DESC, namespace, pod LIMIT 50",
                w=12,
            ),
            table(
                "Quota against allocation per queue (now)",
                f"SELECT q.queue AS queue, q.deserved AS deserved_gpus, q.guarantee AS guarantee_gpus, "
                f"q.capability AS capability_gpus, a.gpus AS allocated_gpus FROM ("
                f"SELECT queue, argMax(deserved_gpus, valid_from) AS deserved, "
                f"argMax(guarantee_gpus, valid_from) AS guarantee, "
                f"argMax(capability_gpus, valid_from) AS capability "
                f"FROM {tbl('queue', final=True)} WHERE {CLUSTER} GROUP BY queue) AS q "
                f"LEFT JOIN (SELECT if(qp.v != '', qp.v, qj.v) AS queue, sum(p.gpus) AS gpus "
                f"FROM ({held_now}) AS p {queue_join} WHERE p.phase = 'Running' GROUP BY queue) AS a "
                "ON a.queue = q.queue ORDER BY queue",
                w=12,
            ),
            table(
                "Free GPUs per HyperNode (fragmentation map, now)",
                f"SELECT hn.v AS hypernode, count() AS nodes, sum(f.free) AS free_gpus, "
                f"countIf(f.free = f.gpus) AS whole_free_nodes, max(f.free) AS most_free_on_one_node, "
                f"arraySort(groupArray(f.free)) AS free_per_node FROM ("
                f"SELECT n.node AS node, n.gpus AS gpus, "
                f"greatest(0, toInt64(n.gpus) - toInt64(coalesce(u.used, 0))) AS free FROM ("
                f"SELECT node, argMax(gpus, valid_from) AS gpus FROM {tbl('node', final=True)} "
                f"WHERE {CLUSTER} AND valid_to IS NULL GROUP BY node) AS n LEFT JOIN ("
                f"SELECT node, sum(gpus) AS used FROM ({held_now}) WHERE phase IN ('Running', 'Pending') "
                "GROUP BY node) AS u ON u.node = n.node WHERE n.gpus > 0) AS f "
                f"LEFT JOIN ({hypernode_of_sql(tbl('node', final=True), tbl('hypernode', final=True), CLUSTER)}) "
                "AS hn ON hn.node = f.node GROUP BY hypernode ORDER BY hypernode",
                w=12,
            ),
            table(
                "Pods preempted or evicted",
                f"SELECT ts, namespace, pod, reason, node, preemptor, message "
                f"FROM {tbl('pod_event', final=True)} WHERE {CLUSTER} AND $__timeFilter(ts) "
                f"AND {any_of('tenant', 'namespace')} ORDER BY ts DESC LIMIT 200",
                w=12,
            ),
        ],
    )


# --- railscope itself ----------------------------------------------------------------------------
def self_health() -> g.Dashboard:
    kinds = [
        "gpu_sample",
        "nic_sample",
        "switch_port_sample",
        "switch_queue_sample",
        "flow_sample",
        "hdfs_transfer",
        "attributed_flow",
    ]
    fresh = " UNION ALL ".join(
        f"SELECT '{KINDS[k].table}' AS table, count() AS rows, max(ts) AS newest FROM {tbl(k)} "
        f"WHERE {CLUSTER} AND $__timeFilter(ts)"
        for k in kinds
    )
    return _dashboard(
        "railscope-self",
        "railscope / Self health",
        "railscope's own pipeline: records in and out per component, failures, collector "
        "success and duration, spool, and how fresh each table is.",
        [],
        [
            prom(
                "Records received per component",
                [
                    (
                        "sum by (component) (rate(railscope_component_received_total[5m]))",
                        "{{component}}",
                    )
                ],
                unit="rps",
            ),
            prom(
                "Records dropped and failed operations",
                [
                    (
                        "sum by (component) (rate(railscope_component_dropped_records_total[5m]))",
                        "dropped {{component}}",
                    ),
                    (
                        "sum by (component, reason) (rate(railscope_component_failed_total[5m]))",
                        "failed {{component}} {{reason}}",
                    ),
                ],
                unit="ops",
            ),
            prom(
                "Collector success (1 = last cycle ok)",
                [("min by (component) (railscope_collector_success)", "{{component}}")],
            ),
            prom(
                "Collector duration (slowest instance)",
                [("max by (component) (railscope_collector_duration_seconds)", "{{component}}")],
                unit="s",
            ),
            prom(
                "Spool bytes (ClickHouse unreachable or slow)",
                [
                    (
                        "sum by (instance) (railscope_component_spool_bytes)",
                        "{{instance}}",
                    )
                ],
                unit="bytes",
            ),
            prom(
                "Spool rows evicted unconfirmed (an insert cut off after sending: may be stored)",
                [
                    (
                        "sum by (instance) (railscope_component_spool_unconfirmed_rows)",
                        "{{instance}}",
                    )
                ],
            ),
            prom(
                "Targets up",
                [('sum by (job) (up{job=~"railscope.*"})', "{{job}}")],
            ),
            table(
                "Table freshness (rows in range, newest row)",
                f"SELECT * FROM ({fresh}) ORDER BY table",
                w=12,
            ),
            ts(
                "Rows stored per minute",
                " UNION ALL ".join(
                    f"SELECT $__timeInterval(ts) AS time, '{KINDS[k].table}' AS table, count() AS rows "
                    f"FROM {tbl(k)} WHERE {CLUSTER} AND $__timeFilter(ts) GROUP BY time"
                    for k in kinds[:5]
                )
                + " ORDER BY time, table",
            ),
            table(
                "Component self-reports stored (component_stats)",
                f"SELECT component, host, max(ts) AS last, max(received_total) AS received, "
                f"max(failed_total) AS failed, argMax(success, ts) AS success, "
                f"argMax(spool_bytes, ts) AS spool_bytes FROM {tbl('component_stat')} "
                f"WHERE {CLUSTER} AND $__timeFilter(ts) GROUP BY component, host ORDER BY component",
            ),
        ],
    )


DASHBOARDS: dict[str, Callable[[], g.Dashboard]] = {
    "overview": overview,
    "job": job,
    "fabric": fabric,
    "gpus": gpus,
    "hdfs-dci": hdfs_dci,
    "placement": placement,
    "pool": pool_dashboard,
    "self": self_health,
}
