"""The gateway's write-ahead log: every accepted agent batch is on disk before its insert is
answered. Batches arriving together are written together (group commit): one Arrow IPC file per
record kind per commit, fsynced, the agents' deduplication tokens in its schema metadata. So the
cost on disk follows commits, not agents, and a restart finds every answered batch.

It never drops a batch: past `max_bytes` it refuses new ones with a retryable error, and the
agents keep theirs in their own spools. It never talks to the store (merge.py does).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa

from telemetry.contracts import ComponentStats
from telemetry.ingest.tokens import SeenTokens
from telemetry.store.spool import Spool, SpoolEntry

log = logging.getLogger(__name__)

TOKENS_KEY = b"railscope.tokens"  # schema metadata of a log file: the agents' tokens, one a line


class Backlog(Exception):
    """The log is over its limit: the store behind the gateway is not keeping up."""


def tokens_of(schema: pa.Schema) -> list[str]:
    raw = (schema.metadata or {}).get(TOKENS_KEY, b"")
    return [t for t in raw.decode().split("\n") if t]


def entry_tokens(entry: SpoolEntry) -> list[str]:
    """The agent tokens a log file holds (its schema only is read)."""
    import pyarrow.ipc as ipc

    with pa.memory_map(str(entry.path), "r") as src:
        return tokens_of(ipc.open_stream(src).schema)


@dataclass
class _Item:
    kind: str
    table: pa.Table
    token: str | None
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


class Inbox:
    def __init__(
        self,
        directory: str,
        tokens: SeenTokens,
        max_bytes: int,
        *,
        on_commit: Callable[[SpoolEntry], None] = lambda e: None,
        fsync: bool = True,
    ) -> None:
        """`on_commit(entry)` is called (in the commit thread) for every file written."""
        self.spool = Spool(directory, max_bytes=None, fsync=fsync)  # takes the directory's lock
        self.tokens = tokens
        self.max_bytes = max_bytes
        self.on_commit = on_commit
        self.stats = ComponentStats("ingest:inbox")
        self._cond = threading.Condition()
        self._queue: list[_Item] = []
        self._queued_bytes = 0
        self._closed = False
        self._lock = threading.Lock()
        self.bytes = 0  # on disk, waiting for a merged insert (merge.py subtracts what it removes)
        self.commits = 0
        self.duplicates = 0
        for e in self.spool.entries():
            self.bytes += e.size
        self._thread = threading.Thread(
            target=self._run, name="railscope-ingest-commit", daemon=True
        )
        self._thread.start()

    def accept(self, kind: str, table: pa.Table, token: str | None) -> int:
        """Write `table` (already conformed to `kind`) to the log and return its rows once it is
        on disk; 0 for a token already taken (nothing written). Raises Backlog past the limit,
        OSError when the write failed (the token is released: the agent retries)."""
        with self.stats.lock:
            self.stats.received += table.num_rows
        if token is not None and not self.tokens.claim(token):
            with self._lock:
                self.duplicates += 1
            return 0
        with self._cond:
            if self.bytes + self._queued_bytes + table.nbytes > self.max_bytes:
                if token is not None:
                    self.tokens.release([token])
                self.stats.error("backlog")
                raise Backlog(
                    f"the ingest log holds {self.bytes + self._queued_bytes} bytes, over "
                    f"ingest.max_bytes ({self.max_bytes}): the store is not keeping up"
                )
            item = _Item(kind, table, token)
            self._queue.append(item)
            self._queued_bytes += table.nbytes
            self._cond.notify()
        item.done.wait()
        if item.error is not None:
            if token is not None:
                self.tokens.release([token])
            raise item.error
        return table.num_rows

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return
                items, self._queue = self._queue, []
                self._queued_bytes = 0
            by_kind: dict[str, list[_Item]] = {}
            for it in items:
                by_kind.setdefault(it.kind, []).append(it)
            for kind, group in by_kind.items():
                self._commit(kind, group)
            for it in items:
                it.done.set()

    def _commit(self, kind: str, group: list[_Item]) -> None:
        tokens = [it.token for it in group if it.token is not None]
        try:
            table = (
                pa.concat_tables([it.table for it in group]) if len(group) > 1 else group[0].table
            )
            table = table.replace_schema_metadata({TOKENS_KEY: "\n".join(tokens).encode()})
            entry = self.spool.append(kind, table)
        except (OSError, pa.ArrowInvalid) as e:
            self.stats.error("log_write_failed")
            log.error(
                "ingest: cannot write %d %s batch(es) to %s: %s",
                len(group),
                kind,
                self.spool.dir,
                e,
            )
            for it in group:
                it.error = e
            return
        size = entry.size
        with self._cond:
            self.bytes += size
            self.commits += 1
        with self.stats.lock:
            self.stats.sent += entry.rows
            self.stats.last_success = True
        self.on_commit(entry)

    def removed(self, size: int) -> None:
        """merge.py removed a file of `size` bytes (its rows are in the store, or set aside)."""
        with self._cond:
            self.bytes -= size

    def stop_commits(self) -> None:
        """Commit what is queued and stop the commit thread (accept() answers nothing after)."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(30)

    def close(self) -> None:
        """stop_commits(), then release the directory."""
        self.stop_commits()
        self.spool.close()
