"""Statements rendered from a template split once per text (telemetry/store/statement.py): the
markers outside literals and comments become typed literals, the rest is left as written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from telemetry.store.statement import Template, render


def test_markers_become_typed_literals() -> None:
    sql = "SELECT 1 WHERE ts >= {ws:DateTime64(3, 'UTC')} AND c = {cluster:String}"
    got = render(sql, {"ws": datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC), "cluster": "a'b"})
    assert got == (
        "SELECT 1 WHERE ts >= _CAST('2026-01-02 03:04:05.678000', 'DateTime64(3, \\'UTC\\')') "
        "AND c = _CAST('a\\'b', 'String')"
    )


def test_datetimes_are_written_in_utc() -> None:
    east = timezone(timedelta(hours=2))
    got = render("SELECT {t:DateTime64(3, 'UTC')}", {"t": datetime(2026, 1, 1, 2, 0, tzinfo=east)})
    assert "'2026-01-01 00:00:00.000000'" in got


def test_markers_in_strings_and_comments_are_text() -> None:
    sql = "SELECT '{a:String}' -- {b:String}\n, {c:UInt8} /* {d:String} */"
    t = Template(sql)
    assert t.markers == [("c", "UInt8")]
    assert (
        render(sql, {"c": 1})
        == "SELECT '{a:String}' -- {b:String}\n, _CAST(1, 'UInt8') /* {d:String} */"
    )


def test_containers_element_by_element() -> None:
    got = render(
        "SELECT {a:Array(Tuple(String, UInt8))}, {b:Array(String)}, {n:Nullable(String)}",
        {"a": [("x", 1), ("y\\", 2)], "b": [], "n": None},
    )
    assert "_CAST([tuple('x', 1), tuple('y\\\\', 2)], 'Array(Tuple(String, UInt8))')" in got
    assert "_CAST([], 'Array(String)')" in got
    assert "_CAST(NULL, 'Nullable(String)')" in got


def test_a_marker_without_a_value_fails() -> None:
    with pytest.raises(KeyError, match="cluster"):
        render("SELECT {cluster:String}", {"other": 1})


def test_no_parameters_no_change() -> None:
    sql = "SELECT '{x:String}'"
    assert render(sql, None) == sql
