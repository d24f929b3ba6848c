"""A statement rendered once per text (Store.query, telemetry/store/statement.py) answers what the
same statement answers with the engine's own parameter substitution."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from telemetry.store import Store

CASES: list[tuple[str, dict[str, Any]]] = [
    ("SELECT {t:DateTime64(3, 'UTC')}", {"t": datetime(2026, 1, 1, 1, 2, 3, 456789, tzinfo=UTC)}),
    ("SELECT {t:DateTime('UTC')}", {"t": datetime(2026, 1, 1, 1, 2, 3, tzinfo=UTC)}),
    ("SELECT {a:Array(Tuple(String, String))}", {"a": [("x", "y'z"), ("\x1e", "b\\")]}),
    ("SELECT {a:Array(Tuple(String))}", {"a": [("x",)]}),
    (
        "SELECT {a:Array(UInt64)}, {b:Array(String)}, {n:Nullable(String)}, {f:Float64}",
        {"a": [1, 2], "b": [], "n": None, "f": 1.5},
    ),
    ("SELECT ('a', 'b') IN {a:Array(Tuple(String, String))}, '{y:String}'", {"a": [("a", "b")]}),
]


@pytest.mark.parametrize(("sql", "params"), CASES)
def test_rendered_answers_as_substituted(store: Store, sql: str, params: dict[str, Any]) -> None:
    substituted = store.client.query(sql, parameters=params).result_rows
    assert store.query(sql, params).result_rows == substituted


def test_a_statement_longer_than_the_parsers_limit_is_read_whole(store: Store) -> None:
    """Parameters are literals in the text: 40,000 tick times (as a set-based statement over an
    hour of ticks passes per member) make a statement of about 1 MB, past ClickHouse's default
    max_query_size (256 KiB); the store raises the limit to the statement's length for it."""
    xs = list(range(1_796_693_660_000, 1_796_693_660_000 + 40_000))
    sql = "SELECT length({xs:Array(Int64)}), arraySum({xs:Array(Int64)})"
    assert store.query_rows(sql, {"xs": xs}) == [(40_000, sum(xs))]
    store.command("SELECT length({xs:Array(Int64)})", {"xs": xs})
    with pytest.raises(Exception, match=r"(?i)max query size"):  # what it raised before
        store.client.query(sql.replace("{xs:Array(Int64)}", str(xs)))
