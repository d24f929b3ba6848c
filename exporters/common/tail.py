"""Following files like `tail -F`, for any source that reads logs: where each file was read up to,
by identity (device, inode) rather than by name, and a state file that keeps it across restarts.

Rotation by rename keeps a file's identity, so a renamed file is finished under its new name and
the file created in its place is read from its start; copytruncate keeps the identity but the
file shrinks below the offset, which restarts it at 0 (counted by the caller). It reads in bounded
chunks and never holds a file open between reads.

`Tailer` follows one file by its name instead (an HDFS DataNode's clienttrace log, an NCCL
Inspector writer's file), finishing a log4j-rotated `path.1` ... before the new file, with its
positions in a `TailOffsets` file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CHUNK_BYTES = 1 << 20

FileKey = tuple[int, int]  # (st_dev, st_ino)


def file_key(st: os.stat_result) -> FileKey:
    return (st.st_dev, st.st_ino)


@dataclass
class Position:
    """Where one file was read up to: byte offset and complete lines before it."""

    path: str
    offset: int = 0
    line: int = 0


class FileGone(Exception):
    """The file followed is not there any more under its name nor in its directory."""


class Truncated(Exception):
    """The file shrank below the offset read (copytruncate, or truncated under the reader)."""


def locate(path: Path, key: FileKey) -> Path:
    """Where the file `key`, last seen at `path`, is now: `path` itself, or the name it was
    renamed to in the same directory (rotation). FileGone when neither."""
    try:
        if file_key(path.stat()) == key:
            return path
    except FileNotFoundError:
        pass
    try:
        with os.scandir(path.parent) as it:
            for entry in it:
                try:
                    if entry.is_file() and file_key(entry.stat()) == key:
                        return Path(entry.path)
                except FileNotFoundError:
                    continue
    except (FileNotFoundError, NotADirectoryError):
        pass
    raise FileGone(str(path))


def read_chunks(
    path: Path, key: FileKey, pos: Position, chunk: int = CHUNK_BYTES
) -> Iterator[bytes]:
    """The bytes of file `key` after `pos.offset`, in chunks; advances `pos.offset` as each chunk
    is handed out. Raises FileGone (not found) or Truncated (shorter than the offset: `pos` is
    reset to the start, the caller reads it again)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise FileGone(str(path)) from None
    try:
        st = os.fstat(fd)
        if file_key(st) != key:
            raise FileGone(str(path))
        if st.st_size < pos.offset:
            pos.offset, pos.line = 0, 0
            raise Truncated(str(path))
        os.lseek(fd, pos.offset, os.SEEK_SET)
        while True:
            data = os.read(fd, chunk)
            if not data:
                return
            pos.offset += len(data)
            yield data
    finally:
        os.close(fd)


class Checkpoints:
    """Positions of followed files (keyed by device and inode) plus any small named values (the
    kernel log's last sequence number), in one JSON state file written atomically (temp file +
    rename) after each cycle. A missing or unreadable file is an empty state: the caller says
    so and starts from its configured place."""

    VERSION = 1

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def load(self) -> tuple[dict[FileKey, Position], dict[str, object]]:
        doc = json.loads(self.path.read_text())
        if not isinstance(doc, dict) or doc.get("version") != self.VERSION:
            raise ValueError(f"not a version-{self.VERSION} checkpoint file")
        files: dict[FileKey, Position] = {}
        for k, v in doc.get("files", {}).items():
            dev, _, ino = k.partition(":")
            files[(int(dev), int(ino))] = Position(str(v["path"]), int(v["offset"]), int(v["line"]))
        extra = doc.get("extra", {})
        return files, dict(extra) if isinstance(extra, dict) else {}

    def save(self, files: dict[FileKey, Position], extra: dict[str, object] | None = None) -> None:
        doc = {
            "version": self.VERSION,
            "files": {
                f"{dev}:{ino}": {"path": p.path, "offset": p.offset, "line": p.line}
                for (dev, ino), p in sorted(files.items())
            },
            "extra": extra or {},
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


# --- one file followed by name (log4j rotation: path.1, path.2 ...) --------------------------


@dataclass
class _FileState:
    inode: int
    offset: int  # bytes read so far
    partial: bytes = b""  # an unfinished last line, kept until its newline arrives

    @property
    def committed(self) -> int:
        """Offset just after the last complete line: where a restarted tailer resumes."""
        return self.offset - len(self.partial)


_MAX_ROTATED = 9  # log4j RollingFileAppender maxBackupIndex is usually well under this


class Tailer:
    """Follows one log file like `tail -F`: new complete lines since the last call; notices
    rotation (new inode or a shorter file) and then finishes the rotated file (`path.1`, the
    log4j RollingFileAppender name; `path.2`... when it rolled more than once meanwhile) before
    starting the new one at offset 0.

    The first call starts at `resume` (inode, offset) when given (a restart: see TailOffsets),
    else at the end of the file (`from_start=False`): old lines were either collected before or
    belong to a backfill done with --from.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        from_start: bool = False,
        resume: tuple[int, int] | None = None,
    ) -> None:
        self.path = Path(path)
        self.from_start = from_start
        self._st: _FileState | None = _FileState(*resume) if resume else None
        self.rotations = 0

    def position(self) -> tuple[int, int] | None:
        """(inode, offset after the last complete line) to persist, or None before the first read."""
        return (self._st.inode, self._st.committed) if self._st else None

    @staticmethod
    def _read_from(p: Path, st: _FileState) -> list[str]:
        with p.open("rb") as f:
            f.seek(st.offset)
            data = f.read()
        st.offset += len(data)
        chunks = (st.partial + data).split(b"\n")
        st.partial = chunks.pop()
        return [c.decode("utf-8", errors="replace") for c in chunks]

    def read(self) -> list[str]:
        try:
            s = self.path.stat()
        except FileNotFoundError:
            return []  # between rotation and re-creation: quiet, try again next cycle
        if self._st is None:
            self._st = _FileState(s.st_ino, 0 if self.from_start else s.st_size)
        st = self._st
        out: list[str] = []
        if s.st_ino != st.inode or s.st_size < st.offset:
            self.rotations += 1
            out += self._finish_rotated(st)
            st = self._st = _FileState(s.st_ino, 0)
        out += self._read_from(self.path, st)
        return out

    def _finish_rotated(self, st: _FileState) -> list[str]:
        """The rest of the file we were reading (now `path.k`), then `path.k-1` ... `path.1`
        whole: what was written between our last read and the newest rotation."""
        names = [self.path.with_name(f"{self.path.name}.{k}") for k in range(1, _MAX_ROTATED + 1)]
        for k, p in enumerate(names):
            try:
                if p.stat().st_ino != st.inode:
                    continue
            except FileNotFoundError:
                continue
            out = self._read_from(p, st)
            if st.partial:  # the rotated file is final: its last line is complete
                out.append(st.partial.decode("utf-8", errors="replace"))
            for newer in reversed(names[:k]):
                rest = _FileState(0, 0)
                try:
                    out += self._read_from(newer, rest)
                except FileNotFoundError:
                    continue
                if rest.partial:
                    out.append(rest.partial.decode("utf-8", errors="replace"))
            return out
        return []  # truncated in place (copytruncate), or rotated away out of reach


class TailOffsets:
    """Where each followed log was read up to, in a small JSON file (next to the spool), so that a
    restarted source resumes there: no line counted twice, none skipped. Written atomically
    (temp file + rename) after every cycle; an unreadable file starts over from the logs' ends."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def load(self) -> dict[str, tuple[int, int]]:
        try:
            doc = json.loads(self.path.read_text())
            return {str(k): (int(v["inode"]), int(v["offset"])) for k, v in doc.items()}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return {}

    def save(self, positions: dict[str, tuple[int, int]]) -> None:
        doc = {k: {"inode": i, "offset": o} for k, (i, o) in sorted(positions.items())}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        os.replace(tmp, self.path)


__all__ = [
    "CHUNK_BYTES",
    "Checkpoints",
    "FileGone",
    "FileKey",
    "Position",
    "TailOffsets",
    "Tailer",
    "Truncated",
    "file_key",
    "locate",
    "read_chunks",
]
