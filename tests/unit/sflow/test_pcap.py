"""The small pcap reader: byte orders, nanosecond stamps, link types, and clear refusals."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from exporters.sflow import encode as E
from exporters.sflow.pcap import PcapStats, read_udp, write_pcap
from telemetry.errors import UserError


def test_roundtrip_and_port_filter(tmp_path: Path) -> None:
    p = tmp_path / "a.pcap"
    write_pcap(p, [(1.5, E.udp_frame(b"hello", dport=6343)), (2.25, E.udp_frame(b"dns", dport=53))])
    st = PcapStats()
    got = list(read_udp(p, port=6343, stats=st))
    assert [(u.ts, u.src, u.dst_port, u.payload) for u in got] == [
        (1.5, "10.0.0.1", 6343, b"hello")
    ]
    assert st.packets == 2 and st.skipped == {"other_port": 1}


def test_big_endian_nanoseconds_and_linux_cooked(tmp_path: Path) -> None:
    frame = E.udp_frame(b"x" * 9)
    sll = b"\0\0\0\1\0\6" + b"\0" * 8 + b"\x08\x00" + frame[14:]  # SLL header instead of Ethernet
    p = tmp_path / "b.pcap"
    with p.open("wb") as f:
        f.write(struct.pack(">IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 113))
        f.write(struct.pack(">IIII", 10, 500_000_000, len(sll), len(sll)) + sll)
    [u] = list(read_udp(p))
    assert u.ts == pytest.approx(10.5) and u.payload == b"x" * 9


def test_refusals_name_the_file(tmp_path: Path) -> None:
    ng = tmp_path / "c.pcapng"
    ng.write_bytes(b"\x0a\x0d\x0d\x0a" + b"\0" * 40)
    with pytest.raises(UserError, match="pcapng"):
        list(read_udp(ng))
    txt = tmp_path / "d.txt"
    txt.write_text("hello, this is not a capture file")
    with pytest.raises(UserError, match=r"d\.txt: not a pcap file"):
        list(read_udp(txt))
    with pytest.raises(UserError, match="cannot read"):
        list(read_udp(tmp_path / "missing.pcap"))


def test_truncated_file_stops_cleanly(tmp_path: Path) -> None:
    p = tmp_path / "e.pcap"
    write_pcap(p, [(1.0, E.udp_frame(b"one")), (2.0, E.udp_frame(b"two"))])
    p.write_bytes(p.read_bytes()[:-10])
    st = PcapStats()
    assert [u.payload for u in read_udp(p, stats=st)] == [b"one"]
    assert st.skipped == {"truncated_file": 1}
