"""A minimal sFlow v5 encoder: builds datagrams for tests, benches and the simulator.

Writes flow samples (sampled header + extended switch) and counter samples (generic interface
+ ethernet) exactly as the v5 spec lays them out; it reads nothing and sends nothing.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from exporters.sflow.decode import ETHERNET_FIELDS, GENERIC_FIELDS


def _pad(b: bytes) -> bytes:
    return b + b"\0" * (-len(b) % 4)


def _rec(fmt: int, body: bytes) -> bytes:
    return struct.pack(">II", fmt, len(body)) + body


def flow_sample(
    header: bytes,
    *,
    seq: int = 1,
    source_index: int = 1,
    rate: int = 1,
    pool: int = 0,
    drops: int = 0,
    input: int = 1,
    output: int = 2,
    frame_length: int | None = None,
    stripped: int = 4,
    vlan: int | None = None,
    expanded: bool = False,
) -> bytes:
    recs = [
        _rec(
            1,
            struct.pack(
                ">IIII",
                1,
                frame_length if frame_length is not None else len(header) + stripped,
                stripped,
                len(header),
            )
            + _pad(header),
        )
    ]
    if vlan is not None:
        recs.append(_rec(1001, struct.pack(">IIII", vlan, 0, vlan, 0)))
    if expanded:
        head = struct.pack(
            ">IIIIIIIIIII", seq, 0, source_index, rate, pool, drops, 0, input, 0, output, len(recs)
        )
        return _rec(3, head + b"".join(recs))
    head = struct.pack(">IIIIIIII", seq, source_index, rate, pool, drops, input, output, len(recs))
    return _rec(1, head + b"".join(recs))


def counter_sample(
    generic: Mapping[str, int], ethernet: Mapping[str, int] | None = None, *, seq: int = 1
) -> bytes:
    recs = []
    if ethernet is not None:
        recs.append(_rec(2, struct.pack(">13I", *(ethernet.get(f, 0) for f in ETHERNET_FIELDS))))
    g = [generic.get(f, 0) for f in GENERIC_FIELDS]
    recs.append(_rec(1, struct.pack(">IIQIIQIIIIIIQIIIIII", *g)))
    return _rec(2, struct.pack(">III", seq, generic.get("ifindex", 0), len(recs)) + b"".join(recs))


def datagram(
    samples: Sequence[bytes], *, agent: str = "10.0.0.1", seq: int = 1, uptime_ms: int = 1000,
    sub_agent: int = 0, version: int = 5,
) -> bytes:  # fmt: skip
    if ":" in agent:
        addr = struct.pack(">I", 2) + socket.inet_pton(socket.AF_INET6, agent)
    else:
        addr = struct.pack(">I", 1) + socket.inet_pton(socket.AF_INET, agent)
    head = (
        struct.pack(">I", version)
        + addr
        + struct.pack(">IIII", sub_agent, seq, uptime_ms, len(samples))
    )
    return head + b"".join(samples)


def rocev2_frame(
    src: str, dst: str, dest_qp: int, psn: int = 0, opcode: int = 0x0A, payload: int = 1024,
    sport: int = 49152, dscp: int = 26, ecn: int = 1, vlan: int | None = None,
) -> bytes:  # fmt: skip
    """An Ethernet/IPv4/UDP(4791)/BTH frame (RDMA WRITE by default), built without scapy."""
    bth = struct.pack(">BBHII", opcode, 0, 0xFFFF, dest_qp & 0xFFFFFF, psn & 0xFFFFFF)
    body = bth + b"\0" * payload + b"\0\0\0\0"  # ICRC
    udp = struct.pack(">HHHH", sport, 4791, 8 + len(body), 0) + body
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, dscp << 2 | ecn, 20 + len(udp), 0, 0x4000, 64, 17, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))  # fmt: skip
    eth = b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01"
    if vlan is not None:
        eth += struct.pack(">HH", 0x8100, vlan) + struct.pack(">H", 0x0800)
    else:
        eth += struct.pack(">H", 0x0800)
    return eth + ip + udp


def udp_frame(
    payload: bytes, src: str = "10.0.0.1", dst: str = "10.0.0.2", dport: int = 6343
) -> bytes:
    """Ethernet/IPv4/UDP around a payload (to put datagrams in a pcap)."""
    udp = struct.pack(">HHHH", 40000, dport, 8 + len(payload), 0) + payload
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0x4000, 64, 17, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))  # fmt: skip
    return b"\x02\0\0\0\0\x02\x02\0\0\0\0\x01\x08\x00" + ip + udp


__all__: list[Any] = ["counter_sample", "datagram", "flow_sample", "rocev2_frame", "udp_frame"]
