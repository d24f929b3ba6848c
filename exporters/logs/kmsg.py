"""The kernel log as /dev/kmsg hands it out: one record per read(), `prio,seq,usec,flags;text`
then the record's KEY=VALUE dictionary lines (each starting with a space); EAGAIN when there is
nothing more; EPIPE when the ring buffer overwrote records before we read them (the next read
goes on with the oldest record still there). The device sits behind a small protocol with the
real reader and a fake that follows those semantics; boot time comes from the proc root."""

from __future__ import annotations

import errno
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

MAX_RECORDS = 100_000  # per cycle: the ring buffer holds far fewer


class KmsgDevice(Protocol):
    def read(self) -> bytes | None:
        """One record; None when none is waiting. Raises BrokenPipeError after an overrun."""
        ...

    def close(self) -> None: ...


class DevKmsg:
    """/dev/kmsg opened non-blocking (reading starts at the oldest record in the buffer)."""

    def __init__(self, path: str | os.PathLike[str] = "/dev/kmsg") -> None:
        self.path = str(path)
        self._fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)

    def read(self) -> bytes | None:
        try:
            return os.read(self._fd, 8192)
        except BlockingIOError:
            return None
        except OSError as e:
            if e.errno == errno.EPIPE:
                raise BrokenPipeError(errno.EPIPE, "kmsg records overwritten before read") from None
            raise

    def close(self) -> None:
        os.close(self._fd)


def boot_time(proc_root: str | os.PathLike[str]) -> datetime | None:
    """Wall time of the kernel's monotonic zero: /proc/stat's btime, else now - /proc/uptime.
    None when neither can be read."""
    root = Path(proc_root)
    try:
        for line in (root / "stat").read_text().splitlines():
            if line.startswith("btime "):
                return datetime.fromtimestamp(int(line.split()[1]), UTC)
    except (OSError, ValueError, IndexError):
        pass
    try:
        up = float((root / "uptime").read_text().split()[0])
        return datetime.now(UTC) - timedelta(seconds=up)
    except (OSError, ValueError, IndexError):
        return None


def boot_id(proc_root: str | os.PathLike[str]) -> str:
    """This boot's id (sequence numbers restart with each boot); '' when unreadable."""
    try:
        return (Path(proc_root) / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def record_seq(rec: bytes) -> int | None:
    """The sequence number of a kmsg record; None for a record that is not one."""
    head, sep, _ = rec.partition(b";")
    if not sep:
        return None
    parts = head.split(b",")
    if len(parts) < 3 or not parts[1].isdigit():
        return None
    return int(parts[1])


__all__ = ["MAX_RECORDS", "DevKmsg", "KmsgDevice", "boot_id", "boot_time", "record_seq"]
