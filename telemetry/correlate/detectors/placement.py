"""Placement detectors: jobs spread above the HyperNode tier they were allowed, jobs spanning
scalable units, RDMA between two tenants' pods, GPUs without a NIC on their PCIe switch on servers
that carry RDMA. They read the inventory as of the window and the attributed flows (so every byte
is charged to the pod that held the IP at that moment)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from telemetry.correlate.attribution import Ancestry
from telemetry.correlate.findings import Finding
from telemetry.correlate.registry import Context, Later, detector, over_ticks
from telemetry.correlate.timebase import per_tick, rows_at, tick_join, tick_params
from telemetry.store import time_range
from telemetry.text import human_bytes
from telemetry.times import valid_during


def _jobs(ctx: Context) -> list[dict[str, Any]]:
    """Jobs with pods placed in the window: their nodes and networkTopology constraint (read
    once per tick: both placement detectors judge the same window; in a batch run again only
    where a pod or job version began or ended)."""
    return ctx.as_of_state(  # type: ignore[no-any-return]
        "placement_jobs",
        ("pod", "job"),
        lambda: ctx.rows(f"""
        SELECT p.namespace AS namespace, p.job AS job, groupUniqArray(p.node) AS nodes,
               any(j.topology_mode) AS mode, any(j.highest_tier_allowed) AS tier_allowed,
               any(j.highest_tier_name) AS tier_name
        FROM (SELECT namespace, job, node FROM {ctx.table("pod", final=True)}
              WHERE cluster = {{cluster:String}} AND job != '' AND node != ''
                AND {valid_during()}) AS p
        LEFT JOIN (SELECT namespace, job, argMax(topology_mode, valid_from) AS topology_mode,
                          argMax(highest_tier_allowed, valid_from) AS highest_tier_allowed,
                          argMax(highest_tier_name, valid_from) AS highest_tier_name
                   FROM {ctx.table("job", final=True)}
                   WHERE cluster = {{cluster:String}} AND valid_from < {{we:DateTime64(3, 'UTC')}}
                   GROUP BY namespace, job) AS j
          ON p.namespace = j.namespace AND p.job = j.job
        GROUP BY p.namespace, p.job
        ORDER BY namespace, job"""),
        span=ctx.window.seconds,
    )


def span_tier(anc: Ancestry, nodes: list[str]) -> tuple[str, int | None]:
    """Lowest HyperNode holding every node, and its tier; (``, None) when there is none."""
    if not nodes or any(n not in anc.ancestors for n in nodes):
        return "", None
    common = [h for h in anc.ancestors[nodes[0]] if all(h in anc.ancestors[n] for n in nodes[1:])]
    return (common[0], anc.tiers[common[0]]) if common else ("", None)


# the bytes a job's pods sent over the flow window, per what the placement detectors tell apart:
# (lca_tier, whether the destination is a known pod, whether it crossed scalable units) -> bytes
_FlowSplit = dict[tuple[int, bool, bool], int]


def _flow_split(ctx: Context, ns: str, job: str) -> _FlowSplit:
    """The job's bytes over the flow window (the trailing `sliding.flow_seconds` before the tick)
    split as _FlowSplit says. The placement detectors judge what is placed now (a one-interval
    window) but sampled flows are sparse, so the bytes they charge are counted over the window
    the flow detectors use (10 s of 1:16k samples often holds none). Every job's split is read in
    one statement per tick, shared by both detectors (a job's own statement each was most of
    their cost)."""

    def read() -> dict[tuple[str, str], _FlowSplit]:
        return _splits(ctx.rows(_split_sql(ctx, over=False), _split_params(ctx, over=False)))

    got = ctx.cached(_split_key(ctx), read)
    return got.get((ns, job), {})


def _split_key(ctx: Context) -> str:
    return f"placement_flows@{ctx.window.end.isoformat()}"


def _split_sql(ctx: Context, *, over: bool) -> str:
    """Every job's bytes split as _FlowSplit says, over the flow window before the tick (per
    judged tick, `over`: each over its own, timebase.tick_join)."""
    tick, join, only = "", "", ""
    if over:
        span = _flow_s(ctx) * 1000
        tick = "tick, "
        join = tick_join(ctx, "attributed_flow", span=span)
        only = " AND tick IN {ticks:Array(Int64)}"
    return f"""
        SELECT {tick}src_namespace AS ns, src_job AS job, lca_tier, dst_pod != '' AS to_pod,
               src_su != dst_su AND dst_su != '' AS between_sus, sum(bytes) AS b
        FROM {ctx.table("attributed_flow")} {join}
        WHERE cluster = {{cluster:String}} AND {time_range("attributed_flow", lo="fws")}{only}
        GROUP BY {tick}ns, job, lca_tier, to_pod, between_sus"""


def _split_params(ctx: Context, *, over: bool) -> dict[str, Any]:
    first = ctx.ticks[0] if over else ctx.window.end
    fws = {"fws": first - timedelta(seconds=_flow_s(ctx))}
    return {**fws, **tick_params(ctx)} if over else fws


def _splits(rows: list[dict[str, Any]]) -> dict[tuple[str, str], _FlowSplit]:
    out: dict[tuple[str, str], _FlowSplit] = {}
    for r in rows:
        split = out.setdefault((r["ns"], r["job"]), {})
        split[(int(r["lca_tier"]), bool(r["to_pod"]), bool(r["between_sus"]))] = int(r["b"])
    return out


def _flow_s(ctx: Context) -> int:
    return int(float(ctx.t("sliding.flow_seconds")))


def _crossed_bytes(ctx: Context, ns: str, job: str, above: int) -> int:
    """Bytes to the job's pods between HyperNodes above tier `above` (or none in common)."""
    split = _flow_split(ctx, ns, job).items()
    return sum(b for (tier, to_pod, _), b in split if to_pod and (tier > above or tier == 0))


def _between_sus_bytes(ctx: Context, ns: str, job: str) -> int:
    return sum(b for (_, _, between), b in _flow_split(ctx, ns, job).items() if between)


# flows: the bytes that crossed the tier are their evidence (read over sliding.flow_seconds)
@detector(
    "placement_violation",
    needs=("pod", "flow_sample"),
    lookback=("sliding.state_seconds",),
    also=("placement_warning",),
)
def placement(ctx: Context) -> list[Finding]:
    anc: Ancestry = ctx.extra["ancestry"]
    if not anc.ancestors:
        return []
    tier_by_name = ctx.extra.get("tier_names", {})
    su_of: dict[str, str] = ctx.extra["su"]
    out = []
    for j in _jobs(ctx):
        if j["mode"] not in ("hard", "soft"):
            continue  # no networkTopology: nothing to violate (counted in evidence of job_spans_su)
        allowed = j["tier_allowed"]
        if allowed is None and j["tier_name"]:
            allowed = tier_by_name.get(j["tier_name"])
        if allowed is None:
            continue
        nodes = sorted(j["nodes"])
        hn, tier = span_tier(anc, nodes)
        sus = sorted({su_of[n] for n in nodes if su_of.get(n)})
        lowest = min(anc.tiers.values())
        # The declared HyperNodes may disagree with the wiring (drift): a job kept to the lowest
        # tier (one leaf group) whose nodes sit in two scalable units still crosses the spine.
        wired_above = len(sus) > 1 and allowed <= lowest
        if tier is not None and tier <= allowed and not wired_above:
            continue
        key = f"{j['namespace']}/{j['job']}"
        crossed = _crossed_bytes(ctx, j["namespace"], j["job"], int(allowed))
        hard = j["mode"] == "hard"
        where = f"tier {tier} ({hn})" if tier is not None else "no common HyperNode"
        how = f"above tier {allowed}"
        evidence: dict[str, object] = {}
        if wired_above and tier is not None and tier <= allowed:
            where = f"{len(sus)} scalable units ({', '.join(sus)}) although the declared HyperNodes put it in {hn}"
            # the declared tree says tier `allowed`, the wiring says the spine: count what the
            # headline is about, the bytes between the scalable units (as job_spans_su does)
            crossed, how = _between_sus_bytes(ctx, j["namespace"], j["job"]), "between them"
            evidence["sus"] = sus
        out.append(
            ctx.finding(
                "critical" if hard else "warning",
                "job",
                key,
                f"job {key} ({j['mode']}, highest tier allowed {allowed}) spans {where}; "
                f"{human_bytes(crossed)} crossed {how} in the last {_flow_s(ctx)}s",
                {
                    "mode": j["mode"],
                    "highest_tier_allowed": allowed,
                    "spanned_tier": tier,
                    "spanned_hypernode": hn,
                    "nodes": nodes,
                    "bytes_above_allowed_tier": crossed,
                    "flow_window_seconds": _flow_s(ctx),
                    **evidence,
                },
                kind="placement_violation" if hard else "placement_warning",
            )
        )
    return out


@over_ticks("placement_violation")
def placement_over(ctx: Context) -> dict[datetime, Later]:
    """Set-based: every judged tick's flow split in one statement; each tick judged when the
    engine reaches it, with its own HyperNode ancestry and scalable units (the tick's facts),
    its split left in the tick's cache for job_spans_su, judged after it at the same ticks."""
    rows = ctx.rows(_split_sql(ctx, over=True), _split_params(ctx, over=True))
    splits = {t: _splits(got) for t, got in rows_at(ctx, rows).items()}

    def later(split: dict[tuple[str, str], _FlowSplit]) -> Later:
        def make(c: Context) -> list[Finding]:
            c.cached(_split_key(c), lambda: split)
            return placement(c)

        return make

    return {t: later(split) for t, split in splits.items()}


@detector("job_spans_su", needs=("pod", "flow_sample"), lookback=("sliding.state_seconds",))
def job_spans_su(ctx: Context) -> list[Finding]:
    su_of: dict[str, str] = ctx.extra["su"]
    out = []
    for j in _jobs(ctx):
        sus = sorted({su_of[n] for n in j["nodes"] if su_of.get(n)})
        if len(sus) < 2:
            continue
        key = f"{j['namespace']}/{j['job']}"
        out.append(
            ctx.finding(
                "warning" if j["mode"] else "info",
                "job",
                key,
                f"job {key} runs in {len(sus)} scalable units ({', '.join(sus)}): its traffic crosses the spine",
                {
                    "sus": sus,
                    "nodes": sorted(j["nodes"]),
                    "mode": j["mode"] or "",
                    "bytes_between_sus": _between_sus_bytes(ctx, j["namespace"], j["job"]),
                    "flow_window_seconds": _flow_s(ctx),
                },
            )
        )
    return out


def _rdma_pairs(ctx: Context, over: bool) -> list[dict[str, Any]]:
    """RDMA flows between two tenants' pods over the window, per pod pair (and judged tick when
    `over`: a `tick` column, timebase.tick_join), most bytes first. The sample of destination
    QPs is the pair's lowest five: the same whatever order the rows are read in."""
    t = "tick, " if over else ""
    return ctx.rows(
        f"""
        SELECT {t}src_namespace, src_pod, dst_namespace, dst_pod, min(src_ip) AS src_ip,
               min(dst_ip) AS dst_ip, sum(bytes) AS bytes, count() AS samples,
               arraySlice(arraySort(groupUniqArray(dest_qp)), 1, 5) AS qps
        FROM {ctx.table("attributed_flow")} {tick_join(ctx, "attributed_flow") if over else ""}
        WHERE {ctx.where("attributed_flow")}{" AND tick IN {ticks:Array(Int64)}" if over else ""}
          AND rdma AND src_namespace != '' AND dst_namespace != '' AND src_namespace != dst_namespace
        GROUP BY {t}src_namespace, src_pod, dst_namespace, dst_pod
        ORDER BY {t}bytes DESC, src_namespace, src_pod, dst_namespace, dst_pod""",
        tick_params(ctx) if over else None,
    )


@detector("cross_tenant_rdma", needs=("flow_sample",), lookback=("sliding.flow_seconds",))
def cross_tenant_rdma(ctx: Context) -> list[Finding]:
    return _cross_tenant(ctx, _rdma_pairs(ctx, over=False))


@over_ticks("cross_tenant_rdma")
def cross_tenant_rdma_over(ctx: Context) -> dict[datetime, list[Finding]]:
    return per_tick(ctx, _rdma_pairs(ctx, over=True), _cross_tenant)


def _cross_tenant(ctx: Context, rows: list[dict[str, Any]]) -> list[Finding]:
    out = []
    pairs: dict[str, dict[str, Any]] = defaultdict(dict)
    for r in rows:
        key = f"{r['src_namespace']}/{r['src_pod']}->{r['dst_namespace']}/{r['dst_pod']}"
        pairs[key] = r
    for key, r in pairs.items():
        out.append(
            ctx.finding(
                "critical",
                "flow",
                key,
                f"RDMA from tenant {r['src_namespace']} ({r['src_pod']}) to tenant {r['dst_namespace']} ({r['dst_pod']}): "
                f"{r['bytes'] / 1e6:.1f} MB",
                {
                    "bytes": r["bytes"],
                    "samples": r["samples"],
                    "src_ip": r["src_ip"],
                    "dst_ip": r["dst_ip"],
                    "dest_qps": sorted(q for q in r["qps"] if q is not None),
                },
            )
        )
    return out


def _detour_rows(ctx: Context, over: bool) -> list[dict[str, Any]]:
    """Nodes with a GPU without a NIC on its PCIe switch (the latest affinity before the tick)
    whose pods sent RDMA in the window, with what they sent and received: per judged tick when
    `over` (a `tick` column, timebase.tick_join). The pod samples are each side's first five
    by name: the same whatever order the rows are read in."""
    t, only, flow_join = "", "", ""
    # the affinity as of each judged tick: a row counts at every tick after it
    affinity_ticks = (
        "ARRAY JOIN arrayFilter(k -> toUnixTimestamp64Milli(ts) < k, {ticks:Array(Int64)}) AS tick"
    )
    if over:
        t, only = "tick, ", " AND tick IN {ticks:Array(Int64)}"
        flow_join = tick_join(ctx, "attributed_flow")
    on = "a.tick = {0}.tick AND " if over else ""
    return ctx.rows(
        f"""
        SELECT {"a.tick AS tick, " if over else ""}a.node AS node, groupUniqArray(a.gpu) AS gpus,
               any(f.bytes) AS bytes, any(f.pods) AS pods,
               any(rx.bytes) AS rx_bytes, any(rx.pods) AS rx_pods
        FROM (SELECT {t}node, gpu, argMax(direct_nic, ts) AS direct
              FROM {ctx.table("gpu_nic_affinity")} {affinity_ticks if over else ""}
              WHERE cluster = {{cluster:String}} AND ts < {{we:DateTime64(3, 'UTC')}}
              GROUP BY {t}node, gpu) AS a
        INNER JOIN (SELECT {t}src_node AS node, sum(bytes) AS bytes,
                           arraySlice(arraySort(groupUniqArray(concat(src_namespace, '/', src_pod))), 1, 5) AS pods
                    FROM {ctx.table("attributed_flow")} {flow_join}
                    WHERE {ctx.where("attributed_flow")}{only}
                      AND rdma AND src_node != ''
                    GROUP BY {t}src_node) AS f ON {on.format("f")}a.node = f.node
        LEFT JOIN (SELECT {t}dst_node AS node, sum(bytes) AS bytes,
                          arraySlice(arraySort(groupUniqArray(concat(dst_namespace, '/', dst_pod))), 1, 5) AS pods
                   FROM {ctx.table("attributed_flow")} {flow_join}
                   WHERE {ctx.where("attributed_flow")}{only}
                     AND rdma AND dst_node != ''
                   GROUP BY {t}dst_node) AS rx ON {on.format("rx")}a.node = rx.node
        WHERE a.direct = 0
        GROUP BY {t}node ORDER BY {t}node""",
        tick_params(ctx) if over else None,
    )


@detector(
    "gpu_without_direct_nic",
    needs=("gpu_nic_affinity", "flow_sample"),
    lookback=("sliding.flow_seconds",),
)
def gpu_without_direct_nic(ctx: Context) -> list[Finding]:
    """GPUs whose PCIe switch has no NIC, on a node whose pods send RDMA: that traffic detours
    through host memory. The evidence adds what the node receives: NCCL's PXN lets such a GPU
    send through a peer GPU's NIC over NVLink, but received data still lands through the CPU
    (a receive-side detour PXN does not remove), and whether the node's pods disable PXN."""
    return _detours(ctx, _detour_rows(ctx, over=False))


@over_ticks("gpu_without_direct_nic")
def gpu_without_direct_nic_over(ctx: Context) -> dict[datetime, list[Finding]]:
    return per_tick(ctx, _detour_rows(ctx, over=True), _detours)


def _detours(ctx: Context, rows: list[dict[str, Any]]) -> list[Finding]:
    out = []
    pxn_of = _pxn_disabled(ctx, [r["node"] for r in rows])
    for r in rows:
        rx = int(r["rx_bytes"] or 0)
        pxn = pxn_of.get(r["node"], [])
        detour = (
            f"; it receives {rx / 1e9:.2f} GB, which lands through host memory whatever PXN does"
            if rx
            else ""
        )
        out.append(
            ctx.finding(
                "info",
                "node",
                r["node"],
                f"{r['node']}: GPU(s) {', '.join(map(str, sorted(r['gpus'])))} have no NIC on their PCIe switch while the node sends "
                f"{human_bytes(r['bytes'])} of RDMA: their traffic crosses host memory{detour}",
                {
                    "gpus": sorted(r["gpus"]),
                    "rdma_bytes": r["bytes"],
                    "pods": sorted(r["pods"]),
                    "rdma_received_bytes": rx,
                    "receiving_pods": sorted(r["rx_pods"] or []),
                    "receive_side_detour": rx > 0,
                    "pxn_disabled_pods": pxn,
                },
            )
        )
    return out


def _pxn_disabled(ctx: Context, nodes: list[str]) -> dict[str, list[str]]:
    """Per node, its pods whose NCCL_PXN_DISABLE=1 (their sends detour too), from
    nccl_settings: every node's in one statement."""
    if not nodes:
        return {}
    out: dict[str, list[str]] = {}
    for x in ctx.rows(
        f"""
        SELECT DISTINCT p.node AS node, concat(s.namespace, '/', s.pod) AS pod
        FROM (SELECT * FROM {ctx.table("nccl_setting", final=True)}
              WHERE cluster = {{cluster:String}} AND name = 'NCCL_PXN_DISABLE') AS s
        INNER JOIN (SELECT namespace, pod, node FROM {ctx.table("pod", final=True)}
                    WHERE cluster = {{cluster:String}} AND node IN {{nodes:Array(String)}}
                      AND {valid_during()}) AS p
          ON s.namespace = p.namespace AND s.pod = p.pod
        WHERE s.value = '1'
          AND {valid_during(alias="s")}
        ORDER BY node, pod""",
        {"nodes": sorted(set(nodes))},
    ):
        out.setdefault(str(x["node"]), []).append(str(x["pod"]))
    return out
