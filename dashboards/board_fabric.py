"""The fabric (ports, queues, PFC, ECN, ECMP groups, flows) and the GPUs. (The dashboards' table: definitions.py.)"""

from __future__ import annotations

from grafanalib import core as g

from dashboards.clickhouse import ALL
from dashboards.common import (
    FINDINGS_IN_RANGE,
    build_dashboard,
    counter_rate,
    job_pods,
    v_job,
    v_node,
    v_switch,
    v_tenant,
)
from dashboards.panels import (
    CLUSTER,
    any_of,
    prom,
    table,
    tbl,
    ts,
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
    return build_dashboard(
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
    return build_dashboard(
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
