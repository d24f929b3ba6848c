"""Attribution: every flow sample of a window joined, as of its own timestamp, to the pod that held
each IP then (primary or Multus secondary), its tenant and job, the nodes' SU and IDC, and the
lowest common HyperNode of the two ends. Runs inside ClickHouse (ASOF JOINs) once per evaluation
tick over the flows that arrived since the previous one; re-running a range replaces its rows, so
it is idempotent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from telemetry.records import ATTRIBUTED_FLOW
from telemetry.store import time_range
from telemetry.topology.store_io import latest_lldp_sql

if TYPE_CHECKING:
    from telemetry.correlate.registry import Context

log = logging.getLogger(__name__)


@dataclass
class Ancestry:
    """node -> HyperNodes above it (lowest tier first) and each HyperNode's tier."""

    ancestors: dict[str, list[str]]
    tiers: dict[str, int]
    tier_names: dict[str, int] = field(default_factory=dict)  # tierName -> tier


def ancestry(ctx: Context) -> Ancestry:
    """The HyperNode tree declared at the end of the window (empty when none is stored)."""
    from telemetry.topology.hypernodes import HyperNodeTree

    specs, labels = declared_hypernodes(ctx)
    if not specs:
        return Ancestry({}, {})

    def build() -> Ancestry:
        tree = HyperNodeTree.build(specs, labels or None)
        return Ancestry(
            {n: tree.ancestors(n) for n in tree.node_names},
            {name: spec.tier for name, spec in tree.specs.items()},
            {spec.tier_name: spec.tier for spec in tree.specs.values() if spec.tier_name},
        )

    return ctx.remembered("ancestry", (specs, labels), build)  # type: ignore[no-any-return]


def declared_hypernodes(ctx: Context) -> tuple[Any, Any]:
    """The HyperNode specs and node labels declared as of the window's end (once per tick)."""
    from telemetry.topology.store_io import declared_from_store

    return ctx.cached(
        f"declared@{ctx.window.end.isoformat()}",
        lambda: declared_from_store(ctx.store, ctx.cluster, at=ctx.window.end),
    )  # type: ignore[no-any-return]


def _lease(ctx: Context, side: str) -> str:
    return f"""(SELECT ip, valid_from, valid_to, namespace, pod, node, network FROM {ctx.table("pod_ip_lease", final=True)}
               WHERE cluster = {{cluster:String}} AND {time_range("pod_ip_lease", None, "we")}) AS {side}"""


def _pod(ctx: Context, side: str) -> str:
    return f"""(SELECT namespace, pod, valid_from, valid_to, job FROM {ctx.table("pod", final=True)}
               WHERE cluster = {{cluster:String}} AND {time_range("pod", None, "we")}) AS {side}"""


def _rail(network: str) -> str:
    """The rail of a Multus network named like rdma-rail3 / rail_3 (rail-optimized clusters
    give each rail its own network); -1 when the name carries none (the primary network)."""
    return f"toInt64(ifNull(toInt64OrNull(extract({network}, '(?i)rail[-_]?(\\d+)')), -1))"


# Node facts (SU, IDC, HyperNode ancestors) arrive as parallel array parameters and are joined
# as a small table: a hash join per side, not a per-row map lookup.
def attribute_sql(ctx: Context) -> str:
    """INSERT ... SELECT of the window's attributed flows."""
    return f"""
INSERT INTO {ctx.table("attributed_flow")} ({", ".join(ATTRIBUTED_FLOW.columns)})
WITH node_info AS (
    SELECT n.1 AS node, n.2 AS su, n.3 AS idc, n.4 AS anc
    FROM (SELECT arrayJoin(arrayZip({{n_node:Array(String)}}, {{n_su:Array(String)}}, {{n_idc:Array(String)}},
                                    {{n_anc:Array(Array(String))}})) AS n)
),
nic_info AS (
    SELECT r.1 AS node, r.2 AS rail, r.3 AS nic, r.4 AS leaf_port
    FROM (SELECT arrayJoin(arrayZip({{r_node:Array(String)}}, {{r_rail:Array(Int64)}}, {{r_nic:Array(String)}},
                                    {{r_port:Array(String)}})) AS r)
)
SELECT ts, cluster, switch, out_port, src_ip, dst_ip, dst_port, dest_qp, rdma, bytes,
       src_namespace, src_pod, src_node, src_job, dst_namespace, dst_pod, dst_node, dst_job,
       src_rail, src_nic, src_leaf_port, dst_rail, dst_nic, dst_leaf_port,
       src_su, dst_su, src_idc, dst_idc,
       arrayFirst(h -> has(dst_anc, h), src_anc) AS lca_hypernode,
       toUInt8(transform(lca_hypernode, {{tier_k:Array(String)}}, {{tier_v:Array(UInt8)}}, 0)) AS lca_tier
FROM (
    SELECT a.*,
           if(pj.valid_to IS NULL OR a.ts < pj.valid_to, pj.job, '') AS src_job,
           if(qj.valid_to IS NULL OR a.ts < qj.valid_to, qj.job, '') AS dst_job,
           sn.su AS src_su, dn.su AS dst_su, sn.idc AS src_idc, dn.idc AS dst_idc, sn.anc AS src_anc, dn.anc AS dst_anc,
           sr.nic AS src_nic, sr.leaf_port AS src_leaf_port, dr.nic AS dst_nic, dr.leaf_port AS dst_leaf_port
    FROM (
        SELECT f.ts AS ts, f.cluster AS cluster, f.switch AS switch, f.out_port AS out_port,
               f.src_ip AS src_ip, f.dst_ip AS dst_ip, f.dst_port AS dst_port, f.dest_qp AS dest_qp,
               f.dst_port = 4791 AS rdma, f.bytes AS bytes,
               if(s.valid_to IS NULL OR f.ts < s.valid_to, s.namespace, '') AS src_namespace,
               if(s.valid_to IS NULL OR f.ts < s.valid_to, s.pod, '') AS src_pod,
               if(s.valid_to IS NULL OR f.ts < s.valid_to, s.node, '') AS src_node,
               if(d.valid_to IS NULL OR f.ts < d.valid_to, d.namespace, '') AS dst_namespace,
               if(d.valid_to IS NULL OR f.ts < d.valid_to, d.pod, '') AS dst_pod,
               if(d.valid_to IS NULL OR f.ts < d.valid_to, d.node, '') AS dst_node,
               if(s.valid_to IS NULL OR f.ts < s.valid_to, {_rail("s.network")}, -1) AS src_rail,
               if(d.valid_to IS NULL OR f.ts < d.valid_to, {_rail("d.network")}, -1) AS dst_rail
        FROM (SELECT * FROM {ctx.table("flow_sample")} WHERE {ctx.where("flow_sample")}) AS f
        ASOF LEFT JOIN {_lease(ctx, "s")} ON f.src_ip = s.ip AND f.ts >= s.valid_from
        ASOF LEFT JOIN {_lease(ctx, "d")} ON f.dst_ip = d.ip AND f.ts >= d.valid_from
    ) AS a
    ASOF LEFT JOIN {_pod(ctx, "pj")} ON a.src_namespace = pj.namespace AND a.src_pod = pj.pod AND a.ts >= pj.valid_from
    ASOF LEFT JOIN {_pod(ctx, "qj")} ON a.dst_namespace = qj.namespace AND a.dst_pod = qj.pod AND a.ts >= qj.valid_from
    LEFT JOIN node_info AS sn ON a.src_node = sn.node
    LEFT JOIN node_info AS dn ON a.dst_node = dn.node
    LEFT JOIN nic_info AS sr ON a.src_node = sr.node AND a.src_rail = sr.rail
    LEFT JOIN nic_info AS dr ON a.dst_node = dr.node AND a.dst_rail = dr.rail
)
"""


def _node_facts(ctx: Context) -> tuple[dict[str, str], dict[str, str]]:
    rows = ctx.rows(f"""
        SELECT node, argMax(su, valid_from) AS su, argMax(idc, valid_from) AS idc FROM {ctx.table("node", final=True)}
        WHERE cluster = {{cluster:String}} AND {time_range("node", None, "we")}
          AND (valid_to IS NULL OR valid_to > {{ws:DateTime64(3, 'UTC')}})
        GROUP BY node""")
    return {r["node"]: r["su"] for r in rows}, {r["node"]: r["idc"] for r in rows}


def _map(name: str, d: dict[str, Any]) -> dict[str, list[Any]]:
    """A dict as two array parameters (keys, values), e.g. for transform() in SQL."""
    keys = sorted(d)
    return {f"{name}_k": keys, f"{name}_v": [d[k] for k in keys]}


def _node_table(
    su: dict[str, str], idc: dict[str, str], anc: Ancestry, among: set[str] | None = None
) -> dict[str, list[Any]]:
    nodes = sorted(
        (set(su) | set(idc) | set(anc.ancestors)) & (among or set())
        if among is not None
        else set(su) | set(idc) | set(anc.ancestors)
    )
    return {
        "n_node": nodes,
        "n_su": [su.get(n, "") for n in nodes],
        "n_idc": [idc.get(n, "") for n in nodes],
        "n_anc": [anc.ancestors.get(n, []) for n in nodes],
    }


def _flow_nodes(ctx: Context) -> set[str]:
    """Nodes that held (at any time up to the window's end) an IP seen in the window's flows:
    only their facts go into the attribution query. A tick of sampled flows touches a few
    nodes; sending every node's facts as parameters cost more than the joins at 2,048 servers."""
    flows = f"SELECT SIDE FROM {ctx.table('flow_sample')} WHERE {ctx.where('flow_sample')}"
    return {
        r["node"]
        for r in ctx.rows(f"""
        SELECT DISTINCT node FROM {ctx.table("pod_ip_lease", final=True)}
        WHERE cluster = {{cluster:String}} AND {time_range("pod_ip_lease", None, "we")}
          AND ip IN ({flows.replace("SIDE", "src_ip")} UNION ALL {flows.replace("SIDE", "dst_ip")})""")
    }


def _only(facts: dict[str, list[Any]], key: str, among: set[str]) -> dict[str, list[Any]]:
    """Parallel array parameters restricted to the rows whose `key` array value is in `among`."""
    keep = [i for i, v in enumerate(facts[key]) if v in among]
    return {k: [v[i] for i in keep] for k, v in facts.items()}


def nic_facts(ctx: Context) -> dict[str, list[Any]]:
    """(node, rail) -> RDMA device and the leaf port LLDP shows it cabled to, as array
    parameters. Rails come from the node exporter's GPU<->NIC affinity (rail = NIC index)."""
    rows = ctx.rows(f"""
        SELECT a.node AS node, a.g_rail AS rail, a.g_nic AS nic, if(empty(l.remote_device), '', concat(l.remote_device, ':', l.remote_port)) AS port
        FROM (SELECT node, argMax(rail, ts) AS g_rail, argMax(nic, ts) AS g_nic, argMax(netdev, ts) AS g_netdev
              FROM {ctx.table("gpu_nic_affinity")}
              WHERE cluster = {{cluster:String}} AND {time_range("gpu_nic_affinity", None, "we")}
              GROUP BY node, gpu HAVING g_nic != '' AND g_rail IS NOT NULL) AS a
        LEFT JOIN ({latest_lldp_sql(ctx.store, lo=None, hi="we")}) AS l
          ON l.local_device = a.node AND l.local_port = a.g_netdev
        GROUP BY node, rail, nic, port ORDER BY node, rail""")
    return {
        "r_node": [r["node"] for r in rows],
        "r_rail": [int(r["rail"]) for r in rows],
        "r_nic": [r["nic"] for r in rows],
        "r_port": [r["port"] for r in rows],
    }


def node_facts(ctx: Context) -> tuple[dict[str, str], dict[str, str]]:
    """node -> scalable unit, node -> IDC, as the inventory had them during the window."""
    return _node_facts(ctx)


def attribute_window(
    ctx: Context,
    anc: Ancestry | None = None,
    facts: tuple[dict[str, str], dict[str, str]] | None = None,
) -> dict[str, Any]:
    """(Re)write the window's attributed flows. Returns counts for self-report. `anc` and
    `facts` (node_facts) are what the caller already read for this tick."""
    (had,) = ctx.rows(f"""
        SELECT (SELECT count() FROM {ctx.table("attributed_flow")} WHERE {ctx.where("attributed_flow")}) AS n,
               (SELECT count() FROM {ctx.table("flow_sample")} WHERE {ctx.where("flow_sample")}) AS flows""")
    if had["n"]:  # a re-run: replace, never add twice (new flows skip the mutation)
        ctx.command(
            f"DELETE FROM {ctx.table('attributed_flow')} WHERE {ctx.where('attributed_flow')}"
        )
    elif not had["flows"]:  # nothing arrived: no facts to read, nothing to join
        return {"flows": 0, "src_unowned": 0, "dst_unowned": 0}
    anc = anc if anc is not None else ancestry(ctx)
    su, idc = facts if facts is not None else _node_facts(ctx)
    among = _flow_nodes(ctx)
    ctx.command(
        attribute_sql(ctx),
        {
            **_node_table(su, idc, anc, among),
            **_map("tier", anc.tiers),
            **_only(nic_facts(ctx), "r_node", among),
        },
    )
    (r,) = ctx.rows(f"""
        SELECT count() AS flows, countIf(src_pod = '') AS src_unowned, countIf(dst_pod = '') AS dst_unowned
        FROM {ctx.table("attributed_flow")} WHERE {ctx.where("attributed_flow")}""")
    if r["flows"] and (r["src_unowned"] or r["dst_unowned"]):
        log.info(
            "attribution %s: %d flow(s), %d source / %d destination IP(s) owned by no pod at the time",
            ctx.window.start.isoformat(),
            r["flows"],
            r["src_unowned"],
            r["dst_unowned"],
        )
    return r
