"""The reference datagrams -> rows path for tests: `decode()` (the dict decoder) then one row per
sample, built from the dicts. Independent of `decode.scan()`'s offsets and `columns.py`, so that
`test_columnar.py` can compare the two value by value."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from exporters.sflow.decode import DecodeError, decode
from exporters.sflow.ingest import REASONS
from telemetry.contracts import Batch
from telemetry.problems import Problems
from telemetry.records import FLOW_SAMPLE

log = logging.getLogger(__name__)

_FLOW_FIELDS = (
    "src_ip", "dst_ip", "src_port", "dst_port", "protocol", "dscp", "ecn",
    "bth_opcode", "dest_qp", "psn", "frame_bytes", "sampling_rate", "bytes", "packets",
)  # fmt: skip
_FLOW_COLUMNS = (
    *_FLOW_FIELDS, "ts", "agent", "switch", "in_port", "out_port", "vlan",
)  # fmt: skip


class ReferenceIngest:
    """The dict-based datagrams -> rows path (`decode()` then one dict per sample): the reference
    the collector's path (`decode.scan()` then `SflowIngest`) is tested against."""

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
