"""Statements on the embedded ClickHouse engine for the HTTP endpoint: raw bytes in, raw bytes out.

Each call opens its own chdb handle on the engine this process already hosts (handles are cheap,
~1 ms, and run concurrently: chdb releases the GIL), so `SET`, `USE` and readonly never leak from
one request into the next. One long-lived handle keeps the engine up between requests. Never
parses or re-encodes results: the engine writes the requested format itself.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from telemetry.errors import EngineError
from telemetry.serve.plan import Plan

_SETTING_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class Outcome:
    """What one statement returned: the body as the engine wrote it and its statistics."""

    body: bytes | memoryview
    read_rows: int = 0
    read_bytes: int = 0
    written_rows: int = 0
    written_bytes: int = 0
    elapsed_ns: int = 0
    keep: list[Any] = field(default_factory=list, repr=False)  # owners of `body`'s memory

    def summary(self) -> dict[str, str]:
        return {
            "read_rows": str(self.read_rows),
            "read_bytes": str(self.read_bytes),
            "written_rows": str(self.written_rows),
            "written_bytes": str(self.written_bytes),
            "total_rows_to_read": str(self.read_rows),
            "result_rows": "0",
            "result_bytes": str(len(self.body)),
            "elapsed_ns": str(self.elapsed_ns),
        }


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def escape_param(value: str) -> str:
    """A query parameter's value as the engine reads it (TSV-escaped): exactly `value`."""
    return (
        value.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    )


# what formatQuery's errors add to the statement's own ("... : In scope SELECT formatQuery(...)")
_SCOPE = re.compile(r"\s*:\s*In scope SELECT formatQuery\(.*$", re.S)


# The most statement text the guard parses (ClickHouse's own default max_query_size): the engine's
# parse grows faster than the text (a 2 MB `1 IN (1,1,...)` took 22 s), so a statement past it is
# refused before anything parses it. An INSERT's data is not statement text: it streams apart.
GUARD_MAX_QUERY_BYTES = 256 << 10


# the engine's own names the guard checks statements against: kind -> system table
NAME_TABLES = (
    ("table_functions", "system.table_functions"),
    ("engines", "system.table_engines"),
    ("database_engines", "system.database_engines"),
)


class GuardAnswers:
    """What serve's statement guard asks of an engine (guard.Parser), answered by an engine's own
    parser through `_check(sql, params)`: the embedded engine (Engine) and the ingest gateway's
    store (telemetry/ingest/gateway.py) both. `_names` holds NAME_TABLES' names."""

    _names: dict[str, frozenset[str]]

    def _check(self, sql: str, params: Mapping[str, str]) -> str:
        raise NotImplementedError

    def _param(self, text: str) -> str:
        """`text` as a query parameter value for `_check` (as is, unless the handle wants it
        escaped)."""
        return text

    def table_functions(self) -> frozenset[str]:
        return self._names["table_functions"]

    def engines(self) -> frozenset[str]:
        return self._names["engines"] | self._names["database_engines"]

    def canonical(self, text: str) -> str:
        """The engine's own text of `text` as exactly one statement (formatQuery: a second
        statement is its syntax error)."""
        if "\0" in text:
            raise EngineError(62, "Syntax error: a NUL byte in the query", "SYNTAX_ERROR")
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > GUARD_MAX_QUERY_BYTES:
            raise EngineError(
                62,
                f"Syntax error: the statement is {size} bytes, over max_query_size "
                f"({GUARD_MAX_QUERY_BYTES}); send an INSERT's data apart (FORMAT X, or VALUES), "
                "or a long list as a query parameter",
                "SYNTAX_ERROR",
            )
        out = self._check("SELECT formatQuery({q:String})", {"q": self._param(text)})
        return out[:-1] if out.endswith("\n") else out

    def explain_ast(self, sql: str, params: Mapping[str, str]) -> str:
        """`EXPLAIN AST` of one canonical statement, query parameters substituted."""
        return self._check("EXPLAIN AST " + sql, params)


class Engine(GuardAnswers):
    """The embedded engine at `path` (the directory a `chdb://PATH` DSN names)."""

    def __init__(self, path: str) -> None:
        import chdb

        # the same spelling clickhouse-connect uses: chdb compares engine paths literally
        self.path = os.path.realpath(path)
        self._chdb = chdb
        self._keepalive = chdb.connect(self.path)
        self._lock = threading.Lock()
        raw = self._keepalive._conn
        row = raw.query("SELECT version(), timezone()", "TabSeparated")
        self.version, self.timezone = row.bytes().decode().strip().split("\t")
        self._names = {}
        for kind, table in NAME_TABLES:
            got = raw.query(f"SELECT lower(name) FROM {table}", "TabSeparatedRaw").bytes()
            self._names[kind] = frozenset(got.decode().split())

    def close(self) -> None:
        with self._lock:
            if self._keepalive is not None:
                self._keepalive.close()
                self._keepalive = None

    # -- what the guard asks (guard.Parser: GuardAnswers), on a read-only handle ------------
    def _param(self, text: str) -> str:
        return escape_param(text)  # chdb's raw parameters take ClickHouse's escaped text

    def _check(self, sql: str, params: Mapping[str, str]) -> str:
        conn = self._chdb.connect(self.path)
        raw = conn._conn
        try:
            # 2, not 1: EXPLAIN applies the statement's own SETTINGS clause (readonly 1 would
            # refuse them all); nothing it runs writes either way
            # the text is at most GUARD_MAX_QUERY_BYTES (canonical); the engine's own text of it
            # adds spaces (`1,1` -> `1, 1`), hence the room
            raw.query(f"SET max_query_size = {2 * GUARD_MAX_QUERY_BYTES + 1024}", "TabSeparated")
            raw.query("SET readonly = 2", "TabSeparated")
            return raw.query(sql, "TabSeparatedRaw", params=dict(params)).bytes().decode()
        except Exception as e:
            err = EngineError.from_engine(e)
            err.message = _SCOPE.sub("", err.message)
            raise err from None
        finally:
            conn.close()

    # -- statements ------------------------------------------------------------------------------
    def _session(
        self,
        database: str | None,
        settings: Sequence[tuple[str, str]],
        readonly: int,
        tag: str,
    ) -> tuple[Any, Any]:
        """A handle with, in this order: `settings` (serve's limits, the user's own, the plan's),
        the query's tag (log_comment: how serve finds it to cancel it), readonly (which then
        refuses any further SET), and the database last."""
        conn = self._chdb.connect(self.path)
        raw = conn._conn
        try:
            for k, v in settings:
                if not _SETTING_NAME.match(k):
                    raise EngineError(115, f"Unknown setting '{k}'", "UNKNOWN_SETTING")
                raw.query(f"SET {k} = {_quote(v)}", "TabSeparated")
            if tag:
                raw.query(f"SET log_comment = {_quote(tag)}", "TabSeparated")
            if readonly:
                raw.query(f"SET readonly = {int(readonly)}", "TabSeparated")
            if database:
                raw.query(f"USE `{database.replace('`', '``')}`", "TabSeparated")
        except EngineError:
            conn.close()
            raise
        except Exception as e:
            conn.close()
            raise EngineError.from_engine(e) from None
        return conn, raw

    def query(
        self,
        sql: bytes | str,
        fmt: str,
        *,
        database: str | None = None,
        settings: Sequence[tuple[str, str]] = (),
        params: Mapping[str, str] | None = None,
        readonly: int = 0,
        tag: str = "",
    ) -> Outcome:
        """Run one statement; `fmt` is the output format unless the statement names its own."""
        conn, raw = self._session(database, settings, readonly, tag)
        try:
            res = raw.query(sql, fmt, params=dict(params or {}))
            # the engine's own buffer, not a copy: a 1M-row result is tens of MB
            view = res.get_memview() if res.size() else None
            return Outcome(
                view.view() if view is not None else b"",
                read_rows=res.rows_read(),
                read_bytes=res.bytes_read(),
                written_rows=res.rows_written(),
                written_bytes=res.bytes_written(),
                elapsed_ns=int(res.elapsed() * 1e9),
                keep=[res, view],
            )
        except Exception as e:
            raise EngineError.from_engine(e) from None
        finally:
            conn.close()

    def run(
        self,
        plan: Plan,
        fmt: str,
        data: bytes | memoryview = b"",
        *,
        database: str | None = None,
        settings: Sequence[tuple[str, str]] = (),
        params: Mapping[str, str] | None = None,
        readonly: int = 0,
        tag: str = "",
    ) -> Outcome:
        """The plan's statement (backend.Backend): an INSERT head with `data`, or a query."""
        if plan.kind == "insert":
            return self.insert(
                plan.sql, plan.fmt, data, database=database, settings=settings,
                readonly=readonly, tag=tag,
            )  # fmt: skip
        return self.query(
            plan.sql, fmt, database=database, settings=settings, params=params,
            readonly=readonly, tag=tag,
        )  # fmt: skip

    def insert(
        self,
        head: str,
        fmt: str,
        data: bytes | memoryview,
        *,
        database: str | None = None,
        settings: Sequence[tuple[str, str]] = (),
        readonly: int = 0,
        tag: str = "",
    ) -> Outcome:
        """`INSERT INTO t (...) [SETTINGS ...]` (no FORMAT) with `data` in format `fmt`."""
        conn, _ = self._session(database, settings, readonly, tag)
        try:
            ins = conn.send_insert(head, fmt)
            try:
                if len(data):
                    ins.append(data)
                done = ins.finish()
            except BaseException:
                with contextlib.suppress(RuntimeError):  # the engine may have dropped it already
                    ins.cancel()
                raise
            return Outcome(
                b"",
                written_rows=int(done.rows_written),
                written_bytes=int(done.bytes_written),
                elapsed_ns=int(done.elapsed * 1e9),
            )
        except EngineError:
            raise
        except Exception as e:
            raise EngineError.from_engine(e) from None
        finally:
            conn.close()

    def purge_memory(self) -> None:
        """Hand the allocator's freed pages back to the system (SYSTEM JEMALLOC PURGE): after a
        query refused for memory, serve's RSS returns to what it was (1.3 GiB -> 0.3 GiB
        measured) instead of staying at the query's peak."""
        conn = self._chdb.connect(self.path)
        try:
            conn._conn.query("SYSTEM JEMALLOC PURGE", "TabSeparated")
        except Exception as e:  # an engine built without jemalloc
            raise EngineError.from_engine(e) from None
        finally:
            conn.close()

    def kill(self, tags: Sequence[str], *, wait: bool = False) -> None:
        """Cancel the queries serve tagged `tags` (and nothing else: the collectors' inserts and
        the engine's ticks carry no tag of serve's)."""
        if not tags:
            return
        conn = self._chdb.connect(self.path)
        try:
            conn._conn.query(
                "KILL QUERY WHERE Settings['log_comment'] IN {tags:Array(String)} "
                + ("SYNC" if wait else "ASYNC"),
                "TabSeparated",
                params={"tags": escape_param("[" + ",".join(map(_quote, tags)) + "]")},
            )
        except Exception as e:  # already finished, or the engine is closing
            raise EngineError.from_engine(e) from None
        finally:
            conn.close()
