"""DataNode clienttrace log lines -> transfer columns (time, src, dest, bytes, op, client, block,
duration). Following a live log across rotation is exporters/common/tail.py's Tailer.

Reads log text only. Never invents a value: a line that does not parse is counted with its reason
and skipped; other clienttrace ops (short-circuit fds, ...) are counted as skipped, not failed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any

# Both duration forms: `duration: N` (Hadoop <= 2.x) and `duration(ns): N` (3.x); both are ns.
_DURATION_KEYS = ("duration(ns)", "duration")
# Non-client writes (NameNode-scheduled re-replication, async cross-IDC copies) are not in
# clienttrace; the receiving DataNode logs "Received <block> [on volume V] size N from /addr".
# DataXceiver logs DataNode-to-DataNode writes with both ends:
# "Received <block> src: /a:p dest: /b:p [volume: V] of size N".
_RECEIVED = re.compile(r"\bReceived (BP-\S+?:blk_\d+_\d+)\b.*? size (\d+) from (/?\S+)")
_RECEIVED_SRC_DEST = re.compile(
    r"\bReceived (BP-\S+?:blk_\d+_\d+) src: (/?\S+) dest: (/?\S+)(?: volume: \S+)? of size (\d+)"
)


# Every reason a clienttrace line is rejected for (ParseStats.errors keys): a bounded set.
REASONS = (
    "field_count",
    "field_names",
    "no_duration",
    "bad_number_or_time",
    "negative_value",
    "replication_without_datanode",
)


@dataclass
class ParseStats:
    lines: int = 0
    transfers: int = 0
    skipped: int = 0  # not a transfer line (other log lines, other clienttrace ops)
    continuation: int = 0  # of those: lines without a timestamp (Java stack traces, ...)
    errors: dict[str, int] = field(default_factory=dict)  # reason -> lines

    def error(self, reason: str) -> None:
        self.errors[reason] = self.errors.get(reason, 0) + 1

    @property
    def failed(self) -> int:
        return sum(self.errors.values())


@dataclass
class Transfers:
    """Column lists, one entry per transfer (cheaper than a dict per line at 10^6 lines)."""

    ts: list[int] = field(default_factory=list)  # ms since epoch, UTC
    datanode: list[str] = field(default_factory=list)
    op: list[str] = field(default_factory=list)
    src: list[str] = field(default_factory=list)
    dest: list[str] = field(default_factory=list)
    bytes: list[int] = field(default_factory=list)
    client_id: list[str] = field(default_factory=list)
    block_id: list[str] = field(default_factory=list)
    duration_seconds: list[float | None] = field(default_factory=list)
    write_mode: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ts)

    def extend(self, other: Transfers) -> None:
        for k in self.__dataclass_fields__:
            getattr(self, k).extend(getattr(other, k))

    def rows(self) -> Iterator[dict[str, Any]]:
        names = list(self.__dataclass_fields__)
        cols = [getattr(self, k) for k in names]
        for vals in zip(*cols, strict=True):
            yield dict(zip(names, vals, strict=True))


class TimeParser:
    """log4j '2016-07-10 21:31:34,263' -> ms since epoch. Caches per second: a busy DataNode
    writes thousands of lines within one second."""

    def __init__(self, tz: tzinfo = UTC) -> None:
        self.tz = tz
        self._sec = ""
        self._base = 0

    def __call__(self, stamp: str) -> int:
        # stamp: 'YYYY-MM-DD HH:MM:SS,mmm' (also '.' as the ms separator)
        sec = stamp[:19]
        if sec != self._sec:
            dt = datetime(
                int(sec[0:4]),
                int(sec[5:7]),
                int(sec[8:10]),
                int(sec[11:13]),
                int(sec[14:16]),
                int(sec[17:19]),
                tzinfo=self.tz,
            )
            self._base = int(dt.timestamp()) * 1000
            self._sec = sec
        return self._base + int(stamp[20:23])


def parse_lines(
    lines: Iterable[str],
    *,
    tz: tzinfo = UTC,
    datanode: str = "",
    stats: ParseStats | None = None,
    out: Transfers | None = None,
) -> Transfers:
    """Parse clienttrace lines (and 'Received ... from' replication lines when `datanode`, the
    address of the DataNode that wrote the log, is known). Appends to `out` when given."""
    st = stats if stats is not None else ParseStats()
    t = out if out is not None else Transfers()
    to_ms = TimeParser(tz)
    n = 0
    try:
        n = _parse_into(lines, to_ms, datanode, st, t)
    finally:  # a reader that fails midway (truncated .gz) keeps what was parsed before
        st.lines += n
        st.transfers = len(t)
    return t


def _parse_into(
    lines: Iterable[str], to_ms: TimeParser, datanode: str, st: ParseStats, t: Transfers
) -> int:
    # Bound methods as locals: this loop is the hot path (see bench/hdfs.py).
    a_ts, a_dn, a_op, a_src, a_dest = (
        t.ts.append,
        t.datanode.append,
        t.op.append,
        t.src.append,
        t.dest.append,
    )
    a_bytes, a_cli, a_blk, a_dur, a_mode = (
        t.bytes.append,
        t.client_id.append,
        t.block_id.append,
        t.duration_seconds.append,
        t.write_mode.append,
    )
    n = 0
    for line in lines:
        n += 1
        i = line.find("src: ")
        if i < 0:
            if _continued(line, st):
                continue
            if "Received BP-" in line:
                _replication(line, datanode, to_ms, st, t)
            else:
                st.skipped += 1
            continue
        parts = line[i:].rstrip("\r\n").split(", ")
        # Fixed field order of DN_CLIENTTRACE_FORMAT; verified key by key, any drift -> error.
        # Hadoop 3.4 inserts `volume: V` (V may be empty) after dest: drop it, it names a disk.
        if len(parts) == 10 and parts[2].startswith("volume:"):
            del parts[2]
        if len(parts) != 9:
            if _continued(line, st):
                continue
            if "Received BP-" in line:
                _replication(line, datanode, to_ms, st, t)
            elif "op: HDFS_READ" in line or "op: HDFS_WRITE" in line:
                st.error("field_count")
            else:
                st.skipped += 1  # other clienttrace ops, e.g. REQUEST_SHORT_CIRCUIT_FDS
            continue
        p_src, p_dest, p_bytes, p_op, p_cli, _p_off, _p_srv, p_blk, p_dur = parts
        op = p_op[4:]
        if op != "HDFS_READ" and op != "HDFS_WRITE":
            st.skipped += 1
            continue
        if not (
            p_dest.startswith("dest: ")
            and p_bytes.startswith("bytes: ")
            and p_blk.startswith("blockid: ")
        ):
            if not _continued(line, st):
                st.error("field_names")
            continue
        dk, _, dv = p_dur.partition(": ")
        if dk not in _DURATION_KEYS:
            if not _continued(line, st):
                st.error("no_duration")
            continue
        try:
            nbytes = int(p_bytes[7:])
            dur = int(dv) / 1e9
            ts = to_ms(line[:23])
        except ValueError:
            if not _continued(line, st):
                st.error("bad_number_or_time")
            continue
        if nbytes < 0 or dur < 0:
            st.error("negative_value")
            continue
        src = p_src[5:].lstrip("/")
        dest = p_dest[6:].lstrip("/")
        a_ts(ts)
        a_op(op)
        a_src(src)
        a_dest(dest)
        a_bytes(nbytes)
        a_cli(p_cli[7:])
        a_blk(p_blk[9:])
        a_dur(dur)
        if op == "HDFS_READ":
            a_dn(src)  # the DataNode serves the read: it is the source
            a_mode("")
        else:
            a_dn(dest)
            a_mode("sync")  # a client write pipeline: the client waits for every hop's ack
    return n


def _continued(line: str, st: ParseStats) -> bool:
    """A line without a log4j timestamp continues the message above it (Java stack-trace frames,
    multi-line messages): skipped and counted, never parsed. Checked off the hot path only."""
    if line[:1].isdigit():
        return False
    st.continuation += 1
    st.skipped += 1
    return True


def _replication(line: str, datanode: str, to_ms: TimeParser, st: ParseStats, t: Transfers) -> None:
    m2 = _RECEIVED_SRC_DEST.search(line)
    if m2:
        block, src, dest, size = m2[1], m2[2].lstrip("/"), m2[3].lstrip("/"), m2[4]
    else:
        m = _RECEIVED.search(line)
        if not m:
            st.skipped += 1
            return
        if not datanode:
            st.error("replication_without_datanode")
            return
        block, src, dest, size = m[1], m[3].lstrip("/"), datanode, m[2]
    try:
        ts = to_ms(line[:23])
    except ValueError:
        st.error("bad_number_or_time")
        return
    t.ts.append(ts)
    t.datanode.append(dest)
    t.op.append("replication")
    t.src.append(src)
    t.dest.append(dest)
    t.bytes.append(int(size))
    t.client_id.append("")
    t.block_id.append(block)
    t.duration_seconds.append(None)
    t.write_mode.append("async")  # no client waits for it: background/asynchronous copy


# A log4j line (any layout: `%c: `, `%c{2} (%F:%M(%L)) - `, `%c (%t): `) whose logger is a
# DataNode's, or that carries a clienttrace transfer or a 'Received' replication line: a DataNode
# log may run for megabytes of start-up and heartbeat lines before its first transfer.
_SNIFF = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[,.]\d{3} +[A-Z]+ +"
    r"(?:.*(?:src: \S+, dest: \S+, (?:volume: \S*, )?bytes: \d+, op: HDFS_|Received BP-)"
    r"|(?:org\.apache\.hadoop\.hdfs\.server\.)?datanode\.[\w.$]+[: ]"
    r"|\S*DataNode\.clienttrace[: ])",
    re.MULTILINE,
)


def looks_like_clienttrace(head: str) -> bool:
    """A DataNode log: log4j lines from the DataNode's loggers, or clienttrace transfer lines."""
    return _SNIFF.search(head) is not None


# --- files for --from: rotated and gzip-compressed ----------------------------------------------
_ROTATED = re.compile(r"^(.*?)\.(\d+)(\.gz)?$")


def rotation_order(p: Path) -> tuple[str, int, int, str]:
    """Sort key putting a log's rotated files oldest first: `x.log.3.gz`, `x.log.2`, `x.log.1`,
    then date-suffixed ones (`x.log.2024-03-01`) by date, then `x.log` itself."""
    name = p.name
    m = _ROTATED.match(name)
    if m:
        return (str(p.with_name(m[1])), 0, -int(m[2]), "")
    base = name[:-3] if name.endswith(".gz") else name
    stem, dot, suffix = base.rpartition(".")
    if dot and suffix[:1].isdigit():  # DailyRollingFileAppender: x.log.2024-03-01
        return (str(p.with_name(stem)), 1, 0, suffix)
    return (str(p.with_name(base)), 2, 0, "")


def is_gzip(head: bytes) -> bool:
    return head[:2] == b"\x1f\x8b"


def gunzip_head(head: bytes, limit: int) -> bytes:
    """The first `limit` bytes of a gzip stream's content from its first bytes (for sniffing)."""
    import zlib

    try:
        return zlib.decompressobj(wbits=31).decompress(head, limit)
    except zlib.error:
        return b""


def open_text(p: Path) -> Any:
    """A text reader over a log file, gzip-compressed (`.gz` rotation) or not."""
    with p.open("rb") as fh:
        gz = is_gzip(fh.read(2))
    if gz:
        import gzip

        return gzip.open(p, "rt", encoding="utf-8", errors="replace")
    return p.open(encoding="utf-8", errors="replace")


def local_tz(name: str) -> tzinfo:
    if name.upper() == "UTC":
        return UTC
    if name.startswith(("+", "-")) and len(name) == 6 and name[3] == ":":
        sign = 1 if name[0] == "+" else -1
        return timezone(sign * timedelta(hours=int(name[1:3]), minutes=int(name[4:6])))
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)
