"""The queries serve is running for its users: each with the client's query_id, its user and the
tag serve gave its engine session (log_comment), so a user's KILL QUERY finds that user's own
queries only and a cancelled request stops its query.

A user's `KILL QUERY WHERE cond` is judged against this registry, never against the engine's
`system.processes` (which also lists the collectors' inserts, the engine's ticks and other users'
statements with their parameters). Never holds a query's parameters, only its canonical text.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field

from telemetry.errors import EngineError
from telemetry.serve import guard
from telemetry.serve.backend import Backend
from telemetry.serve.engine import Outcome, escape_param
from telemetry.serve.plan import Plan

# The columns a KILL QUERY condition may name, as in system.processes
KILL_COLUMNS = (
    "query_id String, user String, query String, elapsed Float64, is_initial_query UInt8, "
    "initial_query_id String, initial_user String, current_database String"
)
ROWS_PARAM = "railscope_serve_queries"
KILL_TABLE = f"format(JSONEachRow, '{KILL_COLUMNS}', {{{ROWS_PARAM}:String}})"
KILL_RESULT = (
    "format(JSONEachRow, 'kill_status String, query_id String, user String, query String', "
    f"{{{ROWS_PARAM}:String}})"
)


@dataclass(eq=False)
class Query:
    query_id: str
    user: str
    sql: str
    database: str
    tag: str = field(default_factory=lambda: f"railscope-serve:{uuid.uuid4()}")
    started: float = field(default_factory=time.monotonic)

    def row(self) -> dict[str, object]:
        return {
            "query_id": self.query_id,
            "user": self.user,
            "query": self.sql,
            "elapsed": round(time.monotonic() - self.started, 6),
            "is_initial_query": 1,
            "initial_query_id": self.query_id,
            "initial_user": self.user,
            "current_database": self.database,
        }


class Registry:
    """Running queries by query_id (unique, as a ClickHouse server keeps them)."""

    def __init__(self) -> None:
        self.by_id: dict[str, Query] = {}

    def add(self, q: Query) -> None:
        if q.query_id in self.by_id:
            raise EngineError(
                216,
                f"Query with id = {q.query_id} is already running.",
                "QUERY_WITH_SAME_ID_IS_ALREADY_RUNNING",
            )
        self.by_id[q.query_id] = q

    def remove(self, q: Query) -> None:
        if self.by_id.get(q.query_id) is q:
            del self.by_id[q.query_id]

    def of_user(self, user: str, but: Query | None = None) -> list[Query]:
        return [q for q in self.by_id.values() if q.user == user and q is not but]

    def tags(self) -> list[str]:
        return [q.tag for q in self.by_id.values()]


def rows(queries: list[Query]) -> str:
    """The queries as JSONEachRow text, the KILL_TABLE parameter."""
    return "".join(json.dumps(q.row(), separators=(",", ":")) + "\n" for q in queries)


def result_rows(queries: list[Query], status: str) -> str:
    return "".join(
        json.dumps(
            {"kill_status": status, "query_id": q.query_id, "user": q.user, "query": q.sql},
            separators=(",", ":"),
        )
        + "\n"
        for q in queries
    )


def kill_select(
    engine: Backend,
    who: guard.Who,
    plan: Plan,
    own: list[Query],
    params: dict[str, str],
) -> tuple[Plan, dict[str, str]]:
    """The SELECT that evaluates `KILL QUERY WHERE cond` of `who` over `own` (that user's running
    queries, as KILL_TABLE), judged like any SELECT of a readonly 2 user, and its parameters. The
    guard has already refused a condition that is more than a comparison of query_id, user or
    query with literals. The caller runs it under the user's limits, as one of the user's
    queries."""
    reader = guard.Who(who.name, max(who.readonly, 2), max(who.level, 2), who.allow, who.limits)
    table = {**params, ROWS_PARAM: escape_param(rows(own))}
    select = f"SELECT query_id FROM {KILL_TABLE} WHERE {plan.kill_condition}"
    check = guard.judge(engine, reader, select, params=table, database=None)
    return check, table


def matched(own: list[Query], got: Outcome) -> list[Query]:
    ids = set(bytes(got.body).decode().split("\n")) - {""}
    return [q for q in own if q.query_id in ids]


def answer(engine: Backend, plan: Plan, hit: list[Query], fmt: str) -> Outcome:
    """Cancel `hit` (unless TEST) and answer as ClickHouse's KILL QUERY does."""
    if hit and plan.kill_mode != "TEST":
        engine.kill([q.tag for q in hit], wait=plan.kill_mode == "SYNC")
    status = {"SYNC": "finished", "TEST": "cant_cancel"}.get(plan.kill_mode, "waiting")
    result = {ROWS_PARAM: escape_param(result_rows(hit, status))}
    # serve's own statement, made of constants: the result rows ride as a parameter
    rows = Plan("query", f"SELECT * FROM {KILL_RESULT}", root="SelectWithUnionQuery")
    return engine.run(rows, fmt, params=result, readonly=2)
