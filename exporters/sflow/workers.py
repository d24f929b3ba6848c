"""`sources.sflow.workers: N` (`railscope sflow --workers N`): N receiver processes on one UDP port.

Each worker (`python -m exporters.sflow.workers`, a fresh interpreter: no fork of a parent that
may hold chdb's threads) binds its own socket to the same address with SO_REUSEPORT (the kernel hashes each
sender's address/port to one socket, so an agent stays on one worker and its sequence numbers
stay in order), checks (`Trust`), decodes (`decode.scan`) and batches with its own `SflowIngest`, and every `flush_seconds` (or at
`batch_rows` rows) hands its rows to the parent as Arrow IPC streams over its stdout pipe,
with a snapshot of its counters; the parent closing the worker's stdin asks it to finish. The parent (`WorkerPool`, owned by `SflowSource`) passes the batches
to the one sink/spool path of the process, so an embedded chdb:// store stays opened by one
process and a server store gets batches with the sink's usual per-batch deduplication tokens.

Back-pressure: when the parent holds `max_rows` rows not yet collected, it stops reading a
worker's pipe; the worker blocks in `send`, its socket queue fills and the kernel drops
datagrams. Those drops are read from /proc/net/udp{,6} (the `drops` column of the socket's
inode) and counted: `dropped` and the `socket_drops` gauge, per worker and in total.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pickle
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pyarrow as pa

from telemetry.contracts import Batch, ComponentStats
from telemetry.errors import UserError
from telemetry.problems import Problems
from telemetry.records import KINDS

log = logging.getLogger(__name__)


def socket_drops(inode: int) -> int | None:
    """The kernel's count of datagrams dropped at the UDP socket with this inode (receive queue
    full), from /proc/net/udp and udp6; None when the socket is not listed (not Linux)."""
    want = str(inode)
    for name in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            with open(name) as f:
                next(f, None)
                for line in f:
                    parts = line.split()
                    if len(parts) >= 13 and parts[9] == want:
                        return int(parts[12])
        except OSError:
            continue
    return None


def reuseport_socket(host: str, port: int, rcvbuf: int) -> socket.socket:
    """A UDP socket bound to host:port with SO_REUSEPORT (several may share the address)."""
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    with contextlib.suppress(OSError):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    try:
        s.bind((host, port))
    except OSError:
        s.close()
        raise
    return s


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()  # type: ignore[no-any-return]


def _snapshot(stats: ComponentStats, ingest: Any, drops: int) -> dict[str, Any]:
    with stats.lock:
        return {
            "received": stats.received,
            "dropped": stats.dropped,
            "errors": dict(stats.errors),
            "lost": ingest.lost,
            "restarts": ingest.restarts,
            "socket_drops": drops,
        }


_LEN = struct.Struct(">Q")


def _send(out: IO[bytes], msg: tuple[Any, ...]) -> None:
    blob = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_LEN.pack(len(blob)))
    out.write(blob)
    out.flush()


def _recv(inp: IO[bytes]) -> tuple[Any, ...]:
    head = inp.read(_LEN.size)
    if len(head) < _LEN.size:
        raise EOFError
    blob = inp.read(_LEN.unpack(head)[0])
    return pickle.loads(blob)  # type: ignore[no-any-return]  # our own child's messages


# the trust keys a worker's spec may leave out (an older parent, a test): the config's defaults
_TRUST_DEFAULTS: dict[str, Any] = {
    "agents": {},
    "allowed_sources": [],
    "require_agent_is_source": True,
    "max_agents": 4096,
}


def worker_main(
    spec: dict[str, Any], out: IO[bytes], stop: threading.Event, flush_now: threading.Event
) -> None:
    """One receiver process: bind, then receive, decode and hand batches over on `out` until
    `stop`. `flush_now`: hand over everything received so far (with what the socket holds),
    answered "flushed"; with `stop` set too, the last hand-over ("done")."""
    from types import SimpleNamespace

    from exporters.sflow.decode import scan
    from exporters.sflow.ingest import REASONS, SflowIngest
    from exporters.sflow.trust import REASONS as TRUST_REASONS
    from exporters.sflow.trust import Trust

    index, flush_seconds = spec["index"], spec["flush_seconds"]
    try:
        sock = reuseport_socket(spec["host"], spec["port"], spec["rcvbuf"])
    except OSError as e:
        _send(out, ("error", str(e)))
        return
    _send(out, ("ready", sock.getsockname()[:2]))
    stats = ComponentStats(f"source:sflow:worker{index}", unit="datagrams")
    problems = Problems(stats, f"sflow worker {index}", (*REASONS, *TRUST_REASONS), logger=log)
    ifnames = {sw: {int(k): v for k, v in m.items()} for sw, m in spec["ifnames"].items()}
    ing = SflowIngest(stats, problems, spec["agents"], ifnames)
    inode = os.fstat(sock.fileno()).st_ino
    base = socket_drops(inode) or 0
    sock.settimeout(min(flush_seconds, 0.2))
    recv, clock, batch_rows = sock.recvfrom, time.monotonic, spec["batch_rows"]
    trust = Trust(SimpleNamespace(**{**_TRUST_DEFAULTS, **spec.get("trust", {})}))

    def ingest(data: bytes, source: str, now_ms: int) -> None:
        why = trust.refuse(data, source)  # the same check as the single-process listener's
        if why is None:
            ing.add(scan(data), source, now_ms)
            return
        with stats.lock:
            stats.received += 1
            stats.dropped += 1
        problems.add(why, f"datagram from {source}", why.replace("_", " "))

    def hand_over(kind: str) -> None:
        parts = [(b.kind.name, _ipc(b.table)) for b in ing.drain()]
        now_drops = socket_drops(inode)
        drops = now_drops - base if now_drops is not None else 0
        _send(out, (kind, _snapshot(stats, ing, drops), parts))

    def take_queued() -> None:
        """What the kernel already queued for this socket, without waiting for more."""
        sock.setblocking(False)
        while True:
            try:
                data, addr = recv(65535)
            except (BlockingIOError, InterruptedError):
                break
            ingest(data, addr[0], int(time.time() * 1000))
        sock.settimeout(min(flush_seconds, 0.2))

    due = clock() + flush_seconds
    try:
        while True:
            try:
                data, addr = recv(65535)
                ingest(data, addr[0], int(time.time() * 1000))
            except TimeoutError:
                pass
            if flush_now.is_set():  # the parent collects (or stops): everything up to now
                flush_now.clear()
                take_queued()
                if stop.is_set():
                    break
                hand_over("flushed")
                due = clock() + flush_seconds
            elif clock() >= due or ing.pending_rows >= batch_rows:
                hand_over("batch")
                due = clock() + flush_seconds
        hand_over("done")
    except (BrokenPipeError, OSError) as e:
        log.error("sflow worker %d: %s", index, e)
    finally:
        sock.close()


def _main() -> None:
    """`python -m exporters.sflow.workers SPEC_JSON`: what `WorkerPool` runs. Messages go to
    stdout; a byte on stdin asks for a hand-over now, closing stdin asks the worker to finish."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    spec = json.loads(sys.argv[1])
    stop, flush_now = threading.Event(), threading.Event()

    def watch() -> None:
        while os.read(0, 4096):  # b"" at EOF: the parent closed the pipe or went away
            flush_now.set()
        stop.set()
        flush_now.set()

    threading.Thread(target=watch, daemon=True).start()
    worker_main(spec, sys.stdout.buffer, stop, flush_now)


@dataclass
class _Worker:
    index: int
    proc: subprocess.Popen[bytes]
    snap: dict[str, Any] = field(default_factory=dict)
    done: bool = False
    last_handover: float = 0.0
    flushed: int = 0  # answers to flush requests


class WorkerPool:
    """The parent side: starts the workers, gathers their batches and counters into one
    `ComponentStats` (sums; per-worker gauges in `extra`, liveness in `collectors`)."""

    def __init__(
        self,
        n: int,
        bind: str,
        *,
        stats: ComponentStats,
        problems: Problems,
        agents: Mapping[str, str],
        ifnames: Mapping[str, Mapping[int, str]],
        rcvbuf: int,
        max_rows: int,
        trust: Mapping[str, Any] | None = None,
        flush_seconds: float = 0.25,
        batch_rows: int = 65536,
    ) -> None:
        """`trust`: the sflow section's agents / allowed_sources / require_agent_is_source /
        max_agents, checked by every worker on every datagram (exporters/sflow/trust.py)."""
        self.trust = dict(trust or {"agents": dict(agents)})
        host, _, port = bind.rpartition(":")
        try:
            self.port = int(port)
        except ValueError:
            raise UserError(f"sources.sflow.bind: {bind!r} is not HOST:PORT") from None
        self.host = (host or "0.0.0.0").strip("[]")
        self.n = n
        self.stats, self.problems = stats, problems
        self.agents, self.ifnames = dict(agents), {k: dict(v) for k, v in ifnames.items()}
        self.rcvbuf, self.max_rows = rcvbuf, max_rows
        self.flush_seconds, self.batch_rows = flush_seconds, batch_rows
        self.bound: tuple[str, int] | None = None
        self._workers: list[_Worker] = []
        self._threads: list[threading.Thread] = []
        self._cond = threading.Condition()
        self._batches: list[Batch] = []
        self._rows = 0
        self._base: tuple[int, int, dict[str, int]] = (
            0,
            0,
            {},
        )  # the parent's own counts before the workers' are added
        self._stopping = False

    def _spawn(self, index: int, port: int) -> _Worker:
        spec = {"index": index, "host": self.host, "port": port, "rcvbuf": self.rcvbuf,
                "agents": self.agents, "ifnames": self.ifnames, "trust": self.trust,
                "flush_seconds": self.flush_seconds, "batch_rows": self.batch_rows}  # fmt: skip
        root = str(Path(__file__).resolve().parents[2])  # this checkout's exporters/ + telemetry/
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}  # fmt: skip
        proc = subprocess.Popen(
            [sys.executable, "-m", "exporters.sflow.workers", json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        return _Worker(index, proc)

    def start(self) -> tuple[str, int]:
        port = self.port
        for i in range(self.n):
            w = self._spawn(i, port)
            self._workers.append(w)
            assert w.proc.stdout is not None
            try:
                msg = _recv(w.proc.stdout)
            except EOFError:
                self.stop()
                raise UserError(
                    f"sflow: worker {i} exited at start (code {w.proc.wait()})"
                ) from None
            if msg[0] == "error":
                self.stop()
                raise UserError(f"sflow: cannot listen on {self.host}:{port}: {msg[1]}")
            self.bound = (str(msg[1][0]), int(msg[1][1]))
            port = self.bound[1]  # port 0: the first worker's port for the others
        with self.stats.lock:
            self._base = (self.stats.received, self.stats.dropped, dict(self.stats.errors))
        for w in self._workers:
            t = threading.Thread(target=self._read, args=(w,), daemon=True)
            t.name = f"railscope-sflow-reader-{w.index}"
            t.start()
            self._threads.append(t)
        assert self.bound is not None
        return self.bound

    def _read(self, w: _Worker) -> None:
        assert w.proc.stdout is not None
        while True:
            try:
                kind, snap, parts = _recv(w.proc.stdout)
            except (EOFError, OSError, pickle.UnpicklingError):
                break
            tables = [(KINDS[k], pa.ipc.open_stream(b).read_all()) for k, b in parts]
            rows = sum(t.num_rows for _, t in tables)
            with self._cond:
                # back-pressure: hold this worker (its socket queue fills, the kernel drops and
                # /proc/net/udp counts) until collect() has taken what is waiting
                while (
                    kind == "batch"  # an answer to take()'s request is never held
                    and self._rows
                    and self._rows + rows > self.max_rows
                    and not self._stopping
                ):
                    self._cond.wait(0.5)
                self._batches.extend(Batch(k, t) for k, t in tables)
                self._rows += rows
                w.snap, w.last_handover = snap, time.monotonic()
                w.flushed += kind == "flushed"
                self._merge()
                self._cond.notify_all()
                if kind == "done":
                    w.done = True
                    break
        if not w.done and not self._stopping:
            self.problems.add("worker_exit", f"worker {w.index}", f"exit code {w.proc.poll()}")
        with self._cond:
            w.done = True
            self._merge()
            self._cond.notify_all()

    def _merge(self) -> None:
        """Sum the workers' counters into the source's stats (called with the lock held)."""
        received, dropped, errors = self._base
        errors = dict(errors)
        extra = {"socket_drops": 0.0, "datagrams_lost": 0.0, "agent_restarts": 0.0}
        for w in self._workers:
            s = w.snap
            if not s:
                continue
            received += s["received"]
            dropped += s["dropped"] + s["socket_drops"]
            for r, n in s["errors"].items():
                errors[r] = errors.get(r, 0) + n
            extra["socket_drops"] += s["socket_drops"]
            extra["datagrams_lost"] += s["lost"]
            extra["agent_restarts"] += s["restarts"]
            extra[f"worker{w.index}_received"] = float(s["received"])
            extra[f"worker{w.index}_socket_drops"] = float(s["socket_drops"])
        now = time.monotonic()
        with self.stats.lock:
            self.stats.received, self.stats.dropped = received, dropped
            self.stats.errors = errors
            self.stats.failed = sum(errors.values())
            self.stats.extra.update(extra)
            for w in self._workers:
                alive = not w.done or self._stopping
                self.stats.collectors[f"worker{w.index}"] = (now - w.last_handover, alive)

    @property
    def pending_rows(self) -> int:
        return self._rows

    def take(self, timeout: float = 5.0) -> list[Batch]:
        """Everything the workers received until now (each hands over what it holds and what
        its socket queued, on request), in arrival order per worker."""
        with self._cond:
            out, self._batches, self._rows = self._batches, [], 0
            self._cond.notify_all()  # a worker held by back-pressure goes on
            live = [w for w in self._workers if not w.done]
            marks = {w.index: w.flushed for w in live}
        for w in live:
            try:
                assert w.proc.stdin is not None
                w.proc.stdin.write(b"f")
                w.proc.stdin.flush()
            except (OSError, ValueError):  # gone (its reader counts it) or stopping
                marks.pop(w.index)
        deadline = time.monotonic() + timeout
        with self._cond:
            while any(not w.done and w.flushed <= marks[w.index] for w in live if w.index in marks):
                left = deadline - time.monotonic()
                if left <= 0:
                    log.warning("sflow: a worker did not hand over within %.0f s", timeout)
                    break
                self._cond.wait(left)
            out += self._batches
            self._batches, self._rows = [], 0
            self._cond.notify_all()
        return out

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the workers to finish (each takes what its socket holds and hands it over)."""
        with self._cond:
            self._stopping = True  # no more back-pressure: the last hand-overs are taken
            self._cond.notify_all()
        for w in self._workers:
            if w.proc.stdin is not None and not w.proc.stdin.closed:
                w.proc.stdin.close()  # the worker's stop signal
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        for w in self._workers:
            try:
                w.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                w.proc.kill()
                w.proc.wait(5)
            if w.proc.stdout is not None:
                w.proc.stdout.close()
        self._threads = []


__all__ = ["WorkerPool", "reuseport_socket", "socket_drops", "worker_main"]

if __name__ == "__main__":
    _main()
