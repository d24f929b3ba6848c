"""Write-ahead spool: every sealed batch is an Arrow IPC file on local disk until ClickHouse has
acknowledged it. Files replay in sequence order with the deduplication token they were born with,
so a batch is never lost and never counted twice. Disk use is bounded: past the limit the oldest
files are dropped and counted — loudly.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pyarrow as pa
import pyarrow.ipc as ipc

log = logging.getLogger(__name__)

_NAME = re.compile(
    r"^(?P<seq>\d{16})\.(?P<kind>[a-z0-9_]+)\.(?P<rows>\d+)\.(?P<token>[0-9a-f]{32})\.arrow$"
)


# Rows per record batch in a spool file: about this many bytes of Arrow data. The store reads a
# file batch by batch, so its read buffers stay this size whatever the sealed batch's size is,
# and the many small chunks a sealed batch is made of (a node's few rows per cycle) become few.
RECORD_BATCH_BYTES = 16 << 20


def record_batches(table: pa.Table, target_bytes: int) -> Iterator[pa.RecordBatch]:
    """`table`'s rows in order as record batches of at most about `target_bytes` each. A piece
    made of small chunks (a node's few rows per cycle) is joined into one batch, a copy of that
    piece alone; a piece whose chunks are already large is written as it lies, without a copy."""
    rows = table.num_rows
    if rows == 0:
        yield from table.to_batches()
        return
    step = max(1, target_bytes * rows // max(1, table.nbytes))
    for offset in range(0, rows, step):
        piece = table.slice(offset, step)
        chunks = max((c.num_chunks for c in piece.columns), default=1)  # may differ by column
        if chunks > 1 and piece.nbytes < chunks * (target_bytes // 4):
            piece = piece.combine_chunks()
        yield from piece.to_batches()


@dataclass(frozen=True, order=True)
class SpoolEntry:
    seq: int
    kind: str
    rows: int
    token: str
    path: Path

    @property
    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0


UNCONFIRMED = ".unconfirmed"  # beside a batch: an insert of it may have landed (mark_unconfirmed)


def _mark(path: Path) -> Path:
    return path.with_name(path.name + UNCONFIRMED)


def _move_mark(src: Path, dest: Path) -> None:
    """A batch moved (rejected, or back in line): its mark, if any, goes with it."""
    if _mark(src).exists():
        os.replace(_mark(src), _mark(dest))


class Spool:
    """One process owns a spool directory (an exclusive `flock` on `.lock`): two writers would
    replay and delete each other's files. `Spool.view()` looks without owning."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        max_bytes: int | None = 1 << 30,
        *,
        fsync: bool = True,
        owner: bool = True,
    ) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.rejected_dir = self.dir / "rejected"
        self.max_bytes = max_bytes
        self.fsync = fsync
        self._lock = threading.Lock()
        self._lock_file: IO[str] | None = None
        if owner:
            self._take_lock()
            for stale in self.dir.glob("*.tmp"):  # a crash mid-write: never acknowledged
                stale.unlink(missing_ok=True)
            for mark in self.dir.glob(f"*{UNCONFIRMED}"):  # its batch is gone: nothing to mark
                if not mark.with_name(mark.name.removesuffix(UNCONFIRMED)).exists():
                    mark.unlink(missing_ok=True)
        entries = self.entries()
        self._seq = entries[-1].seq + 1 if entries else 1
        self.dropped_rows = 0
        self.dropped_files = 0
        # rows of batches evicted after an insert attempt whose outcome is unknown (the
        # connection broke once the batch was sent): the store may hold them, so they are
        # counted here and not as dropped
        self.unconfirmed_rows = 0

    @classmethod
    def view(cls, directory: str | os.PathLike[str]) -> Spool:
        """A look at a spool another process may own: no lock, no cleanup, no fsync."""
        return cls(directory, fsync=False, owner=False)

    def _take_lock(self) -> None:
        import fcntl

        from telemetry.errors import UserError

        # a file object: an abandoned Spool releases the lock when it is collected
        f = open(self.dir / ".lock", "a+")  # noqa: SIM115 — held for the Spool's lifetime
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read(32).strip() or "?"
            f.close()
            raise UserError(
                f"spool {self.dir} is in use by another railscope process (pid {holder}): "
                "give each process its own sink.spool_dir"
            ) from None
        f.truncate(0)
        f.write(f"{os.getpid()}\n")
        f.flush()
        self._lock_file = f

    def close(self) -> None:
        """Release the directory (the lock goes with the process anyway)."""
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def entries(self) -> list[SpoolEntry]:
        """The batches waiting for the store, oldest first."""
        return self._scan(self.dir)

    def rejected_entries(self) -> list[SpoolEntry]:
        """Batches the store refused for good, oldest first (`railscope spool replay-rejected`)."""
        return self._scan(self.rejected_dir) if self.rejected_dir.is_dir() else []

    @staticmethod
    def _scan(directory: Path) -> list[SpoolEntry]:
        out = []
        for p in directory.iterdir():
            m = _NAME.match(p.name)
            if m:
                out.append(SpoolEntry(int(m["seq"]), m["kind"], int(m["rows"]), m["token"], p))
        out.sort()
        return out

    def append(self, kind: str, table: pa.Table) -> SpoolEntry:
        with self._lock:
            seq = self._seq
            self._seq += 1
        token = uuid.uuid4().hex
        final = self.dir / f"{seq:016d}.{kind}.{table.num_rows}.{token}.arrow"
        tmp = final.with_suffix(".tmp")
        try:
            with pa.OSFile(str(tmp), "wb") as f, ipc.new_stream(f, table.schema) as w:
                for batch in record_batches(table, RECORD_BATCH_BYTES):
                    w.write_batch(batch)
            if self.fsync:  # the data, then the rename: a crash leaves the old or the new file
                fd = os.open(tmp, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            os.replace(tmp, final)
            self._sync_dir(self.dir)
        except OSError:  # ENOSPC and friends: no half file left behind; the caller decides
            tmp.unlink(missing_ok=True)
            raise
        entry = SpoolEntry(seq, kind, table.num_rows, token, final)
        if self.max_bytes is not None:  # None: the owner bounds it (the ingest gateway refuses)
            self._enforce_limit(keep=entry)
        return entry

    @staticmethod
    def read(entry: SpoolEntry) -> pa.Table:
        with pa.memory_map(str(entry.path), "r") as src:
            return ipc.open_stream(src).read_all()

    @staticmethod
    def remove(entry: SpoolEntry) -> None:
        entry.path.unlink(missing_ok=True)
        _mark(entry.path).unlink(missing_ok=True)

    @staticmethod
    def is_unconfirmed(entry: SpoolEntry) -> bool:
        """Whether `entry` carries the mark of mark_unconfirmed."""
        return _mark(entry.path).exists()

    def mark_unconfirmed(self, entry: SpoolEntry) -> None:
        """An insert of `entry` failed after the batch was sent (the connection broke before the
        answer): the store may have written it. It stays in line (its replay carries the same
        token, so it is not stored twice); if the spool's limit evicts it before a replay
        succeeds, its rows count as unconfirmed, not dropped. The mark is a file beside the
        batch, so a restarted collector still knows."""
        _mark(entry.path).touch()

    def reject(self, entry: SpoolEntry, reason: str) -> Path:
        """Move a batch the store refuses (not a transient error) aside, keeping it for a person."""
        self.rejected_dir.mkdir(exist_ok=True)
        dest = self.rejected_dir / entry.path.name
        os.replace(entry.path, dest)
        _move_mark(entry.path, dest)  # an earlier, cut-off insert of it may still have landed
        dest.with_suffix(".reason.txt").write_text(reason + "\n")
        self._sync_dir(self.rejected_dir)
        self._sync_dir(self.dir)
        return dest

    def replay_rejected(self) -> list[SpoolEntry]:
        """Put every rejected batch back in line (after the fix): it replays with its own token,
        so a batch that did land before is not stored twice."""
        back = []
        for e in self.rejected_entries():
            dest = self.dir / e.path.name
            os.replace(e.path, dest)
            _move_mark(e.path, dest)
            e.path.with_suffix(".reason.txt").unlink(missing_ok=True)
            back.append(SpoolEntry(e.seq, e.kind, e.rows, e.token, dest))
        self._sync_dir(self.rejected_dir)
        self._sync_dir(self.dir)
        return back

    def bytes(self) -> int:
        """Disk used: waiting and rejected batches (both count against `max_bytes`)."""
        return sum(e.size for e in self.entries() + self.rejected_entries())

    def _enforce_limit(self, keep: SpoolEntry) -> None:
        assert self.max_bytes is not None
        # rejected batches go first (they wait for a person), then the oldest waiting ones
        entries = self.rejected_entries() + self.entries()
        total = sum(e.size for e in entries)
        for e in entries:
            if total <= self.max_bytes:
                break
            if e == keep:
                continue
            total -= e.size
            unconfirmed = self.is_unconfirmed(e)
            self.remove(e)
            e.path.with_suffix(".reason.txt").unlink(missing_ok=True)
            if unconfirmed:
                self.unconfirmed_rows += e.rows
                log.error(
                    "spool %s is over its limit (%d bytes): discarded the oldest batch %s "
                    "(%d %s rows) UNCONFIRMED: an insert of it broke off after it was sent, so "
                    "the store may hold it (counted as unconfirmed, not as dropped)",
                    self.dir,
                    self.max_bytes,
                    e.path.name,
                    e.rows,
                    e.kind,
                )
                continue
            self.dropped_rows += e.rows
            self.dropped_files += 1
            log.error(
                "spool %s is over its limit (%d bytes): DROPPED the oldest %sbatch %s (%d %s rows)",
                self.dir,
                self.max_bytes,
                "rejected " if e.path.parent == self.rejected_dir else "",
                e.path.name,
                e.rows,
                e.kind,
            )

    def _sync_dir(self, directory: Path) -> None:
        """Make renames and unlinks in `directory` durable (a crash must not resurrect them)."""
        if not self.fsync or not directory.is_dir():
            return
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
