"""`sources.sflow.workers: 2`: two receiver processes on one UDP port (SO_REUSEPORT), fed by a
real sFlow agent (pmacct's sfprobe) and by many sender sockets of the test's own encoder; every
datagram accounted, none stored twice, the same rows as the single-process collector."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from exporters.sflow import encode as E
from exporters.sflow.ingest import REASONS
from exporters.sflow.source import SflowSource
from exporters.sflow.workers import WorkerPool, socket_drops
from telemetry.contracts import ComponentStats
from telemetry.problems import Problems
from tests.integration.sflow.sfprobe import replay, roce_pcap

ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])}  # this worktree's code
SENDERS = 12  # source ports: the kernel hashes each to one worker
PER_SENDER = 150


def _volume() -> list[tuple[int, bytes]]:
    """(sender, datagram): each sender is one agent; every flow sample has its own PSN, so a row
    stored twice shows. Every 50th datagram is malformed (bad version), every 10th has counters."""
    out = []
    psn = 0
    for seq in range(1, PER_SENDER + 1):
        for k in range(SENDERS):
            if seq % 50 == 0:
                out.append((k, E.datagram([], agent=f"10.9.0.{k + 1}", version=4)))
                continue
            samples = []
            for _ in range(4):
                psn += 1
                frame = E.rocev2_frame(f"10.0.{k}.1", "10.1.0.1", 0x100 + k, psn=psn)
                samples.append(E.flow_sample(frame[:128], rate=1024, output=k + 1))
            if seq % 10 == 0:
                samples.append(E.counter_sample({"ifindex": k + 1, "in_octets": seq}))
            out.append((k, E.datagram(samples, agent=f"10.9.0.{k + 1}", seq=seq, uptime_ms=seq)))
    return out


def _sfprobe(tmp_path: Path) -> list[bytes]:
    """The datagrams pmacctd's sfprobe plugin (sampling 1) sends for a RoCEv2 pcap, recorded once
    on a plain socket: both collectors then get the real agent's exact bytes (pmacctd itself may
    lose its last few when it exits at the end of a pcap, differently each run)."""
    pcap, rec = tmp_path / "roce.pcap", tmp_path / "sfprobe.datagrams"
    if rec.exists():
        return [bytes.fromhex(h) for h in rec.read_text().split()]
    roce_pcap(pcap, srcs=[f"10.7.{k}.1" for k in range(4)], dst="10.8.0.9", n=40, qp_base=0x7700)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx:
        rx.bind(("127.0.0.1", 0))
        rx.settimeout(2.0)
        replay(pcap, rx.getsockname()[1], tmp_path, agent="127.0.0.9")
        got: list[bytes] = []
        with contextlib.suppress(TimeoutError):
            while True:
                got.append(rx.recv(65535))
    assert got, "pmacctd sent no sFlow datagram"
    rec.write_text("\n".join(d.hex() for d in got))
    return got


def _collect(workers: int, tmp_path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run a collector with `workers`, send the sfprobe replay and the volume, stop, collect."""
    src = SflowSource(SflowSource.Config(bind="127.0.0.1:0", workers=workers))  # type: ignore[call-arg]
    host, port = src.start()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as agent:
            for d in _sfprobe(tmp_path):
                agent.sendto(d, (host, port))
        socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(SENDERS)]
        for i, (k, d) in enumerate(_volume()):
            socks[k].sendto(d, (host, port))
            if i % 200 == 0:
                time.sleep(0.002)  # a sender's pace, not a flood of one burst
        for s in socks:
            s.close()
        time.sleep(0.5)
    finally:
        src.stop()  # workers take what their sockets hold and hand it over
    rows: list[dict[str, Any]] = []
    for b in src.collect():
        rows += [{"_kind": b.kind.name, **r} for r in b.table.to_pylist()]
    return rows, src.stats.snapshot()


def _key(r: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted((k, v) for k, v in r.items() if k != "ts"))


def test_two_workers_account_for_every_datagram(tmp_path: Path) -> None:
    if shutil.which("pmacctd") is None:
        pytest.skip("pmacctd is not installed (Debian package pmacct)")
    one_rows, one = _collect(1, tmp_path)
    two_rows, two = _collect(2, tmp_path)
    volume = len(_volume())
    bad = sum(1 for _, d in _volume() if d[3] == 4)
    sfprobe = one["received"] - volume  # what pmacctd sent (the single collector saw it all)
    assert sfprobe > 0 and one["errors"] == {"bad_version": bad}
    # every datagram: received by a worker (stored, or counted malformed) or dropped at a socket
    assert two["received"] + two["socket_drops"] == volume + sfprobe
    assert two["received"] == two["worker0_received"] + two["worker1_received"]
    assert two["worker0_received"] > 0 and two["worker1_received"] > 0  # the kernel spread them
    assert two["socket_drops"] == 0  # loopback at this pace: nothing to drop
    assert two["errors"] == {"bad_version": bad}
    # a malformed datagram's sequence number is never read: 2 gaps per agent, in both
    assert two["datagrams_lost"] == one["datagrams_lost"] == 2 * SENDERS
    flows = [r for r in two_rows if r["_kind"] == "flow_sample" and r["agent"] != "127.0.0.9"]
    psns = Counter(r["psn"] for r in flows)
    assert len(psns) == 4 * (volume - bad) and max(psns.values()) == 1  # none stored twice
    assert Counter(map(_key, two_rows)) == Counter(map(_key, one_rows))  # same rows
    probe = [r for r in two_rows if r["_kind"] == "flow_sample" and r["agent"] == "127.0.0.9"]
    assert probe and {r["dest_qp"] for r in probe} <= {0x7700 + q for q in range(4)}
    assert sum(r["packets"] for r in probe) <= 40  # sampling 1: one sample per packet sent


def test_socket_drops_read_from_proc() -> None:
    """A socket nobody reads: what overflows its receive queue shows in /proc/net/udp's drops."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx:
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        rx.bind(("127.0.0.1", 0))
        inode = os.fstat(rx.fileno()).st_ino
        assert socket_drops(inode) == 0
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
            for _ in range(200):
                tx.sendto(b"\0" * 1000, rx.getsockname())
        drops = socket_drops(inode)
        assert drops is not None and drops > 0


def test_cli_workers_store_in_the_embedded_store(tmp_path: Path, free_port: int) -> None:
    """`railscope sflow --workers 2 --once` with a chdb:// store: the workers hand their rows to
    the one process that opened the store; they land there."""
    dsn = f"chdb://{tmp_path / 'db'}"
    env = ENV
    proc = subprocess.Popen([sys.executable, "-m", "telemetry.cli", "sflow", "--workers", "2", "--bind",
                             f"127.0.0.1:{free_port}", "--once", "--interval", "6", "--dsn", dsn],
                            stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    try:
        _wait_bound(free_port, 2)
        socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(6)]
        for i in range(120):
            frame = E.rocev2_frame("10.0.0.1", "10.0.0.2", 0x55, psn=i)
            d = E.datagram(
                [E.flow_sample(frame[:128], rate=10)], agent=f"10.3.0.{i % 6}", seq=i // 6 + 1
            )
            socks[i % 6].sendto(d, ("127.0.0.1", free_port))
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert _query(dsn, "SELECT count(), uniqExact(psn), sum(packets) FROM {t}") == [
        [120, 120, 1200]
    ]


def _wait_bound(port: int, sockets: int, timeout: float = 30) -> None:
    """Until `sockets` UDP sockets are bound to `port` (/proc/net/udp)."""
    deadline = time.monotonic() + timeout
    while True:
        with open("/proc/net/udp") as f:
            if sum(f":{port:04X} " in line for line in f) >= sockets:
                return
        assert time.monotonic() < deadline, f"{sockets} sockets not bound to {port}"
        time.sleep(0.05)


def _query(dsn: str, sql: str) -> Any:
    """Rows of `sql` ({t}: the flow_sample table) on a chdb:// store, from another process (one
    process per embedded store)."""
    code = (
        "import json, sys; from telemetry.store import Store; s = Store(sys.argv[1]); "
        "print(json.dumps(s.query_rows(sys.argv[2].format(t=s.table('flow_sample')))))"
    )
    env = ENV
    out = subprocess.run([sys.executable, "-c", code, dsn, sql], capture_output=True, text=True,
                         env=env, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.slow
def test_serve_runs_the_workers(tmp_path: Path) -> None:
    """`railscope serve` with `sources.sflow.workers: 2`: per-worker gauges on /metrics, and on
    SIGTERM the last collection stores every datagram sent (rows = sent)."""
    from tests.integration.serve.conftest import free_port, wait_ping

    qport, uport, mport = free_port(), free_port(socket.SOCK_DGRAM), free_port()
    dsn = f"chdb://{tmp_path / 'store'}"
    cfg = {
        "interval_seconds": 3,
        "store": {"dsn": dsn},
        "sink": {"spool_dir": str(tmp_path / "spool"), "batch_seconds": 1},
        "prometheus": {"listen": f"127.0.0.1:{mport}"},
        "serve": {"query_listen": f"127.0.0.1:{qport}"},
        "sources": {"sflow": {"enabled": True, "bind": f"127.0.0.1:{uport}", "workers": 2}},
    }
    (tmp_path / "railscope.yaml").write_text(json.dumps(cfg))
    log = (tmp_path / "serve.log").open("w")
    env = {**ENV, "RAILSCOPE_CONFIG": ""}
    serve = subprocess.Popen([sys.executable, "-m", "telemetry.cli", "--config", str(tmp_path / "railscope.yaml"),
                              "serve", "--no-correlate"], stdout=log, stderr=subprocess.STDOUT, env=env, text=True)  # fmt: skip
    why = lambda: (tmp_path / "serve.log").read_text()  # noqa: E731
    try:
        wait_ping(f"http://127.0.0.1:{qport}", serve, why)
        _wait_bound(uport, 2)  # serve starts its sources' listeners on their first cycle
        socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(8)]
        sent = 0
        for i in range(400):
            frame = E.rocev2_frame("10.0.0.1", "10.0.0.2", 7, psn=i)
            d = E.datagram(
                [E.flow_sample(frame[:128], rate=5)], agent=f"10.6.0.{i % 8}", seq=i // 8 + 1
            )
            socks[i % 8].sendto(d, ("127.0.0.1", uport))
            sent += 1
        deadline = time.monotonic() + 30
        metrics = ""
        while 'collector="worker1"' not in metrics or "worker1_received" not in metrics:
            assert time.monotonic() < deadline, metrics
            time.sleep(0.5)
            with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=10) as r:
                metrics = r.read().decode()
        assert 'railscope_component_socket_drops{component="source:sflow"} 0.0' in metrics
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(60) == 0, why()
    finally:
        if serve.poll() is None:
            serve.kill()
        log.close()
    assert "Traceback" not in why(), why()
    assert _query(dsn, "SELECT count(), uniqExact(psn) FROM {t}") == [[sent, sent]]


def test_workers_bad_bind_is_one_line(tmp_path: Path) -> None:
    env = ENV
    out = subprocess.run([sys.executable, "-m", "telemetry.cli", "sflow", "--workers", "2", "--bind",
                          "192.0.2.1:6343", "--once", "--output", "jsonl"],
                         capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert lines[-1].startswith("railscope: error: sflow: cannot listen on 192.0.2.1:6343")
    assert sum("192.0.2.1:6343" in x for x in lines) == 1, lines  # said once, not logged too
    assert "Traceback" not in out.stderr


def test_collect_takes_everything_received_so_far() -> None:
    """take() while the workers run returns every datagram sent before it (each worker hands
    over what it holds and what its socket queued, on request): what `serve`'s last collection
    relies on. The timed hand-over is set to 60 s here, so only the request can deliver."""
    st = ComponentStats("source:sflow", unit="datagrams")
    pool = WorkerPool(2, "127.0.0.1:0", stats=st, problems=Problems(st, "sflow", REASONS),
                      agents={}, ifnames={}, rcvbuf=1 << 20, max_rows=10**6,
                      flush_seconds=60)  # fmt: skip
    host, port = pool.start()
    try:
        socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(6)]
        for rnd in range(2):
            for i in range(60):
                frame = E.rocev2_frame("10.0.0.1", "10.0.0.2", 9, psn=rnd * 100 + i)
                d = E.datagram(
                    [E.flow_sample(frame[:128])], agent=f"10.4.0.{i % 6}", seq=rnd * 10 + i // 6 + 1
                )
                socks[i % 6].sendto(d, (host, port))
            rows = [r for b in pool.take() for r in b.table.to_pylist()]  # no wait before it
            assert sorted(r["psn"] for r in rows) == [rnd * 100 + i for i in range(60)]
        assert st.received == 120
        for s in socks:
            s.close()
    finally:
        pool.stop()
