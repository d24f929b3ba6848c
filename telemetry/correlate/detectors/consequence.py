"""Consequence detectors: a job's GPUs idle while its network path is saturated. They describe an
effect (why a job is slow), so the scorer neither credits nor blames them against injected
causes."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from telemetry.correlate.findings import Finding
from telemetry.correlate.registry import Context, detector, over_ticks
from telemetry.correlate.sql import ROLLUP_WINDOW, rollup_table
from telemetry.correlate.timebase import lookback_ms, per_tick, tick_join, tick_params
from telemetry.times import valid_during


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
    t, only = "", ""
    params: dict[str, Any] = {"busy": busy}
    if over:
        t, only = "tick, ", " AND tick IN {ticks:Array(Int64)}"
        params.update(tick_params(ctx))
    if rollup:
        ms = "toInt64(toUnixTimestamp(bucket)) * 1000"  # the interval's start
        join = tick_join(ctx, "attributed_flow", ms) if over else ""
        flows = f"{rollup} {join} WHERE {ROLLUP_WINDOW}"
    else:
        join = tick_join(ctx, "attributed_flow") if over else ""
        flows = f"{ctx.table('attributed_flow')} {join} WHERE {ctx.where('attributed_flow')}"
    # a pod placed at any time of a judged tick's window: one row per tick it overlaps
    pod_ticks = (
        "ARRAY JOIN arrayFilter(k -> "
        + valid_during(
            "fromUnixTimestamp64Milli(k - {lookback_ms:Int64}, 'UTC')",
            "fromUnixTimestamp64Milli(k, 'UTC')",
        )
        + ", {ticks:Array(Int64)}) AS tick"
        if over
        else ""
    )
    if over:
        params["lookback_ms"] = lookback_ms(ctx)
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
            WHERE cluster = {{cluster:String}} AND job != '' AND {valid_during()}
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


@detector("network_bound", needs=("flow_sample",), lookback=("sliding.flow_seconds",))
def network_bound(ctx: Context) -> list[Finding]:
    """Jobs whose GPUs average under `gpu.idle_ratio` busy while a port carrying their traffic
    runs above `network_bound.port_utilization`."""
    return _bound_findings(ctx, *_bound_rows(ctx, over=False))


@over_ticks("network_bound")
def network_bound_over(ctx: Context) -> dict[datetime, list[Finding]]:
    jobs, util = _bound_rows(ctx, over=True)
    return per_tick(ctx, jobs, lambda c, rows: _bound_findings(c, rows, util))
