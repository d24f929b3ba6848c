"""The few questions serve asks of SQL text itself (telemetry/serve/sqltext.py): where an INSERT's
data starts, and what the engine's canonical text of a statement names in its SETTINGS clauses,
FORMAT and KILL condition. Quoting, comments and heredocs never hide a keyword or make one up."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from telemetry.serve import guard
from telemetry.serve import sqltext as S


@pytest.mark.parametrize(
    ("text", "head", "fmt", "data"),
    [
        ("INSERT INTO t VALUES (1),(2)", "INSERT INTO t FORMAT Values", "Values", " (1),(2)"),
        ("insert into t format CSV\n1,2\n", "insert into t format CSV", "CSV", "1,2\n"),
        ("INSERT INTO t (a, `b`) SETTINGS x=1 FORMAT JSONEachRow {\"a\": 'x}",
         "INSERT INTO t (a, `b`) SETTINGS x=1 FORMAT JSONEachRow", "JSONEachRow", "{\"a\": 'x}"),
        # what follows VALUES is data, whatever it looks like
        ("INSERT INTO t VALUES ('x'); DROP TABLE t", "INSERT INTO t FORMAT Values", "Values",
         " ('x'); DROP TABLE t"),
        # a keyword inside a comment, string or quoted name is not one
        ("INSERT /* VALUES */ INTO `VALUES` FORMAT TSV\nx", "INSERT /* VALUES */ INTO `VALUES` FORMAT TSV", "TSV", "x"),
        ("INSERT INTO t -- FORMAT CSV\nVALUES (1)", "INSERT INTO t -- FORMAT CSV FORMAT Values", "Values", " (1)"),
    ],
)  # fmt: skip
def test_insert_data_starts_after_values_or_format(
    text: str, head: str, fmt: str, data: str
) -> None:
    split = S.split_insert(text)
    assert split is not None
    assert split.head(text) == head and split.fmt == fmt and text[split.data_start :] == data


@pytest.mark.parametrize(
    "text",
    [
        "INSERT INTO t SELECT * FROM values('a Int', 1)",  # INSERT ... SELECT: no inline data
        "SELECT 'VALUES'",
        "INSERT INTO t 'never closed VALUES",
        "INSERT INTO t $$ VALUES",
    ],
)
def test_no_inline_data(text: str) -> None:
    assert S.split_insert(text) is None


def test_tokens_skip_nested_comments_heredocs_and_quotes() -> None:
    toks = S.tokens('SELECT $$a\'b$$, `x``y`, "q\\"r" /* a /* b */ c */ -- x\n# y\n 1')
    assert [t.text for t in toks] == ["SELECT", "$$a'b$$", ",", "`x``y`", ",", '"q\\"r"', "1"]
    assert toks[3].name == "x`y"
    with pytest.raises(S.Unterminated):
        S.tokens("SELECT 'never")
    with pytest.raises(S.Unterminated):
        S.tokens("SELECT 1 /* /* */")


def test_settings_clauses_are_read_or_refused_not_guessed() -> None:
    toks = S.tokens(
        "SELECT 1\nSETTINGS max_threads = 1, disk = disk(type = local, path = '/x'), m = -5\n"
        "FORMAT JSON"
    )
    got = S.setting_changes(toks)
    assert got is not None
    changes, clauses = got
    assert [(c.name, c.value) for c in changes] == [
        ("max_threads", "1"),
        ("disk", "disk ( type = local , path = '/x' )"),
        ("m", "- 5"),
    ]
    assert clauses == 1 and S.format_tail(toks) == "JSON" and "disk" in S.called_names(toks)
    assert S.setting_changes(S.tokens("SET a = 1, b = 'x'")) is not None
    # a value this reader does not take whole: the rest is not guessed
    assert S.setting_changes(S.tokens("SELECT 1 SETTINGS a = 1 + 2, b = 0")) is None
    # a column named Settings is no clause
    assert S.setting_changes(S.tokens("SELECT Settings['log_comment'] FROM system.processes")) == (
        [],
        0,
    )


def test_keyword_pairs_and_kill() -> None:
    assert S.has_sequence(S.tokens("SELECT 1\nINTO OUTFILE 'x' AND STDOUT"), "INTO", "OUTFILE")
    assert not S.has_sequence(S.tokens("SELECT 'INTO OUTFILE'"), "INTO", "OUTFILE")
    text = "KILL QUERY WHERE (query_id = 'x') AND (user = 'y') SYNC FORMAT JSON"
    assert S.kill_parts(S.tokens(text), text) == (
        "QUERY",
        "(query_id = 'x') AND (user = 'y')",
        "SYNC",
    )
    assert (
        S.strip_format("INSERT INTO t\nSETTINGS a = 1\nFORMAT CSV")
        == "INSERT INTO t\nSETTINGS a = 1"
    )


# -- the guard's reading of EXPLAIN AST lines ------------------------------------------------------
# the dump's line grammar, as a regular expression: what `_without_tail` must strip, read from the
# end instead (a regular expression tried at every position of a 1.2 MB literal line held the
# interpreter for 0.12 s)
_TAIL = re.compile(r"\s*(?:\(alias [^)]*\)\s*)?(?:\(children \d+\))?\s*$")


@pytest.mark.parametrize(
    ("line", "name"),
    [
        ("Function plus (alias s) (children 1)", "plus"),
        ("Identifier system.users (alias u)", "system.users"),
        ("Function tuple (children 2)", "tuple"),
        ("Literal Tuple_(UInt64_1, UInt64_2) (alias t)", "Tuple_(UInt64_1, UInt64_2)"),
        ("Literal Tuple_(UInt64_1, UInt64_2)", "Tuple_(UInt64_1, UInt64_2)"),
        ("Literal \\'(alias x)\\'", "\\'(alias x)\\'"),
        ("Function f (alias a) (children 3a)", "f (alias a) (children 3a)"),
        ("Function f (children 2) (alias a)", "f (children 2)"),
        ("Function (alias (children 1)", ""),  # read two ways: the longer tail goes (hypothesis)
    ],
)
def test_a_dump_lines_alias_and_children_are_not_its_name(line: str, name: str) -> None:
    (node,) = guard.parse_ast(line)
    assert node.name == name == _TAIL.sub("", line.split(" ", 1)[1]).strip()


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from([*"ab ()\t1_'٣", "(alias ", "(children "])).map("".join),
)
def test_the_tail_is_read_as_the_grammar_says(rest: str) -> None:
    assert guard._without_tail(rest) == _TAIL.sub("", rest).strip()
