"""Consequence detectors: a job's GPUs idle while its network path is saturated, and GPUs
without a direct NIC carrying RDMA. They describe an effect (why a job is slow), so the scorer
neither credits nor blames them against injected causes."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from telemetry.correlate.findings import Finding
from telemetry.correlate.registry import Context, detector, over_ticks
from telemetry.correlate.sql import ROLLUP_WINDOW, rollup_table
from telemetry.correlate.timebase import per_tick, tick_join, tick_params
from telemetry.text import human_bytes


def _bound_rows(
    ctx: Context, over: bool
) -> tuple[list[dict[str, Any]], dict[tuple[int, str], float]]:
    """The jobs sending through a port busier than `network_bound.port_utilization` (their
    busiest such port and their nodes), and each of their nodes' mean GPU utilization, keyed
    (tick, node): per judged tick when `over` (a `tick` column, timebase.tick_join), else tick 0."""
    busy = float(ctx.t("network_bound.port_utilization"))
    # the (job, port) pairs that carried the window's flows: from the per-interval rollup of the
    # attributed flows where it answers for the window (a few rows per pair, not every flow)
    rollup = rollup_table(ctx, "attributed_flow")
    t, only, params = "", "", {"busy": busy}
    if over:
        t, only, params = (
            "tick, ",
            " AND tick IN {ticks:Array(Int64)}",
            {**params, **tick_params(ctx)},
        )
    if rollup:
        ms = "toInt64(toUnixTimestamp(bucket)) * 1000"  # the interval's start
        join = tick_join(ctx, "attributed_flow", ms) if over else ""
        flows = f"{rollup} {join} WHERE {ROLLUP_WINDOW}"
    else:
        join = tick_join(ctx, "attributed_flow") if over else ""
        flows = f"{ctx.table('attributed_flow')} {join} WHERE {ctx.where('attributed_flow')}"
    # a pod placed at any time of a judged tick's window: one row per tick it overlaps
    pod_ticks = (
        "ARRAY JOIN arrayFilter(k -> valid_from < fromUnixTimestamp64Milli(k, 'UTC') AND "
        "(valid_to IS NULL OR valid_to > fromUnixTimestamp64Milli(k - {lookback_ms:Int64}, 'UTC')), "
        "{ticks:Array(Int64)}) AS tick"
        if over
        else ""
    )
    if over:
        params["lookback_ms"] = round((ctx.ticks[0] - ctx.window.start).total_seconds() * 1000)
    jobs = ctx.rows(
        f"""
        WITH port_util AS (  -- busy ports only: a job qualifies through its busiest port
            SELECT {t}switch, port, avg(tx_utilization_ratio) AS util
            FROM {ctx.table("switch_port_sample")} {tick_join(ctx, "switch_port_sample") if over else ""}
            WHERE {ctx.where("switch_port_sample")}{only}
            GROUP BY {t}switch, port
            HAVING util >= {{busy:Float64}}),
        job_ports AS (
            SELECT {t}src_namespace AS ns, src_job AS job, switch, out_port AS port, sum(bytes) AS bytes
            FROM {flows}
              AND src_job != '' AND out_port != ''{only}
              -- GLOBAL: on a cluster, flows are sharded by job, ports by switch and port
              AND ({t}switch, out_port) GLOBAL IN (SELECT {t}switch, port FROM port_util)
            GROUP BY {t}ns, job, switch, port),
        job_nodes AS (
            SELECT {t}namespace AS ns, job, groupUniqArray(node) AS nodes
            FROM {ctx.table("pod", final=True)} {pod_ticks}
            WHERE cluster = {{cluster:String}} AND job != '' AND valid_from < {{we:DateTime64(3, 'UTC')}}
              AND (valid_to IS NULL OR valid_to > {{ws:DateTime64(3, 'UTC')}})
            GROUP BY {t}ns, job)
        SELECT {"jp.tick AS tick, " if over else ""}jp.ns AS ns, jp.job AS job,
               argMax(concat(jp.switch, ':', jp.port), pu.util) AS hot_port, max(pu.util) AS hot_util,
               any(jn.nodes) AS nodes
        FROM job_ports AS jp
        INNER JOIN port_util AS pu ON {"jp.tick = pu.tick AND " if over else ""}jp.switch = pu.switch AND jp.port = pu.port
        INNER JOIN job_nodes AS jn ON {"jp.tick = jn.tick AND " if over else ""}jp.ns = jn.ns AND jp.job = jn.job
        GROUP BY {t}ns, job
        HAVING hot_util >= {{busy:Float64}}
        ORDER BY {t}ns, job""",
        params,
    )
    if not jobs:
        return [], {}
    # each node's mean GPU utilization, read once for every job's nodes
    util = {
        (g["tick"] if over else 0, g["node"]): float(g["util"])
        for g in ctx.rows(
            f"""SELECT {t}node, avg(utilization_ratio) AS util
                FROM {ctx.table("gpu_sample")} {tick_join(ctx, "gpu_sample") if over else ""}
                WHERE {ctx.where("gpu_sample")} AND up = 1 AND node IN {{nodes:Array(String)}}{only}
                GROUP BY {t}node""",
            {**params, "nodes": sorted({n for r in jobs for n in r["nodes"]})},
        )
        if g["util"] is not None  # a node whose samples lack it: left out, as avg() does
    }
    return jobs, util


def _bound_findings(
    ctx: Context, jobs: list[dict[str, Any]], util: dict[tuple[int, str], float]
) -> list[Finding]:
    idle = float(ctx.t("network_bound.gpu_idle_ratio"))
    out = []
    for r in jobs:
        # the mean over the job's nodes of each node's mean (NaN without samples, as SQL's avg)
        tick = r.get("tick", 0)
        mine = [util[(tick, n)] for n in sorted(r["nodes"]) if (tick, n) in util]
        gpu = sum(mine) / len(mine) if mine else math.nan
        if gpu >= idle:
            continue
        key = f"{r['ns']}/{r['job']}"
        out.append(
            ctx.finding(
                "warning",
                "job",
                key,
                f"job {key}: GPUs {gpu:.0%} busy while {r['hot_port']} on its path runs at {r['hot_util']:.0%}",
                {
                    "gpu_utilization": round(float(gpu), 3),
                    "hot_port": r["hot_port"],
                    "hot_port_utilization": round(float(r["hot_util"]), 3),
                },
            )
        )
    return out


@detector(
    "network_bound", category="node", needs=("flow_sample",), lookback=("sliding.flow_seconds",)
)
def network_bound(ctx: Context) -> list[Finding]:
    """Jobs whose GPUs average under `gpu.idle_ratio` busy while a port carrying their traffic
    runs above `network_bound.port_utilization`."""
    return _bound_findings(ctx, *_bound_rows(ctx, over=False))


@over_ticks("network_bound")
def network_bound_over(ctx: Context) -> dict[datetime, list[Finding]]:
    jobs, util = _bound_rows(ctx, over=True)
    return per_tick(ctx, jobs, lambda c, rows: _bound_findings(c, rows, util))


def _detour_rows(ctx: Context, over: bool) -> list[dict[str, Any]]:
    """Nodes with a GPU without a NIC on its PCIe switch (the latest affinity before the tick)
    whose pods sent RDMA in the window, with what they sent and received: per judged tick when
    `over` (a `tick` column, timebase.tick_join). The pod samples are each side's first five
    by name: the same whatever order the rows are read in."""
    t, only, flow_join = "", "", ""
    # the affinity as of each judged tick: a row counts at every tick after it
    affinity_ticks = (
        "ARRAY JOIN arrayFilter(k -> toUnixTimestamp64Milli(ts) < k, {ticks:Array(Int64)}) AS tick"
    )
    if over:
        t, only = "tick, ", " AND tick IN {ticks:Array(Int64)}"
        flow_join = tick_join(ctx, "attributed_flow")
    on = "a.tick = {0}.tick AND " if over else ""
    return ctx.rows(
        f"""
        SELECT {"a.tick AS tick, " if over else ""}a.node AS node, groupUniqArray(a.gpu) AS gpus,
               any(f.bytes) AS bytes, any(f.pods) AS pods,
               any(rx.bytes) AS rx_bytes, any(rx.pods) AS rx_pods
        FROM (SELECT {t}node, gpu, argMax(direct_nic, ts) AS direct
              FROM {ctx.table("gpu_nic_affinity")} {affinity_ticks if over else ""}
              WHERE cluster = {{cluster:String}} AND ts < {{we:DateTime64(3, 'UTC')}}
              GROUP BY {t}node, gpu) AS a
        INNER JOIN (SELECT {t}src_node AS node, sum(bytes) AS bytes,
                           arraySlice(arraySort(groupUniqArray(concat(src_namespace, '/', src_pod))), 1, 5) AS pods
                    FROM {ctx.table("attributed_flow")} {flow_join}
                    WHERE {ctx.where("attributed_flow")}{only}
                      AND rdma AND src_node != ''
                    GROUP BY {t}src_node) AS f ON {on.format("f")}a.node = f.node
        LEFT JOIN (SELECT {t}dst_node AS node, sum(bytes) AS bytes,
                          arraySlice(arraySort(groupUniqArray(concat(dst_namespace, '/', dst_pod))), 1, 5) AS pods
                   FROM {ctx.table("attributed_flow")} {flow_join}
                   WHERE {ctx.where("attributed_flow")}{only}
                     AND rdma AND dst_node != ''
                   GROUP BY {t}dst_node) AS rx ON {on.format("rx")}a.node = rx.node
        WHERE a.direct = 0
        GROUP BY {t}node ORDER BY {t}node""",
        tick_params(ctx) if over else None,
    )


@detector(
    "gpu_without_direct_nic",
    category="placement",
    needs=("gpu_nic_affinity", "flow_sample"),
    lookback=("sliding.flow_seconds",),
)
def gpu_without_direct_nic(ctx: Context) -> list[Finding]:
    """GPUs whose PCIe switch has no NIC, on a node whose pods send RDMA: that traffic detours
    through host memory. The evidence adds what the node receives: NCCL's PXN lets such a GPU
    send through a peer GPU's NIC over NVLink, but received data still lands through the CPU
    (a receive-side detour PXN does not remove), and whether the node's pods disable PXN."""
    return _detours(ctx, _detour_rows(ctx, over=False))


@over_ticks("gpu_without_direct_nic")
def gpu_without_direct_nic_over(ctx: Context) -> dict[datetime, list[Finding]]:
    return per_tick(ctx, _detour_rows(ctx, over=True), _detours)


def _detours(ctx: Context, rows: list[dict[str, Any]]) -> list[Finding]:
    out = []
    pxn_of = _pxn_disabled(ctx, [r["node"] for r in rows])
    for r in rows:
        rx = int(r["rx_bytes"] or 0)
        pxn = pxn_of.get(r["node"], [])
        detour = (
            f"; it receives {rx / 1e9:.2f} GB, which lands through host memory whatever PXN does"
            if rx
            else ""
        )
        out.append(
            ctx.finding(
                "info",
                "node",
                r["node"],
                f"{r['node']}: GPU(s) {', '.join(map(str, sorted(r['gpus'])))} have no NIC on their PCIe switch while the node sends "
                f"{human_bytes(r['bytes'])} of RDMA: their traffic crosses host memory{detour}",
                {
                    "gpus": sorted(r["gpus"]),
                    "rdma_bytes": r["bytes"],
                    "pods": sorted(r["pods"]),
                    "rdma_received_bytes": rx,
                    "receiving_pods": sorted(r["rx_pods"] or []),
                    "receive_side_detour": rx > 0,
                    "pxn_disabled_pods": pxn,
                },
            )
        )
    return out


def _pxn_disabled(ctx: Context, nodes: list[str]) -> dict[str, list[str]]:
    """Per node, its pods whose NCCL_PXN_DISABLE=1 (their sends detour too), from
    nccl_settings: every node's in one statement."""
    if not nodes:
        return {}
    out: dict[str, list[str]] = {}
    for x in ctx.rows(
        f"""
        SELECT DISTINCT p.node AS node, concat(s.namespace, '/', s.pod) AS pod
        FROM (SELECT * FROM {ctx.table("nccl_setting", final=True)}
              WHERE cluster = {{cluster:String}} AND name = 'NCCL_PXN_DISABLE') AS s
        INNER JOIN (SELECT namespace, pod, node FROM {ctx.table("pod", final=True)}
                    WHERE cluster = {{cluster:String}} AND node IN {{nodes:Array(String)}}
                      AND valid_from < {{we:DateTime64(3, 'UTC')}}
                      AND (valid_to IS NULL OR valid_to > {{ws:DateTime64(3, 'UTC')}})) AS p
          ON s.namespace = p.namespace AND s.pod = p.pod
        WHERE s.value = '1'
          AND s.valid_from < {{we:DateTime64(3, 'UTC')}}
          AND (s.valid_to IS NULL OR s.valid_to > {{ws:DateTime64(3, 'UTC')}})
        ORDER BY node, pod""",
        {"nodes": sorted(set(nodes))},
    ):
        out.setdefault(str(x["node"]), []).append(str(x["pod"]))
    return out
