"""sFlow v5 datagram decoder (pure; no I/O, no clock, no logging): `scan()`, the collector's one
pass per datagram (header, offsets of its rows for `columns.py`, what was irregular), and
`decode()`, the same checks giving plain dicts (tools, the simulator, the tests' reference).

Reads flow samples (1), expanded flow samples (3), counter samples (2) and expanded counter
samples (4); flow records: sampled header (1) down through Ethernet/VLAN/IPv4/IPv6/UDP/TCP and,
for UDP 4791 (RoCEv2), the InfiniBand BTH; extended switch (1001). Counter records: generic
interface (1) and ethernet (2). It must never let anything but `DecodeError` escape, and never
return a number it did not read from the datagram: a datagram that does not parse is rejected
whole. Unknown record formats are skipped by their length (that is what the length is for).
"""

from __future__ import annotations

import socket
import struct
from typing import Any

ROCEV2_PORT = 4791

_2U32 = struct.Struct(">II")
_HDR_TAIL = struct.Struct(">IIII")  # sub-agent, sequence, uptime, samples
_FLOW = struct.Struct(">IIIIIIII")  # seq, source id, rate, pool, drops, input, output, records
_XFLOW = struct.Struct(">IIIIIIIIIII")  # expanded: source type/index, in/out format+value
_CTR = struct.Struct(">III")  # seq, source id, records
_XCTR = struct.Struct(">IIII")
_RAW = struct.Struct(">IIII")  # header protocol, frame length, stripped, header length
_XSW = struct.Struct(">IIII")
_GENERIC = struct.Struct(">IIQIIQIIIIIIQIIIIII")
_ETHCTR = struct.Struct(">13I")
_ETH = struct.Struct(">6s6sH")
_BTH = struct.Struct(">BBHII")  # opcode, flags, pkey, dest QP (low 24 bits), PSN (low 24 bits)
_PORTS = struct.Struct(">HH")
_U32 = struct.Struct(">I")

# sample format -> (fixed part's size, where its record count is, what it is called)
_FIXED = {1: (32, 28, "flow sample"), 3: (44, 40, "expanded flow sample"),
          2: (12, 8, "counter sample"), 4: (16, 12, "expanded counter sample")}  # fmt: skip

GENERIC_FIELDS = (
    "ifindex", "iftype", "ifspeed", "ifdirection", "ifstatus",
    "in_octets", "in_ucast_pkts", "in_multicast_pkts", "in_broadcast_pkts", "in_discards",
    "in_errors", "in_unknown_protos",
    "out_octets", "out_ucast_pkts", "out_multicast_pkts", "out_broadcast_pkts", "out_discards",
    "out_errors", "promiscuous_mode",
)  # fmt: skip
ETHERNET_FIELDS = (
    "align_errors", "fcs_errors", "single_collision_frames", "multiple_collision_frames",
    "sqe_test_errors", "deferred_transmissions", "late_collisions", "excessive_collisions",
    "internal_mac_transmit_errors", "carrier_sense_errors", "frame_too_longs",
    "internal_mac_receive_errors", "symbol_errors",
)  # fmt: skip

MAX_VLAN = 4095  # 802.1Q's 12-bit VLAN id
MAX_SAMPLES = 4096  # far above any real agent (a 1500-byte datagram holds ~10); bounds the work


# Every DecodeError.reason: a bounded set (the `reason` label of the sflow source's failures).
REASONS = (
    "bad_agent_address",
    "bad_record",
    "bad_sample_length",
    "bad_version",
    "malformed",
    "too_many_records",
    "too_many_samples",
    "trailing_bytes",
    "truncated_header",
    "truncated_record",
    "truncated_sample",
)


class DecodeError(ValueError):
    """The datagram is malformed; `reason` is a short stable label for self-metrics."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


INTERNAL = 0x3FFFFFFF  # format 0's largest value: the device itself, not one of its interfaces


def _iface(fmt: int, value: int) -> str:
    """An interface as sFlow describes it: an ifIndex, 'internal' (traffic from or to the device
    itself: its CPU), a discard, or 'multiple' (fan-out)."""
    if fmt == 0:
        return "internal" if value == INTERNAL else str(value)
    if fmt == 1:
        return "discard"
    return "multiple"


def decode_header(hdr: bytes, out: dict[str, Any]) -> None:
    """Fill L2-L4 (and BTH) fields from a sampled Ethernet frame. A truncated header is normal
    (it is a prefix of the packet): whatever is present is decoded, the rest stays absent."""
    n = len(hdr)
    if n < 14:
        return
    _dst, _src, etype = _ETH.unpack_from(hdr, 0)
    off = 14
    while etype in (0x8100, 0x88A8, 0x9100) and n >= off + 4:
        tci, etype = _PORTS.unpack_from(hdr, off)
        if "vlan" not in out or out["vlan"] == 0:
            out["vlan"] = tci & 0x0FFF
        off += 4
    decode_ip(hdr, off, etype, out)


def decode_ip(hdr: bytes, off: int, etype: int, out: dict[str, Any]) -> None:
    n = len(hdr)
    if etype == 0x0800:
        if n < off + 20:
            return
        vihl = hdr[off]
        ihl = (vihl & 0x0F) * 4
        if vihl >> 4 != 4 or ihl < 20:
            return
        tos = hdr[off + 1]
        proto = hdr[off + 9]
        out["src_ip"] = socket.inet_ntop(socket.AF_INET, hdr[off + 12 : off + 16])
        out["dst_ip"] = socket.inet_ntop(socket.AF_INET, hdr[off + 16 : off + 20])
        frag = int.from_bytes(hdr[off + 6 : off + 8], "big") & 0x1FFF
        off += ihl
        if frag:  # a later fragment carries no L4 header
            out["protocol"], out["dscp"], out["ecn"] = proto, tos >> 2, tos & 3
            return
    elif etype == 0x86DD:
        if n < off + 40:
            return
        if hdr[off] >> 4 != 6:
            return
        tc = ((hdr[off] & 0x0F) << 4) | (hdr[off + 1] >> 4)
        tos = tc
        proto = hdr[off + 6]
        out["src_ip"] = socket.inet_ntop(socket.AF_INET6, hdr[off + 8 : off + 24])
        out["dst_ip"] = socket.inet_ntop(socket.AF_INET6, hdr[off + 24 : off + 40])
        off += 40
    else:
        return
    out["protocol"], out["dscp"], out["ecn"] = proto, tos >> 2, tos & 3
    if proto in (6, 17) and n >= off + 4:
        sport, dport = _PORTS.unpack_from(hdr, off)
        out["src_port"], out["dst_port"] = sport, dport
        # RoCEv2: the BTH follows the 8-byte UDP header.
        if proto == 17 and dport == ROCEV2_PORT and n >= off + 8 + 12:
            opcode, _flags, _pkey, qp, psn = _BTH.unpack_from(hdr, off + 8)
            out["bth_opcode"] = opcode
            out["dest_qp"] = qp & 0xFFFFFF
            out["psn"] = psn & 0xFFFFFF


def datagram_header(data: bytes | memoryview) -> tuple[bytes, int, int, int, int, int]:
    """(agent address bytes, sub-agent, sequence, uptime ms, samples, offset of the first
    sample) of a datagram, checked (version 5, an IPv4/IPv6 agent, a bounded sample count)."""
    n = len(data)
    if n < 8:
        raise DecodeError("truncated_header", f"{n} bytes")
    version, atype = _2U32.unpack_from(data, 0)
    if version != 5:
        raise DecodeError("bad_version", f"version {version}")
    if atype == 1:
        if n < 12 + 16:
            raise DecodeError("truncated_header", f"{n} bytes")
        agent, off = bytes(data[8:12]), 12
    elif atype == 2:
        if n < 24 + 16:
            raise DecodeError("truncated_header", f"{n} bytes")
        agent, off = bytes(data[8:24]), 24
    else:
        raise DecodeError("bad_agent_address", f"address type {atype}")
    sub_agent, seq, uptime, nsamples = _HDR_TAIL.unpack_from(data, off)
    if nsamples > MAX_SAMPLES:
        raise DecodeError("too_many_samples", str(nsamples))
    return agent, sub_agent, seq, uptime, nsamples, off + 16


def _header_at(
    data: bytes | memoryview, off: int, limit: int, code: str, what: str, kind: str
) -> tuple[int, int, int]:
    """(format, length, end) of the format/length header at `off` whose body must end by `limit`.

    `code` is the DecodeError code; `what` names the thing, `kind` what its format number is.
    """
    if off + 8 > limit:
        raise DecodeError(code, f"{what} header at {off}")
    fmt, length = _2U32.unpack_from(data, off)
    end = off + 8 + length
    if end > limit:
        raise DecodeError(code, f"{kind} {fmt} length {length}")
    return fmt, length, end


def sample_at(data: bytes | memoryview, off: int, n: int) -> tuple[int, int, int]:
    """(format, length, end) of the sample whose header is at `off`; its data follows at off+8."""
    return _header_at(data, off, n, "truncated_sample", "sample", "sample format")


def record_at(data: bytes | memoryview, off: int, end: int, what: str) -> tuple[int, int, int]:
    """(format, length, end) of the `what` (flow/counter) record whose header is at `off`."""
    return _header_at(data, off, end, "truncated_record", f"{what} record", f"{what} record")


def sampled_header_length(data: bytes | memoryview, off: int, length: int, rend: int) -> int:
    """The header length of the sampled-header record whose data is at `off`, checked."""
    if length < 16:
        raise DecodeError("bad_record", "sampled header shorter than 16 bytes")
    hlen: int = _U32.unpack_from(data, off + 12)[0]
    if off + 16 + hlen > rend:
        raise DecodeError("bad_record", f"sampled header length {hlen} > record")
    return hlen


def extended_switch(data: bytes | memoryview, off: int, length: int) -> tuple[int | None, ...]:
    """(src vlan, src priority, dst vlan, dst priority) of an extended-switch record. A value
    outside 802.1Q's range is one the agent did not know (Juniper and hsflowd send 0xFFFFFFFF
    for the VLAN of a routed port): None, the sample kept."""
    if length < 16:
        raise DecodeError("bad_record", "extended switch shorter than 16 bytes")
    sv, sp, dv, dp = _XSW.unpack_from(data, off)
    return (
        sv if sv <= MAX_VLAN else None,
        sp if sp <= 7 else None,
        dv if dv <= MAX_VLAN else None,
        dp if dp <= 7 else None,
    )


def check_counter_record(fmt: int, length: int) -> None:
    if fmt == 1 and length < _GENERIC.size:
        raise DecodeError("bad_record", f"generic interface counters length {length}")
    if fmt == 2 and length < _ETHCTR.size:
        raise DecodeError("bad_record", f"ethernet counters length {length}")


def records_end(off: int, end: int) -> None:
    if off != end:
        raise DecodeError("bad_sample_length", f"records end at {off}, sample at {end}")


def _flow_records(data: bytes, off: int, end: int, count: int, s: dict[str, Any]) -> None:
    for _ in range(count):
        fmt, length, rend = record_at(data, off, end, "flow")
        off += 8
        if fmt == 1:  # sampled header
            _sampled_header(data, off, sampled_header_length(data, off, length, rend), s)
        elif fmt == 1001:  # extended switch
            sv, sp, dv, dp = extended_switch(data, off, length)
            s["src_vlan"], s["src_priority"], s["dst_vlan"], s["dst_priority"] = sv, sp, dv, dp
        off = rend
    records_end(off, end)


def _sampled_header(data: bytes, off: int, hlen: int, s: dict[str, Any]) -> None:
    """The fields of the (checked) sampled-header record whose data is at `off`, into `s`."""
    proto, frame_len, stripped, _ = _RAW.unpack_from(data, off)
    s["header_protocol"] = proto
    s["frame_bytes"] = frame_len
    s["stripped"] = stripped
    s["header_size"] = hlen
    hdr = data[off + 16 : off + 16 + hlen]
    if proto == 1:
        decode_header(hdr, s)
    elif proto == 11:
        decode_ip(hdr, 0, 0x0800, s)
    elif proto == 12:
        decode_ip(hdr, 0, 0x86DD, s)


def _counter_records(data: bytes, off: int, end: int, count: int, s: dict[str, Any]) -> None:
    for _ in range(count):
        fmt, length, rend = record_at(data, off, end, "counter")
        off += 8
        check_counter_record(fmt, length)
        if fmt == 1:
            s["generic"] = dict(zip(GENERIC_FIELDS, _GENERIC.unpack_from(data, off), strict=True))
        elif fmt == 2:
            s["ethernet"] = dict(zip(ETHERNET_FIELDS, _ETHCTR.unpack_from(data, off), strict=True))
        off = rend
    records_end(off, end)


def _flow_sample(data: bytes | memoryview, off: int, expanded: bool) -> tuple[dict[str, Any], int]:
    """(the fields of the flow sample whose data is at `off`, its record count); sizes checked."""
    if expanded:
        (sseq, stype_id, sidx, rate, pool, drops, in_fmt, in_val, out_fmt, out_val,
         nrec) = _XFLOW.unpack_from(data, off)  # fmt: skip
    else:
        sseq, src, rate, pool, drops, inp, outp, nrec = _FLOW.unpack_from(data, off)
        stype_id, sidx = src >> 24, src & 0xFFFFFF
        in_fmt, in_val = inp >> 30, inp & 0x3FFFFFFF
        out_fmt, out_val = outp >> 30, outp & 0x3FFFFFFF
    s = {
        "seq": sseq,
        "source_type": stype_id,
        "source_index": sidx,
        "sampling_rate": rate,
        "pool": pool,
        "drops": drops,
        "in_port": _iface(in_fmt, in_val),
        "out_port": _iface(out_fmt, out_val),
        "input": in_val,
        "output": out_val,
        "output_format": out_fmt,
    }
    return s, nrec


def decode(data: bytes) -> dict[str, Any]:
    """Decode one datagram into {agent, sub_agent, seq, uptime_ms, flows: [...], counters: [...]}.

    Flow dicts carry sampling_rate, frame_bytes, in_port/out_port (ifIndex as text), the header
    fields found (src_ip ... psn) and `bytes`/`packets` scaled by the sampling rate.
    Raises DecodeError (only) when the datagram is malformed.
    """
    try:
        return _decode(data)
    except DecodeError:
        raise
    except (struct.error, IndexError, ValueError, OverflowError) as e:  # belt and braces
        raise DecodeError("malformed", str(e)) from None


def _decode(data: bytes) -> dict[str, Any]:
    n = len(data)
    raw, sub_agent, seq, uptime, nsamples, off = datagram_header(data)
    agent = socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw)
    flows: list[dict[str, Any]] = []
    counters: list[dict[str, Any]] = []
    for _ in range(nsamples):
        stype, slen, end = sample_at(data, off, n)
        off += 8
        if stype == 1 or stype == 3:
            size, _, what = _FIXED[stype]
            if slen < size:
                raise DecodeError("truncated_sample", what)
            s, nrec = _flow_sample(data, off, stype == 3)
            if nrec > MAX_SAMPLES:
                raise DecodeError("too_many_records", str(nrec))
            roff = off + size
            _flow_records(data, roff, end, nrec, s)
            rate = s["sampling_rate"]
            fb = s.get("frame_bytes")
            if fb is not None:
                s["bytes"] = fb * rate
            s["packets"] = rate
            flows.append(s)
        elif stype == 2 or stype == 4:
            if stype == 2:
                if slen < _CTR.size:
                    raise DecodeError("truncated_sample", "counter sample")
                sseq, src, nrec = _CTR.unpack_from(data, off)
                stype_id, sidx = src >> 24, src & 0xFFFFFF
                roff = off + _CTR.size
            else:
                if slen < _XCTR.size:
                    raise DecodeError("truncated_sample", "expanded counter sample")
                sseq, stype_id, sidx, nrec = _XCTR.unpack_from(data, off)
                roff = off + _XCTR.size
            if nrec > MAX_SAMPLES:
                raise DecodeError("too_many_records", str(nrec))
            c: dict[str, Any] = {"seq": sseq, "source_type": stype_id, "source_index": sidx}
            _counter_records(data, roff, end, nrec, c)
            counters.append(c)
        off = end  # unknown sample formats are skipped by length
    if off != n:
        raise DecodeError("trailing_bytes", f"{n - off} bytes after the last sample")
    return {
        "agent": agent,
        "sub_agent": sub_agent,
        "seq": seq,
        "uptime_ms": uptime,
        "flows": flows,
        "counters": counters,
    }


class Decoded:
    """One datagram after `scan`: its header, where its rows are, and what was irregular.

    Offsets are into `data`. Per flow sample with a sampled header: its data (`flow_sample`,
    negated for an expanded sample), its sampled-header record data (`flow_header`) and its
    extended-switch record data (`flow_switch`, -1: none); per counter sample with generic
    interface counters, that record's data (`port_generic`). `columns.py` reads the fields there.
    Irregular cases: `reason`/`detail` say why a malformed datagram was rejected (nothing else is
    set); `no_header` counts flow samples without a sampled header (no row: nothing to
    attribute); a flow sample with more than one sampled-header record (each overwrites what the
    one before set) has no column form, so such a datagram comes as `flows`/`counters` dicts
    (`decode()`'s, for the samples that give rows) and no offsets. Unknown sample and record
    formats are skipped by their length, as `decode()` does."""

    __slots__ = ("agent", "counters", "data", "detail", "flow_header", "flow_sample",
                 "flow_switch", "flows", "no_header", "port_generic", "reason", "seq",
                 "sub_agent", "uptime_ms")  # fmt: skip

    def __init__(self, data: bytes | memoryview) -> None:
        self.data = data
        self.reason = self.detail = ""
        self.agent = b""  # address bytes (4 or 16)
        self.sub_agent = self.seq = self.uptime_ms = self.no_header = 0
        self.flow_sample: list[int] = []
        self.flow_header: list[int] = []
        self.flow_switch: list[int] = []
        self.port_generic: list[int] = []
        self.flows: list[dict[str, Any]] | None = None
        self.counters: list[dict[str, Any]] | None = None


def scan(data: bytes | memoryview) -> Decoded:
    """Decode one datagram in one pass, checking it exactly as `decode()` does (same checks,
    same order, same reasons and messages), into a `Decoded`. Never raises."""
    d = Decoded(data)
    try:
        more = _scan(data, d)
    except DecodeError as e:
        _rejected(d, e.reason, str(e))
    except (struct.error, IndexError, ValueError, OverflowError) as e:  # belt and braces
        _rejected(d, "malformed", str(e))
    else:
        if more:  # the irregular form, from the offsets found above
            try:
                _as_dicts(d, more)
            except (struct.error, IndexError, ValueError, OverflowError) as e:
                _rejected(d, "malformed", str(DecodeError("malformed", str(e))))
    return d


def _rejected(d: Decoded, reason: str, detail: str) -> None:
    d.reason, d.detail, d.flows, d.counters, d.no_header = reason, detail, None, None, 0
    d.flow_sample, d.flow_header, d.flow_switch, d.port_generic = [], [], [], []


def _scan(data: bytes | memoryview, d: Decoded) -> dict[int, list[int]]:
    """Fill `d`; returns {flow row: every sampled-header record} of the flow samples with more
    than one."""
    n = len(data)
    d.agent, d.sub_agent, d.seq, d.uptime_ms, nsamples, off = datagram_header(data)
    f_smp, f_hdr, f_xsw, c_gen = d.flow_sample, d.flow_header, d.flow_switch, d.port_generic
    unpack = _2U32.unpack_from
    no_header = 0
    many: dict[int, list[int]] = {}
    for _ in range(nsamples):
        # sample_at() and record_at(), inline: this loop is the collector's per-sample cost
        if off + 8 > n:
            raise DecodeError("truncated_sample", f"sample header at {off}")
        stype, slen = unpack(data, off)
        end = off + 8 + slen
        if end > n:
            raise DecodeError("truncated_sample", f"sample format {stype} length {slen}")
        off += 8
        if stype == 1 or stype == 3 or stype == 2 or stype == 4:
            size, at, what = _FIXED[stype]
            if slen < size:
                raise DecodeError("truncated_sample", what)
            nrec: int = _U32.unpack_from(data, off + at)[0]
            if nrec > MAX_SAMPLES:
                raise DecodeError("too_many_records", str(nrec))
            roff = off + size
            flow = stype == 1 or stype == 3
            what = "flow record" if flow else "counter record"
            hdr = xsw = gen = -1
            more: list[int] | None = None  # every sampled header, when there is more than one
            for _ in range(nrec):
                if roff + 8 > end:
                    raise DecodeError("truncated_record", f"{what} header at {roff}")
                fmt, length = unpack(data, roff)
                rend = roff + 8 + length
                if rend > end:
                    raise DecodeError("truncated_record", f"{what} {fmt} length {length}")
                roff += 8
                if flow:
                    if fmt == 1:
                        sampled_header_length(data, roff, length, rend)
                        if hdr < 0:
                            hdr = roff
                        elif more is None:
                            more = [hdr, roff]
                        else:
                            more.append(roff)
                    elif fmt == 1001:
                        extended_switch(data, roff, length)
                        xsw = roff
                else:
                    check_counter_record(fmt, length)
                    if fmt == 1:
                        gen = roff
                roff = rend
            if roff != end:
                raise DecodeError("bad_sample_length", f"records end at {roff}, sample at {end}")
            if not flow:
                if gen >= 0:
                    c_gen.append(gen)
            elif hdr < 0:
                no_header += 1
            else:
                if more is not None:
                    many[len(f_smp)] = more
                f_smp.append(-off if stype == 3 else off)
                f_hdr.append(hdr)
                f_xsw.append(xsw)
        off = end  # unknown sample formats are skipped by length
    if off != n:
        raise DecodeError("trailing_bytes", f"{n - off} bytes after the last sample")
    d.no_header = no_header
    return many


def _as_dicts(d: Decoded, more: dict[int, list[int]]) -> None:
    """The datagram's rows as `decode()`'s dicts, from the offsets `_scan` found (the flow
    samples with a sampled header, the counter samples with generic counters)."""
    data = d.data if isinstance(d.data, bytes) else bytes(d.data)
    flows = []
    for i, (smp, hdr, xsw) in enumerate(
        zip(d.flow_sample, d.flow_header, d.flow_switch, strict=True)
    ):
        s, _ = _flow_sample(data, abs(smp), smp < 0)
        for h in more.get(i, (hdr,)):  # in record order: each overwrites what it sets
            _sampled_header(data, h, _U32.unpack_from(data, h + 12)[0], s)
        if xsw >= 0:
            sv, sp, dv, dp = extended_switch(data, xsw, 16)
            s["src_vlan"], s["src_priority"], s["dst_vlan"], s["dst_priority"] = sv, sp, dv, dp
        fb, rate = s.get("frame_bytes"), s["sampling_rate"]  # set: it has a sampled header
        s["bytes"], s["packets"] = fb * rate, rate
        flows.append(s)
    counters = [
        {"generic": dict(zip(GENERIC_FIELDS, _GENERIC.unpack_from(data, g), strict=True))}
        for g in d.port_generic
    ]
    d.flows, d.counters = flows, counters
    d.flow_sample, d.flow_header, d.flow_switch, d.port_generic = [], [], [], []


__all__ = [
    "ETHERNET_FIELDS",
    "GENERIC_FIELDS",
    "ROCEV2_PORT",
    "DecodeError",
    "Decoded",
    "decode",
    "scan",
]
