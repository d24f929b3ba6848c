"""Collection health: a source that stopped sending is a `collection_gap`, its own finding, never
a fault of what it watches. A node whose exporter is silent is not a lost GPU (gpu_lost needs the
exporter to say so); a switch that is not polled is not a flapping link (link_flap needs a down
sample or a link-down counter). Gaps are judged per device against its own sample spacing
(timebase.spacing_sql): silent for `time.gap_seconds`, or `time.gap_spacings` of its spacings
when that is longer, after sending in the trailing `time.gap_baseline_seconds`.

Not judged here: sFlow agents (flow samples stop whenever traffic does: an agent's liveness needs
its counter samples, which are not stored) and the inventory watch (no heartbeat is stored; its
errors are in the component self-report).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from telemetry.correlate.findings import Finding
from telemetry.correlate.registry import Context, detector, over_ticks
from telemetry.correlate.timebase import activity_sql, by_tick, tick_join, tick_params

# source class -> (what it is called, the kinds it writes, their device column)
# source class -> (what it is called, {kind it writes: the keys of its series within a device},
# the device column)
SOURCES: dict[str, tuple[str, dict[str, list[str]], str]] = {
    "node": (
        "node exporter",
        {"nic_sample": ["device", "port"], "gpu_sample": ["gpu", "mig"]},
        "node",
    ),
    "switch": ("switch collector", {"switch_port_sample": ["port"]}, "switch"),
}


def _utc(t: Any) -> datetime:
    return t if t.tzinfo else t.replace(tzinfo=UTC)


@detector(
    "collection_gap",
    needs=("nic_sample", "gpu_sample", "switch_port_sample", "collective_sample"),
    lookback=("time.gap_baseline_seconds",),
)
def collection_gap(ctx: Context) -> list[Finding]:
    activity = {
        kind: ctx.rows(activity_sql(ctx, kind, col, series))
        for _, kinds, col in SOURCES.values()
        for kind, series in kinds.items()
    }
    return _gaps(ctx, ctx.window.end, activity, ctx.rows(_writers_sql(ctx, over=False)))


@over_ticks("collection_gap")
def collection_gap_over(ctx: Context) -> dict[datetime, list[Finding]]:
    at = by_tick(ctx)
    activity: dict[datetime, dict[str, list[dict[str, Any]]]] = {t: {} for t in ctx.ticks}
    for _, kinds, col in SOURCES.values():
        for kind, series in kinds.items():
            for r in ctx.rows(activity_sql(ctx, kind, col, series, over=True), tick_params(ctx)):
                activity[at[r["tick"]]].setdefault(kind, []).append(r)
    writers: dict[datetime, list[dict[str, Any]]] = {t: [] for t in ctx.ticks}
    for r in ctx.rows(_writers_sql(ctx, over=True), tick_params(ctx)):
        writers[at[r["tick"]]].append(r)
    out = {t: _gaps(ctx, t, activity[t], writers[t]) for t in ctx.ticks}
    return {t: fs for t, fs in out.items() if fs}


def _gaps(
    ctx: Context,
    now: datetime,
    activity: dict[str, list[dict[str, Any]]],
    writers: list[dict[str, Any]],
) -> list[Finding]:
    """What collection_gap finds at `now`, from activity_sql's rows per kind and the NCCL
    writers' rows of `now`'s trailing window."""
    gap_s = float(ctx.t("time.gap_seconds"))
    spacings = float(ctx.t("time.gap_spacings"))
    share = float(ctx.t("time.gap_class_share"))
    out: list[Finding] = []
    for cls, (what, kinds, col) in SOURCES.items():
        seen: dict[str, dict[str, Any]] = {}
        for kind in kinds:
            for r in activity.get(kind, []):
                d = seen.setdefault(r[col], {"last": _utc(r["last"]), "spacing": None, "n": 0})
                d["last"] = max(d["last"], _utc(r["last"]))
                d["n"] += int(r["samples"])
                sp = r["spacing_s"]
                if sp is not None and sp == sp and sp > 0:  # NaN: fewer than two times
                    d["spacing"] = sp if d["spacing"] is None else min(d["spacing"], sp)
        silent = {}
        for dev, d in seen.items():
            quiet = (now - d["last"]).total_seconds()
            limit = max(gap_s, spacings * (d["spacing"] or 0.0))
            if d["n"] >= 2 and quiet >= limit:
                silent[dev] = {
                    "silent_seconds": round(quiet),
                    "last_sample": d["last"].isoformat(),
                    "own_spacing_seconds": d["spacing"],
                    "gap_threshold_seconds": limit,
                }
        if not silent:
            continue
        if len(silent) >= 3 and len(silent) >= share * len(seen):
            quiet = min(v["silent_seconds"] for v in silent.values())
            out.append(
                ctx.finding(
                    "critical",
                    "collector",
                    f"{cls}/*",
                    f"{len(silent)} of {len(seen)} {what}s silent for {quiet} s or more: the "
                    "collection (or the store's ingest) stopped, not the devices",
                    {
                        "source": what,
                        "silent": len(silent),
                        "devices": len(seen),
                        "examples": sorted(silent)[:10],
                    },
                )
            )
            continue
        for dev, ev in sorted(silent.items()):
            out.append(
                ctx.finding(
                    "warning",
                    cls,
                    dev,
                    f"{what} of {dev} silent for {ev['silent_seconds']} s (last sample "
                    f"{ev['last_sample']}): a collection gap, not a fault of {dev}",
                    {"source": what, "device": dev, **ev},
                )
            )
    out += _nccl_writers(ctx, now, writers, gap_s)
    return out


def _writers_sql(ctx: Context, over: bool) -> str:
    """Per NCCL Inspector writer (job and node; and judged tick, `over`) its last sample."""
    tick = "tick, " if over else ""
    join = tick_join(ctx, "collective_sample") if over else ""
    only = " AND tick IN {ticks:Array(Int64)}" if over else ""
    return f"""
        SELECT {tick}namespace, job, node, max(ts) AS last, count() AS n
        FROM {ctx.table("collective_sample")} {join}
        WHERE {ctx.where("collective_sample")} AND job != '' AND node != ''{only}
        GROUP BY {tick}namespace, job, node"""


def _nccl_writers(
    ctx: Context, now: datetime, rows: list[dict[str, Any]], gap_s: float
) -> list[Finding]:
    """An NCCL Inspector writer (one node of a job) silent while the job's other nodes keep
    reporting collectives: its files stopped reaching the collector. Collectives stop whenever a
    job does (or hangs, or is between phases), so a writer is judged against its own job."""
    jobs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        jobs.setdefault((r["namespace"], r["job"]), []).append(r)
    out = []
    for (ns, job), nodes in sorted(jobs.items()):
        job_last = max(_utc(r["last"]) for r in nodes)
        if (now - job_last).total_seconds() >= gap_s or len(nodes) < 2:
            continue  # the whole job is quiet: it ended, hangs or waits; not a writer's gap
        for r in sorted(nodes, key=lambda r: r["node"]):
            behind = (job_last - _utc(r["last"])).total_seconds()
            if r["n"] >= 2 and behind >= gap_s:
                out.append(
                    ctx.finding(
                        "warning",
                        "node",
                        f"{r['node']}/nccl",
                        f"NCCL Inspector on {r['node']} (job {ns}/{job}) silent for "
                        f"{behind:.0f} s while the job's other nodes report: a collection gap",
                        {
                            "source": "NCCL Inspector",
                            "device": r["node"],
                            "namespace": ns,
                            "job": job,
                            "silent_seconds": round(behind),
                            "last_sample": _utc(r["last"]).isoformat(),
                        },
                    )
                )
    return out
