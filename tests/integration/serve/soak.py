"""A `railscope serve` soak, shared by tests/integration/serve/test_soak.py and bench/serve.py
--soak: the node (fixture sysfs, fake NVML), sFlow (a steady datagram stream) and inventory
(capture directory) sources at a 1 s interval, correlate --follow on 5 s windows, and concurrent
clickhouse-connect readers on the endpoint; serve's RSS sampled every few seconds."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import clickhouse_connect

from exporters.sflow import encode as E
from tests.integration.serve.conftest import ENV, free_port, wait_ping, write_serve_config
from tests.sysfs_fixture import node8

DUMP = Path(__file__).parents[2] / "fixtures" / "k8s" / "dump"
QUERIES = [
    "SELECT count() FROM flow_samples",
    "SELECT node, gpu, max(power_watts) FROM gpu_samples GROUP BY node, gpu ORDER BY node, gpu",
    "SELECT kind, count() FROM findings FINAL GROUP BY kind",
    "SELECT src_ip, dst_ip, sum(bytes) FROM flow_samples GROUP BY src_ip, dst_ip ORDER BY 3 DESC LIMIT 10",
]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@dataclass
class Soak:
    samples: list[tuple[float, int]]  # (seconds since the readers started, serve's RSS in KiB)
    answered: list[int]  # queries answered per reader
    errors: list[str]  # reader errors
    exit_code: int | None  # serve's, after SIGTERM
    log: str  # serve's stdout + stderr


def run_soak(tmp_path: Path, seconds: float, readers: int = 20, every: float = 5.0) -> Soak:
    n8 = node8()
    qport, uport, mport = free_port(), free_port(socket.SOCK_DGRAM), free_port()
    sources = {
        "node": {
            "enabled": True,
            "sysfs_root": str(n8 / "sys"),
            "gpu_backend": "fake",
            "gpu_fake": str(n8 / "nvml.json"),
            "node_name": "gpu-node-1",
            "podresources_socket": str(tmp_path / "none.sock"),
            "ethtool": False,
        },
        "sflow": {"enabled": True, "bind": f"127.0.0.1:{uport}"},
        "inventory": {"enabled": True, "from": str(DUMP)},
    }
    write_serve_config(tmp_path, 1, qport, mport, sources)
    log = (tmp_path / "serve.log").open("w")
    serve = subprocess.Popen(
        [sys.executable, "-m", "telemetry.cli", "serve", "--config", str(tmp_path / "railscope.yaml"), "--lag", "3"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={k: v for k, v in ENV.items() if k != "RAILSCOPE__PROMETHEUS__ENABLED"},
    )  # fmt: skip
    url = f"http://127.0.0.1:{qport}"
    stop = threading.Event()
    errors: list[str] = []
    answered = [0] * readers

    def reader(i: int) -> None:
        try:
            c = clickhouse_connect.get_client(host="127.0.0.1", port=qport, database="railscope")
            while not stop.is_set():
                c.query(QUERIES[(i + answered[i]) % len(QUERIES)])
                answered[i] += 1
                time.sleep(0.2)
        except Exception as e:
            errors.append(f"reader {i}: {e}")

    def sender() -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            seq = 0
            while not stop.is_set():
                for _ in range(20):
                    seq += 1
                    frame = E.rocev2_frame("2.2.2.49", "192.168.1.205", 4000 + seq % 7, psn=seq)
                    sample = E.flow_sample(frame[:128], rate=100, frame_length=4200)
                    s.sendto(E.datagram([sample], agent="127.0.0.1", seq=seq), ("127.0.0.1", uport))
                time.sleep(0.1)

    threads: list[threading.Thread] = []
    samples: list[tuple[float, int]] = []
    rc: int | None = None
    try:
        wait_ping(url, serve, lambda: (tmp_path / "serve.log").read_text())
        threads = [threading.Thread(target=reader, args=(i,)) for i in range(readers)]
        threads.append(threading.Thread(target=sender))
        for t in threads:
            t.start()
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds and not errors:
            if serve.poll() is not None:
                break
            samples.append((time.monotonic() - t0, rss_kib(serve.pid)))
            time.sleep(every)
        stop.set()
        for t in threads:
            t.join(30)
        serve.send_signal(signal.SIGTERM)
        rc = serve.wait(60)
    finally:
        stop.set()
        if serve.poll() is None:
            serve.kill()
            serve.wait()
        log.close()
    return Soak(samples, answered, errors, rc, (tmp_path / "serve.log").read_text())
