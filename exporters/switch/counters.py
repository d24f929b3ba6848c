"""Pure parsing of SONiC COUNTERS_DB / APPL_DB hashes into switch records (no I/O).

Reads the name/type/index maps, the COUNTERS:/RATES:/USER_WATERMARKS: hashes and APPL_DB
PORT_TABLE / LLDP_ENTRY_TABLE, all handed in as dicts; the mapping of SAI counters to record
fields is the checked-in `sonic_counters.csv`. It never invents a number: a missing or
unparseable counter leaves the field null and is reported through `problems.add(reason, subject)`
(the source's `telemetry.problems.Problems`, see REASONS).
"""

from __future__ import annotations

import csv
import itertools
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from operator import itemgetter, methodcaller
from pathlib import Path
from typing import Any, Protocol

import numpy as np

CSV_PATH = Path(__file__).with_name("sonic_counters.csv")

PORT_NAME_MAP = "COUNTERS_PORT_NAME_MAP"
QUEUE_NAME_MAP = "COUNTERS_QUEUE_NAME_MAP"
QUEUE_TYPE_MAP = "COUNTERS_QUEUE_TYPE_MAP"
QUEUE_INDEX_MAP = "COUNTERS_QUEUE_INDEX_MAP"
PG_NAME_MAP = "COUNTERS_PG_NAME_MAP"
PG_INDEX_MAP = "COUNTERS_PG_INDEX_MAP"
MAPS = (PORT_NAME_MAP, QUEUE_NAME_MAP, QUEUE_TYPE_MAP, QUEUE_INDEX_MAP, PG_NAME_MAP, PG_INDEX_MAP)

QUEUE_TYPES = {
    "SAI_QUEUE_TYPE_UNICAST": "unicast",
    "SAI_QUEUE_TYPE_MULTICAST": "multicast",
    "SAI_QUEUE_TYPE_ALL": "all",
    "SAI_QUEUE_TYPE_UNICAST_VOQ": "voq",
}
PFC_WD_STATUS = {"stormed": 1, "operational": 0}


@dataclass(frozen=True)
class Mapping_:
    kind: str
    field: str
    # alternatives -> terms: take the first alternative whose terms are all present, then sum
    alternatives: tuple[tuple[str, ...], ...]
    type: str
    unit: str
    help: str
    scale: float | None = None  # the switch counts in another unit than the record field


# Which record kind each mapping kind fills (for the unit of its field).
RECORD_KINDS = {
    "port": "switch_port_sample",
    "priority": "switch_priority_sample",
    "queue": "switch_queue_sample",
    "pg": "switch_queue_sample",
}
PRIORITIES = range(8)
_SCALES = {("microseconds", "seconds"): 1e-6}


def _expand(expr: str) -> tuple[str, ...]:
    terms: list[str] = []
    for t in expr.split("+"):
        t = t.strip()
        m = re.search(r"\{(\d+)\.\.(\d+)\}", t)
        if m:
            for i in range(int(m.group(1)), int(m.group(2)) + 1):
                terms.append(t[: m.start()] + str(i) + t[m.end() :])
        else:
            terms.append(t)
    return tuple(terms)


@lru_cache(maxsize=4)
def load_mappings(path: Path = CSV_PATH) -> tuple[Mapping_, ...]:
    lines = [ln for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    from telemetry.records import KINDS

    out = []
    for row in csv.DictReader(lines):
        alts = tuple(_expand(a) for a in row["counters"].split("|"))
        field = KINDS[RECORD_KINDS[row["kind"]]].by_name[row["field"]]
        scale = _SCALES.get((row["unit"], field.unit))
        out.append(
            Mapping_(row["kind"], row["field"], alts, row["type"], row["unit"], row["help"], scale)
        )
    return tuple(out)


# What a parse can report; the switch source adds its own (switch_down, poll_failed).
REASONS = ("wrong_type", "bad_value", "missing_counters")


class Problems(Protocol):
    """Where parse problems go: `telemetry.problems.Problems` (or `.about(switch)`)."""

    def add(self, reason: str, subject: str = "", detail: str = "", n: int = 1) -> None: ...


class WrongType:
    """A key that holds something other than a hash (Redis WRONGTYPE / a non-object in a dump)."""

    def __init__(self, key: str, actual: str) -> None:
        self.key, self.actual = key, actual

    def __repr__(self) -> str:
        return f"WrongType({self.key!r}, {self.actual!r})"


Hash = dict[str, str]


def as_hash(key: str, value: Any, problems: Problems) -> Hash:
    """The hash, or {} after recording a wrong-type problem (never a guessed value)."""
    if isinstance(value, WrongType):
        problems.add("wrong_type", f"{key} ({value.actual})")
        return {}
    return value or {}


def _int(key: str, name: str, v: str, problems: Problems) -> int | None:
    try:
        n = int(v)
    except (TypeError, ValueError):
        try:
            f = float(v)  # some agents write 1.2e3 for integer counters
        except (TypeError, ValueError):
            problems.add("bad_value", f"{key} {name}={v!r}")
            return None
        if not f.is_integer():
            problems.add("bad_value", f"{key} {name}={v!r}")
            return None
        n = int(f)
    if n < 0 or n >= 1 << 64:
        problems.add("bad_value", f"{key} {name}={v!r}")
        return None
    return n


def _float(key: str, name: str, v: str | None, problems: Problems) -> float | None:
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        problems.add("bad_value", f"{key} {name}={v!r}")
        return None
    if f != f or f < 0 or f == float("inf"):
        problems.add("bad_value", f"{key} {name}={v!r}")
        return None
    return f


@lru_cache(maxsize=64)
def _for_kind(
    kind: str, priority: int | None = None, table: Path = CSV_PATH
) -> tuple[Mapping_, ...]:
    ms = tuple(m for m in load_mappings(table) if m.kind == kind)
    if priority is None:
        return ms
    p = str(priority)  # "priority" rows name their counters with {p}
    return tuple(
        Mapping_(
            m.kind,
            m.field,
            tuple(tuple(t.replace("{p}", p) for t in alt) for alt in m.alternatives),
            m.type,
            m.unit,
            m.help,
            m.scale,
        )
        for m in ms
    )


def fields_from(
    kind: str,
    key: str,
    h: Hash,
    problems: Problems,
    priority: int | None = None,
    table: Path = CSV_PATH,
) -> dict[str, Any]:
    """Record fields of `kind` from one merged counter hash, per sonic_counters.csv (or another
    mapping of the same shape: `table`)."""
    out: dict[str, Any] = {}
    for m in _for_kind(kind, priority, table):
        value = None
        for terms in m.alternatives:
            if len(terms) == 1:  # the common case, kept cheap: a poll reads ~10^5 of these
                raw = h.get(terms[0])
                if raw is None:
                    continue
                ok = len(raw) < 20 and raw.isascii() and raw.isdigit()  # < 2**64 for sure
                value = int(raw) if ok else _int(key, terms[0], raw, problems)
                break
            if all(t in h for t in terms):
                vals = [_int(key, t, h[t], problems) for t in terms]
                value = _sum_u64(vals)
                break
        out[m.field] = value if value is None or m.scale is None else value * m.scale
    return out


def _counter_column(
    term: str, raw: Sequence[Any], keys: Sequence[str], problems: Problems
) -> Column:
    """One counter of many hashes: a uint64 array when every hash has it as a decimal string
    within range (the common case: one int() per value, no Python list on the way to Arrow),
    else a list of ints and None (absent, or not a counter: named)."""
    types = set(map(type, raw))
    if types == _STR:
        try:
            return np.fromiter(map(int, raw), dtype=np.uint64, count=len(raw))
        except (ValueError, OverflowError):  # not a number, negative, or past 64 bits
            pass
    elif types <= _STR_OR_NONE:
        try:
            vals = [None if v is None else int(v) for v in raw]
            present = [v for v in vals if v is not None]
            if not present or (min(present) >= 0 and max(present) < 1 << 64):
                return vals
        except ValueError:
            pass
    # something in this column is not a plain counter string: value by value, each one named
    return [
        None if v is None else _int(keys[i], term, v if type(v) is str else json.dumps(v), problems)
        for i, v in enumerate(raw)
    ]


def full(c: Column) -> bool:
    """A column with a value on every row."""
    return isinstance(c, np.ndarray) or None not in c


_STR = frozenset((str,))
_STR_OR_NONE = frozenset((str, type(None)))
Column = list[Any] | np.ndarray[Any, Any]  # a list (None where no value) or an array (none)


def field_columns(
    kind: str,
    keys: Sequence[str],
    hashes: Sequence[Mapping[str, Any]],
    problems: Problems,
    priority: int | None = None,
    table: Path = CSV_PATH,
    cache: dict[str, tuple[Sequence[Any], Column]] | None = None,
) -> dict[str, Column]:
    """`fields_from` for many hashes at once, column by column (the same mapping and rules:
    first alternative whose terms are all present, sums only of present terms, unit scale).
    `keys` name each hash in problems; `cache` shares parsed counters between calls on the same
    hashes (the port kind's PFC sums and the priority rows read the same counters; a caller can
    fill it for several kinds at once with `read_counters`)."""
    cols = cache if cache is not None else {}
    n = len(hashes)
    read_counters(terms(kind, priority, table), keys, hashes, problems, cols)
    out: dict[str, Column] = {}
    for m in _for_kind(kind, priority, table):
        if len(m.alternatives) == 1 and len(m.alternatives[0]) == 1:
            vals = cols[m.alternatives[0][0]][1]
        else:
            vals = _alternatives([[cols[t] for t in alt] for alt in m.alternatives], n)
        if m.scale is not None:
            vals = (
                vals * m.scale
                if isinstance(vals, np.ndarray)
                else [None if v is None else v * m.scale for v in vals]
            )
        out[m.field] = vals
    return out


class _Present(Sequence[Any]):
    """The raw values of a counter that every hash has, read in one batch (`read_counters`):
    `_alternatives` only asks whether each is there, so they are not kept."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: Any) -> Any:
        return True  # present (not None)

    def __contains__(self, v: object) -> bool:
        return v is not None

    def count(self, v: Any) -> int:
        return 0 if v is None else self.n


def read_batch(
    names: Sequence[str], hashes: Sequence[Mapping[str, Any]]
) -> dict[str, tuple[Sequence[Any], Column]] | None:
    """Counters `names` of hashes alike (a switch model has the same counters on every port), in
    one batch: one itemgetter call per hash and one numpy conversion for all of them (int()'s
    rules and 0 <= n < 2**64, as `_counter_column`'s), each counter a uint64 array; counters on
    no hash are null. None where they cannot all be read so (a hash lacks one of the first's
    counters, a value is not a string or not a counter): `read_counters` then reads them column
    by column and names what is wrong. Names no problem itself, so it can run as samples arrive."""
    n = len(hashes)
    need = list(dict.fromkeys(names))
    if not n:
        return None
    have = [t for t in need if t in hashes[0]]
    out: dict[str, tuple[Sequence[Any], Column]] = {}
    if have:
        try:
            rows = list(map(itemgetter(*have), hashes))
        except KeyError:
            return None
        if len(have) == 1:  # itemgetter of one name gives the value, not a 1-tuple
            rows = [(r,) for r in rows]
        if set(map(type, itertools.chain.from_iterable(rows))) != _STR:
            return None
        try:  # counters x hashes, each counter's row contiguous (Arrow takes it as it is)
            arr = np.array(rows, dtype=np.uint64).T.copy()
        except (ValueError, OverflowError):
            return None
        present = _Present(n)
        out = {t: (present, arr[j]) for j, t in enumerate(have)}
    absent = [t for t in need if t not in out]
    if absent:  # counters the model lacks are on no hash: one check of each hash
        a = frozenset(absent)
        if not all(map(methodcaller("isdisjoint", a), map(methodcaller("keys"), hashes))):
            return None
        nones = (None,) * n
        out.update((t, (nones, [None] * n)) for t in absent)
    return out


def read_counters(
    names: Sequence[str],
    keys: Sequence[str],
    hashes: Sequence[Mapping[str, Any]],
    problems: Problems,
    cache: dict[str, tuple[Sequence[Any], Column]],
) -> None:
    """Counters `names` of every hash into `cache` (name -> (raw values, column)), those already
    there skipped: in one batch where `read_batch` can, else column by column through
    `_counter_column`, each bad value named."""
    need = [t for t in dict.fromkeys(names) if t not in cache]
    if not need:
        return
    if not hashes:
        cache.update((t, ((), [])) for t in need)
        return
    got = read_batch(need, hashes)
    if got is not None:
        cache.update(got)
        return
    for t, raw in zip(need, _raw_columns(hashes, need), strict=True):
        cache[t] = (raw, _counter_column(t, raw, keys, problems))


def _raw_columns(hashes: Sequence[Mapping[str, Any]], need: list[str]) -> list[Sequence[Any]]:
    """Each counter of `need` across the hashes (None where a hash lacks it). A switch model has
    the same counters on every port: those of the first hash are read from all of them with one
    C-level itemgetter call each, the rest one map each; a hash that lacks one of the first's
    counters sends the whole read to the general path."""
    first = hashes[0]
    have = [t for t in need if t in first]
    get = itemgetter(*have) if have else None
    try:
        if get is None:
            got: dict[str, Sequence[Any]] = {}
        elif len(have) == 1:  # itemgetter of one name gives the value, not a 1-tuple
            got = {have[0]: tuple(map(get, hashes))}
        else:
            got = dict(zip(have, zip(*map(get, hashes), strict=True), strict=True))
    except KeyError:
        rows = [tuple(map(h.get, need)) for h in hashes]
        return list(zip(*rows, strict=True))
    return [got[t] if t in got else tuple(map(methodcaller("get", t), hashes)) for t in need]


@lru_cache(maxsize=64)
def terms(kind: str, priority: int | None = None, table: Path = CSV_PATH) -> tuple[str, ...]:
    """Every counter name the mappings of `kind` read, once each."""
    return tuple(
        dict.fromkeys(
            t for m in _for_kind(kind, priority, table) for a in m.alternatives for t in a
        )
    )


def _alternatives(alts: list[list[tuple[Sequence[Any], Column]]], n: int) -> Column:
    """Per row: the sum of the first alternative whose terms are all present (None if one of
    them is not a counter). Decided per column where a term is present everywhere or nowhere
    (a switch model has a counter on every port or on none); row by row only otherwise."""
    for k, alt in enumerate(alts):
        if all(type(raw) is _Present for raw, _ in alt):  # on every row, read as uint64 arrays
            arrays = [v for _, v in alt if isinstance(v, np.ndarray)]
            if len(arrays) == len(alt):
                return _sum_u64_columns(arrays)
        if any(raw.count(None) == n for raw, _ in alt):
            continue  # absent on every row: the next alternative
        if all(None not in raw for raw, _ in alt):
            vcols = [v for _, v in alt]
            arrays = [v for v in vcols if isinstance(v, np.ndarray)]
            if len(arrays) == len(vcols):
                return _sum_u64_columns(arrays)
            return [_sum_u64(t) for t in zip(*vcols, strict=True)]
        out: list[Any] = [None] * n
        for i in range(n):
            for a in alts[k:]:
                if all(raw[i] is not None for raw, _ in a):
                    out[i] = _sum_u64([v[i] for _, v in a])
                    break
        return out
    return [None] * n


def _sum_u64(terms: Sequence[int | None]) -> int | None:
    """The sum of counter terms, None when one of them has no value or the sum does not fit the
    64-bit counter it is stored in (a wrong number is worse than none)."""
    if any(t is None for t in terms):
        return None
    total = sum(t for t in terms if t is not None)
    return total if total < 2**64 else None


def _sum_u64_columns(cols: list[np.ndarray[Any, Any]]) -> Column:
    """`_sum_u64` row by row over uint64 columns: numpy wraps a uint64 sum past 2**64 silently,
    so a row whose sum wrapped (the running sum fell below what it was) has no value."""
    total = cols[0]
    wrapped = np.zeros(len(total), dtype=bool)
    for c in cols[1:]:
        nxt = total + c
        wrapped |= nxt < total
        total = nxt
    if not wrapped.any():
        return total
    return [None if w else int(v) for v, w in zip(total.tolist(), wrapped.tolist(), strict=True)]


def priority_rows(
    key: str, h: Hash, problems: Problems, table: Path = CSV_PATH
) -> list[dict[str, Any]]:
    """switch_priority_sample fields (priority 0-7) from one port's counter hash; a priority
    the switch has no PFC counter for gives no row."""
    rows = []
    for p in PRIORITIES:
        f = fields_from("priority", key, h, problems, p, table)
        if any(v is not None for v in f.values()):
            rows.append({"priority": p, **f})
    return rows


def pfc_sums(prios: list[dict[str, Any]]) -> dict[str, int | None]:
    """switch_port_sample's all-priority PFC frame counts from one port's priority rows, as
    sonic_counters.csv sums them: only when all eight priorities have the counter."""
    out: dict[str, int | None] = {}
    for field, leaf in (("pfc_rx_pause_total", "rx_pause_total"),
                        ("pfc_tx_pause_total", "tx_pause_total")):  # fmt: skip
        vals = [r[leaf] for r in prios if r.get(leaf) is not None]
        have = {r["priority"] for r in prios if r.get(leaf) is not None}
        out[field] = sum(vals) if have == set(PRIORITIES) else None
    return out


def port_rows(
    maps: dict[str, Hash],
    hashes: dict[str, Hash],
    appl: dict[str, Hash],
    problems: Problems,
) -> list[dict[str, Any]]:
    """switch_port_sample fields (without ts/switch/asic/role) per port in COUNTERS_PORT_NAME_MAP,
    with its switch_priority_sample rows under "priorities". `hashes` holds COUNTERS:<oid> and RATES:<oid>; `appl` holds PORT_TABLE:<name>."""
    rows = []
    for name, oid in sorted(maps.get(PORT_NAME_MAP, {}).items(), key=lambda kv: _natural(kv[0])):
        ckey = f"COUNTERS:{oid}"
        c = hashes.get(ckey) or {}
        if not c:
            problems.add("missing_counters", ckey)
            continue
        row: dict[str, Any] = {"port": name, "oid": oid}
        row.update(fields_from("port", ckey, c, problems))
        row["priorities"] = priority_rows(ckey, c, problems)
        rkey = f"RATES:{oid}"
        r = hashes.get(rkey) or {}
        # SONiC's RX_BPS/TX_BPS are bytes per second (portstat shows them as B/s).
        row["rx_bytes_per_second"] = _float(rkey, "RX_BPS", r.get("RX_BPS"), problems)
        row["tx_bytes_per_second"] = _float(rkey, "TX_BPS", r.get("TX_BPS"), problems)
        row["up"], row["speed_bps"] = port_status(name, appl, problems)
        rows.append(row)
    return rows


def port_status(name: str, appl: dict[str, Hash], problems: Problems) -> tuple[Any, Any]:
    """A port's (up, speed_bps) from APPL_DB `PORT_TABLE:<name>`: oper_status "up" -> 1, another
    -> 0, none -> None; speed in Mb/s (a bad one named, None)."""
    pt = appl.get(f"PORT_TABLE:{name}") or {}
    status = pt.get("oper_status")
    mbps = _float(f"PORT_TABLE:{name}", "speed", pt.get("speed"), problems)
    return (None if status is None else int(status == "up")), (mbps * 1e6 if mbps else None)


def queue_rows(
    maps: dict[str, Hash], hashes: dict[str, Hash], problems: Problems
) -> list[dict[str, Any]]:
    """switch_queue_sample fields for every queue and priority group that has counters."""
    rows: list[dict[str, Any]] = []
    qtype = maps.get(QUEUE_TYPE_MAP, {})
    for oid, port, idx, c, w in _indexed(maps, hashes, QUEUE_NAME_MAP, QUEUE_INDEX_MAP, problems):
        key = f"COUNTERS:{oid}"
        row: dict[str, Any] = {"port": port, "queue": idx, "oid": oid}
        row["queue_type"] = QUEUE_TYPES.get(
            qtype.get(oid, ""), qtype.get(oid, "").lower() or "unknown"
        )
        row.update(fields_from("queue", key, {**w, **c}, problems))
        st = c.get("PFC_WD_STATUS")
        if st is not None:
            row["pfc_wd_storm_detected"] = PFC_WD_STATUS.get(st)
            if st not in PFC_WD_STATUS:
                problems.add("bad_value", f"{key} PFC_WD_STATUS={st!r}")
        rows.append(row)
    for oid, port, idx, c, w in _indexed(maps, hashes, PG_NAME_MAP, PG_INDEX_MAP, problems):
        row = {"port": port, "queue": idx, "queue_type": "pg", "oid": oid}
        row.update(fields_from("pg", f"COUNTERS:{oid}", {**w, **c}, problems))
        rows.append(row)
    return rows  # in map order: sorting 10^5 rows a poll buys nothing downstream


def lldp_rows(appl: dict[str, Hash]) -> list[dict[str, Any]]:
    """lldp_link fields (local_port, remote_*) from APPL_DB LLDP_ENTRY_TABLE:<port> hashes."""
    rows = []
    for key in sorted(appl, key=_natural):
        if not key.startswith("LLDP_ENTRY_TABLE:"):
            continue
        h = appl[key]
        port_id = h.get("lldp_rem_port_id", "")
        # Subtype 3 = a MAC address as the port id: the description names the port better.
        if h.get("lldp_rem_port_id_subtype") == "3" and h.get("lldp_rem_port_desc"):
            port_id = h["lldp_rem_port_desc"]
        rows.append(
            {
                "local_port": key.split(":", 1)[1],
                "remote_device": h.get("lldp_rem_sys_name", ""),
                "remote_port": port_id,
                "remote_chassis_id": h.get("lldp_rem_chassis_id", ""),
                "source": "sonic",
            }
        )
    return rows


def _indexed(
    maps: dict[str, Hash],
    hashes: dict[str, Hash],
    name_map: str,
    index_map: str,
    problems: Problems,
) -> Iterator[tuple[str, str, int, Hash, Hash]]:
    """(oid, port, index, counters, watermarks) of each object `name_map` names ("Ethernet0:3")
    that has counters or watermarks; its index from `index_map`, else the name's tail."""
    index = maps.get(index_map, {})
    for name, oid in maps.get(name_map, {}).items():
        c = hashes.get(f"COUNTERS:{oid}") or {}
        w = hashes.get(f"USER_WATERMARKS:{oid}") or {}
        if not c and not w:
            continue
        port, idx = _split(name, index.get(oid), problems, name_map)
        if idx is not None:
            yield oid, port, idx, c, w


def _split(
    name: str, index: str | None, problems: Problems, mapname: str
) -> tuple[str, int | None]:
    port, _, tail = name.rpartition(":")
    raw = index if index is not None else tail
    try:
        idx = int(raw)
    except ValueError:
        problems.add("bad_value", f"{mapname} {name}={raw!r}")
        return port, None
    if not 0 <= idx <= 255:
        problems.add("bad_value", f"{mapname} {name}={raw!r}")
        return port, None
    return port, idx


def _natural(s: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s))


__all__ = [
    "MAPS",
    "REASONS",
    "Problems",
    "WrongType",
    "as_hash",
    "field_columns",
    "fields_from",
    "full",
    "lldp_rows",
    "load_mappings",
    "pfc_sums",
    "port_rows",
    "priority_rows",
    "queue_rows",
    "read_batch",
    "read_counters",
    "terms",
]
