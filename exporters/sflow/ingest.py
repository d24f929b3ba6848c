"""Decoded sFlow datagrams -> record batches: flow_sample (scaled by the sampling rate, RoCEv2 BTH
fields) and switch_port_sample (counter samples), with per-agent sequence state (lost datagrams,
agent restarts). It only batches: what a datagram holds, and whether it is malformed, is
`decode.scan()`'s answer, taken as given; this module never reads a datagram's bytes itself
(`columns.py` does, for all buffered samples at once). Shared by the live listener, the
`--workers` receivers, the pcap reader and the bench.
"""

from __future__ import annotations

import logging
import socket
from array import array
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from exporters.sflow.columns import Agent, flow_columns, port_columns
from exporters.sflow.decode import REASONS as DECODE_REASONS
from exporters.sflow.decode import Decoded
from telemetry.contracts import Batch
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


def _dict_batches(d: Decoded, agent: Agent, ts_ms: int) -> list[Batch]:
    """The batches of a datagram that came as dicts (`Decoded.flows`/`counters`: a flow sample
    with more than one sampled-header record), named and stamped as `columns.py` does."""
    names, switch = agent.names, agent.switch
    cols: dict[str, list[Any]] = {k: [] for k in _FLOW_COLUMNS}
    for f in d.flows or ():
        out_port = (
            names.get(f["output"], f["out_port"]) if f["output_format"] == 0 else f["out_port"]
        )
        for k in _FLOW_FIELDS:
            cols[k].append(f.get(k))
        cols["ts"].append(ts_ms)
        cols["agent"].append(agent.address)
        cols["switch"].append(switch)
        cols["in_port"].append(names.get(f["input"], f["in_port"]))
        cols["out_port"].append(out_port)
        cols["vlan"].append(f.get("vlan") or f.get("src_vlan") or 0)
    ports = []
    for c in d.counters or ():
        g = c["generic"]
        idx = g["ifindex"]
        ports.append(
            {
                "ts": ts_ms,
                "switch": switch or agent.address,
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


class SflowIngest:
    """Batches decoded datagrams (`decode.scan()`'s `Decoded`) into flow_sample and
    switch_port_sample rows; keeps per-agent sequence state and counts malformed datagrams.

    Per datagram, `add()` keeps its bytes in one buffer and the offsets `scan()` found; `drain()`
    reads every field of every buffered sample at once (`columns.py`), stamped with each
    datagram's time and agent."""

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
        self._agent_id: dict[bytes, int] = {}
        self._agents: list[Agent] = []
        self._reset()

    def _reset(self) -> None:
        self._buf = bytearray()
        self._f_smp, self._f_hdr, self._f_xsw = array("q"), array("q"), array("q")
        self._c_gen = array("q")
        # per datagram: where it starts in the buffer, time, agent id, flow and port rows it added
        self._d_base, self._d_ts, self._d_agent = array("q"), array("q"), array("l")
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
    def add(self, d: Decoded, source: str, ts_ms: int) -> bool:
        """Buffer the rows of one decoded datagram. False (counted, logged) if it was malformed."""
        self.stats.received += 1
        if d.reason:
            self.problems.add(d.reason, f"malformed datagram from {source}", d.detail)
            return False
        self.datagrams += 1
        a = self._agent(d.agent)
        self._sequence((self._agents[a].address, d.sub_agent), d.seq, d.uptime_ms)
        if d.no_header:
            self.stats.dropped += d.no_header  # no sampled header: nothing to attribute
        if d.flows is not None:  # no column form: its rows, in arrival order
            self._seal()
            for b in _dict_batches(d, self._agents[a], ts_ms):
                self._chunks.append(b)
                self._chunk_rows += b.num_rows
            return True
        self._d_base.append(len(self._buf))
        self._buf += d.data
        self._d_ts.append(ts_ms)
        self._d_agent.append(a)
        self._d_flows.append(len(d.flow_sample))
        self._d_ports.append(len(d.port_generic))
        self._f_smp.extend(d.flow_sample)
        self._f_hdr.extend(d.flow_header)
        self._f_xsw.extend(d.flow_switch)
        self._c_gen.extend(d.port_generic)
        return True

    def _sequence(self, key: tuple[str, int], seq: int, up: int) -> None:
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

    # -- rows out ---------------------------------------------------------------------------
    def _seal(self) -> None:
        """Turn the buffered datagrams into batches (kept in arrival order) and start afresh."""
        if not self._d_ts:
            return
        buf, ts, agent = self._buf, np.frombuffer(self._d_ts, np.int64), np.asarray(self._d_agent)
        base = np.frombuffer(self._d_base, np.int64)
        out = []
        if self._f_smp:
            per = np.asarray(self._d_flows)
            at = np.repeat(base, per)  # scan's offsets are into each datagram
            smp = np.frombuffer(self._f_smp, np.int64)
            xsw = np.frombuffer(self._f_xsw, np.int64)
            cols = flow_columns(
                buf,
                np.where(smp < 0, smp - at, smp + at),  # negative: an expanded sample
                np.frombuffer(self._f_hdr, np.int64) + at,
                np.where(xsw >= 0, xsw + at, -1),
                np.repeat(ts, per),
                np.repeat(agent, per),
                self._agents,
            )
            out.append(_batch(FLOW_SAMPLE, cols))
        if self._c_gen:
            per = np.asarray(self._d_ports)
            cols = port_columns(
                buf,
                np.frombuffer(self._c_gen, np.int64) + np.repeat(base, per),
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


__all__ = ["REASONS", "SflowIngest"]
