"""serve's one table of setting rules (policy.SETTING_RULES): what each setting source is judged
by, and the copy of the table docs/security.md shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from telemetry.serve.policy import (
    SERVE_SETTINGS,
    Limits,
    Refused,
    check_setting,
    setting_rule,
    setting_rules_markdown,
)

LIMITS = Limits(3, 1 << 30, 1000, 1 << 20, 4)


def code(readonly: int, name: str, value: str, allow: frozenset[str] = frozenset()) -> int:
    try:
        check_setting("u", readonly, allow, LIMITS, name, value)
    except Refused as e:
        return e.code
    return 0


def test_docs_show_the_table() -> None:
    docs = (Path(__file__).parents[3] / "docs" / "security.md").read_text()
    assert setting_rules_markdown() in docs


@pytest.mark.parametrize("readonly", [0, 2])
def test_numbers_are_bounded(readonly: int) -> None:
    for value in ("-1", "- 1", "'-1'", "nan", "inf", "1e400", "4", "0", "(0 - 1)", "toInt8(-1)"):
        assert code(readonly, "max_execution_time", value) == 452, value
    assert code(readonly, "max_execution_time", "2.5") == 0
    assert code(readonly, "max_block_size", "0") == 452
    assert code(readonly, "max_threads", "-1") == 452
    assert code(readonly, "max_query_size", str(1 << 30)) == 452


def test_any_other_setting_takes_no_negative_number() -> None:
    assert code(0, "max_partitions_per_insert_block", "-1") == 452
    assert code(0, "max_partitions_per_insert_block", "100") == 0
    assert code(0, "date_time_input_format", "'best_effort'") == 0
    assert code(2, "max_partitions_per_insert_block", "100") == 164


def test_what_serve_sets_is_const_for_every_user() -> None:
    assert SERVE_SETTINGS == {"allow_introspection_functions": "0", "dialect": "clickhouse"}
    everything = frozenset({"input_format_values_interpret_expressions", "allow_ddl"})
    for name in (
        "input_format_values_interpret_expressions",
        "input_format_values_deduce_templates_of_expressions",
        "allow_ddl",
        "allow_experimental_analyzer",
        "additional_table_filters",
        "log_comment",
    ):
        assert setting_rule(name).const, name
        assert code(0, name, "1", everything) == 497, name
    assert code(0, "allow_introspection_functions", "1") == 497
    assert code(0, "allow_introspection_functions", "false") == 0
    assert code(0, "dialect", "'kusto'") == 497
    assert code(1, "max_execution_time", "1") == 164


def test_denied_settings_need_allow() -> None:
    assert code(0, "send_logs_level", "'trace'") == 497
    assert code(0, "send_logs_level", "'trace'", frozenset({"send_logs_level"})) == 0
