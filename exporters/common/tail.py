"""Following files like `tail -F`, for any source that reads logs: where each file was read up to,
by identity (device, inode) rather than by name, and a state file that keeps it across restarts.

Rotation by rename keeps a file's identity, so a renamed file is finished under its new name and
the file created in its place is read from its start; copytruncate keeps the identity but the
file shrinks below the offset, which restarts it at 0 (counted by the caller). It reads in bounded
chunks and never holds a file open between reads.
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


__all__ = [
    "CHUNK_BYTES",
    "Checkpoints",
    "FileGone",
    "FileKey",
    "Position",
    "Truncated",
    "file_key",
    "locate",
    "read_chunks",
]
