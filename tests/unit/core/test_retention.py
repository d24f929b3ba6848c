"""A time range against the tables' TTL (telemetry/store/retention.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from telemetry.store.retention import outlived, shortest_ttl

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def test_the_shortest_ttl_with_config_overrides() -> None:
    table, days = shortest_ttl({})  # type: ignore[misc]
    assert days > 0 and table
    assert shortest_ttl({table: 2}) == (table, 2)
    assert shortest_ttl({table: None})[1] >= days  # type: ignore[index]


def test_a_range_older_than_the_ttl_is_named() -> None:
    table, days = shortest_ttl({})  # type: ignore[misc]
    assert outlived(NOW - timedelta(days=days - 1), 60, {}, NOW) == ""
    whole = outlived(NOW - timedelta(days=days + 1), 60, {}, NOW)
    assert table in whole and "every row" in whole
    part = outlived(NOW - timedelta(days=days, minutes=30), 60, {}, NOW)
    assert "the rows before" in part
    # no TTL at all: nothing is dropped
    assert outlived(NOW - timedelta(days=9999), 60, {t: None for t in _tables()}, NOW) == ""


def _tables() -> list[str]:
    from telemetry.records import KINDS

    return [k.table for k in KINDS.values()]
