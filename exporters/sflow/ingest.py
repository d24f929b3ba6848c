"""sFlow datagrams -> rows: flow_sample (scaled by the sampling rate, RoCEv2 BTH fields, ECMP
group of the egress port) and switch_port_sample (counter samples), with per-agent sequence
state (lost datagrams, agent restarts). Shared by the live listener, the pcap reader and the
bench. It never stores a number from a datagram that did not decode.
"""

from __future__ import annotations

import logging
import socket
import struct
from array import array
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from exporters.sflow.columns import Agent, flow_columns, port_columns
from exporters.sflow.decode import (
    MAX_SAMPLES,
    DecodeError,
    check_counter_record,
    datagram_header,
    decode,
    extended_switch,
    record_at,
    records_end,
    sample_at,
    sampled_header_length,
)
from exporters.sflow.decode import REASONS as DECODE_REASONS
from telemetry.pipeline import Batch
from telemetry.problems import Problems
from telemetry.records import FLOW_SAMPLE, SWITCH_PORT_SAMPLE, RecordKind

log = logging.getLogger(__name__)

# The `reason` label values of railscope_component_failed_total{component="source:sflow"}.
REASONS = (*DECODE_REASONS, "buffer_full", "worker_exit")
_FLOW_FIELDS = (
    "src_ip", "dst_ip", "src_port", "dst_port", "protocol", "dscp", "ecn",
    "bth_opcode", "dest_qp", "psn", "frame_bytes", "sampling_rate", "bytes", "packets",
)  # fmt: skip
_FLOW_COLUMNS = (
    *_FLOW_FIELDS, "ts", "agent", "switch", "in_port", "out_port", "vlan",
)  # fmt: skip


class ReferenceIngest:
    """The dict-based datagrams -> rows path (`decode()` then one dict per sample): the reference
    `SflowIngest` is tested against, and the fallback it uses for the rare datagram its columnar
    walk does not take (a flow sample with more than one sampled-header record)."""

    def __init__(
        self,
        stats: Any,
        problems: Problems | None = None,
        agents: Mapping[str, str] | None = None,
        ifnames: Mapping[str, Mapping[int, str]] | None = None,
    ) -> None:
        self.stats = stats
        self.problems = problems or Problems(stats, "sflow", REASONS, logger=log)
        self.agents = dict(agents or {})
        self.ifnames = {sw: {int(k): v for k, v in m.items()} for sw, m in (ifnames or {}).items()}
        self._seq: dict[tuple[str, int], tuple[int, int]] = {}  # (agent, sub) -> (seq, uptime)
        self.datagrams = 0
        self.lost = 0
        self.restarts = 0
        # Flow rows are kept as columns: building Arrow from lists is ~3x cheaper than from
        # row dicts, and flows are the collector's volume (bench/sflow.py).
        self._cols: dict[str, list[Any]] = {k: [] for k in _FLOW_COLUMNS}
        self.ports: list[dict[str, Any]] = []

    @property
    def pending_rows(self) -> int:
        return len(self._cols["ts"]) + len(self.ports)

    # -- one datagram ---------------------------------------------------------------------
    def ingest(self, payload: bytes, source: str, ts_ms: int) -> bool:
        """Decode one datagram into the row buffers. False (counted, logged) if malformed."""
        self.stats.received += 1
        try:
            d = decode(payload)
        except DecodeError as e:
            self.problems.add(e.reason, f"malformed datagram from {source}", str(e))
            return False
        self.datagrams += 1
        self._sequence(d)
        self.rows(d, ts_ms)
        return True

    def rows(self, d: dict[str, Any], ts_ms: int) -> None:
        """Append the rows of one decoded datagram."""
        agent = d["agent"]
        switch = self.agents.get(agent, "")
        names = self.ifnames.get(switch or agent, {})
        for f in d["flows"]:
            if f.get("frame_bytes") is None:  # no sampled header: nothing to attribute
                self.stats.dropped += 1
                continue
            out_port = (
                names.get(f["output"], f["out_port"]) if f["output_format"] == 0 else f["out_port"]
            )
            cols = self._cols
            for k in _FLOW_FIELDS:
                cols[k].append(f.get(k))
            cols["ts"].append(ts_ms)
            cols["agent"].append(agent)
            cols["switch"].append(switch)
            cols["in_port"].append(names.get(f["input"], f["in_port"]))
            cols["out_port"].append(out_port)
            cols["vlan"].append(f.get("vlan") or f.get("src_vlan") or 0)
        for c in d["counters"]:
            g = c.get("generic")
            if g is None:
                continue
            idx = g["ifindex"]
            self.ports.append(
                {
                    "ts": ts_ms,
                    "switch": switch or agent,
                    "asic": "",
                    "port": names.get(idx, str(idx)),
                    "up": 1 if g["ifstatus"] & 2 else 0,
                    "speed_bps": float(g["ifspeed"]),
                    "rx_bytes_total": g["in_octets"],
                    "tx_bytes_total": g["out_octets"],
                    "rx_packets_total": g["in_ucast_pkts"]
                    + g["in_multicast_pkts"]
                    + g["in_broadcast_pkts"],
                    "tx_packets_total": g["out_ucast_pkts"]
                    + g["out_multicast_pkts"]
                    + g["out_broadcast_pkts"],
                    "rx_discards_total": g["in_discards"],
                    "tx_discards_total": g["out_discards"],
                    "rx_errors_total": g["in_errors"],
                    "tx_errors_total": g["out_errors"],
                }
            )

    def _sequence(self, d: dict[str, Any]) -> None:
        _sequence(self, (d["agent"], d["sub_agent"]), d["seq"], d["uptime_ms"])

    # -- rows out ---------------------------------------------------------------------------
    def drain(self) -> list[Batch]:
        cols, ports = self._cols, self.ports
        self._cols, self.ports = {k: [] for k in _FLOW_COLUMNS}, []
        out = []
        n = len(cols["ts"])
        if n:
            schema = FLOW_SAMPLE.arrow_schema
            arrays = {k: pa.array(v, type=schema.field(k).type) for k, v in cols.items()}
            arrays["cluster"] = pa.array([""] * n, type=pa.string())  # stamp_cluster fills it
            out.append(Batch.of(FLOW_SAMPLE, pa.table(arrays)))
        if ports:
            out.append(Batch.from_rows("switch_port_sample", ports))
        return out


def _sequence(self: Any, key: Any, seq: int, up: int) -> None:
    """Count lost datagrams (sequence gaps) and agent restarts for one agent/sub-agent."""
    prev = self._seq.get(key)
    self._seq[key] = (seq, up)
    if prev is None:
        return
    pseq, pup = prev
    gap = (seq - pseq) & 0xFFFFFFFF
    if up < pup or (seq < pseq and gap > 0x7FFFFFFF) or gap == 0:
        # uptime went back or the sequence restarted: the agent rebooted/reset
        self.restarts += 1
        self.stats.extra["agent_restarts"] = float(self.restarts)
    elif gap > 1:
        self.lost += gap - 1
        self.stats.extra["datagrams_lost"] = float(self.lost)


_U32 = struct.Struct(">I").unpack_from


# sample format -> (fixed part's size, where its record count is, what it is called)
_FIXED = {1: (32, 28, "flow sample"), 3: (44, 40, "expanded flow sample"),
          2: (12, 8, "counter sample"), 4: (16, 12, "expanded counter sample")}  # fmt: skip


def _records(data: bytes | memoryview, off: int, stype: int, slen: int) -> tuple[int, int]:
    """(record count, offset of the first record) of the sample whose data is at `off`."""
    size, at, what = _FIXED[stype]
    if slen < size:
        raise DecodeError("truncated_sample", what)
    nrec: int = _U32(data, off + at)[0]
    if nrec > MAX_SAMPLES:
        raise DecodeError("too_many_records", str(nrec))
    return nrec, off + size


class _Irregular(Exception):
    """A flow sample with more than one sampled-header record: left to the reference path."""


def _walk(
    data: bytes | memoryview, base: int, f_smp: array, f_hdr: array, f_xsw: array, c_gen: array
) -> tuple[bytes, int, int, int, int]:
    """Validate one datagram exactly as `decode()` does (same checks, same order, same reasons)
    and append buffer offsets (`base` + offset in `data`) of what `columns.py` reads: per flow
    sample with a sampled header its data (negated for an expanded sample), the header record
    and the extended-switch record (-1: none); per counter sample with generic counters, that
    record. Returns (agent address bytes, sub-agent, sequence, uptime, flow samples without a
    sampled header). The caller truncates the arrays back when this raises."""
    n = len(data)
    agent, sub_agent, seq, uptime, nsamples, off = datagram_header(data)
    no_header = 0
    for _ in range(nsamples):
        stype, slen, end = sample_at(data, off, n)
        off += 8
        if stype == 1 or stype == 3:
            nrec, roff = _records(data, off, stype, slen)
            hdr = xsw = -1
            for _ in range(nrec):
                fmt, length, rend = record_at(data, roff, end, "flow")
                roff += 8
                if fmt == 1:
                    sampled_header_length(data, roff, length, rend)
                    if hdr >= 0:
                        raise _Irregular
                    hdr = roff
                elif fmt == 1001:
                    extended_switch(data, roff, length)
                    xsw = roff
                roff = rend
            records_end(roff, end)
            if hdr < 0:
                no_header += 1
            else:
                f_smp.append(-(base + off) if stype == 3 else base + off)
                f_hdr.append(base + hdr)
                f_xsw.append(base + xsw if xsw >= 0 else -1)
        elif stype == 2 or stype == 4:
            nrec, roff = _records(data, off, stype, slen)
            gen = -1
            for _ in range(nrec):
                fmt, length, rend = record_at(data, roff, end, "counter")
                roff += 8
                check_counter_record(fmt, length)
                if fmt == 1:
                    gen = roff
                roff = rend
            records_end(roff, end)
            if gen >= 0:
                c_gen.append(base + gen)
        off = end  # unknown sample formats are skipped by length
    if off != n:
        raise DecodeError("trailing_bytes", f"{n - off} bytes after the last sample")
    return agent, sub_agent, seq, uptime, no_header


def _batch(kind: RecordKind, cols: dict[str, pa.Array]) -> Batch:
    """A batch with exactly the kind's schema (so the sink's conform() has nothing to do):
    columns in order, '' for an absent label, nulls for an absent value."""
    n = len(next(iter(cols.values())))
    schema = kind.arrow_schema
    arrays = []
    for f in schema:
        a = cols.get(f.name)
        if a is None:
            a = pa.array([""] * n, pa.string()) if f.type == pa.string() else pa.nulls(n, f.type)
        arrays.append(a)
    return Batch(kind, pa.Table.from_arrays(arrays, schema=schema))


class SflowIngest(ReferenceIngest):
    """Turns datagrams into rows at decode speed; keeps per-agent sequence state and
    malformed-datagram counts. Shared by the live listener, the pcap reader, the workers and
    the bench.

    Per datagram, one walk validates it (as `decode()` would) and records offsets into a byte
    buffer that holds the datagrams; no per-sample dict or tuple is made. `drain()` reads every
    field of every sample at once (`columns.py`). Rows are the same as `ReferenceIngest`'s,
    whose dict path it keeps for the datagram the walk does not take."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """ReferenceIngest's arguments: stats, problems, agents, ifnames."""
        super().__init__(*args, **kwargs)
        self._agent_id: dict[bytes, int] = {}
        self._agents: list[Agent] = []
        self._reset()

    def _reset(self) -> None:
        self._buf = bytearray()
        self._f_smp, self._f_hdr, self._f_xsw = array("q"), array("q"), array("q")
        self._c_gen = array("q")
        # per datagram: time, agent id, flow rows and port rows it added
        self._d_ts, self._d_agent = array("q"), array("l")
        self._d_flows, self._d_ports = array("l"), array("l")
        self._chunks: list[Batch] = []
        self._chunk_rows = 0

    @property
    def pending_rows(self) -> int:
        return len(self._f_smp) + len(self._c_gen) + self._chunk_rows

    def _agent(self, raw: bytes) -> int:
        i = self._agent_id.get(raw)
        if i is None:
            fam = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
            addr = socket.inet_ntop(fam, raw)
            switch = self.agents.get(addr, "")
            names = self.ifnames.get(switch or addr, {})
            i = self._agent_id[raw] = len(self._agents)
            self._agents.append(Agent(addr, switch, names))
        return i

    # -- one datagram ---------------------------------------------------------------------
    def ingest(self, payload: bytes | memoryview, source: str, ts_ms: int) -> bool:
        """Decode one datagram into the row buffers. False (counted, logged) if malformed."""
        self.stats.received += 1
        nf, nc = len(self._f_smp), len(self._c_gen)
        try:
            raw, sub, seq, up, no_header = _walk(
                payload, len(self._buf), self._f_smp, self._f_hdr, self._f_xsw, self._c_gen
            )
        except DecodeError as e:
            self._truncate(nf, nc)
            self.problems.add(e.reason, f"malformed datagram from {source}", str(e))
            return False
        except _Irregular:
            self._truncate(nf, nc)
            return self._irregular(payload, source, ts_ms)
        except (struct.error, IndexError, ValueError, OverflowError) as e:  # belt and braces
            self._truncate(nf, nc)
            self.problems.add("malformed", f"malformed datagram from {source}", str(e))
            return False
        self.datagrams += 1
        a = self._agent(raw)
        _sequence(self, (self._agents[a].address, sub), seq, up)
        if no_header:
            self.stats.dropped += no_header  # no sampled header: nothing to attribute
        self._buf += payload
        self._d_ts.append(ts_ms)
        self._d_agent.append(a)
        self._d_flows.append(len(self._f_smp) - nf)
        self._d_ports.append(len(self._c_gen) - nc)
        return True

    def _truncate(self, nf: int, nc: int) -> None:
        del self._f_smp[nf:], self._f_hdr[nf:], self._f_xsw[nf:], self._c_gen[nc:]

    def _irregular(self, payload: bytes | memoryview, source: str, ts_ms: int) -> bool:
        """A datagram the walk does not take: rows from the reference path, in arrival order."""
        try:
            d = decode(bytes(payload))
        except DecodeError as e:
            self.problems.add(e.reason, f"malformed datagram from {source}", str(e))
            return False
        self.datagrams += 1
        _sequence(self, (d["agent"], d["sub_agent"]), d["seq"], d["uptime_ms"])
        self._seal()
        self.rows(d, ts_ms)
        for b in ReferenceIngest.drain(self):
            self._chunks.append(b)
            self._chunk_rows += b.num_rows
        return True

    # -- rows out ---------------------------------------------------------------------------
    def _seal(self) -> None:
        """Turn the buffered datagrams into batches (kept in arrival order) and start afresh."""
        if not self._d_ts:
            return
        buf, ts, agent = self._buf, np.frombuffer(self._d_ts, np.int64), np.asarray(self._d_agent)
        out = []
        if self._f_smp:
            per = np.asarray(self._d_flows)
            cols = flow_columns(
                buf,
                np.asarray(self._f_smp),
                np.asarray(self._f_hdr),
                np.asarray(self._f_xsw),
                np.repeat(ts, per),
                np.repeat(agent, per),
                self._agents,
            )
            out.append(_batch(FLOW_SAMPLE, cols))
        if self._c_gen:
            per = np.asarray(self._d_ports)
            cols = port_columns(
                buf,
                np.asarray(self._c_gen),
                np.repeat(ts, per),
                np.repeat(agent, per),
                self._agents,
            )
            out.append(_batch(SWITCH_PORT_SAMPLE, cols))
        chunks, rows = self._chunks, self._chunk_rows
        self._reset()
        self._chunks, self._chunk_rows = chunks + out, rows + sum(b.num_rows for b in out)

    def drain(self) -> list[Batch]:
        self._seal()
        chunks = self._chunks
        self._chunks, self._chunk_rows = [], 0
        out = []
        for kind in (FLOW_SAMPLE, SWITCH_PORT_SAMPLE):
            tables = [b.table for b in chunks if b.kind is kind]
            if tables:
                t = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
                out.append(Batch(kind, t))
        return out


__all__ = ["REASONS", "ReferenceIngest", "SflowIngest"]
