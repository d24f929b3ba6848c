"""Whether a time range outlives the tables' TTL: rows older than a table's TTL are dropped by the
store as it merges, so storing them (a simulated run pinned in the past) loses them quietly.
Never reads the store: the TTLs are the record kinds' own, with the config's `store.ttl_days`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from telemetry.records import KINDS


def shortest_ttl(ttl_days: Mapping[str, int | None]) -> tuple[str, int] | None:
    """(table, days) of the table that keeps its rows the shortest; None where none has a TTL."""
    ttls = [(k.table, ttl_days.get(k.table, k.ttl_days)) for k in KINDS.values()]
    kept = [(t, int(d)) for t, d in ttls if d]
    return min(kept, key=lambda td: td[1]) if kept else None


def outlived(
    begin: datetime, minutes: float, ttl_days: Mapping[str, int | None], now: datetime | None = None
) -> str:
    """Why rows from `begin` on (for `minutes`) would be dropped by a table's TTL ("" where
    none would)."""
    short = shortest_ttl(ttl_days)
    if short is None:
        return ""
    table, days = short
    oldest = (now or datetime.now(UTC)) - timedelta(days=days)
    if begin >= oldest:
        return ""
    end = begin + timedelta(minutes=minutes)
    lost = "every row" if end < oldest else "the rows before " + oldest.strftime("%Y-%m-%dT%H:%MZ")
    return f"older than the tables' TTL ({table} keeps {days} days): the store would drop {lost}"


__all__ = ["outlived", "shortest_ttl"]
