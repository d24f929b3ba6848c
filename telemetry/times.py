"""The one time parser: every flag, config value and object timestamp railscope reads goes
through here, so '15m', 'now', '2026-11-21T10:02:00Z' and epoch milliseconds mean the same thing
everywhere. Naive times are UTC. It never reads the clock except for 'now' and durations ago.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from telemetry.errors import UserError

_DUR = re.compile(r"^(\d+)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
_HINT = (
    "use ISO 8601 (2026-11-21T10:02:00Z), 'now', epoch milliseconds or a duration ago (15m, 2h, 1d)"
)


def parse_iso(text: str) -> datetime | None:
    """ISO 8601 (with 'Z' or an offset; naive = UTC) or None when it is not one."""
    try:
        dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


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


def ms_to_iso(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC with milliseconds ('2026-11-21T10:02:00.000Z'), as
    iso_to_ms reads it back."""
    return (
        datetime.fromtimestamp(ms / 1000, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


__all__ = ["iso_to_ms", "ms_to_iso", "parse_iso", "parse_time"]
