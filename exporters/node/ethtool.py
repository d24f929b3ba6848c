"""ethtool statistics of a netdev: live through the kernel's ethtool ioctl (SIOCETHTOOL:
ETHTOOL_GSSET_INFO / GSTRINGS / GSTATS — no `ethtool` binary is run) and, for replay, from
captured `ethtool -S` text. Both give the same {name: value} map; nothing is ever written.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import re
import socket
import struct
from pathlib import Path
from typing import Protocol

SIOCETHTOOL = 0x8946
ETHTOOL_GSTRINGS = 0x0000001B
ETHTOOL_GSTATS = 0x0000001D
ETHTOOL_GSSET_INFO = 0x00000037
ETH_SS_STATS = 1
ETH_GSTRING_LEN = 32
IFNAMSIZ = 16
# More statistics than any driver has (mlx5 with every channel: a few thousand): a count above
# this is a broken reply, refused before sizing the string and value buffers by it.
MAX_STATS = 1 << 16

# name: value, the value after the last colon: be2net and bnx2x name per-queue statistics
# "rxq0: rx_bytes" and "[0]: rx_bytes" (the ioctl's string table holds those names as they are)
_LINE = re.compile(r"^\s*(.+?):\s*(-?\d+)\s*$")


class EthtoolError(Exception):
    """A netdev's statistics could not be read (reason in `.reason`)."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


def parse_ethtool_s(text: str, *, source: str = "ethtool -S") -> dict[str, int]:
    """`ethtool -S IFACE` output -> {name: value}. Header lines ("NIC statistics:"), blank lines
    and markdown fences are skipped; a line that looks like a stat but has no integer value is an
    error naming the line (a capture cut mid-line must not become a wrong number)."""
    out: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith(("```", "#")) or s.endswith(":"):
            continue  # blank, fence, comment, or a header such as "NIC statistics:"
        m = _LINE.match(line)
        if not m:
            if ":" in s:
                raise EthtoolError(
                    "malformed_ethtool", f"{source}:{n}: not 'name: integer': {s[:80]!r}"
                )
            continue
        out[m[1].strip()] = int(m[2])
    return out


class EthtoolReader(Protocol):
    def stats(self, netdev: str) -> dict[str, int]: ...


class IoctlEthtool:
    """Live reader. The string table is cached per netdev and re-read only when the number of
    statistics changes (driver reload), so a scrape costs one GSSET_INFO + one GSTATS ioctl."""

    def __init__(self) -> None:
        self._sock: socket.socket | None = None
        self._names: dict[str, list[str]] = {}

    def _ioctl(self, netdev: str, buf: ctypes.Array[ctypes.c_char]) -> None:
        if self._sock is None:
            self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        name = netdev.encode()
        if len(name) >= IFNAMSIZ:
            raise EthtoolError("bad_netdev", f"{netdev}: interface name too long")
        ifreq = struct.pack(f"{IFNAMSIZ}sP", name, ctypes.addressof(buf)) + b"\0" * 16
        try:
            fcntl.ioctl(self._sock.fileno(), SIOCETHTOOL, ifreq)
        except OSError as e:
            reason = {
                errno.EOPNOTSUPP: "ethtool_not_supported",
                errno.ENODEV: "missing_device",
                errno.EPERM: "no_permission",
            }.get(e.errno or 0, "ethtool_ioctl")
            raise EthtoolError(reason, f"{netdev}: ethtool ioctl failed: {e.strerror}") from None

    def _count(self, netdev: str) -> int:
        buf = ctypes.create_string_buffer(
            struct.pack("IIQI", ETHTOOL_GSSET_INFO, 0, 1 << ETH_SS_STATS, 0), 24
        )
        self._ioctl(netdev, buf)
        _cmd, _res, mask, n = struct.unpack_from("IIQI", buf.raw)
        if not mask & (1 << ETH_SS_STATS):
            return 0
        if n > MAX_STATS:
            raise EthtoolError(
                "ethtool_ioctl",
                f"{netdev}: the kernel reports {n} statistics (at most {MAX_STATS})",
            )
        return int(n)

    def _strings(self, netdev: str, n: int) -> list[str]:
        buf = ctypes.create_string_buffer(
            struct.pack("III", ETHTOOL_GSTRINGS, ETH_SS_STATS, n), 12 + n * ETH_GSTRING_LEN
        )
        self._ioctl(netdev, buf)
        raw = buf.raw[12:]
        return [
            raw[i * ETH_GSTRING_LEN : (i + 1) * ETH_GSTRING_LEN]
            .split(b"\0", 1)[0]
            .decode(errors="replace")
            for i in range(n)
        ]

    def stats(self, netdev: str) -> dict[str, int]:
        n = self._count(netdev)
        if n == 0:
            return {}
        names = self._names.get(netdev)
        if names is None or len(names) != n:
            names = self._names[netdev] = self._strings(netdev, n)
        buf = ctypes.create_string_buffer(struct.pack("II", ETHTOOL_GSTATS, n), 8 + 8 * n)
        self._ioctl(netdev, buf)
        got = struct.unpack_from("I", buf.raw, 4)[0]
        values = struct.unpack_from(f"{min(got, n)}Q", buf.raw, 8)
        return dict(zip(names, values, strict=False))

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class TextEthtool:
    """Replay reader: DIR/<netdev>.txt holds captured `ethtool -S <netdev>` output."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def stats(self, netdev: str) -> dict[str, int]:
        p = self.directory / f"{netdev}.txt"
        if not p.is_file():
            return {}  # not captured: nothing to report for this netdev, not an error
        return parse_ethtool_s(p.read_text(errors="replace"), source=str(p))
