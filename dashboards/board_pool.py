"""The shared GPU pool, and railscope itself. (The dashboards' table: definitions.py.)"""

from __future__ import annotations

from grafanalib import core as g

from dashboards.common import (
    FINDINGS_IN_RANGE,
    build_dashboard,
    v_cluster,
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
from telemetry.records import KINDS


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
    return build_dashboard(
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
    return build_dashboard(
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
