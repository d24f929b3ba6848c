"""GPU pool detectors: GPUs held by pods that do not use them, gangs that wait although enough
GPUs are free (scattered over nodes, models or HyperNodes they may not use), and queues above
their deserved share while another queue sits below its guarantee with gangs waiting.

They read the inventory as of the window's end (pods, nodes, podgroups, queues, priority
classes) and the GPU samples of the window; thresholds under `pool:` in thresholds.yaml.
gpu_idle_allocated also has a set-based form (`gpu_idle_allocated_over`): each of its reads
once over many ticks, judged as the per-tick form judges each.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from telemetry.correlate.findings import Finding
from telemetry.correlate.registry import Context, detector, over_ticks
from telemetry.correlate.timebase import by_tick, interval_ms, lookback_ms
from telemetry.pool import Gang, place_gang
from telemetry.times import as_of, as_utc, from_ms, valid_during

AT = "{we:DateTime64(3, 'UTC')}"


def _asof(
    ctx: Context, kind: str, cols: str, where: str = "1", params: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Rows of a versioned inventory kind valid at the window's end."""
    return ctx.rows(
        f"""
        SELECT {cols} FROM {ctx.table(kind, final=True)}
        WHERE cluster = {{cluster:String}} AND {as_of(AT)} AND {where}""",
        params,
    )


# what the pool detectors read of a pod (as of a time)
POD_COLS = (
    "namespace, pod, node, phase, job, podgroup, priority_class, gpu_model, "
    "coalesce(gpu_requests, 0) AS gpus"
)


def _pods(ctx: Context) -> list[dict[str, Any]]:
    return ctx.cached(  # type: ignore[no-any-return]
        "pool_pods",
        lambda: _asof(
            ctx,
            "pod",
            POD_COLS,
        ),
    )


def _queue_of(ctx: Context) -> dict[tuple[str, str], str]:
    """(namespace, podgroup or job) -> queue, as of the window's end."""

    def make() -> dict[tuple[str, str], str]:
        return _queues(
            _asof(ctx, "job", "namespace, job, queue"),
            _asof(ctx, "podgroup", "namespace, podgroup, queue"),
        )

    return ctx.cached("pool_queue_of", make)  # type: ignore[no-any-return]


def _queues(jobs: list[dict[str, Any]], groups: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """(namespace, podgroup or job) -> queue from job and PodGroup rows (a PodGroup's wins)."""
    out = {(r["namespace"], r["job"]): r["queue"] for r in jobs}
    for r in groups:
        out[(r["namespace"], r["podgroup"])] = r["queue"]
    return out


def _pod_queue(q: dict[tuple[str, str], str], p: dict[str, Any]) -> str:
    return q.get((p["namespace"], p["podgroup"])) or q.get((p["namespace"], p["job"])) or ""


def _pending_gangs(ctx: Context) -> list[dict[str, Any]]:
    """PodGroups not running at the window's end and waiting for at least
    pool.gang_pending_seconds (since creation or since they last ran)."""
    wait = float(ctx.t("pool.gang_pending_seconds"))
    rows = ctx.rows(
        f"""
        SELECT ns AS namespace, pg AS podgroup, j AS job, q AS queue, mm AS min_member,
               mg AS min_gpus, ph AS phase, un AS unschedulable, why AS reason, since
        FROM (
            SELECT namespace AS ns, podgroup AS pg,
                   argMax(job, valid_from) AS j, argMax(queue, valid_from) AS q,
                   argMax(min_member, valid_from) AS mm, argMax(min_gpus, valid_from) AS mg,
                   argMax(phase, valid_from) AS ph, argMax(unschedulable, valid_from) AS un,
                   argMax(reason, valid_from) AS why,
                   greatest(min(valid_from), maxIf(coalesce(valid_to, {AT}), phase = 'Running'))
                       AS since,
                   argMax({as_of(AT)}, valid_from) AS current
            FROM {ctx.table("podgroup", final=True)}
            WHERE cluster = {{cluster:String}} AND valid_from <= {AT}
            GROUP BY namespace, podgroup)
        WHERE current AND ph NOT IN ('Running', 'Completed', 'Succeeded', 'Failed')
          AND since <= {AT} - toIntervalMillisecond({{wait:UInt64}})
        ORDER BY namespace, podgroup""",
        {"wait": int(wait * 1000)},
    )
    return rows


# --- gpu_idle_allocated ------------------------------------------------------------------------
def _idle_params(ctx: Context, names: list[tuple[str, str]] | None) -> tuple[str, dict[str, Any]]:
    """The idle-pod statements' pod filter (`names`: only those pods) and shared parameters: the
    busy floor, and the slack a pod's first sample may lag its window's start."""
    params: dict[str, Any] = {
        "floor": float(ctx.t("pool.busy_utilization_floor")),
        "slack": int(2 * float(ctx.t("sliding.interval_seconds")) * 1000),
    }
    if names is None:
        return "", params
    params["names"] = names
    return "AND (namespace, pod) IN {names:Array(Tuple(String, String))}", params


def _idle_pods(
    ctx: Context, lo: Any, names: list[tuple[str, str]] | None = None
) -> dict[tuple[str, str], dict[str, Any]]:
    """Pods whose every GPU stayed under the floor from `lo` to the window's end, with samples
    from the start (the pod held them all along)."""
    only, params = _idle_params(ctx, names)
    params["lo"] = lo
    rows = ctx.rows(
        f"""
        SELECT namespace, pod, count() AS gpus, max(peak) AS peak, min(first) AS first_ts
        FROM (SELECT namespace, pod, node, gpu, max(utilization_ratio) AS peak, min(ts) AS first
              FROM {ctx.table("gpu_sample")}
              WHERE cluster = {{cluster:String}} AND pod != '' {only}
                AND ts >= {{lo:DateTime64(3, 'UTC')}} AND ts < {AT}
              GROUP BY namespace, pod, node, gpu)
        GROUP BY namespace, pod
        HAVING peak IS NOT NULL AND peak < {{floor:Float64}}
           AND first_ts <= {{lo:DateTime64(3, 'UTC')}} + toIntervalMillisecond({{slack:UInt64}})""",
        params,
    )
    return {(r["namespace"], r["pod"]): r for r in rows}


def _last_busy(ctx: Context, ns: str, pod: str) -> Any:
    (r,) = ctx.rows(
        f"""
        SELECT maxIf(ts, utilization_ratio >= {{floor:Float64}}) AS busy, min(ts) AS first
        FROM {ctx.table("gpu_sample")}
        WHERE cluster = {{cluster:String}} AND namespace = {{ns:String}} AND pod = {{pod:String}}
          AND ts < {AT}""",
        {"ns": ns, "pod": pod, "floor": float(ctx.t("pool.busy_utilization_floor"))},
    )
    busy, first = as_utc(r["busy"]), as_utc(r["first"])
    return busy if busy.timestamp() > 0 else first


@detector(
    "gpu_idle_allocated",
    needs=("gpu_sample", "pod"),
    lookback=("pool.idle_allocated_seconds",),
)
def gpu_idle_allocated(ctx: Context) -> list[Finding]:
    idle = _idle_pods(ctx, ctx.window.start)
    if not idle:
        return []
    pods = {(p["namespace"], p["pod"]): p for p in _pods(ctx)}
    purpose = {
        r["priority_class"]: r["purpose"]
        for r in _asof(ctx, "priority_class", "priority_class, purpose")
    }
    longer: dict[str, float] = ctx.t("pool.idle_allocated_seconds_by_purpose") or {}
    # a purpose with a longer grace (Interactive) must have been idle for that long
    for purp, secs in longer.items():
        names = [k for k in idle if purpose.get(pods.get(k, {}).get("priority_class", "")) == purp]
        if names and float(secs) > ctx.window.seconds:
            still = _idle_pods(ctx, ctx.window.end - timedelta(seconds=float(secs)), names)
            for k in names:
                if k not in still:
                    idle.pop(k)
    queue_of = _queue_of(ctx)
    out = []
    for (ns, pod), r in sorted(idle.items()):
        p = pods.get((ns, pod))
        if p is None or p["phase"] != "Running":
            continue  # the pod is gone: its GPUs are free again
        since = _last_busy(ctx, ns, pod)
        out.append(_idle_finding(ctx, r, p, purpose, _pod_queue(queue_of, p), since))
    return out


def _idle_finding(
    ctx: Context,
    r: dict[str, Any],
    p: dict[str, Any],
    purpose: dict[str, str],
    q: str,
    since: datetime,
) -> Finding:
    """The finding on idle pod `p` (its idle row `r`, idle since `since`) at the window's end."""
    ns, pod = p["namespace"], p["pod"]
    idle_s = (ctx.window.end - since).total_seconds()
    wasted = r["gpus"] * idle_s / 3600.0
    return Finding(
        "gpu_idle_allocated",
        "pool",
        "warning",
        "pod",
        f"{ns}/{pod}",
        f"pod {ns}/{pod} (job {p['job'] or '-'}, queue {q or '-'}) holds {r['gpus']} GPU(s) "
        f"on {p['node']} below {ctx.t('pool.busy_utilization_floor'):.0%} utilization for "
        f"{idle_s / 60:.0f} min: {wasted:.1f} GPU-hours idle",
        {
            "namespace": ns,
            "pod": pod,
            "job": p["job"],
            "queue": q,
            "node": p["node"],
            "priority_class": p["priority_class"],
            "purpose": purpose.get(p["priority_class"], ""),
            "gpus": int(r["gpus"]),
            "peak_utilization": float(r["peak"]),
            "idle_since": since.isoformat(),
            "idle_gpu_hours": round(wasted, 3),
        },
    )


# set-based (Context.ticks): the per-tick form's reads, each once over the judged ticks
Key = tuple[str, str]


def _idle_over(
    ctx: Context, span_ms: int, ticks: list[int], names: list[Key] | None = None
) -> dict[int, dict[Key, dict[str, Any]]]:
    """Per tick of `ticks` (epoch ms), _idle_pods over its trailing `span_ms` (`names`: only
    those pods), in one statement. The samples are first reduced per pod and interval of
    gcd(tick step, span) ms: an interval lies wholly inside a tick's window or wholly out. An
    interval whose peak reaches the floor (busy) is in no idle window; any other stands for the
    ticks whose window holds it and no busy interval of its pod: those after the last busy
    interval before it by more than the span and up to the next busy one after it. So an
    interval row is repeated only for the ticks where its pod may be idle, not every tick whose
    window holds it; the ticks' groups are the per-tick statement's, over the same samples."""
    step = interval_ms(ctx)
    width = math.gcd(step, span_ms)
    if any(t % step for t in ticks):
        raise ValueError(f"ticks off the {step} ms grid: {ticks[:3]}")
    only, params = _idle_params(ctx, names)
    params.update(lo=from_ms(ticks[0] - span_ms), hi=from_ms(ticks[-1]), ticks=ticks)
    ms = "toUnixTimestamp64Milli(ts)"
    rows = ctx.rows(
        f"""
        SELECT tick, namespace, pod, uniqExactMerge(g) AS gpus, max(peak) AS peak,
               min(first) AS first_ts
        FROM (
            SELECT *,
                   max(if(busy, b, NULL)) OVER (PARTITION BY namespace, pod ORDER BY b
                       ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_busy,
                   min(if(busy, b, NULL)) OVER (PARTITION BY namespace, pod ORDER BY b
                       ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS next_busy
            FROM (
                SELECT namespace, pod, intDiv({ms}, {width}) * {width} AS b,
                       max(utilization_ratio) AS peak, min(ts) AS first,
                       uniqExactState(node, gpu) AS g,
                       ifNull(peak >= {{floor:Float64}}, 0) AS busy
                FROM {ctx.table("gpu_sample")}
                WHERE cluster = {{cluster:String}} AND pod != '' {only}
                  AND ts >= {{lo:DateTime64(3, 'UTC')}} AND ts < {{hi:DateTime64(3, 'UTC')}}
                GROUP BY namespace, pod, b))
        ARRAY JOIN arrayMap(i -> i * {step}, range(
            intDiv(greatest(b, ifNull(prev_busy + {span_ms}, 0)), {step}) + 1,
            intDiv(least(b + {span_ms}, ifNull(next_busy, b + {span_ms})), {step}) + 1)) AS tick
        WHERE NOT busy AND tick IN {{ticks:Array(Int64)}}
        GROUP BY tick, namespace, pod
        HAVING peak IS NOT NULL AND peak < {{floor:Float64}}
           AND toUnixTimestamp64Milli(first_ts) <= tick - {span_ms} + {{slack:UInt64}}""",
        params,
    )
    out: dict[int, dict[Key, dict[str, Any]]] = defaultdict(dict)
    for r in rows:
        out[r["tick"]][(r["namespace"], r["pod"])] = r
    return out


def _asof_ticks(
    ctx: Context,
    kind: str,
    cols: str,
    ticks: list[int],
    where: str = "1",
    params: dict[str, Any] | None = None,
) -> dict[int, list[dict[str, Any]]]:
    """_asof at each of `ticks` (epoch ms): the rows of versions valid at each, in one read."""
    at = "fromUnixTimestamp64Milli(k, 'UTC')"
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in ctx.rows(
        f"""
        SELECT tick, {cols} FROM {ctx.table(kind, final=True)}
        ARRAY JOIN arrayFilter(k -> {as_of(at)}, {{at_ticks:Array(Int64)}}) AS tick
        WHERE cluster = {{cluster:String}} AND {where}
          AND {
            valid_during(
                "fromUnixTimestamp64Milli({at_lo:Int64}, 'UTC')",
                "fromUnixTimestamp64Milli({at_hi:Int64}, 'UTC')",
                closed=True,
            )
        }""",
        {**(params or {}), "at_ticks": ticks, "at_lo": ticks[0], "at_hi": ticks[-1]},
    ):
        out[r.pop("tick")].append(r)
    return out


def _last_busy_over(
    ctx: Context, names: list[Key], hi_ms: int
) -> dict[Key, tuple[Any, Any, list[Any]]]:
    """For _last_busy at any tick up to `hi_ms`: per pod of `names`, its last busy sample
    before the window's start, its first sample, and its busy samples from the window's start
    to `hi_ms` (one read for every tick)."""
    rows = ctx.rows(
        f"""
        SELECT namespace, pod, maxIf(ts, busy AND ts < {{ws:DateTime64(3, 'UTC')}}) AS before,
               min(ts) AS first,
               arraySort(groupArrayIf(ts, busy AND ts >= {{ws:DateTime64(3, 'UTC')}})) AS busy_ts
        FROM (SELECT namespace, pod, ts, utilization_ratio >= {{floor:Float64}} AS busy
              FROM {ctx.table("gpu_sample")}
              WHERE cluster = {{cluster:String}}
                AND (namespace, pod) IN {{names:Array(Tuple(String, String))}}
                AND ts < {{hi:DateTime64(3, 'UTC')}})
        GROUP BY namespace, pod""",
        {
            "names": names,
            "hi": from_ms(hi_ms),
            "floor": float(ctx.t("pool.busy_utilization_floor")),
        },
    )
    return {(r["namespace"], r["pod"]): (r["before"], r["first"], r["busy_ts"]) for r in rows}


def _since(row: tuple[Any, Any, list[Any]], tick: datetime) -> datetime:
    """_last_busy at `tick` from _last_busy_over's row."""
    before, first, busy_ts = row
    busy = max([as_utc(before)] + [b for b in map(as_utc, busy_ts) if b < tick])
    return busy if busy.timestamp() > 0 else as_utc(first)


@over_ticks("gpu_idle_allocated")
def gpu_idle_allocated_over(ctx: Context) -> dict[datetime, list[Finding]]:
    at = by_tick(ctx)
    span = lookback_ms(ctx)
    idle = _idle_over(ctx, span, sorted(at))
    if not idle:
        return {}
    ticks = sorted(idle)
    names = sorted({k for found in idle.values() for k in found})
    pods = {
        t: {(p["namespace"], p["pod"]): p for p in rows}
        for t, rows in _asof_ticks(
            ctx,
            "pod",
            POD_COLS,
            ticks,
            "(namespace, pod) IN {names:Array(Tuple(String, String))}",
            {"names": names},
        ).items()
    }
    purposes = {
        t: {r["priority_class"]: r["purpose"] for r in rows}
        for t, rows in _asof_ticks(ctx, "priority_class", "priority_class, purpose", ticks).items()
    }
    longer: dict[str, float] = ctx.t("pool.idle_allocated_seconds_by_purpose") or {}
    # a purpose with a longer grace (Interactive) must have been idle for that long: one read
    # per such purpose over the ticks where one of its pods is idle
    for purp, secs in longer.items():
        if float(secs) * 1000 <= span:
            continue
        need = {
            (t, k)
            for t in ticks
            for k in idle[t]
            if purposes.get(t, {}).get(pods.get(t, {}).get(k, {}).get("priority_class", "")) == purp
        }
        if not need:
            continue
        still = _idle_over(
            ctx,
            round(float(secs) * 1000),
            sorted({t for t, _ in need}),
            sorted({k for _, k in need}),
        )
        for t, k in need:
            if k not in still.get(t, {}):
                idle[t].pop(k)
    running = {
        t: [
            (k, pods[t][k])
            for k in sorted(found)
            if pods.get(t, {}).get(k, {}).get("phase") == "Running"
        ]
        for t, found in idle.items()
    }
    held = sorted({k for found in running.values() for k, _ in found})
    if not held:
        return {}
    busy = _last_busy_over(ctx, held, ticks[-1])
    need_q = sorted(t for t, found in running.items() if found)
    jobs = _asof_ticks(ctx, "job", "namespace, job, queue", need_q)
    groups = _asof_ticks(ctx, "podgroup", "namespace, podgroup, queue", need_q)
    out: dict[datetime, list[Finding]] = {}
    for t in need_q:
        c = ctx.at(at[t])
        queue_of = _queues(jobs.get(t, []), groups.get(t, []))
        out[at[t]] = [
            _idle_finding(
                c,
                idle[t][k],
                p,
                purposes.get(t, {}),
                _pod_queue(queue_of, p),
                _since(busy[k], at[t]),
            )
            for k, p in running[t]
        ]
    return out


# --- gang_blocked_by_fragmentation -------------------------------------------------------------
def free_gpus(ctx: Context) -> tuple[dict[str, int], dict[str, str]]:
    """Free GPUs per node at the window's end (allocatable less what bound pods request) and
    each node's GPU model."""
    nodes = _asof(ctx, "node", "node, gpus, gpu_model", "gpus > 0")
    used: dict[str, int] = defaultdict(int)
    for p in _pods(ctx):
        if p["node"] and p["phase"] in ("Running", "Pending"):
            used[p["node"]] += int(p["gpus"])
    free = {n["node"]: max(0, int(n["gpus"]) - used[n["node"]]) for n in nodes}
    return free, {n["node"]: n["gpu_model"] for n in nodes}


def gang_shape(ctx: Context, g: dict[str, Any]) -> Gang | None:
    """Members, GPUs per member and acceptable models: from the gang's pending pods, else its
    minResources over minMember; its hard networkTopology tier from its job. None: no GPUs."""
    members = [
        p for p in _pods(ctx) if p["namespace"] == g["namespace"] and p["podgroup"] == g["podgroup"]
    ]
    per = max((int(p["gpus"]) for p in members), default=0)
    n = int(g["min_member"] or 0) or len(members)
    if not per and n and g["min_gpus"]:
        per = -(-int(g["min_gpus"]) // n)
    if not per or not n:
        return None
    models = frozenset(m for p in members for m in str(p["gpu_model"]).split("|") if m)
    tier = None
    job = g["job"] or g["podgroup"]
    for j in _asof(
        ctx,
        "job",
        "topology_mode, highest_tier_allowed, highest_tier_name",
        "namespace = {ns:String} AND job = {job:String}",
        {"ns": g["namespace"], "job": job},
    ):
        if j["topology_mode"] == "hard":
            tier = j["highest_tier_allowed"]
            if tier is None and j["highest_tier_name"]:
                anc = ctx.extra.get("ancestry")
                tier = anc.tier_names.get(j["highest_tier_name"]) if anc else None
    return Gang(n, per, models, tier)


@detector(
    "gang_blocked_by_fragmentation",
    needs=("podgroup", "node"),
    lookback=("sliding.state_seconds",),
    settle=("pool.gang_pending_seconds",),
)
def gang_blocked(ctx: Context) -> list[Finding]:
    gangs = _pending_gangs(ctx)
    if not gangs:
        return []
    free, model_of = free_gpus(ctx)
    anc = ctx.extra.get("ancestry")
    out = []
    for g in gangs:
        gang = gang_shape(ctx, g)
        if gang is None:
            continue
        pl = place_gang(
            gang,
            free,
            model_of,
            anc.ancestors if anc else None,
            anc.tiers if anc else None,
        )
        if pl.fits or pl.free_gpus < gang.gpus:
            continue  # placeable now (the scheduler will), or simply not enough GPUs
        key = f"{g['namespace']}/{g['podgroup']}"
        usable = {
            n: f
            for n, f in free.items()
            if f and (not gang.models or model_of.get(n, "") in gang.models)
        }
        by_hn: dict[str, int] = defaultdict(int)
        if anc:
            for n, f in usable.items():
                for h in anc.ancestors.get(n, [])[:1]:
                    by_hn[h] += f
        where = f" within tier {gang.highest_tier}" if gang.highest_tier is not None else ""
        out.append(
            Finding(
                "gang_blocked_by_fragmentation",
                "pool",
                "warning",
                "podgroup",
                key,
                f"gang {key} ({gang.members} x {gang.gpus_per_pod} GPUs) waits although "
                f"{pl.free_gpus} GPUs it may use are free: at most {pl.largest} member(s) fit"
                f"{where}",
                {
                    "queue": g["queue"],
                    "phase": g["phase"],
                    "reason": g["reason"],
                    "members": gang.members,
                    "gpus_per_member": gang.gpus_per_pod,
                    "models": sorted(gang.models),
                    "highest_tier_allowed": gang.highest_tier,
                    "free_gpus": pl.free_gpus,
                    "largest_placeable_members": pl.largest,
                    "largest_domain": pl.domain,
                    "free_gpus_per_node": dict(sorted(usable.items(), key=lambda kv: -kv[1])[:32]),
                    "free_gpus_per_hypernode": dict(sorted(by_hn.items())),
                    "pending_since": g["since"].isoformat(),
                },
            )
        )
    return out


# --- queue_over_guarantee_starving -------------------------------------------------------------
@detector(
    "queue_over_guarantee_starving",
    needs=("queue", "podgroup"),
    lookback=("sliding.state_seconds",),
    settle=("pool.gang_pending_seconds",),
)
def queue_starving(ctx: Context) -> list[Finding]:
    waiting: dict[str, list[str]] = defaultdict(list)
    for g in _pending_gangs(ctx):
        waiting[g["queue"]].append(f"{g['namespace']}/{g['podgroup']}")
    if not waiting:
        return []
    queues = {
        r["queue"]: r
        for r in _asof(ctx, "queue", "queue, deserved_gpus, guarantee_gpus, capability_gpus")
    }
    queue_of = _queue_of(ctx)
    held: dict[str, int] = defaultdict(int)
    for p in _pods(ctx):
        if p["phase"] == "Running" and p["node"]:
            held[_pod_queue(queue_of, p)] += int(p["gpus"])
    ratio = float(ctx.t("pool.over_deserved_ratio"))
    over = {
        q: {"allocated_gpus": held[q], "deserved_gpus": r["deserved_gpus"]}
        for q, r in queues.items()
        if r["deserved_gpus"] is not None and held[q] > r["deserved_gpus"] * ratio
    }
    out = []
    for q, gangs in sorted(waiting.items()):
        r = queues.get(q)
        if r is None or r["guarantee_gpus"] is None or held[q] >= r["guarantee_gpus"]:
            continue
        others = {k: v for k, v in over.items() if k != q}
        if not others:
            continue
        out.append(
            Finding(
                "queue_over_guarantee_starving",
                "pool",
                "warning",
                "queue",
                q,
                f"queue {q} holds {held[q]} GPUs, below its guarantee of {r['guarantee_gpus']}, "
                f"with {len(gangs)} gang(s) waiting, while {', '.join(sorted(others))} hold more "
                "than they deserve",
                {
                    "allocated_gpus": held[q],
                    "guarantee_gpus": r["guarantee_gpus"],
                    "deserved_gpus": r["deserved_gpus"],
                    "waiting_gangs": sorted(gangs),
                    "over_deserved": others,
                },
            )
        )
    return out
