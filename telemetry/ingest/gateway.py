"""`railscope ingest`: an insert gateway between many agents and the store. Agents point their
store DSN at it and insert exactly as they would into ClickHouse (the HTTP interface, `INSERT ...
FORMAT ArrowStream` with the batch's `insert_deduplication_token`); the gateway answers once the
batch is in its write-ahead log (inbox.py) and sends the store one merged insert per record kind
every `flush_seconds` (merge.py). Every statement is first judged by `railscope serve`'s statement
guard (serve/guard.py, on the store's own parser), and the gateway acts on the guard's plan
(serve/backend.py): an insert's target table and format, or a read-only root kind (an agent's
start-up checks), which passes through to the store under the user's limits and settings.

It never changes rows, never inserts into a table that is not a record kind's, and never answers
an insert before the batch is on its disk.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from telemetry.contracts import ComponentStats
from telemetry.errors import EngineError
from telemetry.ingest.config import IngestConfig
from telemetry.ingest.inbox import Backlog, Inbox
from telemetry.ingest.merge import Merger
from telemetry.ingest.tokens import SeenTokens
from telemetry.problems import describe
from telemetry.records import KINDS, RecordKind, SchemaError
from telemetry.serve.config import ServeConfig
from telemetry.serve.engine import NAME_TABLES, GuardAnswers, Outcome
from telemetry.serve.plan import Plan
from telemetry.store.client import Store

log = logging.getLogger("railscope.ingest")

# What the gateway passes through to the store, by the guard plan's root kind: an agent's
# start-up checks (SELECT, SHOW, DESCRIBE, EXISTS). SET and USE would outlive the request on a
# shared store connection; everything else that writes or administers is the store's own.
PASS_THROUGH_ROOTS = frozenset(
    {"SelectWithUnionQuery", "SelectIntersectExceptQuery", "SelectQuery", "DescribeQuery"}
)
PASS_THROUGH_ROOT_PREFIXES = ("Show", "Exists")


def passes_through(root: str) -> bool:
    return root in PASS_THROUGH_ROOTS or root.startswith(PASS_THROUGH_ROOT_PREFIXES)


class Gateway(GuardAnswers):
    """The gateway as serve's HTTP front sees it (serve/backend.Backend): inserts into the log,
    reads to the store. Per-user limits: the front applies max_concurrent_queries to every
    statement; the others are the engine's settings and apply to the reads passed to the store,
    with the user's own settings; an insert is answered from the log and never runs in an engine,
    so they do not apply to it (ingest/config.py INSERT_UNBOUNDED_LIMITS; `config check` says so
    where a user sets one)."""

    def __init__(self, store: Store, inbox: Inbox) -> None:
        self.store, self.inbox = store, inbox
        self.version, self.timezone = (
            str(x) for x in store.query_rows("SELECT version(), timezone()")[0]
        )
        self.tables: dict[str, RecordKind] = {k.table: k for k in KINDS.values()}
        self._reads = threading.Lock()  # start-up checks only: one at a time is plenty
        self.stats = ComponentStats("ingest:gateway")
        # what serve's statement guard (serve/guard.py) asks of an engine, answered by the store
        # (GuardAnswers): every statement is judged as `railscope serve` judges it before it is
        # taken or passed on
        self._names = {
            kind: frozenset(str(r[0]) for r in store.query_rows(f"SELECT lower(name) FROM {table}"))
            for kind, table in NAME_TABLES
        }

    def _check(self, sql: str, params: Mapping[str, str]) -> str:
        """The store's parser's answer (formatQuery, EXPLAIN AST: nothing runs)."""
        with self._reads:
            try:
                body = self.store.client.raw_query(
                    sql, parameters=dict(params) or None, fmt="TabSeparatedRaw"
                )
            except Exception as e:
                raise EngineError.from_engine(e) from None
        return body.decode() if isinstance(body, bytes) else str(body)

    def kill(self, tags: Sequence[str], *, wait: bool = False) -> None:
        """Nothing to cancel: an insert is answered once it is in the log, and a read passed to
        the store is its own (the store's limits bound it)."""

    def purge_memory(self) -> None:
        """Nothing to purge: the gateway's own memory is its requests' bodies."""

    def close(self) -> None:
        """The store belongs to IngestService's caller."""

    def _kind(self, plan: Plan, database: str | None) -> RecordKind:
        if plan.target is None:
            raise EngineError(
                48,
                "railscope ingest inserts into the record kinds' tables, not into a table function",
                "NOT_IMPLEMENTED",
            )
        db = plan.target[0] or database or self.store.database
        table = plan.target[1]
        kind = self.tables.get(table)
        if kind is None or db != self.store.database:
            raise EngineError(
                60,
                f"Table {db}.{table} does not exist: railscope ingest takes the record kinds' tables "
                f"of database {self.store.database}",
                "UNKNOWN_TABLE",
            )
        return kind

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
        if plan.kind == "insert":
            return self._insert(plan, data, database, settings, readonly)
        return self._read(plan, fmt, settings, params)

    def _insert(
        self,
        plan: Plan,
        data: bytes | memoryview,
        database: str | None,
        settings: Sequence[tuple[str, str]],
        readonly: int,
    ) -> Outcome:
        t = time.perf_counter_ns()
        try:
            kind = self._kind(plan, database)
            if readonly:
                raise EngineError(164, "Cannot insert: this user is readonly", "READONLY")
            if plan.fmt != "ArrowStream":
                raise EngineError(
                    73,
                    f"railscope ingest takes FORMAT ArrowStream, not {plan.fmt}",
                    "UNKNOWN_FORMAT",
                )
            try:
                table = ipc.open_stream(pa.py_buffer(data)).read_all()
            except (pa.ArrowInvalid, OSError) as e:
                raise EngineError(
                    117, f"the body is not an Arrow stream: {e}", "INCORRECT_DATA"
                ) from None
            try:
                table = kind.conform(table.replace_schema_metadata(None))
            except SchemaError as e:
                raise EngineError(53, str(e), "TYPE_MISMATCH") from None
            token = dict(settings).get("insert_deduplication_token") or None
            try:
                rows = self.inbox.accept(kind.name, table, token)
            except Backlog as e:
                raise EngineError(252, str(e), "TOO_MANY_PARTS") from None
            except OSError as e:
                raise EngineError(
                    425, f"cannot write the ingest log: {e}", "SYSTEM_ERROR"
                ) from None
        except EngineError as e:
            self.stats.error(e.name or str(e.code))
            raise
        with self.stats.lock:
            self.stats.received += 1
            self.stats.sent += rows
            self.stats.last_success = True
        return Outcome(
            b"",
            written_rows=rows,
            written_bytes=table.nbytes if rows else 0,
            elapsed_ns=time.perf_counter_ns() - t,
        )

    def _read(
        self,
        plan: Plan,
        fmt: str,
        settings: Sequence[tuple[str, str]],
        params: Mapping[str, str] | None,
    ) -> Outcome:
        """A read the plan's root allows, on the store, under the user's limits and settings (the
        store's client sets them for this request only)."""
        if not passes_through(plan.root):
            raise EngineError(
                48,
                "railscope ingest takes INSERT ... FORMAT ArrowStream into the record kinds' tables "
                "and read-only queries; run anything else against the store itself",
                "NOT_IMPLEMENTED",
            )
        with self._reads:
            try:
                body = self.store.client.raw_query(
                    plan.sql,
                    parameters=dict(params or {}) or None,
                    settings=dict(settings) or None,
                    fmt=None if plan.out_fmt else fmt,
                )
            except Exception as e:
                raise EngineError.from_engine(e) from None
        return Outcome(body)


class IngestService:
    """The gateway's parts: the log, the merger's thread, the HTTP endpoint. `start()`, then
    `stop()`, which stops intake, commits what was taken and tries one last merged insert
    (what is left stays in the log for the next start)."""

    def __init__(
        self, store: Store, cfg: IngestConfig, *, merge_store: Store | None = None
    ) -> None:
        """`merge_store`: the merger's own connection (embedded: its own engine handle), so a
        pass-through read never waits for a merged insert."""
        self.cfg = cfg
        self.tokens = SeenTokens(cfg.spool_dir, cfg.dedup_window_seconds)
        self.merger: Merger | None = None
        self.inbox = Inbox(cfg.spool_dir, self.tokens, cfg.max_bytes, on_commit=self._committed)
        self.merger = Merger(
            merge_store or store,
            self.inbox,
            self.tokens,
            flush_rows=cfg.flush_rows,
            flush_seconds=cfg.flush_seconds,
            retry_initial_seconds=cfg.retry_initial_seconds,
            retry_max_seconds=cfg.retry_max_seconds,
        )
        self.gateway = Gateway(store, self.inbox)
        from telemetry.serve.http import QueryServer

        host, _, port = cfg.listen.rpartition(":")
        self.server = QueryServer(
            self.gateway,
            ServeConfig(
                threads=cfg.threads,
                max_request_bytes=cfg.max_request_bytes,
                max_connections=cfg.max_connections,
                max_connections_per_network=cfg.max_connections_per_network,
                users=cfg.users,
            ),
            host=host.strip("[]") or "127.0.0.1",
            port=int(port),
            ssl_context=cfg.ssl_context(),
        )
        self.server.stats = ComponentStats("ingest:http")
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._merge_loop, name="railscope-ingest-merge", daemon=True
        )
        self.crashed: str | None = None

    def _committed(self, entry: Any) -> None:
        if self.merger is not None:
            self.merger.add(entry)

    def start(self) -> tuple[str, int]:
        self._thread.start()
        return self.server.start()

    def _merge_loop(self) -> None:
        assert self.merger is not None
        tick = min(0.25, self.cfg.flush_seconds / 4)
        while not self._stop.is_set():
            try:
                self.merger.flush()
            except Exception as e:  # a bug, or the disk: logged, counted, tried again
                self.merger.problems.exception(e, log=False)  # logged below, with its trace
                self.crashed = describe(e)
                log.exception("ingest: merge pass failed")
                self._stop.wait(1.0)
            else:
                self.crashed = None
            self._stop.wait(tick)

    def components(self) -> list[ComponentStats]:
        assert self.merger is not None
        files, rows = self.merger.waiting()
        pending, done = self.tokens.counts()
        with self.inbox.stats.lock:
            self.inbox.stats.extra.update(
                log_bytes=float(self.inbox.bytes),
                log_files=float(files),
                log_rows=float(rows),
                commits=float(self.inbox.commits),
                duplicates=float(self.inbox.duplicates),
                tokens_pending=float(pending),
                tokens_done=float(done),
            )
        with self.merger.stats.lock:
            self.merger.stats.extra["inserts"] = float(self.merger.inserts)
        return [self.server.stats, self.gateway.stats, self.inbox.stats, self.merger.stats]

    def health(self) -> list[str]:
        return [f"ingest merge: {self.crashed}"] if self.crashed else []

    def stop(self) -> None:
        self.server.stop()
        self.inbox.stop_commits()
        self._stop.set()
        self._thread.join(60)
        assert self.merger is not None
        try:
            self.merger.flush(force=True)
        except Exception as e:
            log.error(
                "ingest: last merged insert failed (%s); the log keeps it for the next start", e
            )
        left, rows = self.merger.waiting()
        if left or list(self.merger.groups.glob("*.json")):
            log.warning(
                "ingest: stopping with %d rows in the log %s; they go at the next start",
                rows,
                self.cfg.spool_dir,
            )
        self.inbox.close()
