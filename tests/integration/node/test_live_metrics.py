"""A live exporter: the node source feeding a Prometheus sink served by aiohttp on a free port,
scraped over HTTP across cycles (wrap, reset, GPU lost, malformed file in between); and the
`railscope node` daemon itself serving /metrics and writing the embedded store."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from exporters.node import nvml
from exporters.node.source import NodeSource
from telemetry.pipeline import Pipeline
from telemetry.sinks.prometheus import PrometheusSink


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def find(metrics: dict[str, float], name: str, **labels: str) -> float | None:
    for k, v in metrics.items():
        if k.startswith(name + "{") and all(f'{lk}="{lv}"' in k for lk, lv in labels.items()):
            return v
    return None


def test_live_scrapes_across_cycles(node8_copy: Path, free_port: int) -> None:
    fake = nvml.FakeNvml.from_dict(json.loads((node8_copy / "nvml.json").read_text()))
    src = NodeSource.replay(str(node8_copy), node_name="n1", gpu_backend_impl=fake)
    prom = PrometheusSink(components=lambda: [src.stats])
    pipe = Pipeline([src], [prom])
    prom.serve("127.0.0.1", free_port)
    try:
        pipe.run_once()
        m1 = scrape(free_port)
        assert find(m1, "railscope_gpu_up", gpu="3") == 1.0
        rx1 = find(m1, "railscope_nic_rx_bytes_total", device="mlx5_1")
        tx1 = find(m1, "railscope_nic_tx_bytes_total", device="mlx5_2")
        assert rx1 is not None and tx1 is not None
        assert rx1 == (4_000_000_000 + 2_000_006 * 17) * 4

        ctr = node8_copy / "sys/class/infiniband/mlx5_1/ports/1/counters"
        (ctr / "port_rcv_data").write_text("100\n")  # wrapped past 2^32: +(2^32 - raw + 100) words
        ctr2 = node8_copy / "sys/class/infiniband/mlx5_2/ports/1/counters"
        (ctr2 / "port_xmit_data").write_text("5\n")  # 64-bit value dropped to 5: a NIC reset
        bad = node8_copy / "sys/class/infiniband/mlx5_3/ports/1/hw_counters/np_cnp_sent"
        bad.write_text("not-a-number\n")
        fake.lose(3)
        pipe.run_once()
        m2 = scrape(free_port)
        raw1 = 4_000_000_000 + 2_000_006 * 17
        assert (
            find(m2, "railscope_nic_rx_bytes_total", device="mlx5_1")
            == rx1 + ((1 << 32) - raw1 + 100) * 4
        )
        assert find(m2, "railscope_nic_resets_total", device="mlx5_1") == 0.0
        assert find(m2, "railscope_nic_tx_bytes_total", device="mlx5_2") == tx1 + 5 * 4
        assert find(m2, "railscope_nic_resets_total", device="mlx5_2") == 1.0
        assert find(m2, "railscope_gpu_up", gpu="3") == 0.0
        assert find(m2, "railscope_gpu_up", gpu="4") == 1.0
        assert find(m2, "railscope_gpu_power_watts", gpu="4") == 654.0
        assert find(m2, "railscope_component_failed_total", reason="gpu:gpu_lost") == 1.0
        assert find(m2, "railscope_component_failed_total", reason="rdma:malformed_sysfs") == 1.0
        assert find(m2, "railscope_collector_success", collector="gpu") == 0.0
        assert find(m2, "railscope_collector_success", collector="pcie") == 1.0
        assert find(m2, "railscope_collector_success", collector="rdma") == 0.0
        assert find(m2, "railscope_collector_success", collector="ethtool") == 1.0
        # the GPU went away: its last power value is no longer exported as if current
        assert find(m2, "railscope_gpu_power_watts", gpu="3") is None
    finally:
        pipe.close()


def test_daemon_serves_metrics_and_stores(node8_copy: Path, free_port: int, tmp_path: Path) -> None:
    """`railscope node` as it runs in the DaemonSet (live mode on an injected sysfs root)."""
    dsn = f"chdb://{tmp_path / 'store'}"
    env = {
        **os.environ,
        "RAILSCOPE_DSN": dsn,
        "RAILSCOPE__SINK__BATCH_SECONDS": "1",
        "RAILSCOPE__SINK__SPOOL_DIR": str(tmp_path / "spool"),
    }
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "telemetry.cli",
            "node",
            "--sysfs-root",
            str(node8_copy / "sys"),
            "--gpu-backend",
            "fake",
            "--gpu-fake",
            str(node8_copy / "nvml.json"),
            "--node-name",
            "n1",
            "--podresources-socket",
            str(tmp_path / "none.sock"),
            "--interval",
            "1",
            "--listen",
            f"127.0.0.1:{free_port}",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        metrics: dict[str, float] = {}
        while time.monotonic() < deadline:
            try:
                metrics = scrape(free_port)
                # the GPU and NIC collectors publish on their own: wait for both
                if (
                    find(metrics, "railscope_gpu_up", gpu="7") is not None
                    and find(metrics, "railscope_nic_up", device="mlx5_6") is not None
                ):
                    break
            except OSError:
                pass
            time.sleep(0.3)
        assert find(metrics, "railscope_gpu_up", gpu="7") == 1.0, "daemon never served GPU metrics"
        assert find(metrics, "railscope_nic_up", device="mlx5_6") == 0.0
        # ethtool on a live run goes through the ioctl: these netdevs do not exist here.
        assert find(metrics, "railscope_nic_priority_rx_pause_total") is None
        time.sleep(2.5)  # let the ClickHouse sink flush a batch
    finally:
        p.terminate()
        out, _ = p.communicate(timeout=30)
    assert p.returncode in (0, -15), out
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, clickhouse_connect as c; cl = c.get_client(dsn=sys.argv[1]);"
            "print(cl.query('SELECT count(), max(power_watts) FROM railscope.gpu_samples').result_rows[0]);"
            "print(cl.query('SELECT uniqExact(device) FROM railscope.nic_samples').result_rows[0])",
            dsn,
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.strip().splitlines()
    count, max_power = re.findall(r"[\d.]+", lines[0])
    assert int(count) >= 8 and float(max_power) == 657.0
    assert lines[1].strip("(),") == "8"
