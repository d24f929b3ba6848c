"""The lease index: every pod IP lease cut into segments (a stretch of one IP's lease during which
its pod's job stays the same, or a stretch after a lease ended with no successor, when the IP is
nobody's), each carrying the pod, tenant, job, node, rail, NIC, leaf port, SU and IDC, as the
arrays `attribute_sql` looks flow ends up in (by IP, then time). Built inside ClickHouse from the
inventory and kept in `attribution_index` between evaluation ticks: a tick rebuilds it only when
what it is built from changed (`fingerprint_sql`: the leases and pod versions begun before the
window's end, the NICs and leaf ports, the node facts, and the build query itself) or the window
starts before the leases it kept (`since`).
"""

from __future__ import annotations

import hashlib
import logging
from typing import TYPE_CHECKING, Any

from telemetry.records import KINDS
from telemetry.store import first_line, time_range
from telemetry.store.schema import quote
from telemetry.topology.store_io import latest_lldp_sql

if TYPE_CHECKING:
    from telemetry.correlate.registry import Context

log = logging.getLogger(__name__)

INDEX = "attribution_index"
# Per segment, its numbers: field -> (column of attribution_index, the name attribute_sql reads
# it by, its type). s: start in ms; rail1: rail + 1, 0 unknown; nidx: the node's position in
# the `nodes` parameter; code: the node's HyperNode path code (attribution.PathCodes; 0 none,
# or the chains compared tier by tier instead); then the three keys of KEYS (below).
NUMERIC = {
    "s": ("starts", "S", "UInt64"),
    "rail1": ("rails", "RL", "UInt32"),
    "nidx": ("node_index", "NI", "UInt32"),
    "code": ("path_codes", "PC", "UInt64"),
    "nj": ("namespace_job_keys", "NJ", "UInt32"),
    "nk": ("node_keys", "NK", "UInt32"),
    "ck": ("nic_keys", "CK", "UInt32"),
}
# the index's arrays (columns of attribution_index) and the names attribute_sql reads them by
ARRAYS = {
    "pods": "POD",
    **{col: name for col, name, _ in NUMERIC.values()},
    "ips": "IPK",
    "ip_segments": "IPV",
}
# the string attributes of KEYS' keys (columns of attribution_index, one per key, each an array
# per attribute), read as one constant `K`: one scalar subquery instead of three (each costs
# 2-3 ms however small its value)
KEYED = {"nj": "namespace_job", "nk": "node_su_idc", "ck": "nic_port"}


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
# that can matter to it, not the whole history. Fourth version (below, KEYS): the string
# attributes through LowCardinality keys, 2.75-2.97 s CPU per 1 M flows against 3.43-3.58 s
# for the third in the same session (docs/correlation.md). Where the INSERT's 2.3-3.5 s per
# 1 M flows go (stop 27, bench data): the scalar subqueries (segment arrays) 0.66 s; the whole
# SELECT into Null 1.13 s wall on two threads; the INSERT into a table without
# job_port_intervals_mv 1.4-2.0 s, its pipeline parallel (CPU above wall); with the view
# 2.5-3.5 s, CPU equal to wall: the view's GROUP BY over the same rows costs 0.15-0.18 s on
# its own, but a dependent view leaves the insert serial. So since migration 13 the engine
# writes that rollup by an INSERT ... SELECT of its own after this one (_rollup_insert).
# Fifth version (this module, stop 32): the arrays are kept between ticks in attribution_index
# and rebuilt only when their inputs change (their fingerprint): building them took 0.4-0.5 s
# of one thread per tick at 100,000 leases, before any flow was read; reading them back takes
# 0.03-0.05 s. Sixth (migration 16): each per-segment number in an array of its own, in the
# narrowest type, with the node's path code among them (attribute_sql no longer takes the node
# facts); each block of flows copies every constant array it indexes once per use, and a scalar
# subquery costs 2-3 ms however small its value, so the flattened 7 MB array of every number
# cost 10-15 ms per block, and the query's fixed cost (13 flows) fell from 80 to 65 ms.
def _segments(ctx: Context) -> str:
    """One row per (IP, start): the attribution of a flow sent at t from/to that IP is the
    segment with the latest start <= t, or nothing before the IP's first lease. Leases that
    ended (or were superseded) by the window's start are left out: at any time in the window
    a later segment of the same IP, or an end that leaves it nobody's, comes after them."""
    return f"""
    lease AS (
        SELECT ip, a, namespace, pod, node, network, b, gap_after FROM (
            SELECT ip, valid_from AS a, namespace, pod, node, network,
                   least(ifNull(valid_to, nxt), ifNull(nxt, valid_to)) AS b,  -- null: neither
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
               n.code AS code, r.nic AS nic, r.leaf_port AS leaf_port
        FROM owned AS o
        LEFT JOIN node_info AS n ON o.node = n.node
        LEFT JOIN nic_info AS r ON o.node = r.node AND o.rail = r.rail
        UNION ALL  -- a lease that ended with no successor yet: its IP is nobody's from then on
        SELECT ip, if(b > a, assumeNotNull(b), a) AS s, '', '', '', '', toInt64(0), '', '',
               toUInt32(0), toUInt64(0), '', ''
        FROM lease WHERE gap_after
    )"""


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
KEYS = {  # key -> the string attributes it carries
    "nj": ("namespace", "job"),
    "nk": ("node", "su", "idc"),
    "ck": ("nic", "leaf_port"),
}
# a segment's fields in the tuples of `R` (sorted by IP, then start), 1-based
_FIELDS = ("ip", "s", "pod", "rail1", "nidx", "code", *(c for cols in KEYS.values() for c in cols))
_AT = {f: i for i, f in enumerate(_FIELDS, 1)}


def _values(key: str) -> str:
    """Per segment of `R`, the tuple of `key`'s attributes."""
    return f"arrayMap(x -> ({', '.join(f'x.{_AT[c]}' for c in KEYS[key])}), R)"


def nic_sql(ctx: Context) -> str:
    """(node, rail) -> RDMA device and the leaf port LLDP shows it cabled to, as of the window's
    end. Rails come from the node exporter's GPU<->NIC affinity (rail = NIC index).

    The leaf port is named as the switch names it where the switch's own LLDP saw the NIC (one
    neighbour record of that switch with the node and netdev as its remote end): a SONiC leaf
    advertises its ports by vendor alias (lldpmgrd: `portidsubtype local <alias>`), so the
    host's view says `leaf01:etp1` where the leaf's counters say `Ethernet0`. Else the host's
    view (lldpcli on the node), else none."""
    lldp = latest_lldp_sql(ctx.store, lo=None, hi="we")
    return f"""
        SELECT a.node AS node, assumeNotNull(a.g_rail) AS rail, a.g_nic AS nic,
               multiIf(s.n = 1, concat(s.switch, ':', s.switch_port),
                       empty(l.remote_device), '', concat(l.remote_device, ':', l.remote_port)) AS port
        FROM (SELECT node, argMax(rail, ts) AS g_rail, argMax(nic, ts) AS g_nic, argMax(netdev, ts) AS g_netdev
              FROM {ctx.table("gpu_nic_affinity")}
              WHERE cluster = {{cluster:String}} AND {time_range("gpu_nic_affinity", None, "we")}
              GROUP BY node, gpu HAVING g_nic != '' AND g_rail IS NOT NULL) AS a
        LEFT JOIN ({lldp}) AS l
          ON l.local_device = a.node AND l.local_port = a.g_netdev
        LEFT JOIN (SELECT remote_device, remote_port, any(local_device) AS switch,
                          any(local_port) AS switch_port, count() AS n
                   FROM ({lldp}) WHERE remote_device != '' GROUP BY remote_device, remote_port) AS s
          ON s.remote_device = a.node AND s.remote_port = a.g_netdev
        GROUP BY node, rail, nic, port"""


def num(field: str, seg: str) -> str:
    """SQL: `field` (of NUMERIC) of segment `seg` (1-based; 0 = none, which reads 0). Each field
    is an array of its own, in the narrowest type that holds it: every block of flows copies
    each constant array it indexes, once per use (a dozen uses), so one flattened UInt64 array
    of every field (7 MB at 100,000 leases) cost 10-15 ms per block, the separate arrays about a
    tenth of that (bench/correlate.py's 1 M flows: the INSERT 0.40 s against 0.43 s; one over
    13 flows 76 ms against 81 ms; the same rows)."""
    return f"{NUMERIC[field][1]}[{seg}]"


def _index(ctx: Context) -> str:
    """attribution_index in SQL (the Distributed table in cluster mode)."""
    return f"{quote(ctx.store.database)}.{quote(INDEX)}"


def build_sql(ctx: Context, codes: bool) -> str:
    """INSERT ... SELECT of a new index row for the window's cluster: the segments sorted by
    (IP, start) with their attributes as arrays (see ARRAYS, KEYED). Parameters: the window, the
    cluster, `nodes` (attribution._node_params: with `codes`, each node's path code is its
    fourth field) and `fp` (the fingerprint it is filed under)."""
    settings = "SETTINGS distributed_foreground_insert = 1" if ctx.store.cluster else ""
    fields = ", ".join("toUnixTimestamp64Milli(s)" if f == "s" else f for f in _FIELDS)
    # a rail past UInt32 (a network named rail99999999999) is unknown, never a wrapped number
    value = {"rail1": f"if(x.{_AT['rail1']} > 4294967295, 0, x.{_AT['rail1']})"}
    num = ", ".join(
        f"arrayMap(x -> to{t}(x), arrayEnumerateDense({_values(c)}))"
        if c in KEYS
        else f"arrayMap(x -> to{t}({value.get(c, f'x.{_AT[c]}')}), R)"
        for c, (_, _, t) in NUMERIC.items()
    )
    distinct = ",\n".join(f"arrayDistinct({_values(k)}) AS U_{k}" for k in KEYS)
    per_key = ", ".join(
        "[" + ", ".join(f"arrayMap(y -> y.{i}, U_{k})" for i in range(1, len(cols) + 1)) + "]"
        for k, cols in KEYS.items()
    )
    return f"""
INSERT INTO {_index(ctx)} (cluster, built_at, fingerprint, since, segments, {", ".join(ARRAYS)},
    {", ".join(KEYED.values())})
WITH splitByChar('\\x1e', {{nodes:String}}) AS NODES,  -- per node: node US su US idc US ancestor...
node_info AS (  -- nidx: the node's position in NODES
    SELECT f[1] AS node, f[2] AS su, f[3] AS idc, toUInt32(i) AS nidx,
           {"toUInt64OrZero(f[4])" if codes else "toUInt64(0)"} AS code
    FROM (SELECT arrayJoin(arrayEnumerate(NODES)) AS i, splitByChar('\\x1f', NODES[i]) AS f)
    WHERE length(f) >= 3
),
nic_info AS (
    SELECT node, toInt64(rail) AS rail, nic, port AS leaf_port FROM ({nic_sql(ctx)})
),
{_segments(ctx)},
-- every segment, sorted by (IP, start): position = segment id
(SELECT arraySort(groupArray(({fields}))) FROM segment) AS R,
{distinct},
arrayMap(x -> x.1, R) AS all_ips,
{_firsts("all_ips")} AS first,
arrayFilter((i, f) -> f, arrayEnumerate(all_ips), first) AS fst
SELECT {{cluster:String}}, now64(3), {{fp:UInt64}}, {{ws:DateTime64(3, 'UTC')}}, length(R),
       arrayMap(x -> x.{_AT["pod"]}, R),
       {num},
       arrayFilter((x, f) -> f, all_ips, first),
       -- per IP: its first segment << 32 | how many it has
       arrayMap((x, y) -> bitOr(bitShiftLeft(toUInt64(x), 32), toUInt64(y - x)),
                fst, arraySlice(arrayPushBack(arrayPopFront(fst), length(all_ips) + 1), 1, length(fst))),
       {per_key}
{settings}"""


def fingerprint_sql(ctx: Context) -> str:
    """One row: `inputs`, a hash of the rows build_sql reads (the lease and pod versions begun
    before the window's end as FINAL shows them, and the NICs with their leaf ports: their
    content, so a merge or an hourly re-report of the same affinity changes nothing), and
    `have`, the fingerprints of the cluster's stored index rows that serve this window."""
    lease = "ip, valid_from, valid_to, namespace, pod, node, network"
    pod = "namespace, pod, valid_from, valid_to, job"
    return f"""
SELECT cityHash64(
    (SELECT (sum(cityHash64({lease})), count()) FROM {ctx.table("pod_ip_lease", final=True)}
     WHERE cluster = {{cluster:String}} AND {time_range("pod_ip_lease", None, "we")}),
    (SELECT (sum(cityHash64({pod})), count()) FROM {ctx.table("pod", final=True)}
     WHERE cluster = {{cluster:String}} AND {time_range("pod", None, "we")}),
    (SELECT (sum(cityHash64(node, rail, nic, port)), count()) FROM ({nic_sql(ctx)}))) AS inputs,
    (SELECT groupArray(fingerprint) FROM {_index(ctx)}
     WHERE cluster = {{cluster:String}} AND since <= {{ws:DateTime64(3, 'UTC')}}) AS have"""


def fingerprint(inputs: int, nodes: str, build: str) -> int:
    """The index's fingerprint: its inputs' hash, the node facts (`nodes` parameter) and the
    build query's text (a new railscope that builds it differently never reads an old one)."""
    h = hashlib.blake2b(digest_size=8)
    for part in (str(inputs), nodes, build):
        h.update(part.encode())
        h.update(b"\x00")
    return int.from_bytes(h.digest(), "big")


# What the index is built from, and each one's time column: build_sql reads the rows begun
# before the window's end (`time_range(kind, None, "we")`).
INPUTS = ("pod_ip_lease", "pod", "gpu_nic_affinity", "lldp_link")
MEMO = "lease_index"  # its entry in the engine's memo (Context.extra["memo"], kept across ticks)


def unchanged_sql(ctx: Context) -> str:
    """One row: `parts`, a hash of the active parts of the tables the index is built from (any
    insert, merge, mutation or truncation names a new part), and `moved`, how many of their
    rows begin in [{lo}, {hi}) (those enter or leave the index's inputs when the window's end
    moves across them). A few milliseconds, where fingerprint_sql reads every lease and pod
    version (0.04-0.07 s at 100,000 leases)."""
    tables = ", ".join(f"'{KINDS[k].table}'" for k in INPUTS)
    moved = " + ".join(
        f"(SELECT count() FROM {ctx.table(k)} WHERE cluster = {{cluster:String}} AND "
        f"{time_range(k, 'lo', 'hi')})"
        for k in INPUTS
    )
    return f"""
SELECT (SELECT cityHash64(groupArray(p)) FROM (
            SELECT concat(table, '/', name) AS p FROM system.parts
            WHERE database = {{db:String}} AND table IN ({tables}) AND active ORDER BY p)) AS parts,
       {moved} AS moved"""


def ensure(ctx: Context, params: dict[str, Any]) -> tuple[int, bool]:
    """(the fingerprint of an index row that serves the window, whether this call built it):
    built first when no stored row does. `params`: attribution._node_params.

    Between ticks of the engine (its memo in `ctx.extra`) the fingerprint is taken again only
    when something it covers may have changed: the parts of the input tables, a row of theirs
    that began between the previous tick's window end and this one's, the node facts or the
    build query; or the window starts before the previous one. Otherwise the previous tick's
    fingerprint stands, without reading the inventory. A row gone since (replaced by a build
    for another window, then merged away) fails the attribution's read (read_sql), and
    attribute_window forgets the memo: the next tick takes the fingerprint again. In cluster
    mode (the parts lie on the shards) it is taken every tick."""
    build = build_sql(ctx, "lca_codes" in params)
    memo = None if ctx.store.cluster else ctx.extra.get("memo")
    inputs = hashlib.blake2b(f"{params['nodes']}\x00{build}".encode(), digest_size=8).digest()
    parts = None
    if memo is not None:
        prev = memo.get(MEMO)
        lo, hi = sorted((prev["we"], ctx.window.end)) if prev else (ctx.window.end,) * 2
        try:
            (now,) = ctx.rows(unchanged_sql(ctx), {"db": ctx.store.database, "lo": lo, "hi": hi})
        except Exception as e:  # system.parts not readable: fingerprint every tick, as before
            if not memo.get(MEMO + ":unreadable"):
                log.warning("lease index: %s; its fingerprint is taken every tick", first_line(e))
            memo[MEMO + ":unreadable"] = True
            memo.pop(MEMO, None)
            memo = prev = now = None
        parts = now["parts"] if now else None
        if (
            now
            and prev is not None
            and prev["parts"] == parts
            and prev["inputs"] == inputs
            and not now["moved"]
            and prev["since"] <= ctx.window.start
        ):
            prev["we"] = ctx.window.end
            return int(prev["fp"]), False
    (row,) = ctx.rows(fingerprint_sql(ctx))
    fp = fingerprint(int(row["inputs"]), params["nodes"], build)
    built = fp not in row["have"]
    if built:
        ctx.command(build, {**params, "fp": fp})
        log.debug(
            "attribution index rebuilt for %s (fingerprint %x)", ctx.window.start.isoformat(), fp
        )
    if memo is not None:  # the parts as they were before the fingerprint was taken
        # the row read serves this window (its since <= ws), so any window starting later
        memo[MEMO] = {
            "parts": parts,
            "inputs": inputs,
            "we": ctx.window.end,
            "since": ctx.window.start,
            "fp": fp,
        }
    return fp, built


def forget(ctx: Context) -> None:
    """Drop the memo's fingerprint (the index row it names could not be read)."""
    memo = ctx.extra.get("memo")
    if memo is not None:
        memo.pop(MEMO, None)


def read_sql(ctx: Context) -> str:
    """The WITH items that bind ARRAYS' names to the index row filed under `{fp:UInt64}`. Each
    is a scalar subquery of its own (read once per query, a constant), and each fails the query
    when the row is gone (replaced by another window's build, then merged away, between
    `ensure` and this read) instead of looking every flow up in nothing."""
    where = (
        f"FROM {_index(ctx)} WHERE cluster = {{cluster:String}} "
        "AND fingerprint = {fp:UInt64} AND since <= {ws:DateTime64(3, 'UTC')}"
    )
    gone = "'the attribution index row was replaced by another build: retried next tick'"
    parts = ", ".join(f"argMax({col}, built_at)" for col in KEYED.values())
    return ",\n".join(
        f"(SELECT if(throwIf(count() = 0, {gone}) = 0, {value}, []) {where}) AS {name}"
        for value, name in [
            *((f"argMax({col}, built_at)", name) for col, name in ARRAYS.items()),
            (f"arrayConcat({parts})", "K"),
        ]
    )


def keyed(key: str, attribute: str, number: str) -> str:
    """SQL: `attribute` (of KEYS[key]) of key number `number` (1-based; 0 reads '') in `K`."""
    at = [(k, c) for k, cols in KEYS.items() for c in cols].index((key, attribute)) + 1
    return f"K[{at}][{number}]"
