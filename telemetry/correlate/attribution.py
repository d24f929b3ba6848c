"""Attribution: every flow sample of a window joined, as of its own timestamp, to the pod that held
each IP then (primary or Multus secondary), its tenant and job, the nodes' SU and IDC, and the
lowest common HyperNode of the two ends. Runs inside ClickHouse once per evaluation tick over the
flows that arrived since the previous one: each end looked up, by IP and time, in the lease
index (lease_index.py: lease segments as arrays, kept between ticks, rebuilt when the inventory
changes); re-running a range replaces its rows, so it is idempotent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from telemetry.correlate import lease_index
from telemetry.correlate.lease_index import KEYS, keyed, num, read_sql
from telemetry.records import ATTRIBUTED_FLOW
from telemetry.times import valid_during

if TYPE_CHECKING:
    from telemetry.correlate.registry import Context

log = logging.getLogger(__name__)


@dataclass
class Ancestry:
    """node -> HyperNodes above it (lowest tier first) and each HyperNode's tier."""

    ancestors: dict[str, list[str]]
    tiers: dict[str, int]
    tier_names: dict[str, int] = field(default_factory=dict)  # tierName -> tier
    _codes: list[PathCodes | None] = field(
        default_factory=list, init=False, repr=False, compare=False
    )

    def path_codes(self) -> PathCodes | None:
        """PathCodes.of(self), worked out once: the engine keeps one Ancestry while the
        HyperNodes hold (Context.remembered), and packing 2,048 nodes' chains takes 8 ms."""
        if not self._codes:
            self._codes.append(PathCodes.of(self))
        return self._codes[0]


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


# Node facts (SU, IDC, HyperNode ancestors) arrive as one string parameter (array parameters
# of 2,048 nodes' facts cost 0.1 s to parse, per use); the lease index joins SU, IDC and the
# NICs to its segments (a few per lease), not to the flows (lease_index.py).
CODE_BITS = 64  # the width of a node's path code (a UInt64)


@dataclass(frozen=True)
class PathCodes:
    """Every node's HyperNode chain packed into one UInt64, root first: level k's HyperNode as
    its (1-based) position among its parent's children, in a field of its own whose end
    `ends[k-1]` counts bits from the top. Two nodes' chains agree down to their lowest common
    HyperNode and differ below it (HyperNodeTree: one parent each), so the fields the two
    codes share from the top are the LCA's own chain: `hypernode` maps each HyperNode's code
    (its chain's fields, the rest 0) to it. No codes (PathCodes.of gives None) when the chains
    need more than CODE_BITS bits, or give one HyperNode two parents."""

    ends: tuple[int, ...]
    node: dict[str, int]
    hypernode: dict[int, str]

    @classmethod
    def of(cls, anc: Ancestry) -> PathCodes | None:
        parent: dict[str, str | None] = {}
        for chain in anc.ancestors.values():  # lowest tier first: chain[i + 1] is the parent
            for i, h in enumerate(chain):
                up = chain[i + 1] if i + 1 < len(chain) else None
                if parent.setdefault(h, up) != up:
                    return None  # not a tree: two parents (compared chain by chain instead)
        children: dict[str | None, set[str]] = {}
        for h, up in parent.items():
            children.setdefault(up, set()).add(h)
        position = {h: i for kids in children.values() for i, h in enumerate(sorted(kids), 1)}
        widths: list[int] = []
        for chain in anc.ancestors.values():
            for k, h in enumerate(reversed(chain)):
                if k == len(widths):
                    widths.append(0)
                widths[k] = max(widths[k], position[h].bit_length())
        ends = tuple(sum(widths[: k + 1]) for k in range(len(widths)))
        if ends and ends[-1] > CODE_BITS:
            return None

        def code(root_first: list[str]) -> int:
            return sum(position[h] << (CODE_BITS - ends[k]) for k, h in enumerate(root_first))

        nodes, hns = {}, {}
        for n, chain in anc.ancestors.items():
            root_first = chain[::-1]
            nodes[n] = code(root_first)
            for k in range(len(root_first)):
                hns[code(root_first[: k + 1])] = root_first[k]
        return cls(ends, nodes, hns)

    def lca_sql(self, s: str = "PC[s_id]", d: str = "PC[d_id]") -> str:
        """The LCA (1-based into `hn`, 0 for none) of the nodes whose codes are `s` and `d` (the
        lease index's per-segment codes of the two ends' segments, 0 for a node without
        HyperNodes or no node): the number of fields the two
        codes agree on from the top (their XOR below 2^(64 - end)), the source's code cut to
        those, looked up by `transform` in `{lca_codes}`/`{lca_ids}` (a hash of a hundred or
        so). A few integer operations and two array reads per flow: comparing the chains tier
        by tier (_lca) cost 0.16 s per 1 M flows at depth 4, this 0.02 s (bench/correlate.py's
        flows, the columns alone)."""
        if not self.ends:
            return "toUInt32(0)"
        xor = f"(bitXor({s}, {d}) AS lca_xor)"
        agree = " + ".join(
            f"({xor if k == 0 else 'lca_xor'} < {1 << (CODE_BITS - e)})"
            for k, e in enumerate(self.ends)
        )
        full = (1 << CODE_BITS) - 1
        masks = ", ".join(["0", *(str(full ^ ((1 << (CODE_BITS - e)) - 1)) for e in self.ends)])
        return (
            f"transform(bitAnd({s}, CAST([{masks}] AS Array(UInt64))"
            f"[1 + ({agree})]), {{lca_codes:Array(UInt64)}}, {{lca_ids:Array(UInt32)}}, "
            "toUInt32(0))"
        )


def _lca(depth: int) -> str:
    """The lowest common HyperNode when the chains do not fit PathCodes: (`AN[k]`: every
    node's k-th ancestor counted from its root, 0 beyond its depth; `s_node`/`d_node`: the
    ends' node indexes, 0 for none), 0 for none. The two nodes' root-first chains agree from
    the root down to their lowest common HyperNode and differ below it: the LCA is the deepest
    position where both chains hold the same HyperNode. One comparison per tier, unrolled."""
    if depth <= 0:
        return "toUInt32(0)"
    arms = [
        f"AN[{k}][s_node] != 0 AND AN[{k}][s_node] = AN[{k}][d_node], AN[{k}][s_node]"
        for k in range(depth, 0, -1)
    ]
    return f"multiIf({', '.join(arms)}, toUInt32(0))"


def _segment_of(end: str, ip: str) -> str:
    """The columns that find a flow end's segment (`{end}_id`, 1-based into the sorted segment
    arrays, 0 for none): the IP's first segment and count (`IPV`: first << 32 | count) by a
    hash lookup on the IP, then how many of its starts are <= t (a slice of a few of S)."""
    return f"""transform({ip}, IPK, IPV, toUInt64(0)) AS {end}_v,
             toUInt32(bitShiftRight({end}_v, 32)) AS {end}_f,
             arrayCount(x -> x <= t, arraySlice(S, {end}_f, bitAnd({end}_v, 4294967295))) AS {end}_c,
             if({end}_c = 0, toUInt32(0), {end}_f + {end}_c - 1) AS {end}_id"""


def attribute_sql(ctx: Context, depth: int = 0, codes: PathCodes | None = None) -> str:
    """INSERT ... SELECT of the window's attributed flows, looked up in the lease index row filed
    under `{fp:UInt64}` (lease_index.ensure); the lowest common HyperNode by `codes` (the
    `nodes` parameter then carries each node's code), else by comparing the chains (`depth`:
    the most HyperNode ancestors any node has). In cluster mode the INSERT into the
    Distributed table writes to its shards before it returns (the rollup is read from the
    flows right after). The rows go to the table in blocks
    of 524,288 rows: the SELECT goes on while a block is written, where one block of about a
    million rows (the default) left the whole write until the end (bench/correlate.py, medians
    of 7: 1 M flows 0.99 s instead of 1.08 s, 3 M flows 2.30 s instead of 2.50 s; blocks of
    262,144 took 1 CPU-s more at 3 M). The flows are read in blocks of up to 262,144 rows,
    whatever their bytes: every block copies each constant array it indexes (the index's
    numbers were then one 7 MB array at 100,000 leases, used a dozen times; see num()), and the
    default cap of 1 MB per block made that about 40 blocks per 1 M flows (the INSERT 0.59 s wall / 0.94 CPU-s against
    0.40 s / 0.67 CPU-s, medians of 5; the SELECT alone on one thread 0.60 s against 0.33 s)."""
    settings = [
        "min_insert_block_size_rows = 524288",
        "max_block_size = 262144",
        "preferred_block_size_bytes = 1000000000",
    ]
    if ctx.store.cluster:
        settings.append("distributed_foreground_insert = 1")
    if codes is not None:
        # each segment's node's path code is in the index (PC): no per-node facts needed here
        lca, per_node, node_ids = codes.lca_sql(), "", ""
    else:
        lca = _lca(depth)
        ancestors = ", ".join(
            f"arrayMap(l -> toUInt32OrZero(splitByChar('\\x1f', l)[{3 + k}]), NODES)"
            for k in range(1, depth + 1)
        )
        # per node: its k-th HyperNode ancestor from its root (1-based into hn), 0 none
        per_node = (
            "splitByChar('\\x1e', {nodes:String}) AS NODES,  -- per node: node US su US idc "
            f"US HyperNodes\n(SELECT [{ancestors}]) AS AN,\n"
        )
        node_ids = (
            f"toUInt32({num('nidx', 's_id')}) AS s_node, toUInt32({num('nidx', 'd_id')}) AS d_node,"
        )
    keys = ", ".join(
        f"toLowCardinality(toUInt32({num(key, f'{p}_id')})) AS {p}_{key}"
        for p in "sd"
        for key in KEYS
    )
    out = {
        "ts": "ts", "cluster": "cluster", "switch": "switch", "out_port": "out_port",
        "src_ip": "src_ip", "dst_ip": "dst_ip", "dst_port": "dst_port", "dest_qp": "dest_qp",
        "rdma": "dst_port = 4791", "bytes": "bytes",
    }  # fmt: skip
    for side in ("src", "dst"):
        p = side[0]
        out[f"{side}_pod"] = f"POD[{p}_id]"
        out[f"{side}_rail"] = f"toInt64({num('rail1', f'{p}_id')}) - 1"
        for key, cols in KEYS.items():
            for c in cols:
                out[f"{side}_{c}"] = keyed(key, c, f"{p}_{key}")
    out["lca_hypernode"] = f"arrayElement({{hn:Array(String)}}, toLowCardinality({lca}) AS lca)"
    out["lca_tier"] = "arrayElement({hn_tier:Array(UInt8)}, lca)"
    assert sorted(out) == sorted(ATTRIBUTED_FLOW.columns), sorted(
        set(out) ^ set(ATTRIBUTED_FLOW.columns)
    )
    select = ",\n       ".join(f"{e} AS {c}" if e != c else c for c, e in out.items())
    return f"""
INSERT INTO {ctx.table("attributed_flow")} ({", ".join(out)})
WITH {per_node}
-- the lease index (lease_index.py): constants, each read once in a subquery of its own
{read_sql(ctx)}
SELECT {select}
FROM (SELECT ts, cluster, switch, out_port, src_ip, dst_ip, dst_port, dest_qp, bytes,
             toUnixTimestamp64Milli(ts) AS t, {_segment_of("s", "src_ip")},
             {_segment_of("d", "dst_ip")}, {node_ids}
             {keys}
      FROM {ctx.table("flow_sample")} WHERE {ctx.where("flow_sample")})
SETTINGS {", ".join(settings)}"""


def _node_facts(ctx: Context) -> tuple[dict[str, str], dict[str, str]]:
    rows = ctx.rows(f"""
        SELECT node, argMax(su, valid_from) AS su, argMax(idc, valid_from) AS idc FROM {ctx.table("node", final=True)}
        WHERE cluster = {{cluster:String}} AND {valid_during()}
        GROUP BY node""")
    return {r["node"]: r["su"] for r in rows}, {r["node"]: r["idc"] for r in rows}


def _node_params(
    su: dict[str, str], idc: dict[str, str], anc: Ancestry, codes: PathCodes | None = None
) -> dict[str, Any]:
    """attribute_sql's parameters: `hn`/`hn_tier`, every HyperNode and its tier (0 unknown);
    `nodes`, per node its SU, IDC and then its path code (`codes`; `lca_codes`/`lca_ids`: each
    HyperNode's code and its 1-based index into `hn`), or without codes its HyperNode ancestors
    (from the root down: see _lca) as 1-based indexes into `hn`; fields split by US (0x1f),
    nodes by RS (0x1e): one string, not array parameters (those of 2,048 nodes cost 0.1 s to
    parse). Kubernetes object names never hold control characters."""
    hns = sorted(set(anc.tiers) | {h for hs in anc.ancestors.values() for h in hs})
    ids = {h: i for i, h in enumerate(hns, 1)}
    nodes = sorted(set(su) | set(idc) | set(anc.ancestors))

    def hypernodes(n: str) -> list[str]:
        if codes is not None:
            return [str(codes.node[n])] if n in codes.node else []
        return [str(ids[h]) for h in reversed(anc.ancestors.get(n, []))]

    lines = "\x1e".join(
        "\x1f".join([n, su.get(n, ""), idc.get(n, ""), *hypernodes(n)]) for n in nodes
    )
    params = {"nodes": lines, "hn": hns, "hn_tier": [anc.tiers.get(h, 0) for h in hns]}
    if codes is not None:
        params["lca_codes"] = list(codes.hypernode)
        params["lca_ids"] = [ids[h] for h in codes.hypernode.values()]
    return params


def node_facts(ctx: Context) -> tuple[dict[str, str], dict[str, str]]:
    """node -> scalable unit, node -> IDC, as the inventory had them during the window."""
    return _node_facts(ctx)


def _rollup_insert(ctx: Context, rerun: bool) -> str | None:
    """The INSERT ... SELECT that adds the window's attributed flows to job_port_intervals
    (the engine writes that rollup itself since migration 13: a materialized view on
    attributed_flows left the attribution's INSERT on one thread). For a window attributed
    again (`rerun`), the rollup's intervals overlapping the window are deleted here, and the
    INSERT re-adds them whole from the attributed flows, those just written and those of the
    intervals' parts outside the window. None when the store has no such rollup (before
    migration 12)."""
    from telemetry.store.rollups import BY_KIND, JOB_PORT_SELECT, ROLLUP_INTERVAL
    from telemetry.store.schema import quote

    name = BY_KIND[ATTRIBUTED_FLOW.name].table
    # whether the engine reads rollups or not (Correlator(rollups=False)), it keeps this one
    if not ctx.store.query_rows(
        "SELECT count() FROM system.tables WHERE database = {db:String} AND name = {t:String}",
        {"db": ctx.store.database, "t": name},
    )[0][0]:
        return None
    db = quote(ctx.store.database)
    flows = ctx.table("attributed_flow")
    if not rerun:
        source = f"(SELECT * FROM {flows} WHERE {ctx.where('attributed_flow')})"
    else:
        first = f"toStartOfInterval({{ws:DateTime64(3, 'UTC')}}, {ROLLUP_INTERVAL})"
        ctx.command(
            f"DELETE FROM {db}.{quote(name)} WHERE cluster = {{cluster:String}} "
            f"AND bucket >= {first} AND bucket < {{we:DateTime64(3, 'UTC')}}"
        )
        source = (
            f"(SELECT * FROM {flows} WHERE cluster = {{cluster:String}} "
            f"AND ts >= {first} AND ts < {{we:DateTime64(3, 'UTC')}} + {ROLLUP_INTERVAL} "
            f"AND toStartOfInterval(ts, {ROLLUP_INTERVAL}) < {{we:DateTime64(3, 'UTC')}})"
        )
    # the rows are grouped already: no insert-time merge of the SummingMergeTree (readers sum)
    return (
        f"INSERT INTO {db}.{quote(name)}\n"
        + JOB_PORT_SELECT.strip().format(source=source)
        + "\nSETTINGS optimize_on_insert = 0"
    )


def statement(
    ctx: Context,
    anc: Ancestry | None = None,
    facts: tuple[dict[str, str], dict[str, str]] | None = None,
) -> tuple[str, dict[str, Any], bool]:
    """The INSERT ... SELECT that attributes the window's flows and its parameters, the lease
    index ensured for it first (whether it had to be built). `anc` and `facts` (node_facts):
    what the caller already read for this tick."""
    anc = anc if anc is not None else ancestry(ctx)
    su, idc = facts if facts is not None else _node_facts(ctx)
    depth = max((len(v) for v in anc.ancestors.values()), default=0)
    codes = anc.path_codes()
    params = _node_params(su, idc, anc, codes)
    fp, built = lease_index.ensure(ctx, params)
    if codes is not None:  # the index holds the nodes' codes: the facts string is not read
        params = {k: v for k, v in params.items() if k != "nodes"}  # (75 kB: 4 ms to bind)
    return attribute_sql(ctx, depth, codes), {**params, "fp": fp}, built


def attribute_window(
    ctx: Context,
    anc: Ancestry | None = None,
    facts: tuple[dict[str, str], dict[str, str]] | None = None,
) -> dict[str, Any]:
    """(Re)write the window's attributed flows. Returns counts for self-report (flows, IPs
    owned by nobody, whether the lease index had to be rebuilt). `anc` and `facts`
    (node_facts) are what the caller already read for this tick."""
    # whether the window holds attributed rows (a re-run) and flows: the first row answers
    (had,) = ctx.rows(f"""
        SELECT (SELECT count() FROM (SELECT 1 FROM {ctx.table("attributed_flow")} WHERE {ctx.where("attributed_flow")} LIMIT 1)) AS n,
               (SELECT count() FROM (SELECT 1 FROM {ctx.table("flow_sample")} WHERE {ctx.where("flow_sample")} LIMIT 1)) AS flows""")
    if had["n"]:  # a re-run: replace, never add twice (new flows skip the mutation)
        ctx.command(
            f"DELETE FROM {ctx.table('attributed_flow')} WHERE {ctx.where('attributed_flow')}"
        )
    elif not had["flows"]:  # nothing arrived: no facts to read, nothing to join
        return {"flows": 0, "src_unowned": 0, "dst_unowned": 0, "index_built": False}
    rollup = _rollup_insert(ctx, rerun=bool(had["n"]))
    sql, params, built = statement(ctx, anc, facts)
    try:
        ctx.command(sql, params)
    except Exception:
        lease_index.forget(ctx)  # the index row may be gone: fingerprinted again next tick
        raise
    if rollup is not None:
        ctx.command(rollup)
    # owned by nobody: no namespace (every pod has one), a LowCardinality column's compare
    (r,) = ctx.rows(f"""
        SELECT count() AS flows, countIf(src_namespace = '') AS src_unowned, countIf(dst_namespace = '') AS dst_unowned
        FROM {ctx.table("attributed_flow")} WHERE {ctx.where("attributed_flow")}""")
    if r["flows"] and (r["src_unowned"] or r["dst_unowned"]):
        log.info(
            "attribution %s: %d flow(s), %d source / %d destination IP(s) owned by no pod at the time",
            ctx.window.start.isoformat(),
            r["flows"],
            r["src_unowned"],
            r["dst_unowned"],
        )
    return {**r, "index_built": built}
