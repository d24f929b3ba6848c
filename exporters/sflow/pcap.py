"""A small classic-pcap reader: yields the UDP payloads (sFlow datagrams) of a capture file.

Reads pcap (both byte orders, micro- and nanosecond stamps) with Ethernet, Linux cooked (SLL),
raw IP and BSD loopback link types; it writes nothing. pcapng and IP fragments are not
reassembled: a pcapng file is refused with a clear error, a fragment is counted and skipped.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from telemetry.errors import UserError

_MAGIC = {
    b"\xd4\xc3\xb2\xa1": ("<", 1e-6),
    b"\xa1\xb2\xc3\xd4": (">", 1e-6),
    b"\x4d\x3c\xb2\xa1": ("<", 1e-9),
    b"\xa1\xb2\x3c\x4d": (">", 1e-9),
}
LINK_NULL, LINK_ETHERNET, LINK_RAW, LINK_SLL, LINK_IPV4, LINK_IPV6 = 0, 1, 101, 113, 228, 229


@dataclass
class PcapStats:
    packets: int = 0
    udp: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


@dataclass(frozen=True)
class UdpPayload:
    ts: float  # seconds since the epoch
    src: str
    src_port: int
    dst_port: int
    payload: bytes


def read_udp(
    path: str | Path, *, port: int | None = None, stats: PcapStats | None = None
) -> Iterator[UdpPayload]:
    """Yield UDP payloads (to `port` if given) from a classic pcap file."""
    for ts, src, sport, dport, payload in iter_udp(path, port=port, stats=stats):
        yield UdpPayload(ts, src, sport, dport, bytes(payload))


def iter_udp(
    path: str | Path, *, port: int | None = None, stats: PcapStats | None = None
) -> Iterator[tuple[float, str, int, int, memoryview]]:
    """(time, source address, source port, destination port, payload) of each UDP datagram (to
    `port` if given). The file is read in 8 MiB chunks and payloads are views into them (no copy
    per packet): the fast path of `--from FILE.pcap`."""
    st = stats if stats is not None else PcapStats()
    p = Path(path)
    try:
        f = p.open("rb")
    except OSError as e:
        raise UserError(f"{path}: cannot read: {e.strerror}") from None
    with f:
        head = f.read(24)
        if len(head) < 24:
            raise UserError(f"{path}: not a pcap file (only {len(head)} bytes)")
        if head[:4] == b"\x0a\x0d\x0d\x0a":
            raise UserError(f"{path}: pcapng is not supported; convert with `editcap -F pcap`")
        if head[:4] not in _MAGIC:
            raise UserError(f"{path}: not a pcap file (magic {head[:4].hex()})")
        endian, unit = _MAGIC[head[:4]]
        linktype = struct.unpack(endian + "I", head[20:24])[0] & 0x0FFFFFFF
        rec = struct.Struct(endian + "IIII").unpack_from
        names: dict[bytes, str] = {}
        data = b""
        off = 0
        eof = False
        while True:
            if not eof and len(data) - off < _RECORD_MAX:  # views into `data` stay valid
                more = f.read(_CHUNK)
                eof = not more
                data = data[off:] + more
                off = 0
            size = len(data)
            if off == size:
                return
            if off + 16 > size:
                st.skip("truncated_file")
                return
            sec, frac, incl, _orig = rec(data, off)
            if incl > _RECORD_MAX - 16:
                raise UserError(f"{path}: corrupt record (captured length {incl})")
            if off + 16 + incl > size:
                st.skip("truncated_file")
                return
            pkt = memoryview(data)[off + 16 : off + 16 + incl]
            off += 16 + incl
            st.packets += 1
            got = _udp(pkt, linktype, st)
            if got is None:
                continue
            raw, sport, dport, start, end = got
            if port is not None and dport != port:
                st.skip("other_port")
                continue
            st.udp += 1
            src = names.get(raw)
            if src is None:
                src = names[raw] = socket.inet_ntop(
                    socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw
                )
            yield sec + frac * unit, src, sport, dport, pkt[start:end]


_RECORD_MAX = 16 + 262144  # record header + the largest captured length taken
_CHUNK = 8 << 20
_PORTS3 = struct.Struct(">HHH").unpack_from


def _udp(pkt: memoryview, linktype: int, st: PcapStats) -> tuple[bytes, int, int, int, int] | None:
    """(source address bytes, source port, destination port, payload start, payload end)."""
    n = len(pkt)
    if linktype == LINK_ETHERNET:
        if n < 14:
            st.skip("short_frame")
            return None
        etype = (pkt[12] << 8) | pkt[13]
        off = 14
        while etype in (0x8100, 0x88A8) and n >= off + 4:
            etype = (pkt[off + 2] << 8) | pkt[off + 3]
            off += 4
    elif linktype == LINK_SLL:
        if n < 16:
            st.skip("short_frame")
            return None
        etype, off = (pkt[14] << 8) | pkt[15], 16
    elif linktype == LINK_NULL:
        if n < 4:
            st.skip("short_frame")
            return None
        off = 4
        etype = 0x0800 if n > 4 and pkt[4] >> 4 == 4 else 0x86DD
    elif linktype in (LINK_RAW, LINK_IPV4, LINK_IPV6):
        off = 0
        etype = 0x0800 if n and pkt[0] >> 4 == 4 else 0x86DD
    else:
        st.skip(f"linktype_{linktype}")
        return None
    if etype == 0x0800:
        if n < off + 20:
            st.skip("short_ip")
            return None
        ihl = (pkt[off] & 0x0F) * 4
        if pkt[off + 9] != 17:
            st.skip("not_udp")
            return None
        if ((pkt[off + 6] << 8) | pkt[off + 7]) & 0x3FFF:
            st.skip("ip_fragment")
            return None
        src = bytes(pkt[off + 12 : off + 16])
        off += ihl
    elif etype == 0x86DD:
        if n < off + 40:
            st.skip("short_ip")
            return None
        if pkt[off + 6] != 17:  # extension headers before UDP are not followed
            st.skip("not_udp")
            return None
        src = bytes(pkt[off + 8 : off + 24])
        off += 40
    else:
        st.skip("not_ip")
        return None
    if n < off + 8:
        st.skip("short_udp")
        return None
    sport, dport, ulen = _PORTS3(pkt, off)
    end = off + ulen if ulen >= 8 else n
    return src, sport, dport, off + 8, min(end, n)


def write_pcap(path: str | Path, frames: list[tuple[float, bytes]]) -> None:
    """Write Ethernet frames as a classic little-endian pcap (for tests and benches)."""
    with Path(path).open("wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, LINK_ETHERNET))
        for ts, frame in frames:
            sec = int(ts)
            f.write(struct.pack("<IIII", sec, int((ts - sec) * 1e6), len(frame), len(frame)))
            f.write(frame)


__all__ = ["PcapStats", "UdpPayload", "iter_udp", "read_udp", "write_pcap"]
