"""The few questions serve asks of SQL text itself (telemetry/serve/sqltext.py): where an INSERT's
data starts, and what the engine's canonical text of a statement names in its SETTINGS clauses,
FORMAT and KILL condition. Quoting, comments and heredocs never hide a keyword or make one up."""

from __future__ import annotations

import pytest

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
