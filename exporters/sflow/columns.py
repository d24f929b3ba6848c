"""Columns from offsets: the vectorised half of `ingest.SflowIngest` (pure; numpy and Arrow).

`decode.scan()` validates each datagram exactly as `decode()` does and keeps only where things
are; `ingest.py` appends the datagram bytes to one buffer and, per flow sample, the buffer offsets
of the sample, its sampled-header record and its extended-switch record (per counter sample, of
its generic-interface record). Everything else is read here for all samples at once:
fixed-offset fields are gathered with numpy, the sampled header (Ethernet, 802.1Q/QinQ, IPv4/IPv6,
TCP/UDP ports, RoCEv2 BTH) is parsed with masks over arrays of per-sample offsets, and the string
columns are built by Arrow kernels (IPv4 dotted quads) or once per distinct value (port names).
The rules are `decode.decode_header`/`decode_ip`'s, field for field; tests compare the two paths.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from exporters.sflow.decode import INTERNAL, MAX_VLAN, ROCEV2_PORT

_VLAN_TPIDS = (0x8100, 0x88A8, 0x9100)
_PAD = 64  # zero bytes after the buffer: a clamped gather past the end reads zeros


@dataclass(frozen=True)
class Agent:
    """One sFlow agent seen in the batch: its address, switch name and ifIndex names."""

    address: str
    switch: str
    names: Mapping[int, str]


class _Gather:
    """Big-endian reads at many offsets of one buffer."""

    def __init__(self, buf: bytes | bytearray) -> None:
        b = np.zeros(len(buf) + _PAD, dtype=np.uint8)
        b[: len(buf)] = np.frombuffer(buf, dtype=np.uint8)
        self.b = b
        self.last = len(b) - 8

    def u8(self, i: np.ndarray) -> np.ndarray:
        return self.b[np.minimum(i, self.last)]

    def u16(self, i: np.ndarray) -> np.ndarray:
        i = np.minimum(i, self.last)
        b = self.b
        return (b[i].astype(np.uint16) << 8) | b[i + 1]

    def u32(self, i: np.ndarray) -> np.ndarray:
        i = np.minimum(i, self.last)
        b = self.b
        return (
            (b[i].astype(np.uint32) << 24)
            | (b[i + 1].astype(np.uint32) << 16)
            | (b[i + 2].astype(np.uint32) << 8)
            | b[i + 3]
        )

    def u64(self, i: np.ndarray) -> np.ndarray:
        return (self.u32(i).astype(np.uint64) << np.uint64(32)) | self.u32(i + 4)


def _nullable(values: np.ndarray, valid: np.ndarray, typ: pa.DataType) -> pa.Array:
    if valid.all():
        return pa.array(values, type=typ)
    return pa.array(values.astype(typ.to_pandas_dtype()), type=typ, mask=~valid)


def _iface_names(
    agent: np.ndarray, fmt: np.ndarray, val: np.ndarray, agents: Sequence[Agent], *, named: bool
) -> pa.Array:
    """`decode._iface(fmt, val)` as text, named through the agent's ifnames: for any format when
    `named` (the input side, as the row builder always did), else only for an ifIndex."""
    cls = np.where(fmt == 0, 0, np.where(fmt == 1, 1, 2)).astype(np.int64)
    key = (agent.astype(np.int64) << 34) | (cls << 32) | val.astype(np.int64)
    uniq, inv = np.unique(key, return_inverse=True)
    out = []
    for k in uniq.tolist():
        a, c, v = k >> 34, (k >> 32) & 3, k & 0xFFFFFFFF
        text = (
            ("internal" if v == INTERNAL else str(v))
            if c == 0
            else ("discard" if c == 1 else "multiple")
        )
        out.append(agents[a].names.get(v, text) if named or c == 0 else text)
    return pc.take(pa.array(out, type=pa.string()), pa.array(inv.reshape(-1)))


def _by_agent(agent: np.ndarray, values: Sequence[str]) -> pa.Array:
    return pc.take(pa.array(values, type=pa.string()), pa.array(agent))


def _ipv4_text(g: _Gather, at: np.ndarray) -> pa.Array:
    parts = [pc.cast(pa.array(g.u8(at + k)), pa.string()) for k in range(4)]
    return pc.binary_join_element_wise(*parts, ".")


def _ip_text(g: _Gather, h: np.ndarray, ok4: np.ndarray, ok6: np.ndarray, rel: int) -> pa.Array:
    """Source (rel 0) or destination (rel 1) address text; '' where the header has no IP."""
    n = len(h)
    out = (
        pa.array(np.full(n, "", dtype=object), type=pa.string()) if n else pa.array([], pa.string())
    )
    if ok4.any():
        out = pc.if_else(pa.array(ok4), _ipv4_text(g, h + 12 + 4 * rel), out)
    if ok6.any():
        text = np.full(n, "", dtype=object)
        raw = g.b
        for i in np.flatnonzero(ok6).tolist():
            s = int(h[i]) + 8 + 16 * rel
            text[i] = socket.inet_ntop(socket.AF_INET6, raw[s : s + 16].tobytes())
        out = pc.if_else(pa.array(ok6), pa.array(text, type=pa.string()), out)
    return out


def flow_columns(
    buf: bytes | bytearray,
    sample: np.ndarray,
    header: np.ndarray,
    xsw: np.ndarray,
    ts_ms: np.ndarray,
    agent: np.ndarray,
    agents: Sequence[Agent],
) -> dict[str, pa.Array]:
    """The flow_sample columns of the flow samples whose data start at `sample` (negative: an
    expanded sample at -offset), sampled-header record data at `header`, extended-switch record
    data at `xsw` (-1: none); `agent` indexes `agents`."""
    g = _Gather(buf)
    exp = sample < 0
    o = np.abs(sample)
    rate = g.u32(o + np.where(exp, 12, 8))
    inp, outp = g.u32(o + 20), g.u32(o + 24)
    in_fmt = np.where(exp, g.u32(o + 24), inp >> 30)
    in_val = np.where(exp, g.u32(o + 28), inp & 0x3FFFFFFF)
    out_fmt = np.where(exp, g.u32(o + 32), outp >> 30)
    out_val = np.where(exp, g.u32(o + 36), outp & 0x3FFFFFFF)
    hproto, frame, hlen = g.u32(header), g.u32(header + 4), g.u32(header + 12).astype(np.int64)
    h = header + 16

    # link layer: Ethernet (+ 802.1Q/QinQ tags; the first non-zero VLAN id), or bare IPv4/IPv6
    eth = (hproto == 1) & (hlen >= 14)
    etype = np.where(
        eth, g.u16(h + 12), np.where(hproto == 11, 0x0800, np.where(hproto == 12, 0x86DD, 0))
    )
    off = np.where(eth, 14, 0).astype(np.int64)
    vlan = np.zeros(len(h), dtype=np.int64)
    tagged = eth & np.isin(etype, _VLAN_TPIDS) & (hlen >= off + 4)
    while tagged.any():
        tci = g.u16(h + off).astype(np.int64) & 0x0FFF
        vlan = np.where(tagged & (vlan == 0), tci, vlan)
        etype = np.where(tagged, g.u16(h + off + 2), etype)
        off = off + 4 * tagged
        tagged = tagged & np.isin(etype, _VLAN_TPIDS) & (hlen >= off + 4)
    has_xsw = xsw >= 0
    # else the extended switch record's ingress VLAN, when the agent knew it (decode.MAX_VLAN)
    xvlan = np.where(has_xsw, g.u32(np.where(has_xsw, xsw, 0)), 0)
    vlan = np.where(vlan != 0, vlan, np.where(xvlan <= MAX_VLAN, xvlan, 0))

    # network layer
    ip = h + off
    b0 = g.u8(ip)
    ihl = (b0 & 0x0F).astype(np.int64) * 4
    ok4 = (etype == 0x0800) & (hlen >= off + 20) & (b0 >> 4 == 4) & (ihl >= 20)
    ok6 = (etype == 0x86DD) & (hlen >= off + 40) & (b0 >> 4 == 6)
    has_ip = ok4 | ok6
    b1 = g.u8(ip + 1)
    tos = np.where(ok4, b1, ((b0 & 0x0F) << 4) | (b1 >> 4))
    proto = np.where(ok4, g.u8(ip + 9), g.u8(ip + 6))
    frag = g.u16(ip + 6) & 0x1FFF
    l4 = (ok4 & (frag == 0)) | ok6
    l4off = off + np.where(ok4, ihl, 40)

    # transport layer, and the BTH after UDP 4791
    ports = l4 & ((proto == 6) | (proto == 17)) & (hlen >= l4off + 4)
    t = h + l4off
    sport, dport = g.u16(t), g.u16(t + 2)
    bth = ports & (proto == 17) & (dport == ROCEV2_PORT) & (hlen >= l4off + 20)

    return {
        "ts": pa.array(ts_ms, type=pa.timestamp("ms", tz="UTC")),
        "agent": _by_agent(agent, [a.address for a in agents]),
        "switch": _by_agent(agent, [a.switch for a in agents]),
        "in_port": _iface_names(agent, in_fmt, in_val, agents, named=True),
        "out_port": _iface_names(agent, out_fmt, out_val, agents, named=False),
        "src_ip": _ip_text(g, ip, ok4, ok6, 0),
        "dst_ip": _ip_text(g, ip, ok4, ok6, 1),
        "src_port": _nullable(sport, ports, pa.uint16()),
        "dst_port": _nullable(dport, ports, pa.uint16()),
        "protocol": _nullable(proto, has_ip, pa.uint8()),
        "vlan": pa.array(vlan.astype(np.uint16), type=pa.uint16()),
        "dscp": _nullable(tos >> 2, has_ip, pa.uint8()),
        "ecn": _nullable(tos & 3, has_ip, pa.uint8()),
        "bth_opcode": _nullable(g.u8(t + 8), bth, pa.uint8()),
        "dest_qp": _nullable(g.u32(t + 12) & 0xFFFFFF, bth, pa.uint32()),
        "psn": _nullable(g.u32(t + 16) & 0xFFFFFF, bth, pa.uint32()),
        "frame_bytes": pa.array(frame, type=pa.uint32()),
        "sampling_rate": pa.array(rate, type=pa.uint32()),
        "bytes": pa.array(frame.astype(np.uint64) * rate.astype(np.uint64), type=pa.uint64()),
        "packets": pa.array(rate.astype(np.uint64), type=pa.uint64()),
    }


def port_columns(
    buf: bytes | bytearray,
    generic: np.ndarray,
    ts_ms: np.ndarray,
    agent: np.ndarray,
    agents: Sequence[Agent],
) -> dict[str, pa.Array]:
    """switch_port_sample columns of the generic-interface counter records whose data start at
    `generic` (offsets in `decode._GENERIC`'s layout)."""
    g = _Gather(buf)
    u64 = pa.uint64()
    ifindex = g.u32(generic)
    sums = {
        "rx_packets_total": g.u32(generic + 32).astype(np.uint64)
        + g.u32(generic + 36)
        + g.u32(generic + 40),
        "tx_packets_total": g.u32(generic + 64).astype(np.uint64)
        + g.u32(generic + 68)
        + g.u32(generic + 72),
    }
    return {
        "ts": pa.array(ts_ms, type=pa.timestamp("ms", tz="UTC")),
        "switch": _by_agent(agent, [a.switch or a.address for a in agents]),
        "port": _iface_names(agent, np.zeros_like(ifindex), ifindex, agents, named=True),
        "up": pa.array(((g.u32(generic + 20) & 2) != 0).astype(np.uint8), type=pa.uint8()),
        "speed_bps": pa.array(g.u64(generic + 8).astype(np.float64), type=pa.float64()),
        "rx_bytes_total": pa.array(g.u64(generic + 24), type=u64),
        "tx_bytes_total": pa.array(g.u64(generic + 56), type=u64),
        "rx_packets_total": pa.array(sums["rx_packets_total"], type=u64),
        "tx_packets_total": pa.array(sums["tx_packets_total"], type=u64),
        "rx_discards_total": pa.array(g.u32(generic + 44).astype(np.uint64), type=u64),
        "tx_discards_total": pa.array(g.u32(generic + 76).astype(np.uint64), type=u64),
        "rx_errors_total": pa.array(g.u32(generic + 48).astype(np.uint64), type=u64),
        "tx_errors_total": pa.array(g.u32(generic + 80).astype(np.uint64), type=u64),
    }


__all__ = ["Agent", "flow_columns", "port_columns"]
