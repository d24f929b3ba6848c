"""The line formats the log source reads, recognised by content (never by file name), and what
each gives: the message the grammar sees and the line's time. Pure: no I/O but what a caller
passes in.

  cri      `<RFC3339Nano> <stdout|stderr> <P|F> <message>`   (/var/log/pods/*/*/N.log)
  kmsg     `<prio>,<seq>,<usec>,<flags>;<message>`           (/dev/kmsg, or a dump of it)
  dmesg    `[  123.456789] message` or `[Mon May 25 12:34:56 2026] message` (dmesg, dmesg -T)
  journal  `Feb 14 05:03:41 host kernel: message` (journalctl -k; -o short-precise and
           short-iso too, and syslog's kern.log)
  text     anything else: a terminal copy, `kubectl logs` (with --timestamps: its leading time;
           `dmesg --time-format iso` too)
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

FORMATS = ("cri", "kmsg", "dmesg", "journal", "text")

_CRI = re.compile(rb"^(\S+) (stdout|stderr) ([PF]) ?")
_CRI_TS = re.compile(
    rb"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d) (?:stdout|stderr) [PF]( |$)"
)
_KMSG = re.compile(rb"^(\d+),(\d+),(\d+),[^;]*;")
_DMESG_MONO = re.compile(rb"^\[\s*(\d+)\.(\d+)\] ?")
_DMESG_CTIME = re.compile(rb"^\[([A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\] ?")
_JOURNAL = re.compile(rb"^([A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d)(?:\.(\d{1,9}))? \S+ kernel: ")
_JOURNAL_ISO = re.compile(
    rb"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)) \S+ kernel: "
)
_LEADING_TS = re.compile(rb"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:\d\d)) ")

_SNIFF_LINES = 64


def sniff(head: bytes) -> str:
    """The format of a file from its first bytes: the one that most of its first non-blank lines
    fit (at least half of them); 'text' otherwise."""
    lines = [ln for ln in head.split(b"\n")[:_SNIFF_LINES] if ln.strip()]
    if len(head) >= 4096 and b"\n" in head:  # the last line may be cut by the sniff window
        lines = lines[:-1] or lines
    if not lines:
        return "text"
    tests = (
        ("cri", lambda ln: _CRI_TS.match(ln) is not None),
        ("kmsg", lambda ln: _KMSG.match(ln) is not None or ln[:1] == b" "),
        (
            "dmesg",
            lambda ln: _DMESG_MONO.match(ln) is not None or _DMESG_CTIME.match(ln) is not None,
        ),
        (
            "journal",
            lambda ln: _JOURNAL.match(ln) is not None or _JOURNAL_ISO.match(ln) is not None,
        ),
    )
    best, score = "text", 0
    for name, test in tests:
        n = sum(1 for ln in lines if test(ln))
        if name == "kmsg" and not any(_KMSG.match(ln) for ln in lines):
            n = 0  # continuation lines alone are not a kmsg dump
        if n > score:
            best, score = name, n
    return best if score * 2 >= len(lines) else "text"


_UTC_NANO = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?Z\Z")


def parse_rfc3339(s: str) -> datetime:
    """An RFC 3339 time with up to nanoseconds (CRI, kubectl --timestamps) as UTC; ValueError
    when it is not one."""
    m = _UTC_NANO.match(s)
    if m:  # what the container runtime writes: UTC, nanoseconds
        y, mo, d, h, mi, sec, frac = m.groups()
        us = int(frac[:6].ljust(6, "0")) if frac else 0
        return datetime(int(y), int(mo), int(d), int(h), int(mi), int(sec), us, tzinfo=UTC)
    if s.endswith("Z"):
        s = s[:-1] + "+00:00"
    head, dot, rest = s.partition(".")
    if dot:  # datetime takes microseconds: cut the fraction to 6 digits, keep the offset
        i = 0
        while i < len(rest) and rest[i].isdigit():
            i += 1
        s = f"{head}.{rest[:i][:6].ljust(6, '0')}{rest[i:]}"
    dt = datetime.fromisoformat(s)
    if dt.tzinfo is None:
        raise ValueError(f"no time zone: {s!r}")
    return dt.astimezone(UTC)


class BadTimestamp(ValueError):
    """A line of a timed format whose time does not parse."""


def cri_split(line: bytes) -> tuple[bytes, str, bool, bytes] | None:
    """(time text, stream, partial, message) of a CRI line; None when it is not one."""
    m = _CRI.match(line)
    if not m:
        return None
    return m[1], m[2].decode(), m[3] == b"P", line[m.end() :]


class Clock:
    """Turns a format's own time into UTC: `boot` (the wall time of monotonic zero) for kmsg and
    dmesg's `[secs.usec]`, `year` for journalctl's year-less dates, `fallback` for lines that
    carry no time at all (plain text: the file's modification time)."""

    def __init__(self, *, boot: datetime | None, year: int, fallback: datetime) -> None:
        self.boot = boot
        self.year = year
        self.fallback = fallback

    def mono(self, usec: int) -> datetime:
        return (self.boot or self.fallback) + timedelta(microseconds=usec)

    def message(self, fmt: str, line: bytes) -> tuple[datetime | None, bytes]:
        """(time or None when the line has none of its own, message) of one line of `fmt`.
        Raises BadTimestamp for a line whose own time is malformed."""
        if fmt == "dmesg":
            m = _DMESG_MONO.match(line)
            if m:
                usec = int(m[1]) * 1_000_000 + int(m[2][:6].ljust(6, b"0"))
                return self.mono(usec), line[m.end() :]
            m = _DMESG_CTIME.match(line)
            if m:
                try:
                    t = datetime.strptime(m[1].decode(), "%a %b %d %H:%M:%S %Y").replace(tzinfo=UTC)
                except ValueError as e:
                    raise BadTimestamp(str(e)) from None
                return t, line[m.end() :]
            return None, line.strip()  # a continuation line: indented, no time of its own
        if fmt == "journal":
            m = _JOURNAL.match(line)
            if m:
                try:
                    t = datetime.strptime(f"{self.year} {m[1].decode()}", "%Y %b %d %H:%M:%S")
                except ValueError as e:
                    raise BadTimestamp(str(e)) from None
                if m[2]:  # -o short-precise: microseconds
                    t = t.replace(microsecond=int(m[2][:6].ljust(6, b"0")))
                return t.replace(tzinfo=UTC), line[m.end() :]
            m = _JOURNAL_ISO.match(line)
            if m:
                try:
                    t = datetime.fromisoformat(m[1].decode().replace(",", ".")).astimezone(UTC)
                except ValueError as e:
                    raise BadTimestamp(str(e)) from None
                return t, line[m.end() :]
            return None, line.strip()
        if fmt == "kmsg":
            m = _KMSG.match(line)
            if m:
                return self.mono(int(m[3])), line[m.end() :]
            return None, line
        if fmt == "cri":
            parts = cri_split(line)
            if parts is None:
                raise BadTimestamp("not a CRI line")
            ts, _, _, msg = parts
            try:
                return parse_rfc3339(ts.decode("ascii")), msg
            except (ValueError, UnicodeDecodeError) as e:
                raise BadTimestamp(str(e)) from None
        m = _LEADING_TS.match(line)
        if m:
            try:
                return parse_rfc3339(m[1].decode().replace(",", ".")), line[m.end() :]
            except ValueError:
                pass
        return None, line


def last_mono_usec(tail: bytes, fmt: str) -> int | None:
    """The monotonic time (usec) of the last timed line in `tail` of a dmesg or kmsg text, to
    anchor a capture's clock at its file's modification time."""
    for line in reversed(tail.split(b"\n")):
        if fmt == "dmesg":
            m = _DMESG_MONO.match(line)
            if m:
                return int(m[1]) * 1_000_000 + int(m[2][:6].ljust(6, b"0"))
        elif fmt == "kmsg":
            k = _KMSG.match(line)
            if k:
                return int(k[3])
    return None


__all__ = [
    "FORMATS",
    "BadTimestamp",
    "Clock",
    "cri_split",
    "last_mono_usec",
    "parse_rfc3339",
    "sniff",
]
