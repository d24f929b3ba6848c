"""GPU pool accounting: per interval, how many GPUs the pool has, how many are allocated to pods,
how many of those are busy (mean utilization at or above a floor) or idle, and how many are free,
for the whole pool or grouped by tenant, queue, priority class, provisioning type, GPU model or
HyperNode; quota (deserved / guarantee / capability) beside allocation per queue.

Two implementations of the same arithmetic: `accounting` in ClickHouse (what the command, the
dashboard and the detectors use) and `accounting_polars` over frames (the baseline `bench/pool.py`
compares against, and a cross-check in the tests). Read-only: nothing here writes to the store.

Definitions (docs/pool.md):
- allocated: GPUs requested by pods Running on a node at the interval's start (inventory);
- busy: of those, GPUs whose mean `utilization_ratio` over the interval is >= the floor, counted
  through the pod the GPU sample names (kubelet pod-resources); idle-allocated = allocated - busy;
- total / allocatable: nodes' nvidia.com/gpu capacity / allocatable at the interval's start;
  free = allocatable - allocated.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # polars is loaded by the functions that build frames: `railscope node` imports
    import polars as pl  # this module's names (the pool command's choices) and must stay light

from telemetry.records import (
    GPU_SAMPLE,
    HYPERNODE,
    JOB,
    NAMESPACE,
    NODE,
    POD,
    POD_EVENT,
    PODGROUP,
    QUEUE,
)
from telemetry.records import PRIORITY_CLASS as PC
from telemetry.store.client import table_ref
from telemetry.times import as_of

# --by NAME -> the key column. Pod dimensions group what pods hold; node dimensions also group
# what nodes have (total, allocatable, free).
POD_DIMENSIONS = ("tenant", "queue", "priority", "provisioning")
NODE_DIMENSIONS = ("gpu-model", "hypernode")
DIMENSIONS = (*POD_DIMENSIONS, *NODE_DIMENSIONS)


@dataclass(frozen=True)
class Range:
    start: datetime
    step_s: int
    intervals: int

    @classmethod
    def of(cls, start: datetime, end: datetime, step_s: int) -> Range:
        span = (end - start).total_seconds()
        return cls(start, step_s, max(1, int(-(-span // step_s))))


def _t(store: Any, kind: Any, final: bool = True, alias: str = "") -> str:
    return table_ref(kind, store.database, final=final, alias=alias)


def _latest(store: Any, kind: Any, key: str, value: str, where: str = "1") -> str:
    """The latest version of one value per key of an inventory kind."""
    return (
        f"SELECT {key}, argMax({value}, valid_from) AS v FROM {_t(store, kind)} "
        f"WHERE cluster = {{cluster:String}} AND {where} GROUP BY {key}"
    )


def _buckets() -> str:
    return (
        "SELECT number AS bi, {s:DateTime64(3, 'UTC')} + toIntervalSecond(number * {step:UInt32})"
        " AS bt FROM numbers({n:UInt32})"
    )


def hypernode_of_sql(nodes: str, hypernodes: str, cluster: str) -> str:
    """(node, v): each node's lowest-tier HyperNode as declared now, for exactMatch and
    regexMatch members (a labelMatch member is not resolved here). `nodes`/`hypernodes` are table
    references, `cluster` the predicate selecting the cluster."""
    return (
        f"SELECT n.node AS node, argMin(h.hypernode, h.tier) AS v "
        f"FROM (SELECT DISTINCT node FROM {nodes} WHERE {cluster}) AS n "
        f"CROSS JOIN (SELECT hypernode, tier, member, selector FROM {hypernodes} "
        f"WHERE {cluster} AND member_type = 'Node' AND {as_of(None)}) AS h "
        "WHERE if(h.selector = 'regexMatch', match(n.node, h.member), h.member = n.node) "
        "GROUP BY n.node"
    )


def leaf_hypernodes(store: Any, cluster: str) -> dict[str, str]:
    """node -> its lowest-tier HyperNode as declared now (hypernode_of_sql); a node in none is
    left out."""
    sql = hypernode_of_sql(_t(store, NODE), _t(store, HYPERNODE), "cluster = {cluster:String}")
    return {str(n): str(h) for n, h in store.query_rows(sql, {"cluster": cluster}) if h}


def _node_key(store: Any, by: str | None) -> tuple[str, str]:
    """(JOIN clause on alias `nd`, key expression) for a node dimension. GLOBAL: on a cluster
    the left side may be the nodes' Distributed table, and a right side read on every shard
    again is refused (and the HyperNodes lie on other shards than the nodes)."""
    if by == "gpu-model":
        return (
            f"GLOBAL LEFT JOIN ({_latest(store, NODE, 'node', 'gpu_model')}) AS nm ON nm.node = nd.node",
            "nm.v",
        )
    if by == "hypernode":
        hn = hypernode_of_sql(_t(store, NODE), _t(store, HYPERNODE), "cluster = {cluster:String}")
        return f"GLOBAL LEFT JOIN ({hn}) AS nh ON nh.node = nd.node", "nh.v"
    return "", "''"


def _pod_key(store: Any, by: str | None) -> tuple[str, str]:
    """(JOIN clauses on alias `a`, key expression) for any dimension, seen from a pod."""
    if by == "tenant":
        return (
            f"LEFT JOIN ({_latest(store, NAMESPACE, 'namespace', 'tenant')}) AS tn "
            "ON tn.namespace = a.namespace",
            "if(tn.v = '', a.namespace, tn.v)",
        )
    if by == "queue":
        pg = _latest(store, PODGROUP, "namespace, podgroup", "queue")
        jb = _latest(store, JOB, "namespace, job", "queue")
        return (
            f"LEFT JOIN ({pg}) AS qp ON qp.namespace = a.namespace AND qp.podgroup = a.podgroup "
            f"LEFT JOIN ({jb}) AS qj ON qj.namespace = a.namespace AND qj.job = a.job",
            "if(qp.v != '', qp.v, qj.v)",
        )
    if by == "priority":
        return "", "a.priority_class"
    if by == "provisioning":
        return (
            f"LEFT JOIN ({_latest(store, PC, 'priority_class', 'provisioning')}) AS pv "
            "ON pv.priority_class = a.priority_class",
            "pv.v",
        )
    if by in NODE_DIMENSIONS:
        join, key = _node_key(store, by)
        return join.replace("nd.node", "a.node"), key
    return "", "''"


def accounting_sql(store: Any, by: str | None) -> str:
    """One row per (interval, key): allocated, busy, idle-allocated, and for the whole pool or a
    node dimension total, allocatable and free GPUs; per queue its quota."""
    pod_join, pod_key = _pod_key(store, by)
    alloc = f"""
        SELECT b.bi AS bi, p.namespace AS namespace, p.pod AS pod, p.node AS node,
               toUInt32(p.gpu_requests) AS gpus, p.priority_class AS priority_class,
               p.podgroup AS podgroup, p.job AS job
        FROM {_t(store, POD, alias="p")} CROSS JOIN ({_buckets()}) AS b
        WHERE p.cluster = {{cluster:String}} AND p.phase = 'Running' AND p.node != ''
          AND p.gpu_requests > 0 AND {as_of("bt", "p")}"""
    busy = f"""
        SELECT bi, namespace, pod, countIf(u >= {{floor:Float64}}) AS busy FROM (
            SELECT intDiv(toUnixTimestamp64Milli(ts) - toUnixTimestamp64Milli({{s:DateTime64(3, 'UTC')}}),
                          {{step:UInt32}} * 1000) AS bi,
                   node, gpu, namespace, pod, avg(utilization_ratio) AS u
            FROM {_t(store, GPU_SAMPLE, final=False)}
            WHERE cluster = {{cluster:String}} AND pod != ''
              AND ts >= {{s:DateTime64(3, 'UTC')}} AND ts < {{u:DateTime64(3, 'UTC')}}
            GROUP BY bi, node, gpu, namespace, pod)
        GROUP BY bi, namespace, pod"""
    held = f"""
        SELECT a.bi AS bi, {pod_key} AS key, sum(a.gpus) AS allocated_gpus,
               sum(least(a.gpus, b.busy)) AS busy_gpus, count() AS pods
        FROM ({alloc}) AS a
        LEFT JOIN ({busy}) AS b ON b.bi = a.bi AND b.namespace = a.namespace AND b.pod = a.pod
        {pod_join}
        GROUP BY bi, key"""
    if by is None or by in NODE_DIMENSIONS:
        node_join, node_key = _node_key(store, by)
        have = f"""
            SELECT b.bi AS bi, {node_key} AS key,
                   sum(coalesce(nd.gpu_capacity, nd.gpus)) AS total_gpus,
                   sum(nd.gpus) AS allocatable_gpus
            FROM {_t(store, NODE, alias="nd")} CROSS JOIN ({_buckets()}) AS b
            {node_join}
            WHERE nd.cluster = {{cluster:String}} AND {as_of("bt", "nd")} AND nd.gpus > 0
            GROUP BY bi, key"""
        rows = f"""
            SELECT coalesce(h.bi, n.bi) AS bi, coalesce(h.key, n.key) AS key,
                   toUInt64(coalesce(n.total_gpus, 0)) AS total_gpus,
                   toUInt64(coalesce(n.allocatable_gpus, 0)) AS allocatable_gpus,
                   toUInt64(coalesce(h.allocated_gpus, 0)) AS allocated_gpus,
                   toUInt64(coalesce(h.busy_gpus, 0)) AS busy_gpus,
                   toInt64(coalesce(n.allocatable_gpus, 0)) - toInt64(coalesce(h.allocated_gpus, 0))
                       AS free_gpus
            FROM ({held}) AS h FULL OUTER JOIN ({have}) AS n ON n.bi = h.bi AND n.key = h.key
            SETTINGS join_use_nulls = 1"""
        quota = ""
    else:
        # by queue: every queue in every interval, holding nothing or not
        every = (
            f"UNION ALL SELECT b.bi AS bi, q.queue AS key, toUInt64(0) AS allocated_gpus, "
            f"toUInt64(0) AS busy_gpus FROM ({_buckets()}) AS b CROSS JOIN "
            f"(SELECT DISTINCT queue FROM {_t(store, QUEUE)} WHERE cluster = {{cluster:String}}) AS q"
            if by == "queue"
            else ""
        )
        rows = f"""
            SELECT bi, key, CAST(NULL, 'Nullable(UInt64)') AS total_gpus,
                   CAST(NULL, 'Nullable(UInt64)') AS allocatable_gpus,
                   sum(allocated_gpus) AS allocated_gpus, sum(busy_gpus) AS busy_gpus,
                   CAST(NULL, 'Nullable(Int64)') AS free_gpus
            FROM (SELECT bi, key, toUInt64(allocated_gpus) AS allocated_gpus,
                         toUInt64(busy_gpus) AS busy_gpus FROM ({held}) {every})
            GROUP BY bi, key"""
        quota = ""
    if by == "queue":
        quota = f"""
            LEFT JOIN (SELECT queue, argMax(deserved_gpus, valid_from) AS deserved_gpus,
                              argMax(guarantee_gpus, valid_from) AS guarantee_gpus,
                              argMax(capability_gpus, valid_from) AS capability_gpus
                       FROM {_t(store, QUEUE)} WHERE cluster = {{cluster:String}}
                       GROUP BY queue) AS q ON q.queue = r.key"""
    quota_cols = (
        "q.deserved_gpus AS deserved_gpus, q.guarantee_gpus AS guarantee_gpus, "
        "q.capability_gpus AS capability_gpus"
        if quota
        else "CAST(NULL, 'Nullable(UInt32)') AS deserved_gpus, "
        "CAST(NULL, 'Nullable(UInt32)') AS guarantee_gpus, "
        "CAST(NULL, 'Nullable(UInt32)') AS capability_gpus"
    )
    return f"""
        SELECT {{s:DateTime64(3, 'UTC')}} + toIntervalSecond(r.bi * {{step:UInt32}}) AS interval_start,
               r.key AS key, r.total_gpus AS total_gpus, r.allocatable_gpus AS allocatable_gpus,
               r.allocated_gpus AS allocated_gpus, r.busy_gpus AS busy_gpus,
               toUInt64(r.allocated_gpus - r.busy_gpus) AS idle_allocated_gpus,
               r.free_gpus AS free_gpus, {quota_cols}
        FROM ({rows}) AS r {quota}
        WHERE r.bi < {{n:UInt32}}
        ORDER BY interval_start, key"""


def accounting(
    store: Any,
    start: datetime,
    end: datetime,
    *,
    by: str | None = None,
    step_s: int = 60,
    floor: float = 0.05,
    cluster: str = "default",
) -> pl.DataFrame:
    """Pool accounting per interval of `step_s` from `start` to `end` (see the module doc)."""
    rng = Range.of(start, end, step_s)
    params = {
        "s": start,
        "u": end,
        "step": step_s,
        "n": rng.intervals,
        "floor": floor,
        "cluster": cluster,
    }
    return store.query_df(accounting_sql(store, by), params)


def preemptions(
    store: Any, start: datetime, end: datetime, *, cluster: str = "default"
) -> pl.DataFrame:
    """Pods preempted or evicted in [start, end): the victim's GPUs and provisioning type, and
    for whom (the preempting pod named by its UID in kube-scheduler's event, and its type)."""
    pod_cols = (
        "namespace, pod, uid, argMax(priority_class, valid_from) AS pc, "
        "argMax(gpu_requests, valid_from) AS gpus"
    )
    pods = (
        f"SELECT {pod_cols} FROM {_t(store, POD)} WHERE cluster = {{cluster:String}} "
        "GROUP BY namespace, pod, uid"
    )
    prov = _latest(store, PC, "priority_class", "provisioning")
    return store.query_df(
        f"""
        SELECT e.ts AS ts, e.namespace AS namespace, e.pod AS pod, e.reason AS reason,
               e.node AS node, v.gpus AS gpus, v.pc AS priority_class, vp.v AS provisioning,
               if(b.pod != '', concat(b.namespace, '/', b.pod), e.preemptor) AS preempted_for,
               b.pc AS for_priority_class, bp.v AS for_provisioning
        FROM {_t(store, POD_EVENT, alias="e")}
        GLOBAL LEFT JOIN ({pods}) AS v ON v.namespace = e.namespace AND v.pod = e.pod
        GLOBAL LEFT JOIN ({prov}) AS vp ON vp.priority_class = v.pc
        GLOBAL LEFT JOIN ({pods}) AS b ON b.uid = e.preemptor AND e.preemptor != ''
        GLOBAL LEFT JOIN ({prov}) AS bp ON bp.priority_class = b.pc
        WHERE e.cluster = {{cluster:String}} AND e.ts >= {{s:DateTime64(3, 'UTC')}}
          AND e.ts < {{u:DateTime64(3, 'UTC')}}
        ORDER BY ts, namespace, pod""",
        {"s": start, "u": end, "cluster": cluster},
    )


def gpu_hours(df: pl.DataFrame, step_s: int) -> dict[str, float]:
    """GPU-hours allocated, busy and idle-allocated over the rows of `accounting`."""
    h = step_s / 3600.0
    return {
        "allocated_gpu_hours": float(df["allocated_gpus"].sum() or 0) * h,
        "busy_gpu_hours": float(df["busy_gpus"].sum() or 0) * h,
        "idle_allocated_gpu_hours": float(df["idle_allocated_gpus"].sum() or 0) * h,
    }


def accounting_polars(
    pods: pl.DataFrame,
    samples: pl.DataFrame,
    start: datetime,
    end: datetime,
    *,
    step_s: int = 60,
    floor: float = 0.05,
    key: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The allocated/busy/idle arithmetic of `accounting` in polars. `pods`: pod versions
    (namespace, pod, node, phase, gpu_requests, valid_from, valid_to); `samples`: GPU samples
    (ts, node, gpu, namespace, pod, utilization_ratio); `key`: (namespace, pod, key), default one
    key '' for all. Returns (interval_start, key, allocated_gpus, busy_gpus, idle_allocated_gpus)."""
    import polars as pl

    rng = Range.of(start, end, step_s)
    s_ms = int(start.timestamp() * 1000)
    buckets = pl.DataFrame({"bi": range(rng.intervals)}).with_columns(
        bt=pl.lit(s_ms) + pl.col("bi") * step_s * 1000
    )
    p = pods.filter(
        (pl.col("phase") == "Running") & (pl.col("node") != "") & (pl.col("gpu_requests") > 0)
    ).with_columns(
        vf=pl.col("valid_from").dt.epoch("ms"),
        vt=pl.col("valid_to").dt.epoch("ms"),
    )
    alloc = (
        p.join(buckets, how="cross")
        .filter(
            (pl.col("vf") <= pl.col("bt"))
            & (pl.col("vt").is_null() | (pl.col("vt") > pl.col("bt")))
        )
        .select("bi", "namespace", "pod", gpus=pl.col("gpu_requests").cast(pl.UInt32))
    )
    busy = (
        samples.filter((pl.col("pod") != "") & (pl.col("ts") >= start) & (pl.col("ts") < end))
        .with_columns(bi=(pl.col("ts").dt.epoch("ms") - s_ms) // (step_s * 1000))
        .group_by("bi", "node", "gpu", "namespace", "pod")
        .agg(u=pl.col("utilization_ratio").mean())
        .group_by("bi", "namespace", "pod")
        .agg(busy=(pl.col("u") >= floor).sum())
    )
    a = alloc.join(busy, on=["bi", "namespace", "pod"], how="left").with_columns(
        busy=pl.min_horizontal(pl.col("gpus"), pl.col("busy").fill_null(0))
    )
    if key is not None:
        a = a.join(key, on=["namespace", "pod"], how="left").with_columns(
            pl.col("key").fill_null("")
        )
    else:
        a = a.with_columns(key=pl.lit(""))
    return (
        a.group_by("bi", "key")
        .agg(allocated_gpus=pl.col("gpus").sum(), busy_gpus=pl.col("busy").sum())
        .with_columns(
            idle_allocated_gpus=pl.col("allocated_gpus") - pl.col("busy_gpus"),
            interval_start=pl.lit(start) + pl.duration(seconds=pl.col("bi") * step_s),
        )
        .sort("bi", "key")
        .select("interval_start", "key", "allocated_gpus", "busy_gpus", "idle_allocated_gpus")
    )


# --- gang placement over free GPUs -------------------------------------------------------------
@dataclass(frozen=True)
class Gang:
    members: int  # pods that must start together (minMember)
    gpus_per_pod: int  # each on one node
    models: frozenset[str] = frozenset()  # acceptable nvidia.com/gpu.product values; empty = any
    highest_tier: int | None = None  # hard networkTopology: all members under one HyperNode of
    # this tier or lower; None = anywhere

    @property
    def gpus(self) -> int:
        return self.members * self.gpus_per_pod


@dataclass(frozen=True)
class Placement:
    fits: bool
    free_gpus: int  # free GPUs of an acceptable model, pool-wide
    largest: int  # most members placeable in one allowed domain
    domain: str  # where `largest` was found ('' = the whole pool, else a HyperNode)


def place_gang(
    gang: Gang,
    free: dict[str, int],
    model_of: dict[str, str],
    ancestors: dict[str, list[str]] | None = None,
    tiers: dict[str, int] | None = None,
) -> Placement:
    """Can `gang` start on the free GPUs now? A member needs `gpus_per_pod` on one node, so a
    node with f free GPUs takes f // gpus_per_pod members; with a hard topology limit all
    members must sit under one HyperNode of tier <= highest_tier. Linear in nodes x tiers."""
    per = max(1, gang.gpus_per_pod)
    ok = {
        n: f
        for n, f in free.items()
        if f > 0 and (not gang.models or model_of.get(n, "") in gang.models)
    }
    free_total = sum(ok.values())
    slots = {n: f // per for n, f in ok.items()}
    if gang.highest_tier is None:
        largest = sum(slots.values())
        return Placement(largest >= gang.members, free_total, largest, "")
    per_domain: dict[str, int] = {}
    anc, tier = ancestors or {}, tiers or {}
    for n, k in slots.items():
        for h in anc.get(n, []):
            if tier.get(h, 1 << 30) <= gang.highest_tier:
                per_domain[h] = per_domain.get(h, 0) + k
    if not per_domain:
        return Placement(False, free_total, 0, "")
    domain, largest = max(per_domain.items(), key=lambda kv: (kv[1], kv[0]))
    return Placement(largest >= gang.members, free_total, largest, domain)


__all__ = [
    "DIMENSIONS",
    "Gang",
    "Placement",
    "accounting",
    "accounting_polars",
    "accounting_sql",
    "gpu_hours",
    "leaf_hypernodes",
    "place_gang",
    "preemptions",
]
