"""NCCL Inspector output, parsed: JSON lines (one collective of one communicator per line) and
Prometheus textfiles (`NCCL_INSPECTOR_PROM_DUMP=1`, one file per GPU rewritten each interval).

Pure functions over text; no I/O. Every line either becomes one row or one counted reason
(`REASONS`): a malformed line, an unknown format version, a missing or out-of-range field never
raises. Rows are kept column-wise (`Rows`), the shape the Arrow batch is built from.
See docs/nccl.md for the format and ../shared/data/nccl/README.md for its description.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from telemetry.nccl import canonical, split_algo_proto

# Format versions whose fields this parser knows (`metadata.inspector_output_format_version`):
# v4.0; v4.1 adds a per-dump `dump_stats` record (no collective: its ring-buffer drops are
# counted, `Rows.inspector_dropped`); v4.2 adds coll_algo, coll_proto and header.comm_name, read
# when present (and coll_n_channels, which some Inspector builds add). Any v4.N is read for the
# fields v4.0 has (minor versions add, they do not change); another major version is refused line
# by line (`unknown_version`).
KNOWN_VERSIONS = frozenset({"v4.0", "v4.1", "v4.2"})
_SAME_MAJOR = re.compile(r"v4\.\d{1,4}")
# The bounded `reason` values a line is counted under when it gives no row.
REASONS = (
    "malformed_json",  # not a JSON object / not UTF-8 / truncated
    "unknown_version",  # a format version this parser does not know
    "missing_field",  # header/metadata/coll_perf or one of their required fields absent
    "bad_value",  # a field of the wrong type or out of range (negative size, NaN bandwidth)
    "line_too_long",  # longer than MAX_LINE_BYTES (a verbose trace gone wrong, or not Inspector)
    "malformed_prom",  # a textfile line that is not `name{labels} value`
)
# Verbose lines carry per-channel kernel events; a few KiB each. Anything far larger is not one.
MAX_LINE_BYTES = 1 << 20
_U32 = (1 << 32) - 1
_U64 = (1 << 64) - 1
_NUMBER = frozenset({int, float})  # a JSON number (bool excluded: type(True) is bool)

COLUMNS = (
    "ts",  # ms since the epoch (dump_timestamp_us / 1000)
    "node",  # hostname
    "pid",
    "comm_id",
    "rank",
    "n_ranks",
    "n_nodes",
    "collective",
    "coll_sn",
    "msg_size_bytes",
    "exec_time_us",
    "timing_source",
    "algo_bandwidth_gbs",
    "bus_bandwidth_gbs",
    "gpu",  # the Prom format's gpu_device_id; '' from JSON (attribution fills it)
    "format_version",
    "algorithm",  # coll_algo (v4.2) / the Prom algo_proto label, canonical; '' not given
    "protocol",  # coll_proto / algo_proto
    "channels",  # coll_n_channels, else the verbose trace's distinct channel ids; None unknown
    "comm_name",  # header.comm_name (v4.2); '' not given
)


@dataclass
class Rows:
    """Parsed collectives (one tuple per row, in COLUMNS order; `cols` gives them column-wise)
    and the lines that gave none, by reason."""

    tuples: list[tuple[Any, ...]] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    first_error: dict[str, str] = field(default_factory=dict)  # reason -> an example, for the log
    # well-formed lines that give no row: records that are not collectives (`dump_stats`,
    # `p2p_perf`), collectives without a bandwidth (`nan_bandwidth`), by kind
    skipped: dict[str, int] = field(default_factory=dict)
    # collective records the Inspector overwrote in its ring before dumping them (dump_stats)
    inspector_dropped: int = 0

    def __len__(self) -> int:
        return len(self.tuples)

    def error(self, reason: str, example: str) -> None:
        self.errors[reason] = self.errors.get(reason, 0) + 1
        self.first_error.setdefault(reason, example[:200])

    def add(self, row: tuple[Any, ...]) -> None:
        self.tuples.append(row)

    @property
    def cols(self) -> dict[str, list[Any]]:
        if not self.tuples:
            return {c: [] for c in COLUMNS}
        return {c: list(v) for c, v in zip(COLUMNS, zip(*self.tuples, strict=True), strict=True)}

    def row(self, i: int) -> dict[str, Any]:
        return dict(zip(COLUMNS, self.tuples[i], strict=True))


class _Bad(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


def _uint(v: Any, hi: int) -> int:
    if type(v) is not int or v < 0 or v > hi:
        raise _Bad("bad_value")
    return v


def _num(v: Any) -> float:
    if type(v) is int or type(v) is float:
        f = float(v)
        if math.isfinite(f) and f >= 0:
            return f
    raise _Bad("bad_value")


def _str(v: Any) -> str:
    if type(v) is not str:
        raise _Bad("bad_value")
    return v


def known_version(v: Any) -> bool:
    return v in KNOWN_VERSIONS or (type(v) is str and _SAME_MAJOR.fullmatch(v) is not None)


def _not_a_collective(doc: dict[str, Any], rows: Rows) -> bool:
    """A well-formed record of another kind: counted in `rows.skipped` (and a dump_stats
    record's drops in `rows.inspector_dropped`). False for anything else."""
    if "coll_perf" in doc:
        return False
    stats = doc.get("dump_stats")
    if type(stats) is dict:
        n = stats.get("coll_dropped_since_last_dump")
        if type(n) is int and n > 0:
            rows.inspector_dropped += n
        rows.skipped["dump_stats"] = rows.skipped.get("dump_stats", 0) + 1
        return True
    if type(doc.get("p2p_perf")) is dict:
        rows.skipped["p2p_perf"] = rows.skipped.get("p2p_perf", 0) + 1
        return True
    return False


def _channels(p: dict[str, Any]) -> int | None:
    """coll_n_channels when the record gives it, else the number of distinct channels its verbose
    kernel events ran on, else None (not known)."""
    n = p.get("coll_n_channels")
    if n is not None:
        return _uint(n, 0xFFFF)
    trace = p.get("event_trace_sn")
    events = trace.get("kernel_events") if type(trace) is dict else None
    if type(events) is not list:
        return None
    ids = {e.get("channel_id") for e in events if type(e) is dict} - {None}
    return min(len(ids), 0xFFFF) if ids else None


def parse_json_line(line: str | bytes, rows: Rows) -> None:
    """One Inspector JSON line into `rows` (a blank line is skipped, a record that is not a
    collective counted in `rows.skipped`, anything else bad counted under its reason)."""
    if len(line) > MAX_LINE_BYTES:
        rows.error("line_too_long", f"{len(line)} bytes")
        return
    try:
        doc = orjson.loads(line)
    except (orjson.JSONDecodeError, TypeError):
        if not line.strip():
            return
        rows.error("malformed_json", line if isinstance(line, str) else repr(line))
        return
    try:
        if type(doc) is not dict:
            raise _Bad("malformed_json")
        try:
            h, m = doc["header"], doc["metadata"]
            version = m["inspector_output_format_version"]
            if not known_version(version):
                raise _Bad("unknown_version")
            if _not_a_collective(doc, rows):
                return
            p = doc["coll_perf"]
            if type(p) is dict and "nan" in (p.get("coll_algobw_gbs"), p.get("coll_busbw_gbs")):
                # the plugin's writer prints a NaN double as the string "nan" (a collective of
                # no bytes in no time): no bandwidth to record, and nothing wrong with the line
                rows.skipped["nan_bandwidth"] = rows.skipped.get("nan_bandwidth", 0) + 1
                return
            row = (
                _uint(m["dump_timestamp_us"], _U64) // 1000,
                _str(m["hostname"]),
                _uint(m["pid"], _U32),
                _str(h["id"]),
                _uint(h["rank"], _U32),
                _uint(h["n_ranks"], _U32),
                _uint(h["nnodes"], _U32),
                _str(p["coll"]),
                _uint(p["coll_sn"], _U64),
                _uint(p["coll_msg_size_bytes"], _U64),
                _num(p["coll_exec_time_us"]),
                _str(p.get("coll_timing_source", "")),
                _num(p["coll_algobw_gbs"]),
                _num(p["coll_busbw_gbs"]),
                "",
                version,
                canonical(_str(p.get("coll_algo", ""))),
                canonical(_str(p.get("coll_proto", ""))),
                _channels(p),
                _str(h.get("comm_name", "")),
            )
        except (KeyError, TypeError):  # absent, or a container that is not an object
            raise _Bad("missing_field") from None
    except _Bad as e:
        rows.error(e.reason, line if isinstance(line, str) else repr(line))
        return
    rows.add(row)


def parse_json_lines(lines: Iterable[str | bytes], rows: Rows | None = None) -> Rows:
    """Every line into `rows`. A fast path reads a well-formed line with inline checks; any line
    it does not accept goes through `parse_json_line`, which says why (same rows, same reasons)."""
    rows = rows if rows is not None else Rows()
    add = rows.tuples.append
    loads = orjson.loads
    versions = KNOWN_VERSIONS
    inf = math.inf
    for line in lines:
        try:
            if len(line) > MAX_LINE_BYTES:
                raise ValueError
            d = loads(line)
            h = d["header"]
            m = d["metadata"]
            p = d["coll_perf"]
            v = m["inspector_output_format_version"]
            ts, host, pid = m["dump_timestamp_us"], m["hostname"], m["pid"]
            cid, rank, nr, nn = h["id"], h["rank"], h["n_ranks"], h["nnodes"]
            coll, sn, size = p["coll"], p["coll_sn"], p["coll_msg_size_bytes"]
            us, algo, bus = p["coll_exec_time_us"], p["coll_algobw_gbs"], p["coll_busbw_gbs"]
            src = p.get("coll_timing_source", "")
            alg, proto, name = (
                p.get("coll_algo", ""),
                p.get("coll_proto", ""),
                h.get("comm_name", ""),
            )
            if not (
                (v in versions or known_version(v))
                and type(ts) is type(sn) is type(size) is type(pid) is type(rank) is int
                and type(nr) is type(nn) is int
                and type(host) is type(cid) is type(coll) is type(src) is str
                and type(alg) is type(proto) is type(name) is str
                and type(us) in _NUMBER
                and type(algo) in _NUMBER
                and type(bus) in _NUMBER
                and (0 <= ts <= _U64 and 0 <= sn <= _U64 and 0 <= size <= _U64)
                and (0 <= pid <= _U32 and 0 <= rank <= _U32 and 0 <= nr <= _U32 and 0 <= nn <= _U32)
                and (0 <= us < inf and 0 <= algo < inf and 0 <= bus < inf)  # NaN fails
            ):
                raise ValueError
            ch = _channels(p) if "coll_n_channels" in p or "event_trace_sn" in p else None
        except Exception:  # the slow path names what is wrong (or skips a blank line)
            parse_json_line(line, rows)
            continue
        add(
            (
                ts // 1000, host, pid, cid, rank, nr, nn, coll, sn, size,
                float(us), src, float(algo), float(bus), "", v,
                canonical(alg) if alg else "", canonical(proto) if proto else "", ch, name,
            )
        )  # fmt: skip
    return rows


def compact_objects(text: str) -> list[str]:
    """A file of JSON objects laid out over several lines each (the Inspector README's examples,
    or a dump passed through `jq .`) as one compact line per object, for parse_json_lines.
    What does not decode is kept from there on as one piece, counted once as malformed (where the
    next object would start is not guessed)."""
    dec = json.JSONDecoder()
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        try:
            obj, i = dec.raw_decode(text, i)
        except ValueError:
            out.append(text[i:].strip())
            break
        out.append(json.dumps(obj, separators=(",", ":")))
    return out


def pretty_printed(head: bytes) -> bool:
    """Whether a JSON file's first line is a lone `{` (objects laid out over lines), which the
    plugin itself never writes (one compact object per line)."""
    first = head.lstrip().split(b"\n", 1)[0]
    return first.strip() == b"{"


# --- Prometheus textfile ------------------------------------------------------------------------
METRICS = {
    "nccl_algorithm_bandwidth_gbs": "algo_bandwidth_gbs",
    "nccl_bus_bandwidth_gbs": "bus_bandwidth_gbs",
    "nccl_collective_exec_time_microseconds": "exec_time_us",
}
# The labels that name one collective of one rank: its three metrics join into one row on them.
_KEY = ("comm_id", "collective", "hostname", "rank", "pid", "coll_sn")
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\}\s+(\S+)(?:\s+(-?\d+))?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)')
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGTP]?i?B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


def _labels(text: str) -> dict[str, str] | None:
    out: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        m = _LABEL.match(text, pos)
        if m is None:
            return None
        out[m[1]] = m[2].replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        pos = m.end()
    return out


def message_size_bytes(text: str) -> int | None:
    """The Prom format's `message_size` label ("1.00GB", "256KB", "512B") in bytes. The plugin
    prints binary multiples (1.00GB = 2^30 bytes: the same collective's JSON line says
    1073741824), rounded to 2 decimals."""
    m = _SIZE.match(text)
    if m is None:
        return None
    unit = (m[2] or "").lower()[:1]
    return round(float(m[1]) * _UNITS.get(unit, 1))


def parse_prom(text: str, mtime_ms: int, rows: Rows | None = None) -> Rows:
    """One Inspector textfile into rows: the three metrics of one collective (same comm_id,
    collective, hostname, rank, pid, coll_sn) make one row. Time: the sample's timestamp, else a
    `timestamp` label (µs or ms since the epoch), else the file's mtime."""
    rows = rows if rows is not None else Rows()
    merged: dict[tuple[str, ...], dict[str, Any]] = {}
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        m = _SAMPLE.match(s)
        labels = _labels(m[2]) if m else None
        if m is None or labels is None:
            rows.error("malformed_prom", line)
            continue
        col = METRICS.get(m[1])
        if col is None:
            continue  # another metric in the same textfile directory: not ours
        try:
            value = float(m[3])
            key = tuple(labels[k] for k in _KEY)
        except (ValueError, KeyError):
            rows.error("malformed_prom" if "=" not in m[3] else "missing_field", line)
            continue
        r = merged.setdefault(key, {"labels": labels, "stamp": m[4]})
        r[col] = value
    for key, r in merged.items():
        lab = r["labels"]
        try:
            row = _prom_row(key, lab, r, mtime_ms)
        except _Bad as e:
            rows.error(e.reason, " ".join(f"{k}={v}" for k, v in lab.items()))
            continue
        rows.add(row)
    return rows


def _int_label(v: str, hi: int) -> int:
    try:
        return _uint(int(v), hi)
    except ValueError:
        raise _Bad("bad_value") from None


def _prom_row(
    key: tuple[str, ...], lab: dict[str, str], r: dict[str, Any], mtime_ms: int
) -> tuple[Any, ...]:
    comm_id, coll, host, rank, pid, sn = key
    if "bus_bandwidth_gbs" not in r or "exec_time_us" not in r:
        raise _Bad("missing_field")
    ts = mtime_ms
    stamp = r["stamp"] or lab.get("timestamp")
    if stamp:
        v = _int_label(stamp, _U64)
        ts = v // 1000 if v > 10**14 else v  # µs or ms since the epoch
    size = message_size_bytes(lab.get("message_size", "")) if "message_size" in lab else 0
    if size is None:
        raise _Bad("bad_value")
    return (
        ts,
        host,
        _int_label(pid, _U32),
        comm_id,
        _int_label(rank, _U32),
        _int_label(lab.get("n_ranks", "0"), _U32),
        _int_label(lab.get("n_nodes", "0"), _U32),
        coll,
        _int_label(sn, _U64),
        size,
        _num(r["exec_time_us"]),
        lab.get("coll_timing_source", ""),
        _num(r.get("algo_bandwidth_gbs", 0.0)),
        _num(r["bus_bandwidth_gbs"]),
        lab.get("gpu_device_id", ""),
        "prom",
        *_prom_algo_proto(lab),
        _int_label(lab["coll_n_channels"], 0xFFFF) if "coll_n_channels" in lab else None,
        lab.get("comm_name", ""),
    )


def _prom_algo_proto(lab: dict[str, str]) -> tuple[str, str]:
    """(algorithm, protocol) of a textfile sample: its `algo_proto` label (`Ring_ll`), else
    `coll_algo` / `coll_proto` labels; '' where not given."""
    if "algo_proto" in lab:
        return split_algo_proto(lab["algo_proto"])
    return canonical(lab.get("coll_algo", "")), canonical(lab.get("coll_proto", ""))


def size_bucket(n: int) -> str:
    """A message size's power-of-two bucket, as a label: 1000 -> '512B', 2^30 -> '1GiB'.
    Baselines compare a collective with others of the same bucket (bandwidth depends on size)."""
    if n <= 0:
        return "0B"
    b = 1 << (n.bit_length() - 1)
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift:
            return f"{b >> shift}{unit}"
    return f"{b}B"


__all__ = [
    "COLUMNS",
    "KNOWN_VERSIONS",
    "REASONS",
    "Rows",
    "message_size_bytes",
    "parse_json_line",
    "parse_json_lines",
    "parse_prom",
    "size_bucket",
]
