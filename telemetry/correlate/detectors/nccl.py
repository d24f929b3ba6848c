"""A job's NCCL settings against what they cost: collectives that run with an algorithm or
protocol far below what another reaches at the same shape, and rank pairs with fewer flows than
the ECMP groups on their paths are wide.

Both read what the job ran (NCCL Inspector's algorithm and protocol, sampled RoCEv2 flows) and
name the setting behind it from the inventory (`nccl_settings`); neither judges a setting that
did not show in what the job ran. Thresholds: `collective.algorithm_*`, `low_flow_entropy.*`.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from telemetry.correlate.detectors.fabric import (
    port_subject,
    roles_and_neighbours,
    roles_and_neighbours_at,
)
from telemetry.correlate.entropy import collision_probability, qps_needed
from telemetry.correlate.findings import Finding
from telemetry.correlate.registry import Context, Later, Window, detector, over_ticks
from telemetry.correlate.timebase import (
    lookback_ms,
    per_tick,
    per_tick_later,
    tick_join,
    tick_params,
)
from telemetry.nccl import env_value, forced_by
from telemetry.times import valid_during

_SHAPE = ("collective", "msg_size_bucket", "n_ranks", "n_nodes")
_TS = "DateTime64(3, 'UTC')"


def _algorithm_rows(
    ctx: Context, over: bool
) -> tuple[list[dict[str, Any]], dict[tuple[Any, ...], dict[tuple[str, str], dict[str, Any]]]]:
    """What each communicator ran in the window per shape and algorithm/protocol (its median
    bus bandwidth), and what each algorithm/protocol reached at those shapes over the reference
    window, keyed (tick, *shape) with tick 0, or per judged tick when `over` (each tick's
    reference window is the `collective.algorithm_reference_seconds` before it)."""
    t = "tick, " if over else ""
    now = ctx.rows(
        f"""
        SELECT {t}namespace, job, comm_id, {", ".join(_SHAPE)}, algorithm, protocol,
               median(bus_bandwidth_gbs) AS now_gbs, count() AS n
        FROM {ctx.table("collective_sample")} {tick_join(ctx, "collective_sample") if over else ""}
        WHERE {ctx.where("collective_sample")} AND job != '' AND algorithm != ''
              {"AND tick IN {ticks:Array(Int64)}" if over else ""}
        GROUP BY {t}namespace, job, comm_id, {", ".join(_SHAPE)}, algorithm, protocol
        HAVING n >= {{min_n:UInt32}}
        ORDER BY {t}namespace, job, comm_id, {", ".join(_SHAPE)}, algorithm, protocol""",
        {"min_n": int(ctx.t("collective.min_samples")), **(tick_params(ctx) if over else {})},
    )
    if not now:
        return [], {}
    ref_s = timedelta(seconds=float(ctx.t("collective.algorithm_reference_seconds")))
    # the reference window: before each judged tick (tick_join over a context whose lookback
    # is the reference's)
    ref = dataclasses.replace(ctx, window=Window(ctx.window.end - ref_s, ctx.window.end))
    if over:
        ref = dataclasses.replace(ctx, window=Window(ctx.ticks[0] - ref_s, ctx.ticks[-1]))
    shapes = sorted({tuple(r[k] for k in _SHAPE) for r in now})
    reached: dict[tuple[Any, ...], dict[tuple[str, str], dict[str, Any]]] = defaultdict(dict)
    for r in ref.rows(
        f"""
        SELECT {t}{", ".join(_SHAPE)}, algorithm, protocol,
               quantileExact({{q:Float64}})(bus_bandwidth_gbs) AS reached_gbs, count() AS n,
               arraySort(groupUniqArray(concat(namespace, '/', job))) AS jobs
        FROM {ctx.table("collective_sample")} {tick_join(ref, "collective_sample") if over else ""}
        WHERE cluster = {{cluster:String}} AND algorithm != '' AND job != ''
          AND ts >= {{ws:{_TS}}} AND ts < {{we:{_TS}}}
          AND ({", ".join(_SHAPE)}) IN {{shapes:Array(Tuple(String, String, UInt32, UInt32))}}
          {"AND tick IN {ticks:Array(Int64)}" if over else ""}
        GROUP BY {t}{", ".join(_SHAPE)}, algorithm, protocol
        HAVING n >= {{min_base:UInt32}}""",
        {
            "q": float(ctx.t("collective.algorithm_quantile")),
            "shapes": shapes,
            "min_base": int(ctx.t("collective.min_baseline_samples")),
            **(tick_params(ctx) if over else {}),
        },
    ):
        key = (r.pop("tick") if over else 0, *(r[k] for k in _SHAPE))
        reached[key][(r["algorithm"], r["protocol"])] = r
    return now, reached


@detector(
    "collective_algorithm_underperforms",
    needs=("collective_sample",),
    lookback=("collective.window_seconds",),
)
def collective_algorithm_underperforms(ctx: Context) -> list[Finding]:
    """A communicator whose collectives of one shape (collective, size bucket, ranks, nodes) run
    with an algorithm/protocol that reaches (`collective.algorithm_quantile` of its bus bandwidth
    over `collective.algorithm_reference_seconds`, any job of that shape) at least
    `collective.algorithm_gap_ratio` less than another algorithm/protocol reaches at the same
    shape, and that runs below that now. The setting that forced it (NCCL_ALGO / NCCL_PROTO of
    the job's pods) is named when there is one."""
    return _algorithm_findings(ctx, *_algorithm_rows(ctx, over=False))


@over_ticks("collective_algorithm_underperforms")
def collective_algorithm_underperforms_over(ctx: Context) -> dict[datetime, list[Finding]]:
    """Set-based: the communicators' and the reference's bandwidth per tick in two statements;
    the forcing settings of the jobs of every tick in one more (_settings_at)."""
    now, reached = _algorithm_rows(ctx, over=True)
    forced = _settings_at(ctx, now, _FORCING) if now else {}
    return per_tick(ctx, now, lambda c, rows: _algorithm_findings(c, rows, reached, forced))


_FORCING = ("NCCL_ALGO", "NCCL_PROTO")  # the settings that force an algorithm or protocol


def _settings_at(
    ctx: Context, rows: list[dict[str, Any]], names: tuple[str, ...]
) -> dict[tuple[int, str, str], dict[str, str]]:
    """Set-based _settings: per judged tick (`tick` of `rows`) and job of its rows, the values
    of NCCL settings `names` during that tick's window, in one statement."""
    jobs = sorted({(r["namespace"], r["job"]) for r in rows})
    out: dict[tuple[int, str, str], dict[str, str]] = {}
    for r in ctx.rows(
        _settings_sql(ctx, over=True),
        {**tick_params(ctx), "jobs": jobs, "names": list(names), "lookback": lookback_ms(ctx)},
    ):
        out.setdefault((r["tick"], r["namespace"], r["job"]), {})[str(r["name"])] = str(r["v"])
    return out


def _algorithm_findings(
    ctx: Context,
    now: list[dict[str, Any]],
    reached: dict[tuple[Any, ...], dict[tuple[str, str], dict[str, Any]]],
    forced: dict[tuple[int, str, str], dict[str, str]] | None = None,
) -> list[Finding]:
    """collective_algorithm_underperforms' findings at one tick; `forced`: the jobs' forcing
    settings read ahead per tick (_settings_at), else read here."""
    gap = float(ctx.t("collective.algorithm_gap_ratio"))
    out = []
    for r in now:
        by_algo = reached.get((r.get("tick", 0), *(r[k] for k in _SHAPE)), {})
        mine = by_algo.get((r["algorithm"], r["protocol"]))
        others = [v for k, v in by_algo.items() if k != (r["algorithm"], r["protocol"])]
        if mine is None or not others:
            continue
        best = max(others, key=lambda v: (v["reached_gbs"], v["algorithm"], v["protocol"]))
        limit = (1 - gap) * float(best["reached_gbs"])
        if float(mine["reached_gbs"]) >= limit or float(r["now_gbs"]) >= limit:
            continue
        if forced is None:
            settings = _settings(ctx, r["namespace"], r["job"], _FORCING)
        else:
            settings = forced.get((r["tick"], r["namespace"], r["job"]), {})
        out.append(_underperforms(r, mine, best, settings))
    return out


def _underperforms(
    r: dict[str, Any], mine: dict[str, Any], best: dict[str, Any], settings: dict[str, str]
) -> Finding:
    ns, job, comm = r["namespace"], r["job"], r["comm_id"]
    forced = {
        name: value
        for name, value in settings.items()
        if forced_by(value, r["algorithm"] if name == "NCCL_ALGO" else r["protocol"])
    }
    setting = ", ".join(f"{k}={v}" for k, v in sorted(forced.items()))
    what = f"{r['algorithm']}/{r['protocol']}"
    other = f"{best['algorithm']}/{best['protocol']}"
    why = f"forced by {setting}" if setting else "no NCCL_ALGO/NCCL_PROTO forces it: NCCL chose it"
    drop = 1 - float(mine["reached_gbs"]) / float(best["reached_gbs"])
    return Finding(
        "collective_algorithm_underperforms",
        "nccl",
        "warning",
        "communicator",
        f"{ns}/{job}/{comm}",
        f"{ns}/{job}: {r['collective']} {r['msg_size_bucket']} runs {what} at "
        f"{float(r['now_gbs']):.1f} GB/s bus bandwidth; {other} reached "
        f"{float(best['reached_gbs']):.1f} GB/s at the same shape ({r['n_ranks']} ranks on "
        f"{r['n_nodes']} nodes, {', '.join(best['jobs'][:3])}): {drop:.0%} less ({why})",
        {
            "namespace": ns,
            "job": f"{ns}/{job}",
            "comm_id": comm,
            **{k: r[k] for k in _SHAPE},
            "algorithm": r["algorithm"],
            "protocol": r["protocol"],
            "bus_bandwidth_gbs": round(float(r["now_gbs"]), 3),
            "reached_gbs": round(float(mine["reached_gbs"]), 3),
            "best_algorithm": best["algorithm"],
            "best_protocol": best["protocol"],
            "best_reached_gbs": round(float(best["reached_gbs"]), 3),
            "best_jobs": list(best["jobs"][:5]),
            "gap_ratio": round(drop, 3),
            "forced_by": forced,
            "setting": setting,
            "try_setting": f"NCCL_ALGO={env_value(best['algorithm'])}"
            + (
                f" NCCL_PROTO={env_value(best['protocol'])}"
                if best["protocol"] != r["protocol"]
                else ""
            ),
        },
    )


def _settings(ctx: Context, ns: str, job: str, names: tuple[str, ...]) -> dict[str, str]:
    """The job's pods' values of NCCL settings `names` during the window (nccl_settings; the
    most common value where pods differ)."""
    rows = ctx.rows(_settings_sql(ctx), {"ns": ns, "job": job, "names": list(names)})
    return {str(r["name"]): str(r["v"]) for r in rows}


def _settings_sql(ctx: Context, *, over: bool = False) -> str:
    """_settings' statement: parameters ns, job, names (and the window). `over` (_settings_at):
    per judged tick and job instead, each tick's window the `lookback` ms before it; parameters
    jobs, names, lookback and tick_params()."""
    keys, join = "", ""
    job = "namespace = {ns:String} AND job = {job:String}"
    during = valid_during()
    if over:
        keys, join = "tick, namespace, job, ", "ARRAY JOIN {ticks:Array(Int64)} AS tick"
        job = "(namespace, job) IN {jobs:Array(Tuple(String, String))}"
        during = valid_during(
            "fromUnixTimestamp64Milli(tick - {lookback:Int64})", "fromUnixTimestamp64Milli(tick)"
        )
    return f"""
        SELECT {keys}name, topK(1)(value)[1] AS v FROM {ctx.table("nccl_setting", final=True)}
        {join}
        WHERE cluster = {{cluster:String}} AND {job}
          AND name IN {{names:Array(String)}} AND value != ''
          AND {during}
        GROUP BY {keys}name"""


@detector(
    "low_flow_entropy",
    needs=("flow_sample",),
    lookback=("low_flow_entropy.window_seconds",),
)
def low_flow_entropy(ctx: Context) -> list[Finding]:
    """A job whose rank pairs (source and destination RDMA IPs of its own pods) leave a leaf
    through its ECMP uplinks with fewer distinct flows (QP x UDP source port, in the sampled
    flows) than that uplink group is wide. Judged on the pairs with at least
    `low_flow_entropy.min_samples_per_pair` samples, by the pair that shows the most flows (the
    job's QPs per connection apply to every pair). Evidence: the collision probability that
    hashing alone gives (ecmp.max_over_mean over the busiest group), the QPs per connection that
    would bring it under `low_flow_entropy.target_collision_probability`, and the job's ECMP
    collision findings and incidents on those uplinks."""
    roles, peers = roles_and_neighbours(ctx)
    width = _leaf_width(roles, peers)
    if not width:
        return []
    return _entropy_judged(ctx, _pair_rows(ctx, sorted(width), over=False), roles, peers, width)


@over_ticks("low_flow_entropy")
def low_flow_entropy_over(ctx: Context) -> dict[datetime, Later]:
    """Set-based: each tick's leaves from its own roles and LLDP neighbours, the pairs of every
    tick in one statement (over the range's leaves; each tick keeps the ports of its own), and
    the findings made when the engine reaches the tick (the ECMP findings and incidents on the
    job's uplinks are those of the ticks before it)."""
    facts = roles_and_neighbours_at(ctx)
    widths = {t: _leaf_width(roles, peers) for t, (roles, peers) in facts.items()}
    leaves = sorted({leaf for w in widths.values() for leaf in w})
    if not leaves:
        return {}

    def make(c: Context, rows: list[dict[str, Any]]) -> list[Finding]:
        roles, peers = facts[c.window.end]
        width = widths[c.window.end]
        mine = []
        for r in rows:  # the ports of this tick's leaves, as its own statement reads them
            ports = [(sw, p) for sw, p in r["ports"] if sw in width]
            if ports:
                mine.append({**r, "ports": ports})
        return _entropy_judged(c, mine, roles, peers, width) if width else []

    return per_tick_later(ctx, _pair_rows(ctx, leaves, over=True), make)


def _leaf_width(
    roles: dict[str, str], peers: dict[tuple[str, str], tuple[str, str]]
) -> dict[str, int]:
    """leaf -> its uplinks to spines (by LLDP)."""
    width: dict[str, int] = defaultdict(int)
    for (dev, _), (rdev, _) in peers.items():
        if roles.get(dev) == "leaf" and roles.get(rdev) == "spine":
            width[dev] += 1
    return dict(width)


def _pair_rows(ctx: Context, leaves: list[str], *, over: bool) -> list[dict[str, Any]]:
    """Per job rank pair (its own pods' RDMA IPs) seen leaving `leaves`: the (switch, port)s it
    left by and its distinct flows and samples in the window (per judged tick too, `over`)."""
    params: dict[str, Any] = {"leaves": leaves}
    tick = a_join = f_join = only = on = ""
    if over:
        tick, on, only = "tick, ", " AND a.tick = f.tick", " AND tick IN {ticks:Array(Int64)}"
        a_join, f_join = tick_join(ctx, "attributed_flow"), tick_join(ctx, "flow_sample")
        params.update(tick_params(ctx))
    return ctx.rows(
        f"""
        SELECT {"a.tick AS tick, " if over else ""}a.src_namespace AS ns, a.src_job AS job,
               a.src_ip AS src_ip, a.dst_ip AS dst_ip,
               groupUniqArray((a.switch, a.out_port)) AS ports, any(f.flows) AS flows,
               any(f.samples) AS samples
        FROM (SELECT {tick}src_namespace, src_job, src_ip, dst_ip, switch, out_port
              FROM {ctx.table("attributed_flow")} {a_join}
              WHERE {ctx.where("attributed_flow")} AND rdma AND src_job != ''
                AND dst_job = src_job AND dst_namespace = src_namespace
                AND switch IN {{leaves:Array(String)}}{only}) AS a
        INNER JOIN (SELECT {tick}src_ip, dst_ip, uniqExact(src_port, dest_qp) AS flows,
                           count() AS samples
                    FROM {ctx.table("flow_sample")} {f_join}
                    WHERE {ctx.where("flow_sample")} AND dest_qp IS NOT NULL{only}
                    GROUP BY {tick}src_ip, dst_ip) AS f
          ON a.src_ip = f.src_ip AND a.dst_ip = f.dst_ip{on}
        GROUP BY {tick}ns, job, src_ip, dst_ip
        ORDER BY {tick}ns, job, src_ip, dst_ip""",
        params,
    )


def _entropy_judged(
    ctx: Context,
    rows: list[dict[str, Any]],
    roles: dict[str, str],
    peers: dict[tuple[str, str], tuple[str, str]],
    width: dict[str, int],
) -> list[Finding]:
    """What low_flow_entropy finds from `_pair_rows`' rows of one tick."""
    min_samples = int(ctx.t("low_flow_entropy.min_samples_per_pair"))
    jobs: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        up = [
            (sw, p) for sw, p in r["ports"] if roles.get(peers.get((sw, p), ("", ""))[0]) == "spine"
        ]
        if not up:
            continue  # turned at the leaf: no ECMP group on its path
        j = jobs.setdefault((r["ns"], r["job"]), {"pairs": 0, "judged": [], "by_leaf": {}})
        j["pairs"] += 1
        for sw in {sw for sw, _ in up}:
            j["by_leaf"][sw] = j["by_leaf"].get(sw, 0) + 1
        j.setdefault("uplinks", set()).update(up)
        if int(r["samples"]) >= min_samples:
            j["judged"].append(int(r["flows"]))
    out = []
    for (ns, job), j in sorted(jobs.items()):
        if not j["judged"]:
            continue  # too few samples per pair yet to count its flows
        flows = max(j["judged"])
        w = min(width[leaf] for leaf in j["by_leaf"])
        if flows >= w:
            continue
        out.append(_entropy_finding(ctx, ns, job, j, flows, w))
    return out


def _entropy_finding(
    ctx: Context, ns: str, job: str, j: dict[str, Any], flows: int, w: int
) -> Finding:
    ratio = float(ctx.t("ecmp.max_over_mean"))
    target = float(ctx.t("low_flow_entropy.target_collision_probability"))
    leaf, conns = max(j["by_leaf"].items(), key=lambda kv: (kv[1], kv[0]))
    uplinks = sorted(port_subject(sw, port) for sw, port in j["uplinks"])
    setting, linked = _entropy_facts(ctx, ns, job, uplinks)
    qps = int(setting.get("NCCL_IB_QPS_PER_CONNECTION", "1") or 1)  # NCCL's default is 1
    per_qp = max(1, flows // max(qps, 1))  # flows a QP setting of 1 gives (channels)
    p = collision_probability(conns * flows, w, ratio)
    need = qps_needed(conns, per_qp, w, ratio, target)
    key = f"{ns}/{job}"
    fix = (
        f"NCCL_IB_QPS_PER_CONNECTION={need} brings it under {target:.0%}"
        if need
        else f"no QP count NCCL allows brings it under {target:.0%}"
    )
    return Finding(
        "low_flow_entropy",
        "nccl",
        "warning",
        "job",
        key,
        f"job {key}: its rank pairs cross ECMP groups of {w} uplinks with {flows} flow(s) each "
        f"(QPs per connection {qps}); hashing alone overloads an uplink of {leaf} "
        f"({conns} connection(s) through it) with probability {p:.0%}; {fix}"
        + (
            f"; {len(linked['findings'])} ECMP collision finding(s) on its uplinks"
            if linked["findings"]
            else ""
        ),
        {
            "job": key,
            "namespace": ns,
            "flows_per_pair": flows,
            "ecmp_width": w,
            "pairs_crossing": j["pairs"],
            "pairs_judged": len(j["judged"]),
            "busiest_leaf": leaf,
            "connections_through_busiest_leaf": conns,
            "qps_per_connection": qps,
            "qps_setting": setting.get("NCCL_IB_QPS_PER_CONNECTION", ""),
            "collision_probability": p,
            "target_collision_probability": target,
            "qps_needed": need,
            "uplinks": uplinks[:16],
            "ecmp_findings": linked["findings"],
            "ecmp_incidents": linked["incidents"],
        },
    )


def _entropy_facts(
    ctx: Context, ns: str, job: str, uplinks: list[str]
) -> tuple[dict[str, str], dict[str, list[str]]]:
    """In one statement: the job's NCCL_IB_QPS_PER_CONNECTION as _settings reads it, and the
    ECMP collision findings (and their incidents) on its uplinks seen up to this window: what
    the low entropy caused or made likely."""
    rows = ctx.rows(
        f"""
        SELECT 'setting' AS what, CAST(name, 'String') AS key, CAST(v, 'String') AS value
        FROM ({_settings_sql(ctx)})
        UNION ALL
        SELECT DISTINCT 'finding', CAST(subject, 'String'), '' FROM {ctx.table("finding", final=True)}
        WHERE cluster = {{cluster:String}} AND kind = 'ecmp_imbalance'
          AND subject IN {{ports:Array(String)}}
          AND last_seen >= {{ws:{_TS}}} AND first_seen < {{we:{_TS}}}
        UNION ALL
        SELECT DISTINCT 'incident', CAST(incident_id, 'String'), ''
        FROM {ctx.table("incident", final=True)}
        WHERE cluster = {{cluster:String}} AND root_kind = 'ecmp_imbalance' AND merged_into = ''
          AND root_subject IN {{ports:Array(String)}}
          AND last_seen >= {{ws:{_TS}}} AND first_seen < {{we:{_TS}}}""",
        {"ns": ns, "job": job, "names": ["NCCL_IB_QPS_PER_CONNECTION"], "ports": uplinks},
    )
    got: dict[str, list[str]] = {"finding": [], "incident": []}
    for r in rows:
        if r["what"] != "setting":
            got[r["what"]].append(r["key"])
    setting = {r["key"]: r["value"] for r in rows if r["what"] == "setting"}
    return setting, {"findings": sorted(got["finding"]), "incidents": sorted(got["incident"])}
