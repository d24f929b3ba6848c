"""One stream of log bytes (a file, a container's log, a capture) -> the events its lines hold.

Lines are not looked at one by one: each read is searched for the grammar's few screen literals
with `bytes.find` (grammar.screen_anchors), and only the lines around a hit are decoded, given
their time and matched; every other line is only counted (so a bad timestamp or invalid UTF-8 is
noticed, and counted, on a line that could be an event). CRI partial (P) lines, which the runtime writes for a
message longer than its buffer, are joined before matching. Memory is bounded: at most one
incomplete line (max_line bytes) is carried between reads; a longer line is counted and skipped.
It never stores an unmatched line and never builds an event from a line it could not read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from exporters.logs import grammar
from exporters.logs.excerpt import EXCERPT_CHARS, excerpt
from exporters.logs.formats import BadTimestamp, Clock, cri_split

MAX_LINE_BYTES = 64 * 1024
_PARTIAL_TAG = b" P "  # CRI's partial tag, after the stream; checked in place (_has_partial)


class Hit(NamedTuple):
    ts: datetime
    kind: str
    fields: dict[str, Any]
    excerpt: str
    line: int  # 1-based line of the stream where the record starts


@dataclass
class Counts:
    """What a stream held, by outcome (the source sums them into its self-report)."""

    lines: int = 0
    matched: int = 0
    binary: int = 0  # lines with NUL bytes: never matched
    invalid_utf8: int = 0  # screened lines with bytes that are not UTF-8 (matched with U+FFFD)
    too_long: int = 0  # lines over max_line bytes: skipped
    bad_timestamp: int = 0  # lines of a timed format whose time does not parse: skipped
    rate_limited: int = 0  # lines dropped by the pod's token bucket

    def add(self, other: Counts) -> None:
        for k, v in vars(other).items():
            setattr(self, k, getattr(self, k) + v)


@dataclass
class _Partial:
    ts: bytes
    line: int
    parts: list[bytes] = field(default_factory=list)
    size: int = 0


class Scanner:
    """The events of one stream of format `fmt` (exporters/logs/formats.py), fed in reads."""

    def __init__(
        self,
        fmt: str,
        clock: Clock,
        *,
        line: int = 0,
        max_line: int = MAX_LINE_BYTES,
        excerpt_chars: int = EXCERPT_CHARS,
    ) -> None:
        self.fmt = fmt
        self.clock = clock
        self.line = line  # complete lines consumed so far
        self.max_line = max_line
        self.excerpt_chars = excerpt_chars
        self.session = grammar.Session()
        self.counts = Counts()
        self.carry = b""
        self.skipping = False  # inside a line over max_line: drop up to its newline
        self._partial: dict[str, _Partial] = {}
        self._last_ts: datetime | None = None
        self.anchors = grammar.screen_anchors(fmt)

    # --- input ----------------------------------------------------------------------------------
    def feed(self, data: bytes, limit: int | None = None) -> list[Hit]:
        """Events of the complete lines that `data` ends (the rest is carried to the next read).
        With `limit`, at most that many lines are matched; the others are counted rate_limited."""
        buf = self._complete(data)
        if not buf:
            return []
        n = buf.count(b"\n")
        if limit is not None and n > limit:
            cut = _nth_newline(buf, limit)
            self.counts.rate_limited += n - limit
            self.counts.lines += n - limit
            dropped_after = n - limit
            buf = buf[:cut]
            n = limit
        else:
            dropped_after = 0
        hits = self._scan(buf, n) if n else []
        self.line += dropped_after
        return hits

    def skip(self, data: bytes) -> int:
        """Drops the lines `data` completes (the token bucket is empty): counted, not read."""
        buf = self._complete(data)
        n = buf.count(b"\n")
        self.counts.rate_limited += n
        self.counts.lines += n
        self.line += n
        return n

    def finish(self) -> list[Hit]:
        """End of input (--from): the last line, if it has no newline, is a line too."""
        if self.skipping or not self.carry:
            self.carry, self.skipping = b"", False
            return []
        return self.feed(b"\n")

    def _complete(self, data: bytes) -> bytes:
        if self.skipping:
            nl = data.find(b"\n")
            if nl < 0:
                return b""
            self.skipping = False
            self.line += 1
            self.counts.lines += 1
            data = data[nl + 1 :]
        end = data.rfind(b"\n")
        if end < 0:
            self.carry += data
            if len(self.carry) > self.max_line:
                self.counts.too_long += 1
                self.carry, self.skipping = b"", True
            return b""
        buf = self.carry + data[: end + 1] if self.carry else data[: end + 1]
        self.carry = data[end + 1 :]
        if len(self.carry) > self.max_line:
            self.counts.too_long += 1
            self.carry, self.skipping = b"", True
        return buf

    # --- matching -------------------------------------------------------------------------------
    def _scan(self, buf: bytes, n: int) -> list[Hit]:
        base = self.line
        self.line += n
        self.counts.lines += n
        bad = self._bad_lines(buf)
        if self.fmt == "cri" and (self._partial or _has_partial(buf)):
            return self._per_line(buf, base, bad)
        starts: dict[int, int] = {}
        for a in self.anchors:
            pos = buf.find(a)
            while pos >= 0:
                ls = buf.rfind(b"\n", 0, pos) + 1
                le = buf.find(b"\n", pos)
                starts[ls] = le
                pos = buf.find(a, le)
        hits: list[Hit] = []
        at, line = 0, base  # `line`: lines that end before offset `at`
        for ls in sorted(starts):
            line += buf.count(b"\n", at, ls)
            at = ls
            if ls in bad:
                continue
            hit = self._line(buf[ls : starts[ls]], line + 1, buf, ls)
            if hit is not None:
                hits.append(hit)
        return hits

    def _per_line(self, buf: bytes, base: int, bad: set[int]) -> list[Hit]:
        hits: list[Hit] = []
        ls = 0
        line = base
        while ls < len(buf):
            le = buf.index(b"\n", ls)
            line += 1
            if ls not in bad:
                raw = buf[ls:le]
                parts = cri_split(raw)
                if parts is None:
                    self.counts.bad_timestamp += 1
                else:
                    ts, stream, partial, msg = parts
                    hit = self._joined(ts, stream, partial, msg, line)
                    if hit is not None:
                        hits.append(hit)
            ls = le + 1
        return hits

    def _joined(self, ts: bytes, stream: str, partial: bool, msg: bytes, line: int) -> Hit | None:
        p = self._partial.get(stream)
        if p is None:
            if not partial:
                if not _holds(msg, self.anchors):
                    return None
                return self._line(ts + b" " + stream.encode() + b" F " + msg, line, b"", 0)
            p = self._partial[stream] = _Partial(ts, line)
        p.parts.append(msg)
        p.size += len(msg)
        if p.size > self.max_line:
            self.counts.too_long += 1
            del self._partial[stream]
            return None
        if partial:
            return None
        del self._partial[stream]
        whole = b"".join(p.parts)
        if not _holds(whole, self.anchors):
            return None
        return self._line(p.ts + b" " + stream.encode() + b" F " + whole, p.line, b"", 0)

    def _line(self, raw: bytes, line: int, buf: bytes, ls: int) -> Hit | None:
        if self.fmt == "kmsg" and raw[:1] == b" ":
            return None  # a record's KEY=VALUE dictionary line
        if len(raw) > self.max_line:
            self.counts.too_long += 1
            return None
        try:
            ts, msg = self.clock.message(self.fmt, raw)
        except BadTimestamp:
            self.counts.bad_timestamp += 1
            return None
        if ts is None:
            ts = self._previous_ts(buf, ls) if self.fmt in ("dmesg", "journal") else None
            ts = ts or self._last_ts or self.clock.fallback
        else:
            self._last_ts = ts
        try:
            text = msg.decode("utf-8")
        except UnicodeDecodeError:
            self.counts.invalid_utf8 += 1  # matched all the same, its bad bytes as U+FFFD
            text = msg.decode("utf-8", "replace")
        ev = self.session.match(text, line)
        if ev is None:
            return None
        self.counts.matched += 1
        return Hit(ts, ev.kind, ev.fields, excerpt(text, self.excerpt_chars), ev.line)

    def _previous_ts(self, buf: bytes, ls: int) -> datetime | None:
        """The time of the nearest timed line before a continuation line (dmesg, journal)."""
        end = ls
        while end > 0:
            start = buf.rfind(b"\n", 0, end - 1) + 1
            raw = buf[start : end - 1]
            if raw[:1] not in (b" ", b"\t"):
                try:
                    ts, _ = self.clock.message(self.fmt, raw)
                except BadTimestamp:
                    return None
                return ts
            end = start
        return None

    def _bad_lines(self, buf: bytes) -> set[int]:
        """Starts of lines with NUL bytes (binary: never matched), counted."""
        bad: set[int] = set()
        pos = buf.find(b"\x00")
        while pos >= 0:
            ls = buf.rfind(b"\n", 0, pos) + 1
            le = buf.find(b"\n", pos)
            bad.add(ls)
            self.counts.binary += 1
            pos = buf.find(b"\x00", le)
        return bad


def _has_partial(buf: bytes) -> bool:
    """Whether a CRI read holds a partial (P) line: one pass for " P ", each hit checked to be
    the tag after the stream name (a message may hold " P " too)."""
    pos = buf.find(_PARTIAL_TAG)
    while pos >= 0:
        if buf[pos - 6 : pos] in (b"stdout", b"stderr"):
            return True
        pos = buf.find(_PARTIAL_TAG, pos + 3)
    return False


def _holds(msg: bytes, anchors: tuple[bytes, ...]) -> bool:
    return any(a in msg for a in anchors)


def _nth_newline(buf: bytes, k: int) -> int:
    """The index just past the k-th newline of buf (0 for k == 0)."""
    at = 0
    for _ in range(k):
        at = buf.index(b"\n", at) + 1
    return at


__all__ = ["MAX_LINE_BYTES", "Counts", "Hit", "Scanner"]
