"""ClickHouse sink: batches by size and age, writes every sealed batch to the spool first, then
inserts it with the batch's deduplication token and deletes the spool file once acknowledged.

While ClickHouse is unreachable batches wait in the spool and replay in order with backoff. A
batch the server refuses for a non-transient reason is moved to `spool/rejected/`, never retried
forever and never silently lost.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from telemetry.contracts import Batch, ComponentStats, ExportResult
from telemetry.errors import StoreUnavailable
from telemetry.records import KINDS, SchemaError
from telemetry.sinks.clickhouse_codes import RETRYABLE, code_name, error_code
from telemetry.store.client import Store
from telemetry.store.spool import Spool, SpoolEntry

log = logging.getLogger(__name__)


def is_transient(exc: BaseException) -> bool:
    """Retry later, or reject the batch? By the server's error code when there is one (the table
    in `clickhouse_codes`), else connection-level trouble is transient and anything else the
    server said is about the batch."""
    from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError

    if isinstance(exc, SchemaError):
        return False
    code = error_code(exc)
    if code is not None and not isinstance(exc, OperationalError):
        return code in RETRYABLE
    if isinstance(exc, OperationalError | StoreUnavailable | ConnectionError | TimeoutError):
        return True
    if isinstance(exc, DatabaseError):
        return False
    return isinstance(exc, OSError)


def may_have_landed(exc: BaseException) -> bool:
    """Whether a failed insert may still have been written: a connection that broke after the
    request went out (reset, closed without an answer, timed out reading it) leaves that
    unknown; a server that answered with an error code, or one that was never reached
    (connection refused, no route), did not write it."""
    if error_code(exc) is not None or isinstance(exc, SchemaError | StoreUnavailable):
        return False
    chain: list[BaseException] = []  # the exception and its causes (urllib3's, wrapped)
    e: BaseException | None = exc
    while e is not None and len(chain) < 8:
        chain.append(e)
        e = e.__cause__ or e.__context__
    if any(isinstance(x, ConnectionRefusedError) for x in chain):
        return False
    text = " ".join(str(x) for x in chain)
    never = ("NewConnectionError", "Connection refused", "Failed to establish a new connection")
    return not any(n in text for n in never)


def _retry_reason(exc: BaseException) -> str:
    """The `reason` label of a retry: the code's name from the table (a bounded set), else
    `unreachable` (connection-level trouble)."""
    code = error_code(exc)
    return RETRYABLE[code].lower() if code in RETRYABLE else "unreachable"


# A sealed batch at least this large is followed by `release_freed_memory()` once it is spooled,
# and a drain that stored one by the store's `release_memory()`.
RELEASE_AFTER_BYTES = 32 << 20

# A sealed batch larger than this is spooled as several files, each inserted with its own token:
# the embedded engine holds about twice what one insert reads while it writes it (plus its column
# buffers), so a 406 MiB batch inserted whole took the process to 2.6x the batch, in pieces
# (bench/ingest.py) ~2x. Each file is stored exactly once, as a whole batch is.
SPOOL_FILE_BYTES = 64 << 20


def spool_pieces(table: pa.Table, limit: int = SPOOL_FILE_BYTES) -> list[pa.Table]:
    """`table` as consecutive slices of about `limit` bytes each (no copy), in order."""
    if table.nbytes <= limit or table.num_rows < 2:
        return [table]
    step = max(1, limit * table.num_rows // table.nbytes)
    return [table.slice(o, step) for o in range(0, table.num_rows, step)]


def release_freed_memory() -> None:
    """Hand the memory of a batch that was just spooled back to the system before the store
    reads the file: Arrow's pool and the C heap (where numpy buffers that Arrow arrays wrap are
    allocated) otherwise keep it resident for reuse, and the embedded store's insert then comes
    on top of it."""
    pa.default_memory_pool().release_unused()
    if _malloc_trim is not None:
        _malloc_trim(0)


def _libc_malloc_trim() -> Callable[[int], int] | None:
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None  # glibc only
    except OSError:
        return None


_malloc_trim = _libc_malloc_trim()


@dataclass
class _Buffer:
    tables: list[pa.Table]
    rows: int
    since: float


class ClickHouseSink:
    name = "clickhouse"

    def __init__(
        self,
        store: Store,
        *,
        spool_dir: str,
        batch_rows: int = 100_000,
        batch_seconds: float = 5.0,
        spool_max_bytes: int = 1 << 30,
        retry_initial_seconds: float = 0.5,
        retry_max_seconds: float = 30.0,
        replay_batches_per_cycle: int = 16,
        memory_max_rows: int = 1_000_000,
        spool_file_bytes: int = SPOOL_FILE_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`replay_batches_per_cycle`: at most this many spooled batches are inserted per
        `flush()`, so a large backlog replays over several cycles and never stalls collection
        (`close()` drains everything it can). `spool_file_bytes`: a sealed batch larger than this
        is spooled and inserted as several files (SPOOL_FILE_BYTES)."""
        self.store = store
        self.spool = Spool(spool_dir, spool_max_bytes)  # takes the directory's lock
        self.batch_rows = batch_rows
        self.batch_seconds = batch_seconds
        self.retry_initial = retry_initial_seconds
        self.retry_max = retry_max_seconds
        self.replay_batches_per_cycle = replay_batches_per_cycle
        self.clock = clock
        self.stats = ComponentStats("sink:clickhouse")
        self._buffers: dict[str, _Buffer] = {}
        # sealed batches the spool could not write (disk full): kept in memory up to
        # `memory_max_rows`, written at the next flush; past that the oldest are dropped, counted
        self._held: list[tuple[str, pa.Table]] = []
        self.memory_max_rows = memory_max_rows
        self.spool_file_bytes = spool_file_bytes
        self._next_attempt = 0.0
        self._backoff = retry_initial_seconds
        self._down_reason = ""  # why the last attempt failed; "" while the store answers
        self._update_gauges()

    @property
    def down(self) -> bool:
        """The last attempt to reach the store failed (batches wait in the spool)."""
        return bool(self._down_reason)

    # -- Sink contract -----------------------------------------------------------------------
    def export(self, batch: Batch) -> ExportResult:
        self.stats.received += batch.num_rows
        try:
            table = batch.kind.conform(batch.table)  # cheap when the schema already matches
        except SchemaError as e:
            self.stats.error("schema")
            with self.stats.lock:
                self.stats.dropped += batch.num_rows
            log.error(
                "clickhouse sink: dropped a %s batch of %d rows that does not fit its kind: %s",
                batch.kind.name,
                batch.num_rows,
                e,
            )
            return ExportResult(False, 0, str(e))
        buf = self._buffers.get(batch.kind.name)
        if buf is None:
            buf = self._buffers[batch.kind.name] = _Buffer([], 0, self.clock())
        buf.tables.append(table)
        buf.rows += batch.num_rows
        if buf.rows >= self.batch_rows:
            self._seal(batch.kind.name)
            self.drain()
        return ExportResult(True, batch.num_rows)

    def flush(self, force: bool = False) -> None:
        """Seal buffers that are due (all of them with `force`), then try to drain the spool."""
        now = self.clock()
        self._write_held()
        for name, buf in list(self._buffers.items()):
            if force or buf.rows >= self.batch_rows or now - buf.since >= self.batch_seconds:
                self._seal(name)
        self.drain(force=force)

    def close(self) -> None:
        self.flush(force=True)
        left = self.spool.entries()
        if left:
            log.warning(
                "clickhouse sink closing with %d batch(es) (%d rows) still spooled in %s; they replay on next start",
                len(left),
                sum(e.rows for e in left),
                self.spool.dir,
            )
        if self._held:
            n = sum(t.num_rows for _, t in self._held)
            self._held.clear()
            with self.stats.lock:
                self.stats.dropped += n
            self.stats.error("spool_write_failed")
            log.error("clickhouse sink closing: DROPPED %d rows the spool could not write", n)
        self.spool.close()

    # -- internals ---------------------------------------------------------------------------
    def _seal(self, kind: str) -> None:
        buf = self._buffers.pop(kind, None)
        if not buf or not buf.rows:
            return
        table = pa.concat_tables(buf.tables) if len(buf.tables) > 1 else buf.tables[0]
        buf.tables.clear()  # `export` may still hold the buffer: the sealed table is the one copy
        self._held.extend((kind, piece) for piece in spool_pieces(table, self.spool_file_bytes))
        del table  # once spooled, the files are the copy that waits for the store
        self._write_held()
        self._update_gauges()

    def _write_held(self) -> None:
        """Write held batches to the spool in order. A failed write (ENOSPC, EIO) keeps them in
        memory up to `memory_max_rows` — past it the oldest are dropped and counted — and the
        pipeline goes on; the next flush tries again."""
        while self._held:
            kind, table = self._held[0]
            dropped_before = self.spool.dropped_rows
            try:
                self.spool.append(kind, table)
            except OSError as e:
                self.stats.error("spool_write_failed")
                log.error(
                    "spool %s: cannot write a %s batch of %d rows (%s); holding it in memory",
                    self.spool.dir,
                    kind,
                    table.num_rows,
                    e,
                )
                held = sum(t.num_rows for _, t in self._held)
                while self._held and held > self.memory_max_rows:
                    k, t = self._held.pop(0)
                    held -= t.num_rows
                    with self.stats.lock:
                        self.stats.dropped += t.num_rows
                    log.error(
                        "spool %s unwritable and %d rows held: DROPPED a %s batch of %d rows",
                        self.spool.dir,
                        held + t.num_rows,
                        k,
                        t.num_rows,
                    )
                return
            self._held.pop(0)
            if table.nbytes >= RELEASE_AFTER_BYTES:
                del table
                release_freed_memory()
            if self.spool.dropped_rows != dropped_before:
                with self.stats.lock:
                    self.stats.dropped += self.spool.dropped_rows - dropped_before

    def drain(self, force: bool = False) -> int:
        """Insert spooled batches in order, at most `replay_batches_per_cycle` of them unless
        `force`. Stops at the first retryable failure (backoff); a permanent one rejects the batch
        once (to `spool/rejected/`) and goes on."""
        if not force and self.clock() < self._next_attempt:
            return 0
        sent = 0
        purge = False  # a large batch was stored: the engine's allocator gives memory back
        entries = self.spool.entries()
        if not force:
            entries = entries[: self.replay_batches_per_cycle]
        for entry in entries:
            t = time.perf_counter()
            try:
                self._insert(entry)
            except Exception as e:
                if is_transient(e):
                    if may_have_landed(e):
                        self.spool.mark_unconfirmed(entry)
                    self._failed(entry, e)
                    break
                code = error_code(e)
                dest = self.spool.reject(entry, f"{code_name(code)}: {type(e).__name__}: {e}")
                self.stats.error("rejected")
                log.error(
                    "clickhouse refused batch %s (%d %s rows) for good (%s): %s — kept in %s; "
                    "after a fix: railscope spool replay-rejected",
                    entry.path.name,
                    entry.rows,
                    entry.kind,
                    code_name(code),
                    _short(e),
                    dest,
                )
                continue
            purge = purge or entry.size >= RELEASE_AFTER_BYTES
            self.spool.remove(entry)
            sent += entry.rows
            with self.stats.lock:
                self.stats.sent += entry.rows
                self.stats.last_duration_seconds = time.perf_counter() - t
                self.stats.last_success = True
            if self.down:
                log.warning("clickhouse is back: replaying the spool")
            self._down_reason = ""
            self._backoff = self.retry_initial
        if purge:
            # once per drain, not per batch: between the pieces of one sealed batch the engine
            # reuses what the last insert freed (the peak is one insert's), and each purge makes
            # the next insert fault its memory back in
            self.store.release_memory()
        self._update_gauges()
        return sent

    def _insert(self, entry: SpoolEntry) -> None:
        # The spool file is already an Arrow IPC stream of the kind's schema: send it as is (the
        # embedded engine reads it in place), with the token it was born with.
        self.store.insert_arrow_file(KINDS[entry.kind], entry.path, token=entry.token)

    def _failed(self, entry: SpoolEntry, exc: BaseException) -> None:
        reason = _retry_reason(exc)
        self.stats.error(reason)
        self.stats.last_success = False
        # one line when the store goes away, and one more each time the reason changes while it
        # stays away (a cut connection, then a replica answering read-only: both are news)
        if reason != self._down_reason:
            log.error(
                "clickhouse %s (%s); spooling to %s and retrying with backoff%s",
                reason.replace("_", " "),
                _short(exc),
                self.spool.dir,
                f" (before: {self._down_reason.replace('_', ' ')})" if self.down else "",
            )
        self._down_reason = reason
        self._next_attempt = self.clock() + self._backoff * (0.5 + random.random() / 2)
        self._backoff = min(self.retry_max, self._backoff * 2)

    def _update_gauges(self) -> None:
        entries = self.spool.entries()
        rejected = self.spool.rejected_entries()
        with self.stats.lock:
            self.stats.extra["spool_bytes"] = float(sum(e.size for e in entries + rejected))
            self.stats.extra["spool_batches"] = float(len(entries))
            self.stats.extra["spool_rejected_batches"] = float(len(rejected))
            self.stats.extra["spool_dropped_rows"] = float(self.spool.dropped_rows)
            self.stats.extra["spool_unconfirmed_rows"] = float(self.spool.unconfirmed_rows)
            self.stats.extra["buffered_rows"] = float(
                sum(b.rows for b in self._buffers.values()) + sum(t.num_rows for _, t in self._held)
            )


def _short(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return (lines[0] if lines else type(e).__name__)[:200]
