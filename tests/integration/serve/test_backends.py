"""The guard's plan, read from the engine's own parse of each statement: its root kind, the tables
it names and an INSERT's target (what a backend decides from, never the SQL text), and the one
table of setting rules judging a setting whichever way a request gives it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from telemetry.serve import guard
from telemetry.serve.engine import Engine
from telemetry.serve.plan import Plan
from telemetry.serve.policy import Limits, Refused
from telemetry.store import Store

LIMITS = Limits(3, 1 << 30, 1000, 1 << 20, 4)


@pytest.fixture(scope="module")
def engine(chdb_dsn: str) -> Iterator[Engine]:
    e = Engine(str(Store(chdb_dsn).dsn.path))
    yield e
    e.close()


def who(readonly: int = 0) -> guard.Who:
    return guard.Who("u", readonly, readonly, frozenset(), LIMITS)


def plan(engine: Engine, text: str, insert_fmt: str | None = None) -> Plan:
    return guard.judge(engine, who(), text, params={}, database=None, insert_fmt=insert_fmt)


@pytest.mark.parametrize(
    ("text", "insert_fmt", "root", "tables", "target"),
    [
        ("INSERT INTO `db`.`gpu_samples` (a, b) FORMAT ArrowStream", "ArrowStream",
         "InsertQuery", ("db.gpu_samples",), ("db", "gpu_samples")),
        # a comment and odd spacing ahead of the statement: the parse, not a pattern, reads it
        ("/* agent */ -- x\n  insert   into gpu_samples FORMAT ArrowStream", "ArrowStream",
         "InsertQuery", ("gpu_samples",), ("", "gpu_samples")),
        ("INSERT INTO `we.ird`.`t` SETTINGS async_insert = 0 FORMAT Values", "Values",
         "InsertQuery", ("we.ird.t",), ("we.ird", "t")),
        ("INSERT INTO t SELECT * FROM s", None, "InsertQuery", ("t", "s"), ("", "t")),
        ("SELECT * FROM a.b JOIN c ON 1 WHERE x IN (SELECT 1 FROM d) FORMAT JSON", None,
         "SelectWithUnionQuery", ("a.b", "c", "d"), None),
        ("(SELECT 1) UNION ALL (SELECT 2)", None, "SelectWithUnionQuery", (), None),
        ("SHOW TABLES", None, "ShowTables", (), None),
        ("DROP TABLE x.y", None, "DropQuery", (), None),
    ],
)  # fmt: skip
def test_the_plan_carries_root_tables_and_target(
    engine: Engine,
    text: str,
    insert_fmt: str | None,
    root: str,
    tables: tuple[str, ...],
    target: tuple[str, str] | None,
) -> None:
    p = plan(engine, text, insert_fmt)
    assert (p.root, p.tables, p.target) == (root, tables, target)
    assert p.kind == ("insert" if insert_fmt else "query")


def test_a_statement_naming_its_own_format_says_so(engine: Engine) -> None:
    assert plan(engine, "SELECT 1 FORMAT JSONEachRow").out_fmt == "JSONEachRow"
    assert plan(engine, "SELECT 'FORMAT JSON'").out_fmt == ""


@pytest.mark.parametrize("readonly", [0, 2])
def test_every_setting_source_is_judged_by_the_one_table(engine: Engine, readonly: int) -> None:
    """max_execution_time is capped by the user's limit (3 s) and bounded below by 0 in
    SETTING_RULES: a URL parameter, a SETTINGS clause (of the statement or a subquery) and a
    SET statement get the same answer for the same value."""

    def outcomes(value: str) -> list[int]:
        got = []
        attempts = [
            lambda: guard.check_url_settings(who(readonly), {"max_execution_time": value}),
            lambda: guard.judge(
                engine, who(readonly), f"SELECT 1 SETTINGS max_execution_time = {value}",
                params={}, database=None,
            ),
            lambda: guard.judge(
                engine, who(readonly),
                f"SELECT * FROM (SELECT 1 SETTINGS max_execution_time = {value})",
                params={}, database=None,
            ),
            lambda: guard.judge(
                engine, who(readonly), f"SET max_execution_time = {value}", params={},
                database=None,
            ),
        ]  # fmt: skip
        for attempt in attempts:
            try:
                attempt()
            except Refused as e:
                got.append(e.code)
            else:
                got.append(0)
        return got

    assert outcomes("2") == [0, 0, 0, 0]
    assert outcomes("10") == [452] * 4  # over the user's limit
    assert outcomes("0") == [452] * 4  # no limit at all: never, with a limit to keep
    # readonly 1 changes no setting, whichever way
    for attempt in (
        lambda: guard.check_url_settings(who(1), {"max_execution_time": "2"}),
        lambda: plan_as(engine, who(1), "SELECT 1 SETTINGS max_execution_time = 2"),
    ):
        with pytest.raises(Refused) as e:
            attempt()
        assert e.value.code == 164


def plan_as(engine: Engine, w: guard.Who, text: str) -> Plan:
    return guard.judge(engine, w, text, params={}, database=None)
