"""Tokens of ClickHouse SQL text, for the few questions serve asks of a statement's text itself.

Where an INSERT's inline data starts (the engine parses the statement, never the data), and, on the
engine's own canonical text of a statement (`formatQuery`), which settings its SETTINGS clauses
change, which names are called as functions and which keyword pairs (INTO OUTFILE) it holds: what
`EXPLAIN AST` leaves out. Never decides what is allowed (policy.py, guard.py do) and never runs SQL.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

# the white space before one token, then the token: a comment, a string, a quoted identifier, a
# heredoc, a word, a number, or one character (one match a token: a 256 KiB `IN (1, 1, ...)` list
# is some 10^5 of them)
_TOKEN = re.compile(
    r"""
    \s*+
    (?:
    (?P<comment>--[^\n]*|\#[ !][^\n]*|/\*)
  | (?P<string>'(?:[^'\\]|\\.|'')*'?)
  | (?P<quoted>"(?:[^"\\]|\\.|"")*"?|`(?:[^`\\]|\\.|``)*`?)
  | (?P<tag>\$[A-Za-z0-9_]*\$)
  | (?P<word>[A-Za-z_][A-Za-z0-9_$]*)
  | (?P<number>[0-9](?:[0-9A-Za-z_.]|(?<=[eEpP])[+-])*)
  | (?P<op>.)
    )
    """,
    re.X | re.S,
)


class Token(NamedTuple):
    """One token (a tuple: a 256 KiB statement is some 10^5 of them, made and read on the guard's
    threads beside the event loop)."""

    kind: str  # word, quoted, string, number, op
    text: str  # as written (a quoted identifier with its quotes)
    start: int
    end: int
    depth: int  # parentheses/brackets open before it
    upper: str  # a word's text in upper case, "" for any other token (keywords compare on it)

    @property
    def name(self) -> str:
        """An identifier's name: unquoted as the engine reads it."""
        if self.kind == "quoted":
            q = self.text[0]
            body = (
                self.text[1:-1] if len(self.text) > 1 and self.text.endswith(q) else self.text[1:]
            )
            return re.sub(r"\\(.)", r"\1", body.replace(q * 2, q))
        return self.text


class Unterminated(ValueError):
    """A string, quoted identifier, heredoc or comment that never ends."""


def lex(text: str) -> Iterator[Token]:
    """The tokens of `text` but white space and comments, with their paren depth, lazily (an
    INSERT's data after its VALUES is never lexed). Raises Unterminated for a string, identifier,
    heredoc or comment that runs to the end."""
    pos, depth = 0, 0
    while (m := _TOKEN.match(text, pos)) is not None:  # None: white space to the end
        kind = m.lastgroup or "op"
        start, end = m.span(kind)
        if kind == "comment":
            pos = _comment_end(text, start)
            continue
        if kind == "tag":  # $tag$ ... $tag$: a string
            close = text.find(m[kind], end)
            if close < 0:
                raise Unterminated("a $heredoc$ that never ends")
            end, kind = close + len(m[kind]), "string"
        elif kind in ("string", "quoted"):
            tok = m[kind]
            if len(tok) < 2 or tok[-1] != tok[0] or _escaped_end(tok):
                raise Unterminated("a quoted string or identifier that never ends")
        tok = text[start:end]
        if kind == "op" and tok in ")]":
            depth = max(0, depth - 1)
        yield Token(kind, tok, start, end, depth, tok.upper() if kind == "word" else "")
        if kind == "op" and tok in "([":
            depth += 1
        pos = end


def tokens(text: str) -> list[Token]:
    return list(lex(text))


def _escaped_end(tok: str) -> bool:
    """True where the closing quote of `tok` is escaped by a backslash (the regex stopped at the
    end of the text instead)."""
    body = tok[1:-1]
    backslashes = len(body) - len(body.rstrip("\\"))
    return backslashes % 2 == 1


@dataclass(frozen=True)
class InsertSplit:
    """An INSERT with its data inline: the statement is the text up to `head_end` (before VALUES,
    or through FORMAT X), the data starts at `data_start` in format `fmt`."""

    head_end: int
    fmt: str  # "CSV", or "Values" for INSERT ... VALUES
    data_start: int

    values: bool = False  # INSERT ... VALUES: the head ends before the keyword

    def head(self, text: str) -> str:
        """The statement alone, as `INSERT ... FORMAT X` (VALUES becomes FORMAT Values)."""
        h = text[: self.head_end]
        return h.rstrip() + " FORMAT Values" if self.values else h


def split_insert(text: str) -> InsertSplit | None:
    """Where the inline data of an INSERT starts, from its top-level `VALUES` or `FORMAT X`
    (the engine reads everything after as data, never as SQL). None: not an INSERT with inline
    data (INSERT ... SELECT, another statement, or text that does not lex). Offsets count
    characters of `text` (give it bytes decoded as latin-1 to count bytes)."""
    toks: list[Token] = []
    try:
        for t in lex(text):  # lazily: a statement that is no INSERT is not lexed past its start
            toks.append(t)
            if len(toks) == 1 and t.upper != "INSERT":
                return None
            if t.depth:
                continue
            word = t.upper
            if word in ("SELECT", "WITH"):
                return None
            if word == "VALUES":
                return InsertSplit(t.start, "Values", t.end, values=True)
            if t.kind == "word" and len(toks) >= 2 and toks[-2].upper == "FORMAT":
                if toks[-2].depth:
                    continue
                start = t.end
                while start < len(text) and text[start] in " \t\r":
                    start += 1
                if text[start : start + 1] == "\n":
                    start += 1
                return InsertSplit(t.end, t.text, start)
    except Unterminated:
        return None
    return None


def _comment_end(text: str, pos: int) -> int:
    if text.startswith("/*", pos):
        level, i = 1, pos + 2
        while level and i < len(text):
            if text.startswith("/*", i):
                level, i = level + 1, i + 2
            elif text.startswith("*/", i):
                level, i = level - 1, i + 2
            else:
                i += 1
        if level:
            raise Unterminated("a /* comment */ that never ends")
        return i
    nl = text.find("\n", pos)
    return len(text) if nl < 0 else nl + 1


def first_word(toks: list[Token]) -> str:
    return toks[0].upper if toks else ""


def called_names(toks: list[Token]) -> set[str]:
    """Every name followed by `(`: a function, table function, engine, or dictionary source call
    (and, harmlessly, a table name before its column list), lower case."""
    out = set()
    for a, b in itertools.pairwise(toks):
        if b.kind == "op" and b.text == "(" and a.kind in ("word", "quoted"):
            out.add(a.name.lower())
    return out


def has_sequence(toks: list[Token], *words: str) -> bool:
    """True where the keywords `words` follow each other (outside strings and identifiers)."""
    k = len(words)
    for i, t in enumerate(toks[: len(toks) - k + 1]):
        if t.upper == words[0] and all(toks[i + j].upper == w for j, w in enumerate(words)):
            return True
    return False


@dataclass(frozen=True)
class SettingChange:
    name: str
    value: str  # the value's text as written (a literal, or an expression)


def setting_changes(toks: list[Token]) -> tuple[list[SettingChange], int] | None:
    """The `name = value` pairs of every SETTINGS clause, `SET` statement and `MODIFY SETTING`
    of a canonical statement, and how many clauses held them. None: a clause this reader does not
    understand (the caller refuses the statement rather than guess)."""
    out: list[SettingChange] = []
    clauses = 0
    i, n = 0, len(toks)
    while i < n:
        t = toks[i]
        starts = (
            t.upper == "SETTINGS"
            or (t.upper == "SET" and i == 0)
            or (t.upper == "SETTING" and i > 0 and toks[i - 1].upper == "MODIFY")
        )
        if not starts:
            i += 1
            continue
        i += 1
        paren = i < n and toks[i].text == "(" and toks[i].kind == "op"
        if paren:
            i += 1
        if not (i + 1 < n and toks[i].kind in ("word", "quoted") and toks[i + 1].text == "="):
            continue  # a name, not a clause (system.processes' `Settings` column); the caller
            # compares the clauses found with the AST's Set nodes
        while True:
            if i + 1 >= n or toks[i].kind not in ("word", "quoted") or toks[i + 1].text != "=":
                return None
            name = toks[i].name
            j = i + 2
            if j >= n:
                return None
            start = j
            if toks[j].text == "-" and toks[j].kind == "op":
                j += 1
            if j >= n:
                return None
            if toks[j].kind in ("word", "quoted") and j + 1 < n and toks[j + 1].text == "(":
                j = _close(toks, j + 1)
            elif toks[j].kind == "op" and toks[j].text in "([":
                j = _close(toks, j)
            if j < 0:
                return None
            out.append(SettingChange(name, " ".join(t.text for t in toks[start : j + 1])))
            i = j + 1
            if i < n and toks[i].text == "," and toks[i].kind == "op":
                i += 1
                continue
            if paren:
                if i < n and toks[i].text == ")":
                    i += 1
                else:
                    return None
            elif i < n and not (toks[i].kind == "word" or toks[i].text in (")", ";")):
                return None  # a value this reader did not take whole: do not guess the rest
            break
        clauses += 1
    return out, clauses


def _close(toks: list[Token], i: int) -> int:
    """The index of the bracket closing the one at `i`; -1 when it never closes."""
    depth = toks[i].depth
    for j in range(i + 1, len(toks)):
        if toks[j].kind == "op" and toks[j].text in ")]" and toks[j].depth == depth:
            return j
    return -1


def format_tail(toks: list[Token]) -> str | None:
    """The output format a statement names with a top-level `FORMAT X`, if any."""
    for a, b in itertools.pairwise(toks):
        if a.upper == "FORMAT" and a.depth == 0 and b.kind in ("word", "quoted"):
            return b.name
    return None


def strip_format(text: str) -> str:
    """A canonical INSERT head without its trailing `FORMAT X` (the streaming insert names its
    format itself)."""
    toks = tokens(text)
    if len(toks) >= 2 and toks[-2].upper == "FORMAT":
        return text[: toks[-2].start].rstrip()
    return text.rstrip()


def kill_parts(toks: list[Token], text: str) -> tuple[str, str, str] | None:
    """(what, condition, mode) of a canonical `KILL QUERY|MUTATION|... WHERE cond [SYNC|ASYNC|
    TEST] [FORMAT X]`; None where it has another shape."""
    if len(toks) < 4 or toks[0].upper != "KILL":
        return None
    what = toks[1].upper
    try:
        w = next(i for i, t in enumerate(toks) if t.upper == "WHERE" and t.depth == 0)
    except StopIteration:
        return None
    end = len(toks)
    mode = ""
    for i in range(w + 1, len(toks)):
        t = toks[i]
        if t.depth == 0 and t.upper in ("SYNC", "ASYNC", "TEST", "FORMAT", "SETTINGS"):
            end = i
            if t.upper in ("SYNC", "ASYNC", "TEST"):
                mode = t.upper
            break
    if end == w + 1:
        return None
    cond = text[toks[w + 1].start : toks[end - 1].end]
    return what, cond, mode
