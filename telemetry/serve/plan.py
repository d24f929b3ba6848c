"""What the statement guard decided about one statement (guard.py writes it, a backend reads it):
the canonical text to run, its root kind, the tables it names and an INSERT's target. A backend
(backend.py) decides what to do from these fields, never from the statement's text. Data only:
never parses SQL.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Plan:
    """What serve runs: one canonical statement, or an INSERT head and its data's format."""

    kind: str  # "query", "insert" or "kill"
    sql: str  # the canonical statement; an INSERT's head without FORMAT
    root: str = ""  # the root node of the statement's EXPLAIN AST (SelectWithUnionQuery, ...)
    tables: tuple[str, ...] = ()  # every table the statement names, as EXPLAIN AST writes it
    target: tuple[str, str] | None = None  # an INSERT's (database or "", table); None: not one
    fmt: str = ""  # the INSERT data's format
    out_fmt: str = ""  # the format the statement names itself (FORMAT X), if any
    result_set: bool = False  # the statement answers rows (X-ClickHouse-Format is sent)
    settings: dict[str, str] = field(default_factory=dict)  # more SETs for this statement
    kill_condition: str = ""
    kill_mode: str = ""
