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
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

log = logging.getLogger(__name__)

_NAME = re.compile(
    r"^(?P<seq>\d{16})\.(?P<kind>[a-z0-9_]+)\.(?P<rows>\d+)\.(?P<token>[0-9a-f]{32})\.arrow$"
)


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


class Spool:
    def __init__(
        self, directory: str | os.PathLike[str], max_bytes: int = 1 << 30, *, fsync: bool = False
    ) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.rejected_dir = self.dir / "rejected"
        self.max_bytes = max_bytes
        self.fsync = fsync
        self._lock = threading.Lock()
        for stale in self.dir.glob(
            "*.tmp"
        ):  # a crash mid-write leaves only a .tmp: never acknowledged
            stale.unlink(missing_ok=True)
        entries = self.entries()
        self._seq = entries[-1].seq + 1 if entries else 1
        self.dropped_rows = 0
        self.dropped_files = 0

    def entries(self) -> list[SpoolEntry]:
        out = []
        for p in self.dir.iterdir():
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
        with pa.OSFile(str(tmp), "wb") as f, ipc.new_stream(f, table.schema) as w:
            w.write_table(table)
        if self.fsync:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(tmp, final)
        entry = SpoolEntry(seq, kind, table.num_rows, token, final)
        self._enforce_limit(keep=entry)
        return entry

    @staticmethod
    def read(entry: SpoolEntry) -> pa.Table:
        with pa.memory_map(str(entry.path), "r") as src:
            return ipc.open_stream(src).read_all()

    @staticmethod
    def remove(entry: SpoolEntry) -> None:
        entry.path.unlink(missing_ok=True)

    def reject(self, entry: SpoolEntry, reason: str) -> Path:
        """Move a batch the store refuses (not a transient error) aside, keeping it for a person."""
        self.rejected_dir.mkdir(exist_ok=True)
        dest = self.rejected_dir / entry.path.name
        os.replace(entry.path, dest)
        dest.with_suffix(".reason.txt").write_text(reason + "\n")
        return dest

    def bytes(self) -> int:
        return sum(e.size for e in self.entries())

    def _enforce_limit(self, keep: SpoolEntry) -> None:
        entries = self.entries()
        total = sum(e.size for e in entries)
        for e in entries:
            if total <= self.max_bytes:
                break
            if e == keep:
                continue
            total -= e.size
            self.remove(e)
            self.dropped_rows += e.rows
            self.dropped_files += 1
            log.error(
                "spool %s is over its limit (%d bytes): DROPPED the oldest batch %s (%d %s rows)",
                self.dir,
                self.max_bytes,
                e.path.name,
                e.rows,
                e.kind,
            )
