"""The collector's path (`decode.scan()`: one pass per datagram; `SflowIngest`: fields read for all
samples at once) against the dict path (`ReferenceIngest`: `decode()` then a dict per sample): same rows, value
for value and in order, and the same counts (received, dropped, failures by reason, sequence
gaps, restarts) on the real capture, on built datagrams and on mutated ones."""

from __future__ import annotations

import random
import socket
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa

from exporters.sflow import encode as E
from exporters.sflow.decode import scan
from exporters.sflow.ingest import SflowIngest
from exporters.sflow.pcap import read_udp
from telemetry.contracts import ComponentStats
from tests.unit.sflow.reference import ReferenceIngest

PCAP = Path(__file__).parents[2] / "fixtures" / "sflow" / "tcpdump_sflow-print-v6.pcap"
AGENTS = {"10.0.0.1": "leaf01", "30::1:1:1": "spine01"}
IFNAMES = {"leaf01": {1: "Ethernet0", 2: "Ethernet4", 7: "Ethernet24"}, "spine01": {7001: "Eth1"}}


def _run(cls: Any, items: list[tuple[bytes, int]]) -> tuple[dict[str, pa.Table], dict[str, Any]]:
    st = ComponentStats("t")
    ing = cls(st, agents=AGENTS, ifnames=IFNAMES)
    if cls is SflowIngest:
        ok = [ing.add(scan(p), "192.0.2.1", ts) for p, ts in items]
    else:
        ok = [ing.ingest(p, "192.0.2.1", ts) for p, ts in items]
    tables = {b.kind.name: b.table for b in ing.drain()}
    counts = {"ok": ok, "received": st.received, "dropped": st.dropped, "errors": st.errors,
              "lost": ing.lost, "restarts": ing.restarts, "datagrams": ing.datagrams}  # fmt: skip
    return tables, counts


def _same(items: list[tuple[bytes, int]]) -> dict[str, pa.Table]:
    got, got_counts = _run(SflowIngest, items)
    want, want_counts = _run(ReferenceIngest, items)
    assert got_counts == want_counts
    assert got.keys() == want.keys()
    for kind, t in want.items():
        assert got[kind].schema == t.schema
        for col in t.column_names:
            assert got[kind][col].to_pylist() == t[col].to_pylist(), (kind, col)
    return got


def _ipv6_frame(src: str, dst: str, dport: int = 4791, qp: int = 77, tc: int = 0x6A) -> bytes:
    bth = struct.pack(">BBHII", 0x0A, 0, 0xFFFF, qp, 12345)
    udp = struct.pack(">HHHH", 50000, dport, 8 + len(bth), 0) + bth
    ip6 = struct.pack(">IHBB", (6 << 28) | (tc << 20), len(udp), 17, 64)
    ip6 += socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst)
    return b"\x02\0\0\0\0\x02\x02\0\0\0\0\x01\x86\xdd" + ip6 + udp


def _qinq(frame: bytes, outer: int, inner: int) -> bytes:
    return frame[:12] + struct.pack(">HHHH", 0x88A8, outer, 0x8100, inner) + frame[12:]


def _header_record(header: bytes, proto: int) -> bytes:
    body = struct.pack(">IIII", proto, len(header) + 4, 4, len(header)) + header
    return struct.pack(">II", 1, len(body) + (-len(body) % 4)) + body + b"\0" * (-len(body) % 4)


def _flow(records: list[bytes], *, rate: int = 100, inp: int = 1, outp: int = 2) -> bytes:
    head = struct.pack(">IIIIIIII", 9, 1, rate, 0, 0, inp, outp, len(records))
    body = head + b"".join(records)
    return struct.pack(">II", 1, len(body)) + body


def _built() -> list[bytes]:
    roce = E.rocev2_frame("10.1.2.3", "10.4.5.6", 0xABCDEF, psn=0x123456, dscp=26, ecn=3)
    tcp = bytearray(roce)
    tcp[23] = 6  # IPv4 protocol TCP
    frag = bytearray(roce)
    frag[20:22] = b"\x20\x10"  # a later fragment: no L4 header
    arp = roce[:12] + b"\x08\x06" + roce[14:]
    v6 = _ipv6_frame("fd00::1", "fd00::2:3")
    samples: list[bytes] = [
        E.flow_sample(roce[:128], rate=4096, frame_length=4158, input=1, output=7),
        E.flow_sample(E.rocev2_frame("10.0.0.9", "10.0.0.8", 5, vlan=300)[:96], vlan=12),
        E.flow_sample(roce[:60], vlan=44, expanded=True, input=2, output=3),
        E.flow_sample(roce[:64], input=0x3FFFFFFF, output=7),  # from the switch itself
        E.flow_sample(roce[:64], input=2, output=0x3FFFFFFF, expanded=True),  # to it
        E.flow_sample(_qinq(roce, 0, 0x0ABC)[:128], rate=2),
        E.flow_sample(_qinq(roce, 0x0123, 0x0456)[:128]),
        E.flow_sample(bytes(tcp[:80])),
        E.flow_sample(bytes(frag[:80])),
        E.flow_sample(arp[:64]),
        E.flow_sample(v6),
        E.flow_sample(v6[:60]),
        _flow([_header_record(roce[14:90], 11)], inp=0x40000000 | 5, outp=0x80000000 | 3),
        _flow([_header_record(v6[14:], 12)], inp=1, outp=0x40000000),
        _flow([_header_record(roce[:70], 99)]),
        _flow([]),  # no sampled header: dropped, counted
        _flow([struct.pack(">II", 1001, 16) + struct.pack(">IIII", 7, 1, 8, 2)]),
        _flow([struct.pack(">II", 2000, 8) + b"\1" * 8, _header_record(roce[:100], 1)]),
        E.counter_sample(
            {
                "ifindex": 7,
                "ifspeed": 400 * 10**9,
                "ifstatus": 3,
                "in_octets": 2**40,
                "out_octets": 5,
                "in_ucast_pkts": 2**32 - 1,
                "in_multicast_pkts": 2**32 - 1,
                "out_errors": 9,
            },
            {"fcs_errors": 2},
        ),
        E.counter_sample({"ifindex": 99, "ifstatus": 1}),
    ]
    out = [E.datagram([s], seq=i + 1) for i, s in enumerate(samples)]
    # every prefix length of a header: a truncated header decodes whatever is present
    for n in range(0, 96):
        out.append(E.datagram([E.flow_sample(_qinq(roce, 0, 5)[:n])], seq=100 + n))
    for n in range(0, 60):
        out.append(E.datagram([E.flow_sample(v6[:n])], agent="fd00::9", seq=n + 1))
    out.append(E.datagram(samples, agent="10.0.0.2", seq=1))
    # two sampled-header records in one flow sample: the reference path's rows, in order
    two = _flow([_header_record(roce[:100], 1), _header_record(v6[:40], 1)])
    out.append(E.datagram([samples[0], two, samples[1]], agent="10.0.0.2", seq=2))
    out.append(E.datagram(samples[:3], agent="10.0.0.2", seq=7))  # lost 3..6
    out.append(E.datagram(samples[:1], agent="10.0.0.2", seq=1, uptime_ms=5))  # restart
    return out


def test_real_capture_same_rows() -> None:
    items = [(u.payload, int(u.ts * 1000)) for u in read_udp(PCAP)]
    got = _same(items)
    assert (got["flow_sample"].num_rows, got["switch_port_sample"].num_rows) == (13, 48)
    assert set(got["flow_sample"]["switch"].to_pylist()) == {"spine01"}


def test_unknown_vlan_same_rows() -> None:
    """VLAN 0xFFFFFFFF in extended switch records (a real capture, akvorado's data-1140): every
    sample kept by both paths; the flow's VLAN is the known one or 0, never 65535."""
    pcap = PCAP.with_name("akvorado_data-1140.pcap")
    got = _same([(u.payload, int(u.ts * 1000)) for u in read_udp(pcap)])
    assert got["flow_sample"]["vlan"].to_pylist() == [100, 0, 100, 100, 100]


def test_built_datagrams_same_rows() -> None:
    got = _same([(d, 1_700_000_000_000 + i) for i, d in enumerate(_built())])
    flows = got["flow_sample"].to_pylist()
    assert {(f["dest_qp"], f["psn"], f["bth_opcode"]) for f in flows} >= {
        (0xABCDEF, 0x123456, 0x0A)
    }
    assert any(f["src_ip"] == "fd00::1" and f["dest_qp"] == 77 for f in flows)
    assert {f["vlan"] for f in flows} >= {
        300,
        44,
        0x0ABC,
        0x0123,
    }  # a tag wins over extended switch
    assert {f["in_port"] for f in flows} >= {"Ethernet0", "discard", "internal"}
    assert "internal" in {f["out_port"] for f in flows}  # sFlow's 0x3FFFFFFF: the device itself


def test_mutated_and_random_datagrams_counted_the_same() -> None:
    rng = random.Random(21)
    seeds = _built()
    items: list[tuple[bytes, int]] = []
    for i in range(4000):
        b = bytearray(rng.choice(seeds))
        for _ in range(rng.randrange(1, 4)):
            if not b:
                break
            op, pos = rng.random(), rng.randrange(len(b))
            if op < 0.5:
                b[pos] = rng.randrange(256)
            elif op < 0.75:
                pos -= pos % 4
                b[pos : pos + 4] = rng.choice([b"\xff\xff\xff\xff", b"\0\0\0\0", b"\0\0\0\x10"])
            elif op < 0.9:
                del b[pos:]
            else:
                b[pos:pos] = rng.randbytes(rng.randrange(1, 9))
        items.append((bytes(b), i))
    items += [(rng.randbytes(rng.randrange(60)), 0) for _ in range(200)]
    _same(items)


def test_memoryview_payloads_and_pending_rows() -> None:
    st = ComponentStats("t")
    ing = SflowIngest(st)
    data = E.datagram([E.flow_sample(E.rocev2_frame("10.0.0.1", "10.0.0.2", 3)[:128])] * 3)
    assert ing.add(scan(memoryview(b"xx" + data)[2:]), "a", 0)
    assert ing.pending_rows == 3
    [b] = ing.drain()
    assert b.table["dest_qp"].to_pylist() == [3, 3, 3] and ing.pending_rows == 0
    assert ing.drain() == []


def test_scan_reports_what_it_found() -> None:
    """One pass says everything: the reason of a malformed datagram (nothing else), the flow
    samples without a sampled header, and the dict form of a datagram that has no column form."""
    roce = E.rocev2_frame("10.1.2.3", "10.4.5.6", 7)
    bad = scan(E.datagram([], version=4))
    assert (bad.reason, bad.detail, bad.flow_sample, bad.flows) == (
        "bad_version", "bad_version: version 4", [], None)  # fmt: skip
    d = scan(E.datagram([E.flow_sample(roce[:96]), _flow([]), E.counter_sample({"ifindex": 3})]))
    assert (d.reason, d.no_header, len(d.flow_sample), len(d.port_generic), d.flows) == (
        "", 1, 1, 1, None)  # fmt: skip
    v6 = _ipv6_frame("fd00::1", "fd00::2", qp=9)
    two = scan(E.datagram([_flow([_header_record(roce[:100], 1), _header_record(v6[:54], 1)])]))
    assert two.flow_sample == [] and two.flows is not None and two.counters == []
    [f] = two.flows
    assert (f["src_ip"], f["dest_qp"]) == ("fd00::1", 7)  # the second header's IP, the first's BTH
