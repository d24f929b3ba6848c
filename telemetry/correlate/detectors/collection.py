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

from datetime import datetime
from typing import Any

from telemetry.correlate.findings import Finding
from telemetry.correlate.registry import Context, detector, over_ticks
from telemetry.correlate.timebase import activity_sql, by_tick, tick_join, tick_params
from telemetry.times import as_utc

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
    writers = ctx.rows(_writers_sql(ctx, over=False))
    pauses = ctx.rows(_pauses_sql(ctx, over=False), _pause_params(ctx))
    return _gaps(ctx, ctx.window.end, activity, writers, pauses)


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
    pauses: dict[datetime, list[dict[str, Any]]] = {t: [] for t in ctx.ticks}
    for r in ctx.rows(_pauses_sql(ctx, over=True), tick_params(ctx) | _pause_params(ctx)):
        pauses[at[r["tick"]]].append(r)
    out = {t: _gaps(ctx, t, activity[t], writers[t], pauses[t]) for t in ctx.ticks}
    return {t: fs for t, fs in out.items() if fs}


def _gaps(
    ctx: Context,
    now: datetime,
    activity: dict[str, list[dict[str, Any]]],
    writers: list[dict[str, Any]],
    pauses: list[dict[str, Any]],
) -> list[Finding]:
    """What collection_gap finds at `now`, from activity_sql's rows per kind and the NCCL
    writers' and their jobs' pauses' rows of `now`'s trailing window."""
    gap_s = float(ctx.t("time.gap_seconds"))
    spacings = float(ctx.t("time.gap_spacings"))
    share = float(ctx.t("time.gap_class_share"))
    out: list[Finding] = []
    for cls, (what, kinds, col) in SOURCES.items():
        seen: dict[str, dict[str, Any]] = {}
        for kind in kinds:
            for r in activity.get(kind, []):
                d = seen.setdefault(r[col], {"last": as_utc(r["last"]), "spacing": None, "n": 0})
                d["last"] = max(d["last"], as_utc(r["last"]))
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
    out += _nccl_writers(ctx, now, writers, pauses, gap_s)
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


# a job-wide quiet shorter than this is never a pause: the pauses are read to the second
PAUSE_FLOOR_S = 2.0


def _pauses_sql(ctx: Context, over: bool) -> str:
    """Per job (and judged tick, `over`): the stretches in which none of its nodes reported a
    collective (a hang, a checkpoint, a restart), as `pause_end` (epoch seconds) and `pause_s`.
    A stretch is a pause when it lasts `time.gap_spacings` of the job's own rhythm (the spacing
    of its busiest rank's records) and at least PAUSE_FLOOR_S; times to the second."""
    tick = "tick, " if over else ""
    join = tick_join(ctx, "collective_sample") if over else ""
    only = " AND tick IN {ticks:Array(Int64)}" if over else ""
    return f"""
        SELECT {tick}namespace, job,
               arrayFilter((x, d) -> d >= thr, s, arrayDifference(s)) AS pause_end,
               arrayFilter(d -> d >= thr, arrayDifference(s)) AS pause_s
        FROM (
            SELECT {tick}namespace, job, arraySort(groupUniqArrayArray(secs)) AS s,
                   greatest({{pause_floor_s:Float64}}, {{spacings:Float64}} * min(spacing)) AS thr
            FROM (
                SELECT {tick}namespace, job, node, rank,
                       groupUniqArray(intDiv(toUnixTimestamp64Milli(ts), 1000)) AS secs,
                       if(count() > 1, dateDiff('millisecond', min(ts), max(ts)) / 1000
                           / (count() - 1), inf) AS spacing
                FROM {ctx.table("collective_sample")} {join}
                WHERE {ctx.where("collective_sample")} AND job != '' AND node != ''{only}
                GROUP BY {tick}namespace, job, node, rank
            )
            GROUP BY {tick}namespace, job
        )
        WHERE notEmpty(pause_end)"""


def _pause_params(ctx: Context) -> dict[str, object]:
    return {"spacings": float(ctx.t("time.gap_spacings")), "pause_floor_s": PAUSE_FLOOR_S}


def _paused_s(pauses: list[tuple[int, int]], since: datetime, until: datetime) -> float:
    """Seconds of the job's pauses ((end, length) in epoch seconds) within (since, until]."""
    a, b = since.timestamp(), until.timestamp()
    return sum(max(0.0, min(b, end) - max(a, end - n)) for end, n in pauses)


def _nccl_writers(
    ctx: Context,
    now: datetime,
    rows: list[dict[str, Any]],
    pause_rows: list[dict[str, Any]],
    gap_s: float,
) -> list[Finding]:
    """An NCCL Inspector writer (one node of a job) silent while the job's other nodes keep
    reporting collectives: its files stopped reaching the collector. Collectives stop whenever a
    job does (or hangs, or is between phases), so a writer is judged against its own job, and
    its silence counts only the time the job ran collectives without it: an Inspector writes a
    record per completed collective, so a hung job silences every writer at once (the hung
    rank's too) and that pause is the job's, never a writer's gap. Measured so, a job that
    resumes after a hang with one node's first records a second before another's is not a gap."""
    jobs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        jobs.setdefault((r["namespace"], r["job"]), []).append(r)
    paused = {
        (r["namespace"], r["job"]): list(zip(r["pause_end"], r["pause_s"], strict=True))
        for r in pause_rows
    }
    out = []
    for (ns, job), nodes in sorted(jobs.items()):
        job_last = max(as_utc(r["last"]) for r in nodes)
        if (now - job_last).total_seconds() >= gap_s or len(nodes) < 2:
            continue  # the whole job is quiet: it ended, hangs or waits; not a writer's gap
        for r in sorted(nodes, key=lambda r: r["node"]):
            last = as_utc(r["last"])
            idle = _paused_s(paused.get((ns, job), []), last, job_last)
            behind = (job_last - last).total_seconds() - idle
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
                            "job_paused_seconds": round(idle),
                            "last_sample": last.isoformat(),
                        },
                    )
                )
    return out
