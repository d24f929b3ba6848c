"""`railscope node --no-store` (the /metrics-only DaemonSet mode) imports only what a node needs:
no pyarrow, numpy or pandas (its batches stay plain Python columns, read by the Prometheus sink),
no ClickHouse client or engine, no polars, no Kubernetes client, no simulator, no correlation
engine, no other source's module, and no store opened. Checked in a fresh interpreter running the
real CLI, once for one cycle and once serving /metrics. Memory and CPU are measured in
bench/node.py, not asserted here."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.sysfs_fixture import node8

NODE8 = node8()
HEAVY = (
    "pyarrow",  # ~43 MiB of the 84 MiB peak RSS before batches stayed plain
    "numpy",
    "pandas",
    "clickhouse_connect",
    "chdb",
    "polars",
    "kubernetes",
    "kubernetes_asyncio",
    "kmock",
    "telemetry.sim",
    "telemetry.correlate.engine",
    "telemetry.correlate.detectors",
    "telemetry.store.client",
    "telemetry.sinks.clickhouse",
    "exporters.switch",  # the other sources: only the command being run is loaded
    "exporters.sflow.source",
    "exporters.hdfs",
    "exporters.inventory",
)
# Config validation parses the DSN and the thresholds (telemetry.store.dsn,
# telemetry.correlate.thresholds, which come with their packages' light modules): no heavy library.
ARGS = [
    "node",
    "--no-store",
    "--sysfs-root",
    str(NODE8 / "sys"),
    "--gpu-backend",
    "fake",
    "--gpu-fake",
    str(NODE8 / "nvml.json"),
    "--podresources-socket",
    "/nonexistent/kubelet.sock",
]
CHILD = """
import json, sys
from telemetry.cli import main
rc = main(json.loads(sys.argv[1]))
json.dump({"rc": rc, "modules": sorted(sys.modules)}, open(sys.argv[2], "w"))
"""


def heavy_in(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def one_cycle(tmp_path: Path, args: list[str], dsn: str) -> subprocess.CompletedProcess[str]:
    """`railscope ARGS --once` in a child that writes the modules it imported to modules.json."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            json.dumps([*args, "--once"]),
            str(tmp_path / "modules.json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "RAILSCOPE_DSN": dsn},
        check=False,
    )


def test_one_cycle_imports_nothing_heavy(tmp_path: Path) -> None:
    out = tmp_path / "modules.json"
    r = one_cycle(tmp_path, ARGS, f"chdb://{tmp_path}/never-opened")
    assert r.returncode == 0, r.stderr
    assert "railscope_nic_rx_unicast_packets_total{" in r.stdout  # the cycle's /metrics text
    doc = json.loads(out.read_text())
    assert doc["rc"] == 0
    modules = doc["modules"]
    assert "exporters.node.rdma" in modules and "telemetry.sinks.prometheus" in modules
    assert heavy_in(modules) == []
    assert "pandas" not in modules
    assert not (tmp_path / "never-opened").exists()  # no store opened, even with a DSN set


def serve_no_store(*python_flags: str, **popen: Any) -> tuple[subprocess.Popen[str], int]:
    """`railscope node --no-store` serving /metrics on a free loopback port (also bench/node.py)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    cmd = [sys.executable, *python_flags, "-m", "telemetry.cli", *ARGS]
    return subprocess.Popen([*cmd, "--listen", f"127.0.0.1:{port}"], text=True, **popen), port


def test_serving_metrics_imports_nothing_heavy(tmp_path: Path) -> None:
    p, port = serve_no_store(
        "-X", "importtime", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path
    )
    try:
        body = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "railscope_gpu_up{" not in body:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    body = r.read().decode()
            except OSError:
                time.sleep(0.2)
        assert "railscope_nic_state_id{" in body
    finally:
        p.terminate()
        _, err = p.communicate(timeout=30)
    imported = [
        ln.rsplit("|", 1)[1].strip() for ln in err.splitlines() if ln.startswith("import time:")
    ]
    assert "exporters.node.source" in imported
    assert heavy_in(imported) == []


# Writing to a remote store needs the ClickHouse client (the one code path, DESIGN.md) and
# pyarrow (the spool's Arrow files), nothing more: not the embedded engine, polars, pandas, the
# Kubernetes client, the simulator, the correlation engine or another source.
NEEDED_TO_STORE = (
    "pyarrow",
    "numpy",
    "clickhouse_connect",
    "telemetry.store.client",
    "telemetry.sinks.clickhouse",
)
STORE_MODE_HEAVY = [h for h in HEAVY if h not in NEEDED_TO_STORE]


def test_writing_to_a_remote_store_imports_only_the_client(tmp_path: Path) -> None:
    out = tmp_path / "modules.json"
    # nothing listens on port 1: the store is opened (client imported) and found unreachable
    r = one_cycle(tmp_path, [a for a in ARGS if a != "--no-store"], "http://127.0.0.1:1/railscope")
    assert "127.0.0.1:1" in r.stderr and "unreachable" in r.stderr, r.stderr
    modules = json.loads(out.read_text())["modules"]
    assert "clickhouse_connect" in modules and "exporters.node.rdma" in modules
    bad = [m for m in modules if any(m == h or m.startswith(h + ".") for h in STORE_MODE_HEAVY)]
    assert bad == [] and "pandas" not in modules
