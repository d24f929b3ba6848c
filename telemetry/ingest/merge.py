"""Merged inserts: the log files of one record kind, as many agents' batches as `flush_rows` or
`flush_seconds` allow, go to the store in one INSERT — one part per table (per shard) per flush,
however many agents there are.

Each merged insert is declared first in a manifest (`groups/<seq>.json`: the files and the
insert's token, a hash of theirs), fsynced, so a retry after a crash or an error inserts the same
rows with the same token and the store drops a copy that had landed. Once the store acknowledges
it, the agents' tokens are remembered (tokens.py), then the files and the manifest go. A batch the
store refuses for good is set aside in `rejected/` (`railscope spool replay-rejected --spool-dir`
puts it back while the gateway is stopped). Never answers agents (inbox.py does).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from telemetry.contracts import ComponentStats
from telemetry.ingest.inbox import Inbox, entry_tokens, tokens_of
from telemetry.ingest.tokens import SeenTokens
from telemetry.problems import Problems
from telemetry.records import KINDS
from telemetry.sinks.clickhouse import is_transient
from telemetry.sinks.clickhouse_codes import code_name, error_code
from telemetry.store.client import Store
from telemetry.store.spool import Spool, SpoolEntry

log = logging.getLogger(__name__)


def group_token(entries: list[SpoolEntry]) -> str:
    """The merged insert's deduplication token: the same files give the same token."""
    return hashlib.sha256("\n".join(e.token for e in entries).encode()).hexdigest()[:32]


class Merger:
    def __init__(
        self,
        store: Store,
        inbox: Inbox,
        tokens: SeenTokens,
        *,
        flush_rows: int = 500_000,
        flush_seconds: float = 2.0,
        retry_initial_seconds: float = 0.5,
        retry_max_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store, self.inbox, self.tokens = store, inbox, tokens
        self.spool: Spool = inbox.spool
        self.groups = self.spool.dir / "groups"
        self.groups.mkdir(exist_ok=True)
        self.flush_rows, self.flush_seconds = flush_rows, flush_seconds
        self.retry_initial = self.backoff = retry_initial_seconds
        self.retry_max = retry_max_seconds
        self.clock = clock
        self.stats = ComponentStats("ingest:merge")
        self.problems = Problems(self.stats, self.stats.name, (), logger=log)
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._waiting: dict[str, list[tuple[SpoolEntry, float]]] = {}  # kind -> (file, since)
        self._next_attempt = 0.0
        self.inserts = 0
        self._recover()

    # -- state --------------------------------------------------------------------------------
    def _recover(self) -> None:
        """At start: the files a manifest names stay in that group; every other file waits,
        due at once. Their agents' tokens are pending again (a retry is still recognised)."""
        claimed = {n for m in self._manifests() for n in json.loads(m.read_text())["entries"]}
        now = self.clock() - self.flush_seconds
        for e in self.spool.entries():
            self.tokens.add_pending(entry_tokens(e))
            if e.path.name not in claimed:
                self._waiting.setdefault(e.kind, []).append((e, now))

    def add(self, entry: SpoolEntry) -> None:
        """A file the inbox has just committed."""
        with self._lock:
            self._waiting.setdefault(entry.kind, []).append((entry, self.clock()))

    def waiting(self) -> tuple[int, int]:
        """(files, rows) waiting for a merged insert."""
        with self._lock:
            files = [e for es in self._waiting.values() for e, _ in es]
        return len(files), sum(e.rows for e in files)

    def _manifests(self) -> list[Path]:
        return sorted(self.groups.glob("*.json"))

    # -- flushing -----------------------------------------------------------------------------
    def flush(self, force: bool = False) -> int:
        """Insert what is due (everything with `force`): first groups declared before (a retry
        or a crash), then each kind's waiting files. Returns the rows stored; stops at the first
        retryable failure (backoff)."""
        with self._flushing:  # one pass at a time: a declared group is inserted by one pass
            return self._flush(force)

    def _flush(self, force: bool) -> int:
        if not force and self.clock() < self._next_attempt:
            return 0
        stored = 0
        for m in self._manifests():
            n = self._run_manifest(m)
            if n is None:
                return stored
            stored += n
        now = self.clock()
        for kind in sorted(self._waiting):
            while True:
                with self._lock:
                    waiting = self._waiting.get(kind, [])
                    rows = sum(e.rows for e, _ in waiting)
                    due = waiting and (
                        force
                        or rows >= self.flush_rows
                        or now - waiting[0][1] >= self.flush_seconds
                    )
                    if not due:
                        break
                    take: list[SpoolEntry] = []
                    total = 0
                    for e, _ in waiting:
                        if take and total + e.rows > self.flush_rows:
                            break
                        take.append(e)
                        total += e.rows
                    del waiting[: len(take)]
                n = self._run_manifest(self._declare(kind, take))
                if n is None:
                    return stored
                stored += n
        return stored

    def _declare(self, kind: str, entries: list[SpoolEntry]) -> Path:
        """Write the group's manifest (the files, the token) durably before inserting it."""
        path = self.groups / f"{entries[0].seq:016d}.{kind}.json"
        tmp = path.with_suffix(".tmp")
        body = {
            "kind": kind,
            "token": group_token(entries),
            "entries": [e.path.name for e in entries],
        }
        with open(tmp, "w") as f:
            json.dump(body, f)
            f.flush()
            if self.spool.fsync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
        self.spool._sync_dir(self.groups)
        return path

    def _run_manifest(self, manifest: Path) -> int | None:
        """Insert one declared group. Rows stored (0: set aside, or it had landed before), or
        None on a retryable failure (the manifest stays for the next try)."""
        body = json.loads(manifest.read_text())
        kind, token = body["kind"], body["token"]
        entries = [self._entry(self.spool.dir / n) for n in body["entries"]]
        present = [e for e in entries if e is not None]
        if len(present) < len(entries):
            # files go only after the store acknowledged the group: it landed; finish the cleanup
            self._finish(manifest, present, [t for e in present for t in entry_tokens(e)])
            return 0
        t = time.perf_counter()
        tables = [self.spool.read(e) for e in present]
        agent_tokens = [tok for tb in tables for tok in tokens_of(tb.schema)]
        try:
            tables = [tb.replace_schema_metadata(None) for tb in tables]
            table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
            self.store.insert(KINDS[kind], table, token=token)
        except Exception as e:
            if is_transient(e):
                self._failed(kind, e)
                return None
            reason = f"{code_name(error_code(e))}: {type(e).__name__}: {str(e).strip()[:300]}"
            self.tokens.done(agent_tokens)  # answered to the agents: the batch is ours to keep
            for entry in present:
                size = entry.size
                self.spool.reject(entry, reason)
                self.inbox.removed(size)
            manifest.unlink(missing_ok=True)
            self.spool._sync_dir(self.groups)
            self.stats.error("rejected")
            log.error(
                "ingest: the store refused %d %s rows for good (%s): kept in %s",
                sum(x.rows for x in present),
                kind,
                reason,
                self.spool.rejected_dir,
            )
            return 0
        rows = table.num_rows
        self._finish(manifest, present, agent_tokens)
        with self.stats.lock:
            self.stats.sent += rows
            self.stats.last_duration_seconds = time.perf_counter() - t
            self.stats.last_success = True
        self.inserts += 1
        self.backoff = self.retry_initial
        return rows

    def _finish(self, manifest: Path, stored: list[SpoolEntry], agent_tokens: list[str]) -> None:
        """The group is in the store: its agents' tokens remembered first, then its files and
        its manifest removed."""
        self.tokens.done(agent_tokens)
        for e in stored:
            size = e.size
            self.spool.remove(e)
            self.inbox.removed(size)
        manifest.unlink(missing_ok=True)
        self.spool._sync_dir(self.spool.dir)
        self.spool._sync_dir(self.groups)

    def _entry(self, path: Path) -> SpoolEntry | None:
        if not path.exists():
            return None
        seq, kind, rows, token, _ = path.name.split(".")
        return SpoolEntry(int(seq), kind, int(rows), token, path)

    def _failed(self, kind: str, exc: BaseException) -> None:
        self.stats.error(code_name(error_code(exc)).lower() if error_code(exc) else "unreachable")
        self.stats.last_success = False
        log.error(
            "ingest: merged %s insert failed (%s); retrying in %.1fs",
            kind,
            str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__,
            self.backoff,
        )
        self._next_attempt = self.clock() + self.backoff * (0.5 + random.random() / 2)
        self.backoff = min(self.retry_max, self.backoff * 2)
