"""The one owner of time outside the engine's sample model (telemetry/correlate/timebase.py): the
time parser (every flag, config value and object timestamp railscope reads goes through here, so
'15m', 'now', '2026-11-21T10:02:00Z' and epoch milliseconds mean the same thing everywhere), the
epoch, UTC, and the SQL predicates over versioned facts (a row valid from `valid_from` until
`valid_to`, null while it still holds). Naive times are UTC. It never reads the clock except for
'now' and durations ago.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from telemetry.errors import UserError

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_DUR = re.compile(r"^(\d+)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
_HINT = (
    "use ISO 8601 (2026-11-21T10:02:00Z), 'now', epoch milliseconds or a duration ago (15m, 2h, 1d)"
)


def as_utc(t: datetime) -> datetime:
    """A datetime as UTC-aware: a naive one (what the store returns) is UTC; an aware one is
    returned as given."""
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def parse_iso(text: str) -> datetime | None:
    """ISO 8601 (with 'Z' or an offset; naive = UTC) or None when it is not one."""
    try:
        dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return as_utc(dt)


def ts_param(name: str) -> str:
    """SQL: the DateTime64 query parameter `name` (the window's bounds are `ws` and `we`)."""
    return f"{{{name}:DateTime64(3, 'UTC')}}"


def _versioned(alias: str) -> tuple[str, str]:
    p = f"{alias}." if alias else ""
    return f"{p}valid_from", f"{p}valid_to"


def as_of(at: str | None, alias: str = "") -> str:
    """SQL: the version of a versioned fact that holds at the instant `at` (an SQL expression:
    a column, a query parameter such as "{at:DateTime64(3, 'UTC')}"): valid from at or before
    it, not yet ended at it. `at` None: the version still open (the latest, valid_to null).
    `alias`: the table alias the columns are qualified with."""
    vf, vt = _versioned(alias)
    if at is None:
        return f"{vt} IS NULL"
    return f"{vf} <= {at} AND ({vt} IS NULL OR {vt} > {at})"


def valid_during(
    lo: str = ts_param("ws"), hi: str = ts_param("we"), alias: str = "", *, closed: bool = False
) -> str:
    """SQL: the versions of a versioned fact that hold at some instant of the window [lo, hi)
    (SQL expressions, as for as_of; by default the query's window, `ws` to `we`): begun before
    it ends, not ended by its start. `closed`: the window [lo, hi], its ends included."""
    vf, vt = _versioned(alias)
    before, after = ("<=", ">=") if closed else ("<", ">")
    return f"{vf} {before} {hi} AND ({vt} IS NULL OR {vt} {after} {lo})"


def parse_time(text: str, *, now: datetime | None = None, what: str = "time") -> datetime:
    """A user-given time: ISO 8601, 'now', epoch milliseconds, or a duration ago (15m, 2h, 1d).
    Raises UserError naming `what` (e.g. '--since') when it is none of these."""
    s = text.strip()
    now = now or datetime.now(UTC)
    if s == "now":
        return now
    m = _DUR.match(s)
    if m:
        return now - timedelta(**{_UNITS[m[2]]: int(m[1])})
    if s.isdigit() and len(s) >= 10:
        return datetime.fromtimestamp(int(s) / 1000, UTC)
    dt = parse_iso(s)
    if dt is None:
        raise UserError(f"{what} {text!r}: {_HINT}")
    return dt


def iso_to_ms(v: Any) -> int | None:
    """A timestamp inside collected data (Kubernetes creationTimestamp, ...) as epoch ms; None when
    it is absent or not ISO 8601 (the caller counts that as malformed; it never raises)."""
    if not v:
        return None
    dt = parse_iso(str(v))
    return None if dt is None else int(dt.timestamp() * 1000)


def from_ms(ms: float) -> datetime:
    """Epoch milliseconds as a UTC datetime, exactly (no float seconds in between)."""
    return EPOCH + timedelta(milliseconds=ms)


def ms_to_iso(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC with milliseconds ('2026-11-21T10:02:00.000Z'), as
    iso_to_ms reads it back."""
    return from_ms(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")


__all__ = [
    "EPOCH",
    "as_of",
    "as_utc",
    "from_ms",
    "iso_to_ms",
    "ms_to_iso",
    "parse_iso",
    "parse_time",
    "ts_param",
    "valid_during",
]
