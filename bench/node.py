"""Benchmark: one `railscope node` collection cycle on the 8-GPU (fake NVML) / 8-RDMA-NIC fixture
node, against Prometheus node_exporter (infiniband + netclass collectors) scraping the same sysfs
tree, in the same run. Measures CPU time per cycle/scrape and peak RSS of each process.

    python bench/node.py [--cycles N]

A railscope cycle (what runs every interval) is collect + hand the batches to the /metrics sink;
rendering the text happens per scrape and is reported separately, and so is a full replay of the
capture (which also parses `ethtool -S` text and pod-resources JSON; node_exporter does neither).
node_exporter collects and renders on every scrape: its number covers both.
The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.integration.node.test_footprint import serve_no_store  # noqa: E402
from tests.sysfs_fixture import node8  # noqa: E402

NODE8 = node8()
TICK = os.sysconf("SC_CLK_TCK")

_CHILD = r"""
import json, logging, resource, sys, time
logging.disable(logging.WARNING)
sys.path.insert(0, sys.argv[3])
from exporters.node.source import without_pandas
without_pandas()  # as `railscope node --no-store` does: pyarrow would import pandas, unused
from exporters.node import NodeSource
from telemetry.sinks.prometheus import PrometheusSink
node8, n = sys.argv[1], int(sys.argv[2])

def cpu(fn, n):
    t0 = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - t0) / n

# What runs every interval in the DaemonSet: collect (sysfs + 8 fake GPUs and their process lists;
# same sysfs collectors as node_exporter's infiniband+netclass, no ethtool) and hand the batches
# to the /metrics sink.
live = NodeSource.live(sysfs_root=node8 + "/sys", gpu_backend="fake", gpu_fake=node8 + "/nvml.json",
                       collectors=frozenset({"gpu", "rdma", "pcie", "podresources", "processes"}),
                       podresources_socket="/nonexistent/kubelet.sock", node_name="bench")
sink = PrometheusSink(components=lambda: [live.stats])
t0 = time.process_time()
for b in live.collect():
    sink.export(b)
first = time.process_time() - t0

def cycle():
    for b in live.collect():
        sink.export(b)

per_cycle = cpu(cycle, n)
body = sink.render()
per_render = cpu(sink.render, max(n // 4, 5))
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # the DaemonSet's work only
# Replay of the full capture: + ethtool -S text (8 x 90 lines) + pod-resources JSON.
replay = NodeSource.replay(node8, node_name="bench")
replay.collect()
per_replay = cpu(replay.collect, n)
print(json.dumps({"first_cycle_cpu_s": first, "cpu_s_per_cycle": per_cycle, "render_cpu_s": per_render,
                  "replay_cpu_s_per_cycle": per_replay, "metrics_bytes": len(body),
                  "series": sum(1 for l in body.splitlines() if l and l[0] != "#"),
                  "peak_rss_kib": rss}))
"""


def no_store_process() -> dict[str, float]:
    """The real `railscope node --no-store` process (CLI, config, pipeline, /metrics server) on
    the fixture: its peak RSS and CPU from start to its first served scrape."""
    p, port = serve_no_store(
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
                if b"railscope_gpu_up{" in body:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        else:
            raise RuntimeError("railscope node --no-store did not serve a cycle")
        return {"cpu_s": _cpu_ticks(p.pid) / TICK, "peak_rss_kib": _hwm_kib(p.pid)}
    finally:
        p.terminate()
        p.wait(10)


def railscope(cycles: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(NODE8), str(cycles), str(ROOT)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _hwm_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def node_exporter(cycles: int) -> dict[str, float] | None:
    exe = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if exe is None:
        return None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen(
        [
            exe,
            f"--path.sysfs={NODE8 / 'sys'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--collector.disable-defaults",
            "--collector.infiniband",
            "--collector.netclass",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 20
        body = b""
        while time.monotonic() < deadline:
            try:
                body = urllib.request.urlopen(url, timeout=5).read()
                break
            except OSError:
                time.sleep(0.1)
        if not body:
            raise RuntimeError("node_exporter did not answer")
        infiniband = body.count(b"\nnode_infiniband_port_data_received_bytes_total{")
        start = _cpu_ticks(p.pid)
        for _ in range(cycles):
            body = urllib.request.urlopen(url, timeout=5).read()
        per = (_cpu_ticks(p.pid) - start) / TICK / cycles
        return {
            "cpu_s_per_scrape": per,
            "peak_rss_kib": _hwm_kib(p.pid),
            "metrics_bytes": len(body),
            "infiniband_ports_seen": infiniband,
        }
    finally:
        p.terminate()
        p.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=200)
    a = ap.parse_args()
    rs = railscope(a.cycles)
    proc = no_store_process()
    ne = node_exporter(a.cycles)
    per_ms = rs["cpu_s_per_cycle"] * 1000
    render_ms = rs["render_cpu_s"] * 1000
    result: dict[str, object] = {
        "bench": "node",
        "fixture": "8 GPU (fake NVML) + 8 RDMA NIC, tests/fixtures/sysfs/node8",
        "cycles": a.cycles,
        "railscope_cpu_ms_per_cycle": round(per_ms, 3),
        "railscope_first_cycle_cpu_ms": round(rs["first_cycle_cpu_s"] * 1000, 3),
        "railscope_render_cpu_ms_per_scrape": round(render_ms, 3),
        "railscope_replay_full_cpu_ms_per_cycle": round(rs["replay_cpu_s_per_cycle"] * 1000, 3),
        "railscope_peak_rss_mib": round(rs["peak_rss_kib"] / 1024, 1),
        "railscope_no_store_process_peak_rss_mib": round(proc["peak_rss_kib"] / 1024, 1),
        "railscope_no_store_process_cpu_ms_to_first_scrape": round(proc["cpu_s"] * 1000, 1),
        "railscope_core_pct_at_1s_interval": round(per_ms / 1000 * 100, 3),
        "railscope_series": rs["series"],
        "railscope_metrics_bytes": rs["metrics_bytes"],
    }
    if ne is None:
        result["node_exporter"] = "not installed (Debian package prometheus-node-exporter)"
    else:
        ne_ms = ne["cpu_s_per_scrape"] * 1000
        result |= {
            "node_exporter_cpu_ms_per_scrape": round(ne_ms, 3),
            "node_exporter_peak_rss_mib": round(ne["peak_rss_kib"] / 1024, 1),
            "node_exporter_metrics_bytes": ne["metrics_bytes"],
            "node_exporter_infiniband_ports_seen": ne["infiniband_ports_seen"],
            "cpu_ratio_cycle_vs_node_exporter": round(per_ms / ne_ms, 3) if ne_ms else None,
            "cpu_ratio_cycle_plus_render_vs_node_exporter": round((per_ms + render_ms) / ne_ms, 3)
            if ne_ms
            else None,
        }
        result["target_cycle_cpu_le_node_exporter"] = bool(ne_ms and per_ms <= ne_ms)
    result["target_le_0.5pct_core_at_1s"] = per_ms / 1000 * 100 <= 0.5
    result["target_first_cycle_le_50ms"] = result["railscope_first_cycle_cpu_ms"] <= 50  # type: ignore[operator]
    result["target_peak_rss_le_48mib"] = result["railscope_peak_rss_mib"] <= 48  # type: ignore[operator]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
