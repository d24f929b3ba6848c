"""Attribution: every flow sample of a window joined, as of its own timestamp, to the pod that held
each IP then (primary or Multus secondary), its tenant and job, the nodes' SU and IDC, and the
lowest common HyperNode of the two ends. Runs inside ClickHouse once per evaluation tick over the
flows that arrived since the previous one: each end looked up, by IP and time, in lease segments
built from the inventory once per tick into constant arrays (see _segments, attribute_sql);
re-running a range replaces its rows, so it is idempotent.
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


def _rail(network: str) -> str:
    """The rail of a Multus network named like rdma-rail3 / rail_3 (rail-optimized clusters
    give each rail its own network); -1 when the name carries none (the primary network)."""
    return f"toInt64(ifNull(toInt64OrNull(extract({network}, '(?i)rail[-_]?(\\d+)')), -1))"


def _versions(ctx: Context, kind: str, key: str, cols: str) -> str:
    """The versions of an inventory kind that began before the window's end, each with the
    start of the next version of the same `key` (`nxt`, NULL for the last): an ASOF lookup
    at time t picks the version with the latest valid_from <= t, which holds until the
    earlier of its valid_to and `nxt`."""
    return f"""SELECT {key}, valid_from, valid_to, {cols},
               leadInFrame(toNullable(valid_from)) OVER (PARTITION BY {key} ORDER BY valid_from
                   ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING) AS nxt
        FROM {ctx.table(kind, final=True)}
        WHERE cluster = {{cluster:String}} AND {time_range(kind, None, "we")}"""


# Where the time went (CPU seconds, 1 M flows / 100,000 leases of bench/correlate.py). The
# first version (two lease ASOF JOINs, two pod ASOF JOINs, four node/NIC hash joins) 4.2-4.4 s;
# the second (one ASOF JOIN per end against lease segments carrying every attribute; the
# segments, a CTE, built once per end) 2.9-3.4 s. Measured for the third: an ASOF JOIN carrying
# only a segment id, 0.25-0.3 s per end (a plain hash join on the same key 0.1 s); fetching 13
# attributes per end by segment id through a hash join or a Join-engine table 0.65-0.75 s per
# end, through a flat dictionary 0.3 s per end, through arrayElement of constant arrays
# 0.2 s per end; range-hashed dictionaries 0.3-0.4 s per end for the id alone (String key
# 0.9-1.1 s). Kept: the segments are built once, in one scalar subquery, into constant arrays
# sorted by (IP, start); each flow end finds its IP's first segment and count with
# `transform` (a hash lookup on the IP string, 0.1 s per end), the segment by counting the
# starts <= t in a slice of the IP's few (a binary search unrolled over an upper bound on
# them cost 0.1-0.2 s per step and end, in this query), and every attribute by arrayElement of
# a constant array (no join at all). Same answers as the ASOF chain, row for row
# (tests/integration/correlate, the bench). A constant array must be read as an element of an
# array of arrays (`A[k][id]`): a tuple's element (`T.k[id]`) is not folded to a constant and
# costs 5-10x. Leases over before the window are left out, so the arrays hold the segments
# that can matter to it, not the whole history. Fourth version (below, _KEYS): the string
# attributes through LowCardinality keys, 2.75-2.97 s CPU per 1 M flows against 3.43-3.58 s
# for the third in the same session (docs/correlation.md). Where the INSERT's 2.3-3.5 s per
# 1 M flows go (stop 27, bench data): the scalar subqueries (segment arrays) 0.66 s; the whole
# SELECT into Null 1.13 s wall on two threads; the INSERT into a table without
# job_port_intervals_mv 1.4-2.0 s, its pipeline parallel (CPU above wall); with the view
# 2.5-3.5 s, CPU equal to wall: the view's GROUP BY over the same rows costs 0.15-0.18 s on
# its own, but a dependent view leaves the insert serial. So since migration 13 the engine
# writes that rollup by an INSERT ... SELECT of its own after this one (_rollup_insert).
def _segments(ctx: Context) -> str:
    """One row per (IP, start): the attribution of a flow sent at t from/to that IP is the
    segment with the latest start <= t, or nothing before the IP's first lease. Leases that
    ended (or were superseded) by the window's start are left out: at any time in the window
    a later segment of the same IP, or an end that leaves it nobody's, comes after them."""
    return f"""
    lease AS (
        SELECT ip, a, namespace, pod, node, network, b, gap_after FROM (
            SELECT ip, valid_from AS a, namespace, pod, node, network,
                   multiIf(valid_to IS NULL, nxt, nxt IS NULL, valid_to, least(valid_to, assumeNotNull(nxt))) AS b,
                   b IS NOT NULL AND (nxt IS NULL OR b < nxt) AS gap_after
            FROM ({_versions(ctx, "pod_ip_lease", "ip", "namespace, pod, node, network")}))
        WHERE b IS NULL OR greatest(a, assumeNotNull(b)) > {{ws:DateTime64(3, 'UTC')}}
    ),
    pv AS (  -- per pod, its versions sorted by start: (start, end, job, a boundary of its own
             -- at its end: no next version begins there)
        SELECT namespace, pod, arraySort(groupArray((pa, pb, job, gap))) AS v FROM (
            SELECT namespace, pod, valid_from AS pa, valid_to AS pb, job,
                   pb IS NOT NULL AND (nxt IS NULL OR pb < nxt) AS gap
            FROM ({_versions(ctx, "pod", "namespace, pod", "job")}))
        GROUP BY namespace, pod
    ),
    owned AS (  -- a lease's segments: its start, and each start or end of a version of its pod
                -- strictly inside it (distinct by construction), each with the job then
        SELECT l.ip AS ip, l.namespace AS namespace, l.pod AS pod, l.node AS node,
               {_rail("l.network")} AS rail,
               arrayJoin(arrayConcat(
                   if(l.b IS NULL OR l.b > l.a, [l.a], []),
                   arrayFilter(x -> x > l.a AND (l.b IS NULL OR x < l.b),
                               arrayFlatten(arrayMap(x -> if(x.4, [x.1, assumeNotNull(x.2)], [x.1]), p.v))))) AS s,
               arrayCount(x -> x.1 <= s, p.v) AS k,  -- the version holding at s: the last begun
               if(k = 0 OR NOT (p.v[k].2 IS NULL OR s < p.v[k].2), '', p.v[k].3) AS job
        FROM lease AS l LEFT JOIN pv AS p ON l.namespace = p.namespace AND l.pod = p.pod
    ),
    segment AS (
        SELECT o.ip AS ip, o.s AS s, o.namespace AS namespace, o.pod AS pod, o.node AS node,
               o.job AS job, o.rail + 1 AS rail1, n.su AS su, n.idc AS idc, n.nidx AS nidx,
               r.nic AS nic, r.leaf_port AS leaf_port
        FROM owned AS o
        LEFT JOIN node_info AS n ON o.node = n.node
        LEFT JOIN nic_info AS r ON o.node = r.node AND o.rail = r.rail
        UNION ALL  -- a lease that ended with no successor yet: its IP is nobody's from then on
        SELECT ip, if(b > a, assumeNotNull(b), a) AS s, '', '', '', '', toInt64(0), '', '',
               toUInt32(0), '', ''
        FROM lease WHERE gap_after
    )"""


# Node facts (SU, IDC, HyperNode ancestors) arrive as one string parameter (array parameters
# of 2,048 nodes' facts cost 0.1 s to parse, per use); NIC facts are read in the same query.
# Both are joined to the segments (a few per lease), not to the flows.
def _lca(depth: int) -> str:
    """The lowest common HyperNode of the two ends' nodes (`AN[k]`: every node's k-th ancestor,
    lowest tier first, 0 for none; `s_node`/`d_node`: the ends' node indexes, 0 for none): the
    first of the source's that the destination also has, 0 for none. Unrolled over the tree's
    depth on scalar ids read from per-node arrays (a few thousand entries: cache-resident): a
    lambda (arrayFirst(h -> has(dst, h), src)) copies dst once per element and cost a third
    of the whole attribution."""
    if depth <= 0:
        return "toUInt32(0)"
    arms = []
    for k in range(1, depth + 1):
        src = f"AN[{k}][s_node]"
        has = " OR ".join(f"{src} = AN[{j}][d_node]" for j in range(1, depth + 1))
        arms.append(f"{src} != 0 AND ({has}), {src}")
    return f"multiIf({', '.join(arms)}, toUInt32(0))"


def _segment_of(end: str, ip: str) -> str:
    """The columns that find a flow end's segment (`{end}_id`, 1-based into the sorted segment
    arrays, 0 for none): the IP's first segment and count (`IPV`: first << 32 | count) by a
    hash lookup on the IP, then how many of its starts are <= t (a slice of a few)."""
    return f"""transform({ip}, IPK, IPV, toUInt64(0)) AS {end}_v,
             toUInt32(bitShiftRight({end}_v, 32)) AS {end}_f,
             arrayCount(x -> x <= t, arraySlice(SS, {end}_f, bitAnd({end}_v, 4294967295))) AS {end}_c,
             if({end}_c = 0, toUInt32(0), {end}_f + {end}_c - 1) AS {end}_id"""


def _firsts(ips: str) -> str:
    """Per element of a sorted array: whether it is the first of its value (no lambda captures
    the array: a captured column is copied once per element)."""
    prev = f"arraySlice(arrayPushFront({ips}, ''), 1, length({ips}))"  # the previous element
    return f"arrayMap((x, y, i) -> i = 1 OR x != y, {ips}, {prev}, arrayEnumerate({ips}))"


# Each string attribute of a flow end is read through a small integer key turned LowCardinality
# (`toLowCardinality(key)`): a function of a LowCardinality argument and constants runs once per
# distinct key of a block and returns a LowCardinality column sharing the key's positions, so
# the table's LowCardinality columns get their dictionaries without hashing every row's string
# (16 String columns converted on insert cost 0.6-0.8 s per 1 M flows; 7 string columns from
# three keys 0.15 s instead of 0.37 s, measured alone). The keys number the distinct values of
# (namespace, job), (node, SU, IDC) and (NIC, leaf port) over the segments in the order they
# first appear in `R` (arrayEnumerateDense, whose numbering is arrayDistinct's order: one hash
# pass each; dense_rank windows sorting the segments three times cost 0.10-0.15 s more at
# 150,000 segments); the pod (a plain String column, nearly one value per segment) is read by
# segment id, the lowest common HyperNode's name through its id made LowCardinality the same way.
_KEYS = {  # key -> the string attributes it carries
    "nj": ("namespace", "job"),
    "nk": ("node", "su", "idc"),
    "ck": ("nic", "leaf_port"),
}
# a segment's fields in the tuples of `R` (sorted by IP, then start), 1-based
_FIELDS = ("ip", "s", "pod", "rail1", "nidx", *(c for cols in _KEYS.values() for c in cols))
_AT = {f: i for i, f in enumerate(_FIELDS, 1)}


def _values(key: str) -> str:
    """Per segment of `R`, the tuple of `key`'s attributes."""
    return f"arrayMap(x -> ({', '.join(f'x.{_AT[c]}' for c in _KEYS[key])}), R)"


def _keyed(key: str) -> str:
    """`K_{key}`: per number of the key (1-based, see _KEYS), its attributes, one array per
    attribute."""
    arrays = ", ".join(f"arrayMap(y -> y.{i}, u)" for i in range(1, len(_KEYS[key]) + 1))
    return f"""(SELECT [{arrays}] FROM (SELECT arrayDistinct({_values(key)}) AS u)) AS K_{key}"""


def attribute_sql(ctx: Context, depth: int = 0) -> str:
    """INSERT ... SELECT of the window's attributed flows; `depth`: the most HyperNode
    ancestors any node has. In cluster mode the INSERT into the Distributed table writes to its
    shards before it returns (the rollup is read from the flows right after)."""
    settings = "SETTINGS distributed_foreground_insert = 1" if ctx.store.cluster else ""
    fields = ", ".join("toUnixTimestamp64Milli(s)" if f == "s" else f for f in _FIELDS)
    ancestors = ", ".join(
        f"arrayMap(l -> toUInt32OrZero(splitByChar('\\x1f', l)[{3 + k}]), NODES)"
        for k in range(1, depth + 1)
    )
    numeric = ("s", "rail1", "nidx", *_KEYS)  # NUM[i]: per segment, the i-th of these
    num = ", ".join(
        f"arrayMap(x -> toUInt64(x), arrayEnumerateDense({_values(c)}))"
        if c in _KEYS
        else f"arrayMap(x -> toUInt64(x.{_AT[c]}), R)"
        for c in numeric
    )
    at = {c: i for i, c in enumerate(numeric, 1)}
    keys = ", ".join(
        f"toLowCardinality(toUInt32(NUM[{at[key]}][{p}_id])) AS {p}_{key}"
        for p in "sd"
        for key in _KEYS
    )
    out = {
        "ts": "ts", "cluster": "cluster", "switch": "switch", "out_port": "out_port",
        "src_ip": "src_ip", "dst_ip": "dst_ip", "dst_port": "dst_port", "dest_qp": "dest_qp",
        "rdma": "dst_port = 4791", "bytes": "bytes",
    }  # fmt: skip
    for side in ("src", "dst"):
        p = side[0]
        out[f"{side}_pod"] = f"POD[{p}_id]"
        out[f"{side}_rail"] = f"toInt64(NUM[{at['rail1']}][{p}_id]) - 1"
        for key, cols in _KEYS.items():
            for i, c in enumerate(cols, 1):
                out[f"{side}_{c}"] = f"K_{key}[{i}][{p}_{key}]"
    out["lca_hypernode"] = (
        f"arrayElement({{hn:Array(String)}}, toLowCardinality({_lca(depth)}) AS lca)"
    )
    out["lca_tier"] = "arrayElement({hn_tier:Array(UInt8)}, lca)"
    assert sorted(out) == sorted(ATTRIBUTED_FLOW.columns), sorted(
        set(out) ^ set(ATTRIBUTED_FLOW.columns)
    )
    select = ",\n       ".join(f"{e} AS {c}" if e != c else c for c, e in out.items())
    return f"""
INSERT INTO {ctx.table("attributed_flow")} ({", ".join(out)})
WITH splitByChar('\\x1e', {{nodes:String}}) AS NODES,  -- per node: node US su US idc US ancestor...
node_info AS (  -- nidx: the node's position in NODES
    SELECT f[1] AS node, f[2] AS su, f[3] AS idc, toUInt32(i) AS nidx
    FROM (SELECT arrayJoin(arrayEnumerate(NODES)) AS i, splitByChar('\\x1f', NODES[i]) AS f)
    WHERE length(f) >= 3
),
nic_info AS (
    SELECT node, toInt64(rail) AS rail, nic, port AS leaf_port FROM ({nic_sql(ctx)})
),
{_segments(ctx)},
-- every segment, sorted by (IP, start): position = segment id. Each array below is computed
-- once, in a subquery of its own: a lambda over a constant is not folded into a constant and
-- would run again for every block of flows read (8 string arrays of 150,000: 1 s per 1 M flows)
(SELECT arraySort(groupArray(({fields}))) FROM segment) AS R,
(SELECT arrayMap(x -> x.{_AT["pod"]}, R)) AS POD,
(SELECT [{num}]) AS NUM,
NUM[1] AS SS,
{_keyed("nj")},
{_keyed("nk")},
{_keyed("ck")},
(SELECT [{ancestors}]) AS AN,  -- per node: its k-th HyperNode ancestor's id (1-based into hn), 0 none
-- per IP: its key, and its first segment << 32 | how many it has
(SELECT arrayFilter((x, f) -> f, ips, {_firsts("ips")}) FROM (SELECT arrayMap(x -> x.1, R) AS ips)) AS IPK,
(SELECT arrayMap((x, y) -> bitOr(bitShiftLeft(toUInt64(x), 32), toUInt64(y - x)),
                 fst, arraySlice(arrayPushBack(arrayPopFront(fst), length(ips) + 1), 1, length(fst)))
 FROM (SELECT ips, arrayFilter((i, f) -> f, arrayEnumerate(ips), {_firsts("ips")}) AS fst
       FROM (SELECT arrayMap(x -> x.1, R) AS ips))) AS IPV
SELECT {select}
FROM (SELECT ts, cluster, switch, out_port, src_ip, dst_ip, dst_port, dest_qp, bytes,
             toUnixTimestamp64Milli(ts) AS t, {_segment_of("s", "src_ip")},
             {_segment_of("d", "dst_ip")},
             toUInt32(NUM[{at["nidx"]}][s_id]) AS s_node, toUInt32(NUM[{at["nidx"]}][d_id]) AS d_node,
             {keys}
      FROM {ctx.table("flow_sample")} WHERE {ctx.where("flow_sample")})
{settings}"""


def _node_facts(ctx: Context) -> tuple[dict[str, str], dict[str, str]]:
    rows = ctx.rows(f"""
        SELECT node, argMax(su, valid_from) AS su, argMax(idc, valid_from) AS idc FROM {ctx.table("node", final=True)}
        WHERE cluster = {{cluster:String}} AND {time_range("node", None, "we")}
          AND (valid_to IS NULL OR valid_to > {{ws:DateTime64(3, 'UTC')}})
        GROUP BY node""")
    return {r["node"]: r["su"] for r in rows}, {r["node"]: r["idc"] for r in rows}


def _node_params(su: dict[str, str], idc: dict[str, str], anc: Ancestry) -> dict[str, Any]:
    """attribute_sql's parameters: `hn`/`hn_tier`, every HyperNode and its tier (0 unknown);
    `nodes`, per node its SU, IDC and HyperNode ancestors (lowest tier first) as 1-based
    indexes into `hn`, fields split by US (0x1f), nodes by RS (0x1e): one string, not array
    parameters (those of 2,048 nodes cost 0.1 s to parse). Kubernetes object names never hold
    control characters."""
    hns = sorted(set(anc.tiers) | {h for hs in anc.ancestors.values() for h in hs})
    ids = {h: str(i) for i, h in enumerate(hns, 1)}
    nodes = sorted(set(su) | set(idc) | set(anc.ancestors))
    lines = "\x1e".join(
        "\x1f".join([n, su.get(n, ""), idc.get(n, ""), *(ids[h] for h in anc.ancestors.get(n, []))])
        for n in nodes
    )
    return {"nodes": lines, "hn": hns, "hn_tier": [anc.tiers.get(h, 0) for h in hns]}


def nic_sql(ctx: Context) -> str:
    """(node, rail) -> RDMA device and the leaf port LLDP shows it cabled to, as of the window's
    end. Rails come from the node exporter's GPU<->NIC affinity (rail = NIC index)."""
    return f"""
        SELECT a.node AS node, assumeNotNull(a.g_rail) AS rail, a.g_nic AS nic, if(empty(l.remote_device), '', concat(l.remote_device, ':', l.remote_port)) AS port
        FROM (SELECT node, argMax(rail, ts) AS g_rail, argMax(nic, ts) AS g_nic, argMax(netdev, ts) AS g_netdev
              FROM {ctx.table("gpu_nic_affinity")}
              WHERE cluster = {{cluster:String}} AND {time_range("gpu_nic_affinity", None, "we")}
              GROUP BY node, gpu HAVING g_nic != '' AND g_rail IS NOT NULL) AS a
        LEFT JOIN ({latest_lldp_sql(ctx.store, lo=None, hi="we")}) AS l
          ON l.local_device = a.node AND l.local_port = a.g_netdev
        GROUP BY node, rail, nic, port"""


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
    from telemetry.store.migrations import MIGRATION_12_ROLLUPS
    from telemetry.store.schema import quote

    (r,) = [r for r in MIGRATION_12_ROLLUPS if r.source == ATTRIBUTED_FLOW.table]
    name = r.table.name
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
        first = "toStartOfInterval({ws:DateTime64(3, 'UTC')}, INTERVAL 10 SECOND)"
        ctx.command(
            f"DELETE FROM {db}.{quote(name)} WHERE cluster = {{cluster:String}} "
            f"AND bucket >= {first} AND bucket < {{we:DateTime64(3, 'UTC')}}"
        )
        source = (
            f"(SELECT * FROM {flows} WHERE cluster = {{cluster:String}} "
            f"AND ts >= {first} AND ts < {{we:DateTime64(3, 'UTC')}} + INTERVAL 10 SECOND "
            "AND toStartOfInterval(ts, INTERVAL 10 SECOND) < {we:DateTime64(3, 'UTC')})"
        )
    # the rows are grouped already: no insert-time merge of the SummingMergeTree (readers sum)
    return (
        f"INSERT INTO {db}.{quote(name)}\n"
        + r.select.strip().format(source=source)
        + "\nSETTINGS optimize_on_insert = 0"
    )


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
    rollup = _rollup_insert(ctx, rerun=bool(had["n"]))
    anc = anc if anc is not None else ancestry(ctx)
    su, idc = facts if facts is not None else _node_facts(ctx)
    depth = max((len(v) for v in anc.ancestors.values()), default=0)
    ctx.command(attribute_sql(ctx, depth), _node_params(su, idc, anc))
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
    return r
