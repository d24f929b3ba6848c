"""The store: one clickhouse-connect client for the embedded engine (chdb) and for a server.

No code branches on which deployment it is, except DDL for clusters. The embedded engine allows
one data path per process, so clients are shared per path here.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import pyarrow as pa

from telemetry.errors import StoreUnavailable
from telemetry.records import KINDS, RecordKind
from telemetry.store import migrations as mig
from telemetry.store.dsn import DEFAULT_DATABASE, Dsn, parse_dsn
from telemetry.store.rollups import ROLLUPS
from telemetry.store.schema import LOCAL_SUFFIX, literal, quote, table_ttl_sql
from telemetry.store.statement import render

if TYPE_CHECKING:
    import polars as pl

log = logging.getLogger(__name__)

_EMBEDDED: dict[str, Any] = {}
_EMBEDDED_LOCK = threading.Lock()


def _open_embedded(dsn: Dsn) -> Any:
    import clickhouse_connect

    assert dsn.path is not None
    with _EMBEDDED_LOCK:
        if dsn.path in _EMBEDDED:
            return _EMBEDDED[dsn.path]
        if _EMBEDDED:
            other = next(iter(_EMBEDDED))
            raise StoreUnavailable(
                f"embedded store {dsn.path}: this process already opened {other} "
                "(the embedded engine allows one data path per process)"
            )
        Path(dsn.path).mkdir(parents=True, exist_ok=True)
        busy = _in_use(dsn)
        if busy:
            raise StoreUnavailable(busy)
        try:
            # pread, not mmap, for the files an insert reads (a spool batch arrives as a file):
            # a mapped input counts whole in this process's resident memory while it is read
            client = clickhouse_connect.get_client(
                dsn=f"chdb://{dsn.path}", settings={"storage_file_read_method": "pread"}
            )
        except Exception as e:  # chdb raises plain RuntimeError on a locked path
            raise StoreUnavailable(
                f"embedded store {dsn.path}: cannot open: {first_line(e)}"
            ) from None
        _EMBEDDED[dsn.path] = client
        return client


# ClickHouse's default max_query_size (bytes of a statement's text the parser reads)
MAX_QUERY_SIZE = 262_144


def _sized(text: str) -> dict[str, Any] | None:
    """The settings a rendered statement needs: its parameters are literals in its text, and a
    set-based statement over an hour of ticks (each tick's members, pairs or links) can pass
    ClickHouse's max_query_size; such a statement raises it to its own length."""
    if len(text) < (MAX_QUERY_SIZE - 4096) // 4:  # under the limit however it encodes
        return None
    n = len(text.encode())
    return {"max_query_size": n + 4096} if n >= MAX_QUERY_SIZE - 4096 else None


# `railscope serve` writes its query endpoint here (in the store directory) while it runs
SERVE_URL_FILE = "railscope-serve.url"


def _in_use(dsn: Dsn) -> str | None:
    """One line when another process holds the embedded store (the engine flocks `status` and
    writes its PID there), checked before opening so the engine prints nothing of its own."""
    import fcntl

    assert dsn.path is not None
    status = Path(dsn.path) / "status"
    try:
        fd = os.open(status, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None  # a status file left by a process that is gone
    except BlockingIOError:
        text = status.read_text(errors="replace")
    finally:
        os.close(fd)
    pid = next(
        (ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("PID:")), ""
    )
    if pid == str(os.getpid()):
        return None  # this process hosts the engine already (opened without a Store): shareable
    by = f" by pid {pid}" if pid else " by another process"
    try:
        url = (Path(dsn.path) / SERVE_URL_FILE).read_text().strip()
        how = f"(railscope serve): query it with --dsn {url}"
    except OSError:
        url = "http://127.0.0.1:8123"
        how = f"(the embedded store admits one process): run it under `railscope serve` and use --dsn {url}"
    if dsn.database != DEFAULT_DATABASE:
        how += f"/{dsn.database}"
    return f"embedded store {dsn.path} is in use{by} {how} instead"


def _open_server(dsn: Dsn, connect_timeout: float) -> Any:
    import clickhouse_connect
    from clickhouse_connect.driver.exceptions import ClickHouseError

    try:
        return clickhouse_connect.get_client(
            host=dsn.host,
            port=dsn.port,
            username=dsn.username,
            password=dsn.password,
            secure=dsn.scheme == "https",
            verify=dsn.verify,
            ca_cert=dsn.ca_cert,
            client_cert=dsn.client_cert,
            client_cert_key=dsn.client_key,
            connect_timeout=connect_timeout,
            send_receive_timeout=60,
            autogenerate_session_id=False,
        )
    except (ClickHouseError, OSError) as e:
        raise StoreUnavailable(
            f"ClickHouse at {dsn.redacted()} is unreachable: {first_line(e)}"
        ) from None


def table_ref(
    kind: RecordKind | str, database: str | None, *, final: bool = False, alias: str = ""
) -> str:
    """A record kind's table in SQL: the quoted `db`.`table` (the Distributed table in cluster
    mode; unqualified when `database` is None: the connection's default database, as Grafana's
    datasource has it), then `AS alias`, then FINAL when `final` and the kind is versioned
    (the latest version of each row; a no-op for the others)."""
    k = KINDS[kind] if isinstance(kind, str) else kind
    sql = f"{quote(database)}.{quote(k.table)}" if database else quote(k.table)
    if alias:
        sql += f" AS {alias}"
    return sql + " FINAL" if final and k.version_field else sql


def time_range(kind: RecordKind | str, lo: str | None = "ws", hi: str | None = "we") -> str:
    """The WHERE fragment selecting rows of `kind` by its own time column (`RecordKind.
    time_field`) between the DateTime64 query parameters named `lo` (inclusive) and `hi`
    (exclusive); either bound may be left out (None)."""
    k = KINDS[kind] if isinstance(kind, str) else kind
    col = quote(k.time_field)
    parts = [f"{col} >= {{{lo}:DateTime64(3, 'UTC')}}"] if lo else []
    if hi:
        parts.append(f"{col} < {{{hi}:DateTime64(3, 'UTC')}}")
    return " AND ".join(parts) or "1"


_REASONS = (
    ("Connection refused", "connection refused"),
    ("timed out", "connection timed out"),
    ("Name or service not known", "host not found"),
    ("Temporary failure in name resolution", "host not found"),
    ("Authentication failed", "authentication failed"),
    ("CERTIFICATE_VERIFY_FAILED", "TLS certificate verification failed"),
)


def first_line(e: BaseException) -> str:
    """What went wrong, in one line: a known connection failure by its reason, else the
    error's first line (300 characters at most)."""
    text = str(e).strip()
    for needle, reason in _REASONS:
        if needle in text:
            return reason
    lines = text.splitlines()
    return lines[0][:300] if lines else type(e).__name__


class Store:
    """A railscope store. `client` is a clickhouse-connect client (opened lazily)."""

    def __init__(
        self,
        dsn: str | Dsn | None = None,
        *,
        database: str | None = None,
        cluster: str | None = None,
        ttl_overrides: Mapping[str, int | None] | None = None,
        client: Any = None,
        connect_timeout: float = 5.0,
    ) -> None:
        self.dsn = dsn if isinstance(dsn, Dsn) else parse_dsn(dsn)
        self.database = database or self.dsn.database
        self.cluster = cluster
        self.ttl_overrides = dict(ttl_overrides or {})
        self._client = client
        self._connect_timeout = connect_timeout

    # -- connection --------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        if self._client is None:
            if self.dsn.embedded:
                self._client = _open_embedded(self.dsn)
            else:
                self._client = _open_server(self.dsn, self._connect_timeout)
        return self._client

    def table(self, kind: RecordKind | str, *, final: bool = False, alias: str = "") -> str:
        """The one way SQL names a table: see table_ref; qualified with this store's database."""
        return table_ref(kind, self.database, final=final, alias=alias)

    # -- schema ------------------------------------------------------------------------------
    @property
    def _migrations_table(self) -> str:
        return f"{quote(self.database)}.{quote('schema_migrations')}"

    def _ctx(self) -> mig.Context:
        return mig.Context(self.database, self.cluster, self.ttl_overrides)

    def applied_versions(self) -> list[tuple[int, str, datetime]]:
        exists = self.client.query(
            "SELECT count() FROM system.tables WHERE database = {db:String} AND name = 'schema_migrations'",
            parameters={"db": self.database},
        ).result_rows[0][0]
        if not exists:
            return []
        rows = self.client.query(
            f"SELECT version, description, applied_at FROM {self._migrations_table} FINAL ORDER BY version"
        ).result_rows
        return [(int(v), str(d), a) for v, d, a in rows]

    def migrate(self) -> list[mig.Migration]:
        """Apply pending migrations and reconcile configured TTLs. Returns what was applied."""
        ctx = self._ctx()
        for stmt in mig.bookkeeping_sql(ctx):
            self.client.command(stmt)
        done = {v for v, _, _ in self.applied_versions()}
        applied = []
        for m in mig.MIGRATIONS:
            if m.version in done:
                continue
            for stmt in m.statements(ctx):
                self.client.command(stmt)
            self.client.insert(
                self._migrations_table,
                [[m.version, m.description, datetime.now(UTC)]],
                column_names=["version", "description", "applied_at"],
            )
            applied.append(m)
            log.info("applied migration %d: %s", m.version, m.description)
        self._reconcile_ttl()
        return applied

    def pending(self) -> list[mig.Migration]:
        done = {v for v, _, _ in self.applied_versions()}
        return [m for m in mig.MIGRATIONS if m.version not in done]

    def _reconcile_ttl(self) -> None:
        """Configured TTLs: on a kind's table, and on the rollups kept from it (migration 12),
        which keep what their source keeps unless the configuration names the rollup itself
        (flows kept two days, their per-interval aggregates ninety: docs/sizing.md)."""
        rollups = {r.table: r for r in ROLLUPS}
        targets: dict[str, tuple[str, int | None]] = {}  # table -> (time column, days)
        for table, days in self.ttl_overrides.items():
            k = next((k for k in KINDS.values() if k.table == table), None)
            if k is not None:
                targets.setdefault(table, (k.time_field, days))
                for r in rollups.values():
                    if r.source == table and r.table not in self.ttl_overrides:
                        targets[r.table] = ("bucket", days)
            elif table in rollups:
                targets[table] = ("bucket", days)
        for name, (column, days) in targets.items():
            engine = self.client.query(
                "SELECT engine_full FROM system.tables WHERE database = {db:String} AND name = {t:String}",
                parameters={
                    "db": self.database,
                    "t": name + (LOCAL_SUFFIX if self.cluster else ""),
                },
            ).result_rows
            if not engine:
                continue
            has = (
                f"toIntervalDay({int(days)})" in engine[0][0]
                if days
                else " TTL " not in f" {engine[0][0]} "
            )
            if not has:
                self.client.command(table_ttl_sql(name, column, self.database, days, self.cluster))

    # -- data --------------------------------------------------------------------------------
    def insert(self, kind: RecordKind | str, table: pa.Table, *, token: str | None = None) -> int:
        """Insert one Arrow table of `kind`. `token` makes a retried insert idempotent."""
        k = KINDS[kind] if isinstance(kind, str) else kind
        settings = {"insert_deduplication_token": token} if token else None
        self.client.insert_arrow(self.table(k), k.conform(table), settings=settings)
        return table.num_rows

    def insert_arrow_stream(
        self, kind: RecordKind | str, data: bytes | BinaryIO, *, token: str | None = None
    ) -> None:
        """Insert an Arrow IPC stream (e.g. a spool file) as is: no decode/re-encode on our side."""
        k = KINDS[kind] if isinstance(kind, str) else kind
        settings = {"insert_deduplication_token": token} if token else None
        self.client.raw_insert(
            self.table(k), k.columns, insert_block=data, settings=settings, fmt="ArrowStream"
        )

    def insert_arrow_file(
        self, kind: RecordKind | str, path: str | os.PathLike[str], *, token: str | None = None
    ) -> None:
        """Insert an Arrow IPC stream file (a spool file) as is. A server is sent its bytes
        (`insert_arrow_stream`). The embedded engine runs in this process and reads the file
        where it lies: `INSERT ... FROM INFILE`, the statement clickhouse-connect's chdb backend
        runs for `raw_insert` too, but after copying its input into a temporary file of its own
        (a second write of the whole batch: a quarter of the ingest path's time, issue 51). The
        file is read with pread, not mmap, as the embedded client is opened to. A retry with the
        same token is deduplicated as a raw insert's is (the token, and each block's number)."""
        k = KINDS[kind] if isinstance(kind, str) else kind
        if not self.dsn.embedded:
            with open(path, "rb") as f:
                self.insert_arrow_stream(k, f, token=token)
            return
        settings = {"storage_file_read_method": "pread"}
        if token:
            settings["insert_deduplication_token"] = token
        clause = ", ".join(f"{name} = {literal(v)}" for name, v in settings.items())
        cols = ", ".join(quote(c) for c in k.columns)
        self.client.command(
            f"INSERT INTO {self.table(k)} ({cols}) FROM INFILE {literal(os.fspath(path))} "
            f"SETTINGS {clause} FORMAT ArrowStream"
        )

    def release_memory(self) -> None:
        """After a large insert: the embedded engine (in this process) hands the memory its
        allocator keeps for reuse back to the system. A no-op for a server."""
        if not self.dsn.embedded:
            return
        try:
            self.client.command("SYSTEM JEMALLOC PURGE")
        except Exception as e:  # an engine built without jemalloc: nothing to give back
            log.debug("embedded store: no allocator purge: %s", first_line(e))

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> Any:
        """The client's QueryResult of `sql`, its `{name:Type}` parameters rendered as typed
        literals from a template split once per text (statement.py): no client-side
        re-tokenizing of the statement on every call."""
        text = render(sql, parameters)
        return self.client.query(text, settings=_sized(text))

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> Any:
        """A statement that returns nothing to read (INSERT ... SELECT, DELETE), rendered as
        `query` renders."""
        text = render(sql, parameters)
        return self.client.command(text, settings=_sized(text))

    def query_arrow(
        self, sql: str, parameters: Mapping[str, Any] | Sequence[Any] | None = None
    ) -> pa.Table:
        return self.client.query_arrow(sql, parameters=parameters, use_strings=True)

    def query_df(
        self, sql: str, parameters: Mapping[str, Any] | Sequence[Any] | None = None
    ) -> pl.DataFrame:
        import polars as pl

        return pl.from_arrow(self.query_arrow(sql, parameters))  # type: ignore[return-value]

    def query_rows(
        self, sql: str, parameters: Mapping[str, Any] | None = None
    ) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.query(sql, parameters).result_rows]

    def count(self, kind: RecordKind | str) -> int:
        """Rows stored of `kind` (every version of a versioned kind)."""
        return int(self.query_rows(f"SELECT count() FROM {self.table(kind)}")[0][0])

    def ping(self) -> float:
        t = time.perf_counter()
        self.client.query("SELECT 1")
        return time.perf_counter() - t
