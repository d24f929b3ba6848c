"""Collectives (NCCL Inspector, `collective_samples`): a job whose collectives run slower than
its own recent baseline, and one rank that keeps finishing after the others.

Both judge a job against itself, never against a fixed bandwidth: what a collective can reach
depends on its size, the number of ranks and the fabric. Thresholds: `collective.*` in
thresholds.yaml.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

from telemetry.correlate.detectors.node import gpu_subject
from telemetry.correlate.findings import Finding
from telemetry.correlate.registry import Context, Later, detector, over_ticks
from telemetry.correlate.timebase import (
    lookback_ms,
    per_tick,
    per_tick_later,
    tick_join,
    tick_params,
)

_KEYS = "namespace, job, comm_id, collective"


@detector(
    "collective_slowdown",
    needs=("collective_sample",),
    lookback=("collective.window_seconds",),
)
def collective_slowdown(ctx: Context) -> list[Finding]:
    """A job's bus bandwidth for one collective and message size, over the window, below its own
    baseline (the `collective.baseline_seconds` before the window): the window's median under
    the baseline's median by more than `collective.slowdown_ratio` and by more than
    `collective.mad_factor` robust deviations of the baseline's noise (see _noise). One finding per job and
    communicator; the hops of the job's path with findings on them are its ranked evidence."""
    return _slowdowns(ctx, _slowdown_rows(ctx, over=False))


@over_ticks("collective_slowdown")
def collective_slowdown_over(ctx: Context) -> dict[datetime, Later]:
    """One statement for every judged tick; each tick's causes are ranked when the engine
    reaches it (they read the findings of the ticks before it: timebase.per_tick_later)."""
    return per_tick_later(ctx, _slowdown_rows(ctx, over=True), _slowdowns)


def _slowdown_rows(ctx: Context, over: bool) -> list[dict[str, Any]]:
    """Per job, communicator, collective and message size (and judged tick, `over`: each over
    its own trailing window and the baseline before it, timebase.tick_join) the window's and
    the baseline's median bus bandwidth, their sample counts and the baseline's samples."""
    base_ms = int(float(ctx.t("collective.baseline_seconds")) * 1000)
    params: dict[str, Any] = {
        "bs": ctx.window.start - timedelta(milliseconds=base_ms),
        "min_n": int(ctx.t("collective.min_samples")),
        "min_base": int(ctx.t("collective.min_baseline_samples")),
    }
    now = "ts >= {ws:DateTime64(3, 'UTC')}"
    tick, join, only = "", "", ""
    if over:  # a row counts for the ticks whose window or baseline before it holds it
        span = lookback_ms(ctx) + base_ms
        tick, join = "tick, ", tick_join(ctx, "collective_sample", span=span)
        now = f"toUnixTimestamp64Milli(ts) >= tick - {lookback_ms(ctx)}"
        only = " AND tick IN {ticks:Array(Int64)}"
        params |= tick_params(ctx)
    return ctx.rows(
        f"""
        SELECT {tick}{_KEYS}, msg_size_bucket,
               medianIf(bus_bandwidth_gbs, {now}) AS now_gbs,
               countIf({now}) AS now_n,
               medianIf(bus_bandwidth_gbs, NOT ({now})) AS base_gbs,
               countIf(NOT ({now})) AS base_n,
               groupArrayIf((coll_sn, bus_bandwidth_gbs), NOT ({now})) AS base
        FROM {ctx.table("collective_sample")} {join}
        WHERE cluster = {{cluster:String}} AND job != ''
          AND ts >= {{bs:DateTime64(3, 'UTC')}} AND ts < {{we:DateTime64(3, 'UTC')}}{only}
        GROUP BY {tick}{_KEYS}, msg_size_bucket
        HAVING now_n >= {{min_n:UInt32}} AND base_n >= {{min_base:UInt32}}""",
        params,
    )


def _slowdowns(ctx: Context, rows: list[dict[str, Any]]) -> list[Finding]:
    """collective_slowdown's findings at one tick from its rows (_slowdown_rows)."""
    ratio = float(ctx.t("collective.slowdown_ratio"))
    k = float(ctx.t("collective.mad_factor"))
    slow: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        base, now = float(r["base_gbs"]), float(r["now_gbs"])
        if base <= 0 or now > base * (1 - ratio) or base - now <= k * _noise(r["base"]):
            continue
        slow.setdefault((r["namespace"], r["job"], r["comm_id"]), []).append(
            {
                "collective": r["collective"],
                "msg_size_bucket": r["msg_size_bucket"],
                "bus_bandwidth_gbs": round(now, 3),
                "baseline_gbs": round(base, 3),
                "drop_ratio": round(1 - now / base, 3),
                "samples": int(r["now_n"]),
            }
        )
    out = []
    for (ns, job, comm), colls in sorted(slow.items()):
        colls.sort(key=lambda c: -c["drop_ratio"])
        worst = colls[0]
        causes = _causes(ctx, f"{ns}/{job}")
        cause = f"; top cause: {causes[0]['layer']} {causes[0]['name']}" if causes else ""
        out.append(
            Finding(
                "collective_slowdown",
                "collective",
                "critical" if worst["drop_ratio"] >= 2 * ratio else "warning",
                "communicator",
                f"{ns}/{job}/{comm}",
                f"{ns}/{job}: {worst['collective']} {worst['msg_size_bucket']} bus bandwidth "
                f"{worst['bus_bandwidth_gbs']:g} GB/s, {worst['drop_ratio']:.0%} under its "
                f"baseline {worst['baseline_gbs']:g} GB/s (communicator {comm}){cause}",
                {
                    "namespace": ns,
                    "job": job,
                    "comm_id": comm,
                    "collectives": colls,
                    "causes": causes,
                },
            )
        )
    return out


def _noise(base: list[tuple[int, float]]) -> float:
    """The baseline's robust noise: 1.4826 x the median absolute difference between successive
    collectives' (coll_sn order) median bandwidths, / sqrt 2. Unlike the MAD around the baseline's
    median, a level shift inside the baseline (an earlier slowdown) does not inflate it, so a
    second slowdown right after a first is still seen."""
    per_sn: defaultdict[int, list[float]] = defaultdict(list)
    for sn, bw in base:  # (UInt64, Float64): an int and a float already
        per_sn[sn].append(bw)
    meds = [_median(per_sn[sn]) for sn in sorted(per_sn)]
    if len(meds) < 2:
        return 0.0  # one collective: no step-to-step noise to measure, the ratio alone judges
    return 1.4826 * _median([abs(b - a) for a, b in pairwise(meds)]) / 2**0.5


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    if not n:
        return 0.0
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _causes(ctx: Context, job: str) -> list[dict[str, Any]]:
    """The slowed job's ranked causes, kept across ticks (the engine's memo) and recomputed at
    most every `collective.causes_refresh_seconds` once they name one: a job report is some
    twenty queries, and evaluated for every slowed job at every 10 s tick it costs more than
    the rest of the detector. While they name none yet they are recomputed every tick (the
    cause's own finding may open a few ticks after the slowdown's)."""
    memo = ctx.extra.get("memo")
    if memo is None:
        return _ranked_causes(ctx, job)
    refresh = timedelta(seconds=float(ctx.t("collective.causes_refresh_seconds")))
    now, key = ctx.window.end, f"collective_causes:{job}"
    hit = memo.get(key)
    if hit is not None and hit[1] and timedelta(0) <= now - hit[0] < refresh:
        return hit[1]  # type: ignore[no-any-return]
    causes = _ranked_causes(ctx, job)
    for k in [
        k
        for k, v in memo.items()
        if k.startswith("collective_causes:") and v[0] < now - 10 * refresh
    ]:
        del memo[k]  # jobs no longer slowed: a long-running follower keeps no history of them
    memo[key] = (now, causes)
    return causes


def _ranked_causes(ctx: Context, job: str) -> list[dict[str, Any]]:
    """The job's path hops with findings on them, ranked as the per-job report ranks them
    (report.job_path: its hops alone, not the rest of the report), at most 3. Its LLDP
    neighbours as of the tick are the engine's (the tick's cache, read again in a batch run only
    where LLDP changed); it reads the raw samples, as the report does."""
    from telemetry.correlate.report import job_path
    from telemetry.errors import UserError

    keep = ("tick_cache", "memo", "state_epochs", "flush_outputs")
    shared: dict[str, Any] = {k: v for k, v in ctx.extra.items() if k in keep}
    try:
        path = job_path(Context(ctx.store, ctx.window, ctx.thresholds, ctx.cluster, shared), job)
    except UserError:  # the inventory does not know the job's pods (yet)
        return []
    return [
        {"layer": h.layer, "name": h.name, "score": h.score, "evidence": h.evidence_for[:2]}
        for h in path.hops
        if h.evidence_for
    ][:3]


def _straggler_rows(ctx: Context, over: bool) -> list[dict[str, Any]]:
    """Per rank (and judged tick, `over`: its own trailing window, timebase.tick_join) the
    window's collectives' execution times over the median rank's, among the ranks that qualify
    as stragglers (see collective_straggler)."""
    t = "tick, " if over else ""
    join = tick_join(ctx, "collective_sample") if over else ""
    only = " AND tick IN {ticks:Array(Int64)}" if over else ""
    return ctx.rows(
        f"""
        SELECT {t}namespace, job, comm_id, collective, rank, any(node) AS node, any(gpu) AS gpu,
               any(pod) AS pod, count() AS sns, median(r) AS typical_ratio,
               countIf(r >= 1 + greatest({{least_excess:Float64}}, {{k:Float64}} * noise))
                   AS slow, any(noise) AS rank_noise
        FROM (
            SELECT *, 1.4826 * medianExact(abs(r - 1)) OVER (PARTITION BY {t}{_KEYS}) AS noise
            FROM (
                SELECT {t}s.namespace AS namespace, s.job AS job, s.comm_id AS comm_id,
                       s.collective AS collective, s.rank AS rank, s.node AS node, s.gpu AS gpu,
                       s.pod AS pod, s.exec_time_seconds / m.med AS r
                FROM {ctx.table("collective_sample")} AS s {join}
                INNER JOIN (
                    SELECT {t}{_KEYS}, coll_sn, median(exec_time_seconds) AS med,
                           uniqExact(rank) AS ranks
                    FROM {ctx.table("collective_sample")} {join}
                    WHERE {ctx.where("collective_sample")}{only}
                    GROUP BY {t}{_KEYS}, coll_sn
                ) AS m USING ({t}{_KEYS}, coll_sn)
                WHERE s.cluster = {{cluster:String}}
                  AND s.ts >= {{ws:DateTime64(3, 'UTC')}} AND s.ts < {{we:DateTime64(3, 'UTC')}}
                  AND m.ranks >= {{min_ranks:UInt32}} AND m.med > 0{only}
            )
        )
        GROUP BY {t}namespace, job, comm_id, collective, rank
        HAVING sns >= {{min_n:UInt32}} AND typical_ratio >= {{ratio:Float64}}
           AND slow >= {{fraction:Float64}} * sns
        ORDER BY {t}namespace, job, comm_id, collective, rank
        -- on a cluster each shard joins its own rows: collective samples are sharded by
        -- (cluster, job, comm_id, collective), within the join's keys, so a communicator's ranks
        -- and their medians lie on one shard (the Distributed table read as its local one)
        SETTINGS distributed_product_mode = 'local'""",
        {
            "ratio": float(ctx.t("collective.straggler_ratio")),
            "fraction": float(ctx.t("collective.straggler_fraction")),
            "k": float(ctx.t("collective.straggler_noise_factor")),
            "least_excess": float(ctx.t("collective.straggler_least_excess")),
            "min_n": int(ctx.t("collective.min_samples")),
            "min_ranks": int(ctx.t("collective.min_ranks")),
            **(tick_params(ctx) if over else {}),
        },
    )


@detector(
    "collective_straggler",
    needs=("collective_sample",),
    lookback=("collective.window_seconds",),
)
def collective_straggler(ctx: Context) -> list[Finding]:
    """One rank that is consistently slower than its communicator's others: at the same
    collective sequence numbers its execution time over the median rank's is typically (its
    median ratio) at least `collective.straggler_ratio`, and above the ranks' own noise
    (1 + `collective.straggler_noise_factor` x the robust spread of every rank's ratio in the
    communicator) in at least `collective.straggler_fraction` of the window's collectives (and
    `collective.min_samples` of them at least, with `collective.min_ranks` ranks reporting): a
    1.15x rank that is slow in most collectives is a straggler, a rank slow in one is not.
    Localized to its node, GPU and the GPU's NIC."""
    return _stragglers(ctx, _straggler_rows(ctx, over=False))


@over_ticks("collective_straggler")
def collective_straggler_over(ctx: Context) -> dict[datetime, list[Finding]]:
    return per_tick(ctx, _straggler_rows(ctx, over=True), _stragglers)


def _stragglers(ctx: Context, rows: list[dict[str, Any]]) -> list[Finding]:
    out = []
    for r in rows:
        node, gpu = r["node"], _gpu_index(ctx, r["node"], r["gpu"])
        nic = _nic_of(ctx, node, gpu)
        subject = gpu_subject(node, int(gpu)) if gpu.isdigit() else node
        job = f"{r['namespace']}/{r['job']}" if r["job"] else ""
        where = f"{node} GPU {gpu or '?'}" + (f" (NIC {nic})" if nic else "")
        out.append(
            Finding(
                "collective_straggler",
                "collective",
                "warning",
                "gpu" if gpu.isdigit() else "node",
                subject,
                f"rank {r['rank']} of {job or 'communicator ' + r['comm_id']} on {where}: "
                f"{r['collective']} {r['typical_ratio']:.1f}x the median rank's time in "
                f"{r['slow']} of {r['sns']} collectives",
                {
                    "job": job,
                    "comm_id": r["comm_id"],
                    "collective": r["collective"],
                    "rank": int(r["rank"]),
                    "node": node,
                    "gpu": gpu,
                    "nic": nic,
                    "pod": r["pod"],
                    "slow_collectives": int(r["slow"]),
                    "collectives": int(r["sns"]),
                    "typical_ratio": round(float(r["typical_ratio"]), 3),
                    "rank_noise": round(float(r["rank_noise"]), 4),
                },
            )
        )
    return out


def _gpu_index(ctx: Context, node: str, gpu: str) -> str:
    """The rank's GPU as an index: attribution gives the pod's assignment (an index, or a UUID
    as the device plugin lists it) or the textfile's gpu_device_id ("GPU3"); a UUID is looked up
    in the node's gpu_samples. Unchanged when not known."""
    if gpu.isdigit() or gpu.removeprefix("GPU").isdigit():
        return gpu.removeprefix("GPU")
    if not gpu.startswith("GPU-"):
        return gpu
    rows = ctx.rows(
        f"""
        SELECT gpu FROM {ctx.table("gpu_sample")}
        WHERE cluster = {{cluster:String}} AND node = {{node:String}} AND uuid = {{uuid:String}}
          AND ts >= {{ws:DateTime64(3, 'UTC')}} AND ts < {{we:DateTime64(3, 'UTC')}}
        LIMIT 1""",
        {"node": node, "uuid": gpu},
    )
    return str(rows[0]["gpu"]) if rows else gpu


def _nic_of(ctx: Context, node: str, gpu: str) -> str:
    """The RDMA NIC under the GPU's PCIe switch (gpu_nic_affinities), '' when not known."""
    if not gpu.isdigit():
        return ""
    rows = ctx.rows(
        f"""
        SELECT nic FROM {ctx.table("gpu_nic_affinity")}
        WHERE cluster = {{cluster:String}} AND node = {{node:String}} AND gpu = {{gpu:UInt16}}
          AND nic != '' ORDER BY ts DESC LIMIT 1""",
        {"node": node, "gpu": int(gpu)},
    )
    return str(rows[0]["nic"]) if rows else ""
