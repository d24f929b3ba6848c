"""Storage detectors: HDFS reads that cross IDCs, replica placement that breaks the policy, a
data-center interconnect link near its capacity (with the HDFS share of it)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime
from typing import Any

from telemetry.correlate.detectors.fabric import (
    port_subject,
    roles_and_neighbours,
    roles_and_neighbours_at,
)
from telemetry.correlate.findings import Finding
from telemetry.correlate.registry import Context, detector, over_ticks
from telemetry.correlate.timebase import (
    covered_sql,
    per_tick,
    rows_at,
    tick_join,
    tick_params,
)
from telemetry.text import human_bytes


def _host(addr: str) -> str:
    host = addr.rsplit(":", 1)[0] if addr.count(":") == 1 else addr
    return host.lstrip("/")


def _sample(col: str, n: int) -> str:
    """SQL: the group's `n` lowest distinct values of `col`, the same in any read order (a
    set-based statement reads a window's rows in another order than its tick's own)."""
    return f"arraySlice(arraySort(groupUniqArray({col})), 1, {n})"


def _over(ctx: Context, kind: str, over: bool) -> tuple[str, str, str]:
    """The `tick, ` key, the ARRAY JOIN and the judged-ticks filter of a set-based statement
    over `kind` (timebase.tick_join), or nothing."""
    if not over:
        return "", "", ""
    return "tick, ", tick_join(ctx, kind), " AND tick IN {ticks:Array(Int64)}"


def _read_rows(ctx: Context, over: bool) -> list[dict[str, Any]]:
    t, join, only = _over(ctx, "hdfs_transfer", over)
    return ctx.rows(
        f"""
        SELECT {t}dest, src_idc, dest_idc, sum(bytes) AS bytes, count() AS reads,
               {_sample("block_id", 10)} AS blocks, {_sample("datanode", 10)} AS datanodes,
               {_sample("client_id", 5)} AS clients
        FROM {ctx.table("hdfs_transfer")} {join}
        WHERE {ctx.where("hdfs_transfer")}{only}
          AND op = 'HDFS_READ' AND cross_idc
        GROUP BY {t}dest, src_idc, dest_idc
        ORDER BY {t}bytes DESC, dest, src_idc, dest_idc""",
        tick_params(ctx) if over else None,
    )


@detector("hdfs_cross_idc_read", needs=("hdfs_transfer",), lookback=("sliding.flow_seconds",))
def cross_idc_read(ctx: Context) -> list[Finding]:
    return _cross_idc_reads(ctx, _read_rows(ctx, over=False))


@over_ticks("hdfs_cross_idc_read")
def cross_idc_read_over(ctx: Context) -> dict[datetime, list[Finding]]:
    return per_tick(ctx, _read_rows(ctx, over=True), _cross_idc_reads)


def _cross_idc_reads(ctx: Context, rows: list[dict[str, Any]]) -> list[Finding]:
    floor = float(ctx.t("hdfs.cross_idc_read_bytes"))
    out = []
    for r in rows:
        if r["bytes"] < floor:
            continue
        client = _host(r["dest"])
        out.append(
            ctx.finding(
                "warning",
                "host",
                client,
                f"{client} in {r['dest_idc']} read {human_bytes(r['bytes'])} from DataNodes in {r['src_idc']} over the DCI",
                {
                    "bytes": r["bytes"],
                    "reads": r["reads"],
                    "from_idc": r["src_idc"],
                    "to_idc": r["dest_idc"],
                    "blocks": sorted(r["blocks"]),
                    "datanodes": sorted(r["datanodes"]),
                    "clients": sorted(r["clients"]),
                },
            )
        )
    return out


def _violation_rows(ctx: Context, over: bool) -> list[dict[str, Any]]:
    t, join, only = _over(ctx, "hdfs_block_placement", over)
    return ctx.rows(
        f"""
        SELECT {t}path, count() AS blocks, {_sample("block_id", 10)} AS sample,
               {_sample("reason", 5)} AS reasons, {_sample("replicas_by_idc", 5)} AS layouts
        FROM (
            SELECT {t}path, block_id, argMax(reason, ts) AS reason, argMax(replicas_by_idc, ts) AS replicas_by_idc,
                   argMax(violation, ts) AS violation
            FROM {ctx.table("hdfs_block_placement")} {join}
            WHERE {ctx.where("hdfs_block_placement")}{only}
            GROUP BY {t}path, block_id
        )
        WHERE violation
        GROUP BY {t}path ORDER BY {t}path""",
        tick_params(ctx) if over else None,
    )


@detector(
    "hdfs_replica_violation", needs=("hdfs_block_placement",), lookback=("sliding.flow_seconds",)
)
def replica_violation(ctx: Context) -> list[Finding]:
    return _violations(ctx, _violation_rows(ctx, over=False))


@over_ticks("hdfs_replica_violation")
def replica_violation_over(ctx: Context) -> dict[datetime, list[Finding]]:
    return per_tick(ctx, _violation_rows(ctx, over=True), _violations)


def _violations(ctx: Context, rows: list[dict[str, Any]]) -> list[Finding]:
    return [
        ctx.finding(
            "warning",
            "file",
            r["path"],
            f"{r['path']}: {r['blocks']} block(s) not placed per policy ({'; '.join(sorted(r['reasons']))})",
            {
                "blocks": r["blocks"],
                "sample_blocks": sorted(r["sample"]),
                "reasons": sorted(r["reasons"]),
                "layouts": sorted(r["layouts"]),
            },
        )
        for r in rows
    ]


@detector(
    "hdfs_replication_backlog", needs=("hdfs_namenode_sample",), lookback=("sliding.trend_seconds",)
)
def replication_backlog(ctx: Context) -> list[Finding]:
    """Blocks waiting for replicas (under-replicated + pending) above a floor and still growing
    through the window: async cross-IDC replication is not keeping up. The evidence adds the DCI
    budget (async replication rate, headroom) when the HDFS source reports it."""
    floor = float(ctx.t("hdfs.replication_backlog_blocks"))
    out = []
    for r in ctx.rows(f"""
        SELECT namenode,
               argMin(ifNull(under_replicated_blocks, 0) + ifNull(pending_replication_blocks, 0), ts) AS first,
               argMax(ifNull(under_replicated_blocks, 0) + ifNull(pending_replication_blocks, 0), ts) AS last,
               argMax(missing_blocks, ts) AS missing, dateDiff('second', min(ts), max(ts)) AS span_s
        FROM {ctx.table("hdfs_namenode_sample")}
        WHERE {ctx.where("hdfs_namenode_sample")} AND up = 1
        GROUP BY namenode ORDER BY namenode"""):
        if r["last"] < floor or r["last"] <= r["first"]:
            continue
        dci = ctx.rows(f"""
            SELECT src_idc, dest_idc, avg(async_replication_bytes_per_second) AS async_bps,
                   min(headroom_bytes_per_second) AS min_headroom_bps, max(utilization_ratio) AS peak_utilization
            FROM {ctx.table("dci_usage")}
            WHERE {ctx.where("dci_usage")}
            GROUP BY src_idc, dest_idc ORDER BY src_idc, dest_idc""")
        growth = (r["last"] - r["first"]) / r["span_s"] * 60 if r["span_s"] else 0.0
        out.append(
            ctx.finding(
                "warning",
                "namenode",
                r["namenode"],
                f"{r['namenode']}: {r['last']:,} blocks waiting for replicas and growing "
                f"({growth:,.0f}/min): replication is not keeping up",
                {
                    "blocks_waiting_first": r["first"],
                    "blocks_waiting_last": r["last"],
                    "growth_blocks_per_minute": round(growth, 1),
                    "missing_blocks": r["missing"],
                    "dci": dci,
                },
            )
        )
    return out


def _dci_rows(ctx: Context, over: bool) -> list[dict[str, Any]]:
    """How long each DCI port was near capacity: the time its own samples cover (timebase.py);
    per judged tick when `over` (a `tick` column)."""
    return ctx.rows(
        covered_sql(
            ctx,
            "switch_port_sample",
            ["switch", "port"],
            {"hot": "tx_utilization_ratio >= {limit:Float64}"},
            {
                "role": "any(role)",
                "util": "avgIf(tx_utilization_ratio, tx_utilization_ratio >= {limit:Float64})",
                "peak": "max(tx_utilization_ratio)",
            },
            where="role = 'dci'",
            over=over,
        )
        + f" HAVING hot_s > 0 ORDER BY {'tick, ' if over else ''}switch, port",
        {"limit": float(ctx.t("dci.near_capacity_ratio")), **(tick_params(ctx) if over else {})},
    )


def _hdfs_split_sql(ctx: Context, over: bool) -> str:
    """The window's cross-IDC HDFS bytes by operation and write mode (per judged tick, `over`)."""
    t = "tick, " if over else ""
    join = tick_join(ctx, "hdfs_transfer") if over else ""
    only = " AND tick IN {ticks:Array(Int64)}" if over else ""
    return f"""
        SELECT {t}op, write_mode, sum(bytes) AS bytes
        FROM {ctx.table("hdfs_transfer")} {join}
        WHERE {ctx.where("hdfs_transfer")} AND cross_idc{only}
        GROUP BY {t}op, write_mode ORDER BY {t}bytes DESC, op, write_mode"""


@detector(
    "dci_near_capacity",
    needs=("switch_port_sample",),
    lookback=("dci.min_seconds", "sliding.interval_seconds"),
)
def dci_near_capacity(ctx: Context) -> list[Finding]:
    """A data-center interconnect link (a port whose role is 'dci' and whose LLDP peer is a switch)
    transmitting near capacity for long enough; the evidence splits the HDFS cross-IDC share by
    operation."""
    rows = _dci_rows(ctx, over=False)
    if not rows:
        return []
    roles, peers = roles_and_neighbours(ctx)
    return _dci_findings(ctx, rows, roles, peers, lambda: ctx.rows(_hdfs_split_sql(ctx, False)))


@over_ticks("dci_near_capacity")
def dci_near_capacity_over(ctx: Context) -> dict[datetime, list[Finding]]:
    hot = rows_at(ctx, _dci_rows(ctx, over=True))
    if not any(hot.values()):
        return {}
    at = roles_and_neighbours_at(ctx)
    split: dict[datetime, list[dict[str, Any]]] | None = None

    def hdfs(t: datetime) -> list[dict[str, Any]]:
        nonlocal split
        if split is None:  # read once, for every tick, when a tick finds a hot link
            got = rows_at(ctx, ctx.rows(_hdfs_split_sql(ctx, True), tick_params(ctx)))
            split = {
                k: [{c: v for c, v in r.items() if c != "tick"} for r in rs]
                for k, rs in got.items()
            }
        return split[t]

    out = {}
    for t, rows in hot.items():
        if rows and (found := _dci_findings(ctx.at(t), rows, *at[t], functools.partial(hdfs, t))):
            out[t] = found
    return out


def _dci_findings(
    ctx: Context,
    rows: list[dict[str, Any]],
    roles: dict[str, str],
    peers: dict[tuple[str, str], tuple[str, str]],
    read_hdfs: Callable[[], list[dict[str, Any]]],
) -> list[Finding]:
    limit = float(ctx.t("dci.near_capacity_ratio"))
    min_s = float(ctx.t("dci.min_seconds"))
    out = []
    hdfs: list[dict[str, Any]] | None = None
    for r in rows:
        peer = peers.get((r["switch"], r["port"]))
        seconds = float(r["hot_s"])
        if peer is None or peer[0] not in roles or seconds < min_s:
            continue
        subject = f"{port_subject(r['switch'], r['port'])}<->{port_subject(*peer)}"
        if hdfs is None:  # the window's, the same for every hot link: read once
            hdfs = read_hdfs()
        out.append(
            ctx.finding(
                "critical" if (r["peak"] or 0) >= 0.98 else "warning",
                "link",
                subject,
                f"DCI link {subject} above {limit:.0%} of capacity for {seconds:.0f}s (mean {r['util']:.0%} then, peak {r['peak']:.0%})",
                {
                    "capacity_ratio": limit,  # the summary's "above N% of capacity"
                    "seconds_near_capacity": round(seconds),
                    "utilization_when_hot": round(float(r["util"]), 3),
                    "peak": round(float(r["peak"] or 0), 3),
                    "hdfs_cross_idc_bytes_by_op": hdfs,
                },
            )
        )
    return out
