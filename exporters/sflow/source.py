"""The `railscope sflow` source: an sFlow v5 collector (asyncio UDP) or a pcap reader.

Reads datagrams from UDP (default :6343) or a pcap file; each goes one way, once: the trust
check (`trust.py`), one decoding pass (`decode.scan`), then `ingest.SflowIngest`, which batches
the decoded rows into flow_sample and switch_port_sample. Malformed datagrams
are counted by reason and logged once per reason per minute; sequence gaps (lost datagrams) and
agent restarts are counted. `received` counts datagrams.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from exporters.sflow.config import SflowConfig
from exporters.sflow.decode import scan
from exporters.sflow.ingest import REASONS, SflowIngest
from exporters.sflow.trust import REASONS as TRUST_REASONS
from exporters.sflow.trust import Trust
from telemetry.contracts import Batch
from telemetry.errors import UserError
from telemetry.pipeline import BaseSource

if TYPE_CHECKING:
    from exporters.sflow.workers import WorkerPool

log = logging.getLogger(__name__)


class _Protocol(asyncio.DatagramProtocol):
    def __init__(self, owner: SflowSource) -> None:
        self.owner = owner

    def datagram_received(self, data: bytes, addr: tuple[Any, ...]) -> None:
        self.owner._on_datagram(data, addr[0])


class SflowSource(BaseSource):
    """sFlow v5 collector. Live: listens on UDP (--bind, default 0.0.0.0:6343) and emits what
    arrived each interval. Offline: --from FILE.pcap decodes the sFlow datagrams in a capture.
    Flow samples are scaled by their sampling rate; RoCEv2 (UDP 4791) samples carry the BTH
    opcode, destination QP and PSN."""

    name = "sflow"
    unit = "datagrams"
    # REASONS of the decoder, plus the trust checks at the socket (exporters/sflow/trust.py)
    reasons = (*REASONS, *TRUST_REASONS)
    Config = SflowConfig

    def __init__(
        self,
        config: SflowConfig | None = None,
        *,
        pcap_path: str | None = None,
        once: bool = False,
        interval: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.clock = clock  # the wall clock (epoch seconds) that stamps a live datagram's samples
        self.cfg = config or SflowConfig()
        self.pcap_path = pcap_path
        self.once = once
        self.interval = interval
        self.ingest = SflowIngest(self.stats, self.problems, self.cfg.agents, self.cfg.ifnames)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._transport: asyncio.DatagramTransport | None = None
        self._thread: threading.Thread | None = None
        self._trust = Trust(self.cfg)
        self._intake_stopped = False  # after stop_intake(): no listener is started again
        self._truncated = ""  # --from: why the capture was not read to its end
        self.bound: tuple[str, int] | None = None
        self._pool: WorkerPool | None = None

    @classmethod
    def add_arguments(cls, p: Any) -> None:
        p.add_argument(
            "--bind", metavar="HOST:PORT", help="UDP listen address (default 0.0.0.0:6343)"
        )
        p.add_argument(
            "--workers",
            type=int,
            metavar="N",
            help="N receiver processes on the one UDP port (SO_REUSEPORT; default 1)",
        )

    @classmethod
    def fold_args(cls, args: Any, section: dict[str, Any]) -> dict[str, Any]:
        """The `sources.sflow` section with this command line's flags on top."""
        out = {**section, "bind": args.bind} if getattr(args, "bind", None) else section
        if getattr(args, "workers", None) is not None:
            out = {**out, "workers": args.workers}
        return out

    @classmethod
    def build(cls, c: SflowConfig, cfg: Any, *, from_path: str | None, once: bool) -> SflowSource:
        interval = c.interval_seconds or cfg.interval_seconds
        return cls(c, pcap_path=from_path, once=once, interval=interval)

    # -- live -----------------------------------------------------------------------------
    def start(self) -> tuple[str, int]:
        """Start the UDP listener in a background thread; returns the bound address."""
        if self._thread is not None or self._pool is not None:
            assert self.bound is not None
            return self.bound
        if self.cfg.workers > 1:
            return self._start_workers()
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
            try:
                loop.run_forever()
            finally:  # free the port even when the loop died, so a restart can bind it again
                if self._transport is not None and not self._transport.is_closing():
                    self._transport.close()
                    loop.run_until_complete(asyncio.sleep(0))
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

    def _start_workers(self) -> tuple[str, int]:
        from exporters.sflow.workers import WorkerPool

        c = self.cfg
        self._pool = WorkerPool(c.workers, c.bind, stats=self.stats, problems=self.problems,
                                agents=c.agents, ifnames=c.ifnames, rcvbuf=c.rcvbuf_bytes,
                                max_rows=c.max_buffer_rows,
                                trust={"agents": dict(c.agents),
                                       "allowed_sources": list(c.allowed_sources),
                                       "require_agent_is_source": c.require_agent_is_source,
                                       "max_agents": c.max_agents})  # fmt: skip
        self.bound = self._pool.start()
        log.info("sflow: %d workers listening on %s:%d/udp", c.workers, *self.bound)
        return self.bound

    def _on_datagram(self, data: bytes, source: str) -> None:
        why = self._trust.refuse(data, source)
        if why is not None:
            with self._lock:
                self.stats.received += 1
                self.stats.dropped += 1
            self.problems.add(why, f"datagram from {source}", why.replace("_", " "))
            return
        with self._lock:
            if self.ingest.pending_rows >= self.cfg.max_buffer_rows:
                self.stats.dropped += 1
                self.problems.add("buffer_full", f"datagram from {source}", "buffer full")
                return
        d = scan(data)  # outside the lock: this thread is the only one that adds rows
        with self._lock:
            self.ingest.add(d, source, int(self.clock() * 1000))

    def stop(self) -> None:
        if self._pool is not None:
            self._pool.stop()
        loop, t = self._loop, self._thread
        if loop is not None and t is not None:
            if self._transport is not None:
                loop.call_soon_threadsafe(self._transport.close)
            loop.call_soon_threadsafe(loop.stop)
            t.join(5)
        self._thread = None

    def close(self) -> None:
        self.stop()

    def collect(self) -> list[Batch]:
        self._truncated = ""
        batches = super().collect()
        if self._truncated:
            self.stats.last_success = False
            self.stats.last_error = self._truncated
        return batches

    def stop_intake(self) -> None:
        """Graceful shutdown: close the socket; what was received stays for the last collect."""
        self._intake_stopped = True
        self.stop()

    def health(self) -> str | None:
        if self._thread is not None and not self._thread.is_alive():
            return "the UDP listener thread died (restarted at the next collection)"
        return None

    def _collect(self) -> list[Batch]:
        if self.pcap_path:
            return self._from_pcap(self.pcap_path)
        if self._thread is not None and not self._thread.is_alive():
            # the listener died (its loop stopped or crashed): start it again, counted; the
            # collection interval is its backoff
            log.error("sflow: the UDP listener thread died; starting it again")
            self._thread = None
            with self.stats.lock:
                self.stats.extra["restarts"] = self.stats.extra.get("restarts", 0.0) + 1
        if self._thread is None and self._pool is None and not self._intake_stopped:
            self.start()
            if self.once:  # one live cycle = one interval of datagrams
                time.sleep(self.interval)
                if self._pool is not None:
                    self._pool.stop()  # the workers hand over what they hold
        if self._pool is not None:
            return self._pool.take()
        with self._lock:
            return self.ingest.drain()

    def _from_pcap(self, path: str) -> list[Batch]:
        from exporters.sflow.pcap import PcapStats, iter_udp

        st = PcapStats()
        add = self.ingest.add
        for ts, src, _sport, _dport, payload in iter_udp(
            path, port=self.cfg.pcap_port or None, stats=st
        ):
            add(scan(payload), src, int(ts * 1000))
        for why, n in st.skipped.items():
            if why != "other_port":
                self.stats.extra[f"pcap_skipped_{why}"] = float(n)
        if st.skipped.get("truncated_file"):
            # what was read is kept, but the run says so: `--from` exits 1
            self._truncated = (
                f"{path}: truncated pcap: the last record is cut short after {st.packets} packets"
            )
            log.warning("sflow: %s", self._truncated)
        if st.packets and not st.udp:
            log.warning(
                "sflow: %s holds no UDP datagrams to port %s", path, self.cfg.pcap_port or "any"
            )
        return self.ingest.drain()


__all__ = ["SflowSource"]
