"""The real node_exporter (prometheus-node-exporter) and railscope on node_exporter's own
InfiniBand sysfs fixture: every node_infiniband_* series node_exporter prints, railscope reads
with the same value (the mapping is the table in docs/node-exporter.md)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from exporters.node.rdma import RdmaCollector
from tests.unit.node.test_rdma import node_exporter_series, railscope_series

FIX = Path(__file__).parents[2] / "fixtures" / "sysfs" / "node_exporter"
BIN = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.skipif(BIN is None, reason="prometheus-node-exporter is not installed")
def test_same_series_and_values_as_node_exporter() -> None:
    port = free_port()
    proc = subprocess.Popen(
        [
            str(BIN),
            f"--path.sysfs={FIX / 'sys'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--collector.disable-defaults",
            "--collector.infiniband",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        text = ""
        for _ in range(100):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    text = r.read().decode()
                break
            except OSError:
                time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    want = node_exporter_series(text)
    assert len({k[0] for k in want}) == 27
    problems: list[tuple[str, str]] = []
    nic, _ = RdmaCollector(FIX, "n1").collect(1, lambda r, m: problems.append((r, m)))
    assert railscope_series(nic) == want and problems == []
