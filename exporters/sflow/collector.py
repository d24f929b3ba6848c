"""The `railscope sflow` source: an sFlow v5 collector (asyncio UDP) or a pcap reader.

Reads datagrams from UDP (default :6343) or a pcap file, decodes them with `decode.py` and emits
flow_sample rows (scaled by the sampling rate, RoCEv2 BTH fields, ECMP group of the egress
port) and switch_port_sample rows from counter samples. It never stores a number from a
datagram that did not decode; malformed datagrams are counted per reason and logged once per
agent per minute. Sequence gaps (lost datagrams) and agent restarts are counted.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from exporters.sflow.decode import DecodeError, decode
from exporters.switch.ecmp import member_index
from telemetry.errors import UserError
from telemetry.pipeline import BaseSource, Batch, register_source
from telemetry.records import FLOW_SAMPLE

log = logging.getLogger(__name__)

LOG_EVERY_SECONDS = 60.0
_FLOW_FIELDS = (
    "src_ip", "dst_ip", "src_port", "dst_port", "protocol", "dscp", "ecn",
    "bth_opcode", "dest_qp", "psn", "frame_bytes", "sampling_rate", "bytes", "packets",
)  # fmt: skip
_FLOW_COLUMNS = (
    *_FLOW_FIELDS, "ts", "agent", "switch", "in_port", "out_port", "vlan",
)  # fmt: skip


class SflowIngest:
    """Turns datagrams into rows; keeps per-agent sequence state and malformed-datagram counts.
    Shared by the live listener, the pcap reader and the bench."""

    def __init__(
        self,
        stats: Any,
        agents: Mapping[str, str] | None = None,
        ifnames: Mapping[str, Mapping[int, str]] | None = None,
        ecmp_groups: Mapping[str, Mapping[str, list[str]]] | None = None,
    ) -> None:
        self.stats = stats
        self.agents = dict(agents or {})
        self.ifnames = {sw: {int(k): v for k, v in m.items()} for sw, m in (ifnames or {}).items()}
        self.ecmp = member_index({sw: dict(g) for sw, g in (ecmp_groups or {}).items()})
        self._seq: dict[tuple[str, int], tuple[int, int]] = {}  # (agent, sub) -> (seq, uptime)
        self._last_log: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
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
    def ingest(self, payload: bytes, source: str, ts_ms: int, now: float | None = None) -> bool:
        """Decode one datagram into the row buffers. False (counted, logged) if malformed."""
        self.stats.received += 1
        try:
            d = decode(payload)
        except DecodeError as e:
            self.stats.error(e.reason)
            self._log_malformed(source, str(e), time.monotonic() if now is None else now)
            return False
        self.datagrams += 1
        self._sequence(d)
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
        return True

    def _sequence(self, d: dict[str, Any]) -> None:
        key = (d["agent"], d["sub_agent"])
        seq, up = d["seq"], d["uptime_ms"]
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

    def _log_malformed(self, source: str, why: str, now: float) -> None:
        last = self._last_log.get(source)
        if last is not None and now - last < LOG_EVERY_SECONDS:
            self._suppressed[source] = self._suppressed.get(source, 0) + 1
            return
        more = self._suppressed.pop(source, 0)
        self._last_log[source] = now
        tail = f" ({more} more from this source since the last line)" if more else ""
        log.warning("sflow: malformed datagram from %s: %s%s", source, why, tail)

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


class _Protocol(asyncio.DatagramProtocol):
    def __init__(self, owner: SflowSource) -> None:
        self.owner = owner

    def datagram_received(self, data: bytes, addr: tuple[Any, ...]) -> None:
        self.owner._on_datagram(data, addr[0])


@register_source("sflow", help="sFlow v5 collector (UDP or pcap): flows with RoCEv2 QPs, port counters",
                 kinds=["flow_sample", "switch_port_sample"])  # fmt: skip
class SflowSource(BaseSource):
    """sFlow v5 collector. Live: listens on UDP (--bind, default 0.0.0.0:6343) and emits what
    arrived each interval. Offline: --from FILE.pcap decodes the sFlow datagrams in a capture.
    Flow samples are scaled by their sampling rate; RoCEv2 (UDP 4791) samples carry the BTH
    opcode, destination QP and PSN."""

    name = "sflow"

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        bind: str = Field(default="0.0.0.0:6343", description="UDP address to listen on.")
        agents: dict[str, str] = Field(default_factory=dict, description="agent IP -> switch name")
        ifnames: dict[str, dict[int, str]] = Field(
            default_factory=dict, description="switch (or agent IP) -> ifIndex -> port name"
        )
        ecmp_groups: dict[str, dict[str, list[str]]] = Field(
            default_factory=dict, description="switch -> group -> member port names"
        )
        max_buffer_rows: int = Field(
            default=1_000_000, gt=0, description="rows kept between collects"
        )
        rcvbuf_bytes: int = Field(default=8 << 20, gt=0, description="UDP socket receive buffer")
        pcap_port: int = Field(
            default=6343,
            ge=0,
            le=65535,
            description="--from pcap: UDP dest port of sFlow (0 = any)",
        )

    def __init__(
        self,
        config: SflowSource.Config | None = None,
        *,
        pcap_path: str | None = None,
        once: bool = False,
        interval: float = 10.0,
    ) -> None:
        super().__init__()
        self.cfg = config or SflowSource.Config()  # type: ignore[call-arg]
        self.pcap_path = pcap_path
        self.once = once
        self.interval = interval
        self.ingest = SflowIngest(
            self.stats, self.cfg.agents, self.cfg.ifnames, self.cfg.ecmp_groups
        )
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._transport: asyncio.DatagramTransport | None = None
        self._thread: threading.Thread | None = None
        self.bound: tuple[str, int] | None = None

    @classmethod
    def add_arguments(cls, p: Any) -> None:
        p.add_argument(
            "--bind", metavar="HOST:PORT", help="UDP listen address (default 0.0.0.0:6343)"
        )

    @classmethod
    def from_args(cls, args: Any, cfg: Any) -> SflowSource:
        c = cfg.source("sflow")
        if getattr(args, "bind", None):
            c = c.model_copy(update={"bind": args.bind})
        return cls(c, pcap_path=args.from_path, once=bool(args.once), interval=cfg.interval_seconds)

    # -- live -----------------------------------------------------------------------------
    def start(self) -> tuple[str, int]:
        """Start the UDP listener in a background thread; returns the bound address."""
        if self._thread is not None:
            assert self.bound is not None
            return self.bound
        host, _, port = self.cfg.bind.rpartition(":")
        try:
            port_n = int(port)
        except ValueError:
            raise UserError(f"sources.sflow.bind: {self.cfg.bind!r} is not HOST:PORT") from None
        ready = threading.Event()
        err: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                self._transport, _ = loop.run_until_complete(
                    loop.create_datagram_endpoint(
                        lambda: _Protocol(self), local_addr=(host or "0.0.0.0", port_n)
                    )
                )
                sock = self._transport.get_extra_info("socket")
                try:
                    import socket as _s

                    sock.setsockopt(_s.SOL_SOCKET, _s.SO_RCVBUF, self.cfg.rcvbuf_bytes)
                except OSError:
                    pass
                self.bound = sock.getsockname()[:2]
            except OSError as e:
                err.append(e)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="railscope-sflow", daemon=True)
        self._thread.start()
        ready.wait(10)
        if err:
            self._thread = None
            raise UserError(f"sflow: cannot listen on {self.cfg.bind}: {err[0]}")
        assert self.bound is not None
        log.info("sflow: listening on %s:%d/udp", *self.bound)
        return self.bound

    def _on_datagram(self, data: bytes, source: str) -> None:
        with self._lock:
            if self.ingest.pending_rows >= self.cfg.max_buffer_rows:
                self.stats.dropped += 1
                self.stats.error("buffer_full")
                return
            self.ingest.ingest(data, source, int(time.time() * 1000))

    def stop(self) -> None:
        loop, t = self._loop, self._thread
        if loop is not None and t is not None:
            if self._transport is not None:
                loop.call_soon_threadsafe(self._transport.close)
            loop.call_soon_threadsafe(loop.stop)
            t.join(5)
        self._thread = None

    def close(self) -> None:
        self.stop()

    def _collect(self) -> list[Batch]:
        if self.pcap_path:
            return self._from_pcap(self.pcap_path)
        if self._thread is None:
            self.start()
            if self.once:  # one live cycle = one interval of datagrams
                time.sleep(self.interval)
        with self._lock:
            return self.ingest.drain()

    def _from_pcap(self, path: str) -> list[Batch]:
        from exporters.sflow.pcap import PcapStats, read_udp

        st = PcapStats()
        for u in read_udp(path, port=self.cfg.pcap_port or None, stats=st):
            self.ingest.ingest(u.payload, u.src, int(u.ts * 1000))
        for why, n in st.skipped.items():
            if why != "other_port":
                self.stats.extra[f"pcap_skipped_{why}"] = float(n)
        if st.packets and not st.udp:
            log.warning(
                "sflow: %s holds no UDP datagrams to port %s", path, self.cfg.pcap_port or "any"
            )
        return self.ingest.drain()


__all__ = ["SflowIngest", "SflowSource"]
