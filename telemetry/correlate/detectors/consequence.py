"""Consequence detectors: a job's GPUs idle while its network path is saturated. They describe an
effect (why a job is slow), so the scorer neither credits nor blames them against injected
causes."""

from __future__ import annotations

from telemetry.correlate.findings import Finding
from telemetry.correlate.registry import Context, detector
from telemetry.correlate.sql import ROLLUP_WINDOW, rollup_table


@detector("network_bound", needs=("flow_sample",), lookback=("sliding.flow_seconds",))
def network_bound(ctx: Context) -> list[Finding]:
    """Jobs whose GPUs average under `gpu.idle_ratio` busy while a port carrying their traffic
    runs above `network_bound.port_utilization`."""
    idle = float(ctx.t("network_bound.gpu_idle_ratio"))
    busy = float(ctx.t("network_bound.port_utilization"))
    # the (job, port) pairs that carried the window's flows: from the per-interval rollup of the
    # attributed flows where it answers for the window (a few rows per pair, not every flow)
    rollup = rollup_table(ctx, "attributed_flow")
    flows = (
        f"{rollup} WHERE {ROLLUP_WINDOW}"
        if rollup
        else f"{ctx.table('attributed_flow')} WHERE {ctx.where('attributed_flow')}"
    )
    out = []
    for r in ctx.rows(
        f"""
        WITH port_util AS (  -- busy ports only: a job qualifies through its busiest port
            SELECT switch, port, avg(tx_utilization_ratio) AS util FROM {ctx.table("switch_port_sample")}
            WHERE {ctx.where("switch_port_sample")}
            GROUP BY switch, port
            HAVING util >= {{busy:Float64}}),
        job_ports AS (
            SELECT src_namespace AS ns, src_job AS job, switch, out_port AS port, sum(bytes) AS bytes
            FROM {flows}
              AND src_job != '' AND out_port != ''
              -- GLOBAL: on a cluster, flows are sharded by job, ports by switch and port
              AND (switch, out_port) GLOBAL IN (SELECT switch, port FROM port_util)
            GROUP BY ns, job, switch, port),
        job_nodes AS (
            SELECT namespace AS ns, job, groupUniqArray(node) AS nodes FROM {ctx.table("pod", final=True)}
            WHERE cluster = {{cluster:String}} AND job != '' AND valid_from < {{we:DateTime64(3, 'UTC')}}
              AND (valid_to IS NULL OR valid_to > {{ws:DateTime64(3, 'UTC')}})
            GROUP BY ns, job)
        SELECT jp.ns AS ns, jp.job AS job, argMax(concat(jp.switch, ':', jp.port), pu.util) AS hot_port, max(pu.util) AS hot_util,
               any(jn.nodes) AS nodes
        FROM job_ports AS jp
        INNER JOIN port_util AS pu ON jp.switch = pu.switch AND jp.port = pu.port
        INNER JOIN job_nodes AS jn ON jp.ns = jn.ns AND jp.job = jn.job
        GROUP BY ns, job
        HAVING hot_util >= {{busy:Float64}}
        ORDER BY ns, job""",
        {"busy": busy},
    ):
        gpu = ctx.rows(
            f"SELECT avg(util) AS u FROM (SELECT node, avg(utilization_ratio) AS util FROM {ctx.table('gpu_sample')} "
            "WHERE cluster = {cluster:String} AND ts >= {ws:DateTime64(3, 'UTC')} AND ts < {we:DateTime64(3, 'UTC')} "
            "AND up = 1 AND node IN {nodes:Array(String)} GROUP BY node)",
            {"nodes": r["nodes"]},
        )[0]["u"]
        if gpu is None or gpu >= idle:
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
