"""Fault soak: `railscope sflow` writing to `railscope serve` through faults, for a fixed time.

Separate processes, real faults:
- a `railscope serve` process holds the embedded store and its ClickHouse HTTP endpoint;
- a `railscope sflow` collector (1 s batches) writes to it over HTTP through a TCP proxy in this
  process, its spool on a small tmpfs (root only; a plain directory otherwise, and then the
  disk-full fault is skipped and said so);
- this process sends RoCEv2 flow samples as sFlow datagrams at a fixed rate, every sample with a
  unique (dest_qp, psn), and malformed datagrams in between.

Faults, spread over the run: the store unreachable (the proxy refuses) twice and read-only once
(the proxy answers every request with ClickHouse's TABLE_IS_READ_ONLY, code 242, as a replica
whose Keeper is gone does); the serve process itself SIGTERMed and restarted; the spool disk
filled to the last byte while the store is away; the collector SIGTERMed and restarted twice.
Sending pauses while the collector is down (the UDP port is closed then). A store or disk
fault stays on past its planned end until a collector's log shows it (at most 20 s more), so
that "every fault happened" does not depend on an insert falling inside its window on a loaded
machine.

At the end: rows stored = samples sent - samples counted as dropped (the collector's own
`dropped` counters plus the kernel's drops on its socket), no (dest_qp, psn) twice, every
collector and serve exit 0, no Traceback in any log. A batch whose insert broke off after it
was sent (the proxy cuts connections mid-request) may be stored; if the spool then evicts it,
the collector counts its rows as unconfirmed (`spool_unconfirmed_rows`), not as dropped, and
the stored rows may exceed sent - dropped by at most those. The last line is one JSON object.

    python bench/soak.py [--seconds 300] [--rate 200] [--samples 20] [--spool-max 1MiB]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serve import start_serve  # noqa: E402 (bench/serve.py: railscope serve, waited for)

from exporters.sflow.encode import datagram, flow_sample, rocev2_frame  # noqa: E402

READ_ONLY = (
    b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\n"
    b"X-ClickHouse-Exception-Code: 242\r\nConnection: close\r\nContent-Length: 88\r\n\r\n"
    b"Code: 242. DB::Exception: Table is in readonly mode: soak fault (TABLE_IS_READ_ONLY)    \n"
)


# what a collector logs when each fault reaches it (held_until_seen waits for it; the result
# counts it to tell that every fault happened)
FAULT_LINES = {
    "unreachable": "clickhouse unreachable",
    "read_only": "code: 242",
    "spool_disk_full": "[Errno 28]",
}


def first_exception(log: str) -> str:
    """The log line before a log's first Traceback and the exception it ends with, so that a
    failed soak says what went wrong without its work directory."""
    lines = log.splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith("Traceback"))
    j = i + 1
    while j < len(lines) and (lines[j].startswith(" ") or not lines[j].strip()):
        j += 1
    return " | ".join(lines[max(0, i - 1) : i] + lines[j : j + 1])


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FaultProxy:
    """TCP proxy to the store with a mode: up (forward), down (refuse), readonly (answer 242).
    Down closes the listening socket, so new connections are refused as by a store that is
    gone, and the collector knows those inserts never arrived; the connections open at a mode
    change are cut wherever they are, which is what leaves an insert's outcome unknown."""

    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.mode = "up"
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        self._conns: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None
        self._handle: Any = None
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), daemon=True).start()
        ready.wait(10)

    def set(self, mode: str) -> None:
        self.mode = mode

        async def switch() -> None:
            closing = None
            if mode == "down" and self._server is not None:
                closing, self._server = self._server, None
                closing.close()  # refuse from now on
            for w in list(self._conns):
                w.close()
            if closing is not None:
                await closing.wait_closed()  # (3.12+: once its connections closed, above)
            if mode != "down" and self._server is None:
                self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)

        asyncio.run_coroutine_threadsafe(switch(), self.loop).result(30)

    def _run(self, ready: threading.Event) -> None:
        async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            try:
                while data := await r.read(1 << 16):
                    w.write(data)
                    await w.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                w.close()

        async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            self._conns.add(w)
            try:
                if self.mode == "down":
                    return
                if self.mode == "readonly":
                    await r.readuntil(b"\r\n\r\n")
                    w.write(READ_ONLY)
                    await w.drain()
                    return
                try:
                    ur, uw = await asyncio.open_connection(*self.target)
                except OSError:
                    return  # the store process is down: the client sees a closed connection
                self._conns.add(uw)
                await asyncio.gather(pipe(r, uw), pipe(ur, w))
                self._conns.discard(uw)
            except (ConnectionError, OSError, asyncio.IncompleteReadError):
                pass
            finally:
                self._conns.discard(w)
                w.close()

        async def main() -> None:
            self._handle = handle
            self._server = await asyncio.start_server(handle, "127.0.0.1", self.port)

        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(main())
        ready.set()
        self.loop.run_forever()


class Sender:
    """sFlow datagrams to the collector at `rate` per second, `samples` flow samples each, with
    one malformed datagram every `bad_every`. Pausable; counts what it sent."""

    def __init__(self, port: int, rate: int, samples: int, bad_every: int = 20) -> None:
        self.addr = ("127.0.0.1", port)
        self.rate, self.samples, self.bad_every = rate, samples, bad_every
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.running = threading.Event()
        self.stopped = threading.Event()
        self.idle = threading.Event()
        self.sent_samples = self.sent_datagrams = self.malformed = 0
        self.seq = 0
        threading.Thread(target=self._run, daemon=True).start()

    def _datagram(self) -> bytes:
        self.seq += 1
        if self.seq % self.bad_every == 0:
            self.malformed += 1
            return os.urandom(200)  # not sFlow v5: dropped whole, counted as malformed
        return self._flows(self.seq)

    def _flows(self, seq: int) -> bytes:
        out = []
        for i in range(self.samples):
            n = seq * self.samples + i
            frame = rocev2_frame("10.0.0.1", "10.1.0.9", 0x1000 + n // (1 << 24), psn=n, payload=64)
            out.append(flow_sample(frame, seq=n, rate=1))
        return datagram(out, agent="127.0.0.1", seq=seq)

    def _run(self) -> None:
        period = 1.0 / self.rate
        nxt = time.monotonic()
        while not self.stopped.is_set():
            if not self.running.is_set():
                self.idle.set()
                self.running.wait(0.2)
                nxt = time.monotonic()
                continue
            self.idle.clear()
            data = self._datagram()
            self.sock.sendto(data, self.addr)
            if self.seq % self.bad_every:
                self.sent_datagrams += 1
                self.sent_samples += self.samples
            nxt += period
            time.sleep(max(0.0, nxt - time.monotonic()))

    def pause(self) -> None:
        self.running.clear()
        self.idle.wait(5)


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return str(r.read().decode())


def metric(text: str, name: str, component: str) -> float:
    total = 0.0
    for m in re.finditer(
        rf'^{name}\{{component="{re.escape(component)}"[^}}]*\}} (\S+)$', text, re.M
    ):
        total += float(m[1])
    return total


# the sink's `dropped` counter covers every kind it writes; the component_stat rows the collector
# stores about itself are told apart by the DROPPED lines, which name the kind
DROPPED_KIND = re.compile(
    r"DROPPED the oldest \S*batch \S+ \((\d+) (\w+) rows\)"
    r"|DROPPED a (\w+) batch of (\d+) rows|dropped a (\w+) batch of (\d+) rows"
)


UNCONFIRMED_KIND = re.compile(r"discarded the oldest batch \S+ \((\d+) (\w+) rows\) UNCONFIRMED")


def other_kinds_unconfirmed(log: str) -> int:
    """Rows of kinds other than flow_sample that the UNCONFIRMED lines of `log` count."""
    return sum(int(m[1]) for m in UNCONFIRMED_KIND.finditer(log) if m[2] != "flow_sample")


def other_kinds_dropped(log: str) -> int:
    """Rows of kinds other than flow_sample that the DROPPED lines of `log` count."""
    n = 0
    for m in DROPPED_KIND.finditer(log):
        rows, kind = (m[1], m[2]) if m[1] else (m[4], m[3]) if m[3] else (m[6], m[5])
        if kind != "flow_sample":
            n += int(rows)
    return n


def udp_drops(port: int) -> int:
    """The kernel's drop counter of the UDP socket bound to `port` (/proc/net/udp)."""
    for line in Path("/proc/net/udp").read_text().splitlines()[1:]:
        f = line.split()
        if int(f[1].split(":")[1], 16) == port:
            return int(f[-1])
    return 0


class Collector:
    def __init__(
        self, cfg: Path, udp: int, http: int, logs: Path, env: dict[str, str],
        children: list[subprocess.Popen[bytes]],
    ) -> None:  # fmt: skip
        self.cfg, self.udp, self.http, self.logs, self.env = cfg, udp, http, logs, env
        self.children = children
        self.runs: list[dict[str, Any]] = []
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = open(self.logs / f"sflow-{len(self.runs)}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "telemetry.cli", "--config", str(self.cfg), "sflow",
             "--bind", f"127.0.0.1:{self.udp}"],
            stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=ROOT,
        )  # fmt: skip
        self.children.append(self.proc)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"railscope sflow exited {self.proc.returncode}: see {log.name}")
            try:
                scrape(self.http)
                return
            except OSError:
                time.sleep(0.2)
        raise SystemExit("railscope sflow never served /metrics")

    def counters(self) -> dict[str, float]:
        text = scrape(self.http)
        return {
            "dropped": metric(text, "railscope_component_dropped_records_total", "sink:clickhouse")
            + metric(text, "railscope_component_dropped_records_total", "source:sflow"),
            "received_datagrams": metric(
                text, "railscope_component_received_total", "source:sflow"
            ),
            "malformed": metric(text, "railscope_component_failed_total", "source:sflow"),
            "unconfirmed": metric(
                text, "railscope_component_spool_unconfirmed_rows", "sink:clickhouse"
            ),
            "buffered": metric(text, "railscope_component_buffered_rows", "sink:clickhouse"),
            "spooled": metric(text, "railscope_component_spool_batches", "sink:clickhouse"),
            "kernel_drops": float(udp_drops(self.udp)),
        }

    def settle(self, timeout: float) -> dict[str, float]:
        """Wait until the collector holds nothing (all stored); its counters then."""
        deadline = time.monotonic() + timeout
        c = self.counters()
        while time.monotonic() < deadline and (c["buffered"] or c["spooled"]):
            time.sleep(0.5)
            c = self.counters()
        return c

    def stop(self) -> int:
        assert self.proc is not None
        c = self.counters()  # the last reading: nothing is received after the pause
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(60)
        self.runs.append({**c, "rc": rc})
        return rc


def read_store(path: Path, env: dict[str, str]) -> tuple[int, int]:
    code = (
        "import sys; from telemetry.store import Store; s = Store('chdb://' + sys.argv[1]); "
        "print(*s.query_rows('SELECT count(), uniqExact(dest_qp, psn) FROM "
        "railscope.flow_samples')[0])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env,
        timeout=300,
    )  # fmt: skip
    if out.returncode:
        raise SystemExit(out.stderr)
    n, distinct = out.stdout.split()
    return int(n), int(distinct)


def tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                       capture_output=True, text=True)  # fmt: skip
    return r.returncode == 0


def fill(path: Path) -> Path:
    """Fill the filesystem of `path` to the last byte with one file; returns it."""
    f = path / "filler"
    fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for chunk in (1 << 16, 1):
            try:
                while True:
                    os.write(fd, b"\0" * chunk)
            except OSError:
                pass
    finally:
        os.close(fd)
    return f


def main() -> int:
    children: list[subprocess.Popen[bytes]] = []
    try:
        return run(children)
    finally:
        for p in children:  # only after a failure are any still running
            if p.poll() is None:
                p.kill()
                p.wait()


def run(children: list[subprocess.Popen[bytes]]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=float, default=300, help="run time (default 300)")
    ap.add_argument("--rate", type=int, default=200, help="datagrams per second")
    ap.add_argument("--samples", type=int, default=20, help="flow samples per datagram")
    ap.add_argument(
        "--spool-max", default="1MiB",
        help="the collector's sink.spool_max_bytes: small, so outages overflow it and the oldest "
        "batches are dropped, counted (default 1MiB)",
    )  # fmt: skip
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    T = args.seconds
    work = Path(tempfile.mkdtemp(prefix="railscope-soak-"))
    print(f"work directory {work} (removed at the end unless --keep or a failure)", file=sys.stderr)
    logs = work / "logs"
    logs.mkdir()
    spool_fs = work / "spoolfs"
    disk_fault = tmpfs(spool_fs, "8m")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAILSCOPE_CONFIG": ""}
    env.pop("RAILSCOPE_DSN", None)
    q, udp, http = free_port(), free_port(socket.SOCK_DGRAM), free_port()
    store = work / "store"
    events: list[tuple[float, str]] = []
    t0 = time.monotonic()

    def event(what: str) -> None:
        events.append((round(time.monotonic() - t0, 1), what))
        print(f"[{events[-1][0]:7.1f}s] {what}", file=sys.stderr, flush=True)

    serve_rcs = []
    serve = start_serve(store, q, logs / "serve.log")
    children.append(serve)
    proxy = FaultProxy(q)
    cfg = work / "railscope.yaml"
    cfg.write_text(
        f"store: {{dsn: 'http://default@127.0.0.1:{proxy.port}/railscope'}}\n"
        "interval_seconds: 1\n"
        f"sink: {{batch_seconds: 1, spool_dir: '{spool_fs / 'spool'}', shutdown_grace_seconds: 20,"
        f" retry_initial_seconds: 0.2, retry_max_seconds: 2, spool_max_bytes: {args.spool_max}}}\n"
        f"prometheus: {{listen: '127.0.0.1:{http}'}}\n"
    )
    collector = Collector(cfg, udp, http, logs, env, children)
    collector.start()
    sender = Sender(udp, args.rate, args.samples)
    sender.running.set()
    t0 = time.monotonic()  # the faults are spread over the run, not the start-up
    event("start: sending")

    def at(frac: float) -> None:
        time.sleep(max(0.0, t0 + frac * T - time.monotonic()))

    def held_until_seen(kind: str, fault: str) -> None:
        """Keep a fault on until a collector's log shows it (FAULT_LINES[kind]; at most 20 s
        more): on a loaded machine an insert may not come within the fault's share of the run."""
        needle = FAULT_LINES[kind]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if any(needle in p.read_text(errors="replace") for p in logs.glob("sflow-*.log")):
                return
            time.sleep(0.2)
        event(f"{fault}: not seen in the collector's log 20 s after its planned end")

    def restart_collector(n: int) -> None:
        sender.pause()
        time.sleep(1.5)  # what is in flight reaches the socket
        rc = collector.stop()
        event(f"collector SIGTERM #{n}: rc {rc}")
        collector.start()
        sender.running.set()
        event(f"collector restarted #{n}")

    filler = None
    try:
        at(0.08)
        proxy.set("down")
        event("store unreachable #1")
        at(0.16)
        held_until_seen("unreachable", "store unreachable #1")
        proxy.set("up")
        event("store back")
        at(0.22)
        restart_collector(1)
        at(0.30)
        proxy.set("readonly")
        event("store read-only (TABLE_IS_READ_ONLY)")
        at(0.38)
        held_until_seen("read_only", "store read-only")
        proxy.set("up")
        event("store writable")
        at(0.44)
        proxy.set("down")
        event("store unreachable #2")
        if disk_fault:
            filler = fill(spool_fs)
            event(f"spool disk full ({shutil.disk_usage(spool_fs).free} bytes free)")
        at(0.54)
        if filler is not None:
            held_until_seen("spool_disk_full", "spool disk full")
            filler.unlink()
            filler = None
            event("spool disk freed")
        proxy.set("up")
        event("store back")
        at(0.60)
        restart_collector(2)
        at(0.68)
        serve.send_signal(signal.SIGTERM)
        serve_rcs.append(serve.wait(60))
        event(f"store process SIGTERM: rc {serve_rcs[-1]}")
        at(0.76)
        serve = start_serve(store, q, logs / "serve.log")
        children.append(serve)
        event("store process restarted")
        at(0.90)
    finally:
        sender.pause()
        sender.stopped.set()
        if filler is not None:
            filler.unlink()
        proxy.set("up")
    event("stopped sending; draining")
    time.sleep(1.5)
    settled = collector.settle(120)
    rc = collector.stop()
    event(f"collector final SIGTERM: rc {rc}")
    serve.send_signal(signal.SIGTERM)
    serve_rcs.append(serve.wait(60))
    event(f"store process final SIGTERM: rc {serve_rcs[-1]}")
    stored, distinct = read_store(store, env)
    logs_text = {p.name: p.read_text(errors="replace") for p in sorted(logs.iterdir())}
    other = sum(other_kinds_dropped(t) for n, t in logs_text.items() if n.startswith("sflow"))
    dropped = sum(r["dropped"] for r in collector.runs) - other
    unconfirmed = sum(r["unconfirmed"] for r in collector.runs) - sum(
        other_kinds_unconfirmed(t) for n, t in logs_text.items() if n.startswith("sflow")
    )
    kernel = sum(r["kernel_drops"] for r in collector.runs) * args.samples
    tracebacks = {n: first_exception(t) for n, t in sorted(logs_text.items()) if "Traceback" in t}
    lines = "".join(logs_text.values())
    faults_seen = {kind: lines.count(needle) for kind, needle in FAULT_LINES.items()}
    rcs = [int(r["rc"]) for r in collector.runs] + serve_rcs
    malformed = int(sum(r["malformed"] for r in collector.runs))
    result: dict[str, Any] = {
        "seconds": round(time.monotonic() - t0, 1),
        "sent_samples": sender.sent_samples,
        "sent_datagrams": sender.sent_datagrams,
        "malformed_datagrams": sender.malformed,
        "stored_rows": stored,
        "distinct_rows": distinct,
        "counted_dropped": int(dropped),
        "counted_dropped_component_stat_rows": other,
        "counted_unconfirmed": int(unconfirmed),
        "kernel_dropped_samples": int(kernel),
        "disk_full_fault": disk_fault,
        "collector_rcs": [int(r["rc"]) for r in collector.runs],
        "serve_rcs": serve_rcs,
        "settled": {k: settled[k] for k in ("buffered", "spooled")},
        "tracebacks_in": tracebacks,
        "malformed_counted": malformed,
        "fault_log_lines": faults_seen,
        "events": events,
    }
    result["ok"] = (
        # exact when no batch was evicted after a cut-off insert (counted_unconfirmed 0)
        sender.sent_samples - dropped - kernel - unconfirmed
        <= stored
        <= sender.sent_samples - dropped - kernel
        and stored == distinct
        and all(r == 0 for r in rcs)
        and not tracebacks
        # every fault really happened (the collector logged it)
        and faults_seen["unreachable"] > 0
        and faults_seen["read_only"] > 0
        and (faults_seen["spool_disk_full"] > 0 or not disk_fault)
        and 0 < malformed <= sender.malformed
    )
    if args.keep or not result["ok"]:
        result["work"] = str(work)
    else:
        if disk_fault:
            subprocess.run(["umount", "-l", str(spool_fs)], check=False)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
