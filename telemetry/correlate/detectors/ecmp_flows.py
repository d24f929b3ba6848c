"""Which jobs' flows ECMP hashing piled onto an uplink member (fabric.py judges the member hot):
from the sampled flows of the window, the raw samples before it and the inventory's pods. Reads
the store only; judges nothing itself.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from telemetry.correlate.registry import Context
from telemetry.correlate.timebase import by_tick, lookback_ms, tick_join, tick_params
from telemetry.store import time_range
from telemetry.times import valid_during


def _piled_sql(ctx: Context, *, over: bool) -> str:
    """The sampled flows piled_jobs() weighs: per flow (a QP: source, destination, destination
    QP) on a member of {members}, its bytes in the window, and whether it is new there or was
    sampled on other members in the {hs}..window before; `over`: per judged tick (a `tick`
    column), of each tick's members ({tick_members}: (tick, switch, port)), the time before
    each tick's window from {hs} to {he}."""
    only = "(switch, out_port) IN {members:Array(Tuple(String, String))}"
    tick, on, flows_join, before_join = "", "", "", ""
    if over:
        lookback = lookback_ms(ctx)
        since = round(float(ctx.t("ecmp.min_seconds")) * 1000)
        only = "(tick, switch, out_port) IN {tick_members:Array(Tuple(Int64, String, String))}"
        tick, on = "tick, ", "f.tick = b.tick AND "
        flows_join = tick_join(ctx, "attributed_flow")
        before_join = tick_join(
            ctx, "flow_sample", f"toUnixTimestamp64Milli(`ts`) + {lookback}", span=since
        )
    return f"""
        SELECT {"f.tick AS tick, " if over else ""}f.switch AS switch, f.out_port AS out_port,
               src_namespace, src_job, rdma,
               NOT has(b.ports, f.out_port) AS new,
               -- sampled on another member of the group before: the flow moved
               notEmpty(b.ports) AS seen, bytes
        FROM (SELECT {tick}switch, out_port, src_namespace, src_job, src_ip, dst_ip,
                     ifNull(dest_qp, 0) AS qp, any(rdma) AS rdma, sum(bytes) AS bytes
              FROM {ctx.table("attributed_flow")} {flows_join}
              WHERE {ctx.where("attributed_flow")} AND {only}
              GROUP BY {tick}switch, out_port, src_namespace, src_job, src_ip, dst_ip, qp) AS f
        -- GLOBAL: on a cluster, attributed flows and raw samples are sharded apart
        GLOBAL LEFT JOIN (
            SELECT {tick}switch, src_ip, dst_ip, ifNull(dest_qp, 0) AS qp, groupUniqArray(out_port) AS ports
            FROM {ctx.table("flow_sample")} {before_join}
            WHERE cluster = {{cluster:String}} AND {time_range("flow_sample", lo="hs", hi="he" if over else "ws")}
              AND {only}
            GROUP BY {tick}switch, src_ip, dst_ip, qp
        ) AS b ON {on}f.switch = b.switch AND f.src_ip = b.src_ip AND f.dst_ip = b.dst_ip AND f.qp = b.qp"""


def piled_jobs(
    ctx: Context, groups: dict[str, list[str]]
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Per (switch, member) of the uplink `groups` (switch -> its members): the jobs whose flows
    hashing piled onto that member, from the sampled flows of the window (a flow is a QP: source,
    destination, destination QP). A job is piled there when
    - its RDMA flows through the group sit on the member at least `ecmp.max_over_mean` x their
      even share (its flows in the group / members), at least two of them: hashing put them
      together;
    - its bytes on the member above its even share are at least half of what the member's
      sampled bytes run above the group's mean: it is what makes the member hot.
    A job's flows carry alike (one collective's connections), so its flow count per member is
    what its load per member follows. `new_on_member`: those of its flows there that arrived in
    the window, no sample of theirs on the member in the `ecmp.min_seconds` before it (the raw
    samples, whatever was attributed), `moved_onto_member` those of them sampled on another
    member of the group in that time (a rehash moved them); `job_started`: its pods began in
    that time too (the inventory's word: flows that come back after a hang or a quiet phase are
    new on the member, yet the job neither started nor was rehashed). Flows that sat there all
    along did not make a member that turns hot now hot. Most piled first."""
    since_s = float(ctx.t("ecmp.min_seconds"))
    rows = ctx.rows(
        _piled_sql(ctx, over=False),
        {
            "members": sorted((sw, p) for sw, ps in groups.items() for p in ps),
            "hs": ctx.window.start - timedelta(seconds=since_s),
        },
    )
    out = _piled(ctx, rows, groups)
    started = _started_since(ctx, _piled_names(out), since_s)
    return _started(out, started)


def piled_jobs_at(
    ctx: Context, groups: dict[datetime, dict[str, list[str]]]
) -> dict[datetime, dict[tuple[str, str], list[dict[str, Any]]]]:
    """Set-based: piled_jobs() at each tick of `groups` with its groups, from one statement
    (and one of _started_since_at())."""
    groups = {t: g for t, g in groups.items() if g}
    if not groups:
        return {}
    since_s = float(ctx.t("ecmp.min_seconds"))
    at = by_tick(ctx)
    ms = {t: k for k, t in at.items()}
    lookback = ctx.ticks[0] - ctx.window.start
    rows: dict[datetime, list[dict[str, Any]]] = {t: [] for t in groups}
    for r in ctx.rows(
        _piled_sql(ctx, over=True),
        {
            **tick_params(ctx),
            "tick_members": sorted(
                (ms[t], sw, p) for t, g in groups.items() for sw, ps in g.items() for p in ps
            ),
            "hs": ctx.window.start - timedelta(seconds=since_s),
            "he": ctx.ticks[-1] - lookback,
        },
    ):
        rows[at[r.pop("tick")]].append(r)
    out = {t: _piled(ctx, rows[t], g) for t, g in groups.items()}
    started = _started_since_at(ctx, {t: _piled_names(o) for t, o in out.items()}, since_s)
    return {t: _started(o, started[t]) for t, o in out.items()}


def _piled(
    ctx: Context, rows: list[dict[str, Any]], groups: dict[str, list[str]]
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """piled_jobs() from _piled_sql()'s rows of one tick, but for `job_started`."""
    ratio = float(ctx.t("ecmp.max_over_mean"))
    member_bytes: dict[tuple[str, str], float] = {}
    # (switch, namespace, job) -> member -> [flows, new flows, bytes, new flows that moved]
    per_job: dict[tuple[str, str, str], dict[str, list[float]]] = {}
    for r in rows:
        key = (r["switch"], r["out_port"])
        member_bytes[key] = member_bytes.get(key, 0.0) + float(r["bytes"])
        if not r["rdma"] or not r["src_job"]:
            continue
        by_member = per_job.setdefault((r["switch"], r["src_namespace"], r["src_job"]), {})
        c = by_member.setdefault(r["out_port"], [0, 0, 0.0, 0])
        c[0] += 1
        c[1] += int(bool(r["new"]))
        c[2] += float(r["bytes"])
        c[3] += int(bool(r["new"]) and bool(r["seen"]))
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for (sw, ns, job), by_port in sorted(per_job.items()):
        width = len(groups[sw])
        total = sum(c[0] for c in by_port.values())
        job_mean = sum(c[2] for c in by_port.values()) / width
        group_mean = sum(member_bytes.get((sw, p), 0.0) for p in groups[sw]) / width
        for port, (n, new, nbytes, moved_n) in sorted(by_port.items()):
            excess = member_bytes.get((sw, port), 0.0) - group_mean
            if (
                n >= 2
                and n * width >= ratio * total
                and excess > 0
                and nbytes - job_mean >= excess / 2
            ):
                out.setdefault((sw, port), []).append(
                    {
                        "job": f"{ns}/{job}",
                        "flows_on_member": int(n),
                        "new_on_member": int(new),
                        "moved_onto_member": int(moved_n),
                        "flows_in_group": int(total),
                        "flows_per_member": [int(by_port.get(p, [0])[0]) for p in groups[sw]],
                        "share_of_excess": round((nbytes - job_mean) / excess, 3),
                    }
                )
    return out


def _piled_names(out: dict[tuple[str, str], list[dict[str, Any]]]) -> set[tuple[str, ...]]:
    return {tuple(j["job"].split("/", 1)) for js in out.values() for j in js}


def _started(
    out: dict[tuple[str, str], list[dict[str, Any]]], started: set[str]
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    for jobs in out.values():
        for j in jobs:
            j["job_started"] = j["job"] in started
        jobs.sort(key=lambda j: (-j["flows_on_member"] / j["flows_in_group"], j["job"]))
    return out


def fresh(job: dict[str, Any]) -> bool:
    """Most of a piled job's flows on the member arrived in the window because the job started
    then. Flows a rehash moved there (`moved_onto_member`: most often a link of the path went
    down, and traffic came back when it did) are judged over the full `ecmp.min_seconds`, as is
    a job whose flows come back after a hang: the link's own finding says why they moved."""
    return job["job_started"] and 2 * job["new_on_member"] > job["flows_on_member"]


def _started_since(ctx: Context, jobs: set[tuple[str, ...]], since_s: float) -> set[str]:
    """Of `jobs` ((namespace, job)), those whose pods began no earlier than `since_s` before the
    window: the job started (or was started again) then. Its start is the first version of the
    earliest of its pods alive in the window (the inventory's, not the flows': a job whose flows
    come back after a hang did not start)."""
    if not jobs:
        return set()
    pods = ctx.table("pod")
    rows = ctx.rows(
        f"""
        SELECT namespace, job, min(valid_from) AS started FROM {pods}
        WHERE cluster = {{cluster:String}} AND (namespace, job) IN {{jobs:Array(Tuple(String, String))}}
          AND uid GLOBAL IN (SELECT uid FROM {pods}
                      WHERE cluster = {{cluster:String}}
                        AND (namespace, job) IN {{jobs:Array(Tuple(String, String))}}
                        AND {valid_during()})
        GROUP BY namespace, job
        HAVING started >= {{hs:DateTime64(3, 'UTC')}}""",
        {"jobs": sorted(jobs), "hs": ctx.window.start - timedelta(seconds=since_s)},
    )
    return {f"{r['namespace']}/{r['job']}" for r in rows}


def _started_since_at(
    ctx: Context, jobs: dict[datetime, set[tuple[str, ...]]], since_s: float
) -> dict[datetime, set[str]]:
    """Set-based: _started_since() at each tick of `jobs` with its jobs, from one statement
    (each tick's pods alive in its own window, its own `since_s` before it)."""
    out: dict[datetime, set[str]] = {t: set() for t in jobs}
    asked = {t: js for t, js in jobs.items() if js}
    if not asked:
        return out
    at = by_tick(ctx)
    ms = {t: k for k, t in at.items()}
    lookback = lookback_ms(ctx)
    since = round(since_s * 1000)
    pods = ctx.table("pod")
    ws = f"fromUnixTimestamp64Milli(toInt64(tick - {lookback}), 'UTC')"
    for r in ctx.rows(
        f"""
        SELECT a.tick AS tick, p.namespace AS namespace, p.job AS job,
               min(p.valid_from) AS started
        FROM {pods} AS p
        GLOBAL INNER JOIN (
            SELECT DISTINCT tick, uid FROM {pods} ARRAY JOIN {{asked:Array(Int64)}} AS tick
            WHERE cluster = {{cluster:String}}
              AND (tick, namespace, job) IN {{tick_jobs:Array(Tuple(Int64, String, String))}}
              AND {valid_during(ws, "fromUnixTimestamp64Milli(toInt64(tick), 'UTC')")}
        ) AS a ON p.uid = a.uid
        WHERE p.cluster = {{cluster:String}}
          AND (a.tick, p.namespace, p.job) IN {{tick_jobs:Array(Tuple(Int64, String, String))}}
        GROUP BY tick, namespace, job
        HAVING started >= fromUnixTimestamp64Milli(toInt64(tick - {lookback + since}), 'UTC')""",
        {
            "asked": sorted(ms[t] for t in asked),
            "tick_jobs": sorted((ms[t], *j) for t, js in asked.items() for j in js),
        },
    ):
        out[at[r["tick"]]].add(f"{r['namespace']}/{r['job']}")
    return out
