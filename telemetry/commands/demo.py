"""`railscope demo`: the README's main job.

Until the cluster simulator lands this is the minimal end-to-end slice the foundation promises:
synthetic GPU and NIC samples go through the real pipeline (transforms, ClickHouse sink with its
spool) into the embedded store and are read back. It says so when it runs.
"""

from __future__ import annotations

import argparse
import random
import shutil
import time
from pathlib import Path
from typing import Any

from telemetry.commands.common import clickhouse_sink, config_from_args, open_store
from telemetry.pipeline import Batch, Pipeline
from telemetry.records import GPU_SAMPLE, NIC_SAMPLE
from telemetry.transforms import build_transforms


def register(sub: Any) -> list[str]:
    p = sub.add_parser("demo", help="run the end-to-end demo on the embedded store",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="./demo-data", help="directory for the embedded store (default ./demo-data)")
    p.add_argument("--nodes", type=int, default=32, help="GPU servers (default 32)")
    p.add_argument("--minutes", type=int, default=10, help="simulated minutes (default 10)")
    p.add_argument("--seed", type=int, default=1, help="random seed (same seed, same data)")
    p.add_argument("--keep", action="store_true", help="keep existing data in --data instead of starting fresh")
    p.set_defaults(func=run)
    return ["demo"]


def _samples(nodes: int, minutes: int, seed: int, start_ms: int) -> list[Batch]:
    rng = random.Random(seed)
    gpu_rows, nic_rows = [], []
    steps = minutes * 6
    for n in range(nodes):
        node = f"gpu-{n:04d}"
        rx = tx = 0
        for s in range(steps):
            ts = start_ms + s * 10_000
            for g in range(8):
                util = min(1.0, max(0.0, rng.gauss(0.85, 0.08)))
                gpu_rows.append({"ts": ts, "node": node, "gpu": g, "uuid": f"GPU-{n:04d}-{g}", "mig": "", "model": "NVIDIA H100 80GB HBM3",
                                 "pci_bus_id": "", "pod": "", "namespace": "", "up": 1, "utilization_ratio": util,
                                 "power_watts": 150 + 550 * util, "temperature_celsius": 40 + 35 * util})
            rx += rng.randint(10, 40) * 10**9
            tx += rng.randint(10, 40) * 10**9
            nic_rows.append({"ts": ts, "node": node, "device": "mlx5_0", "port": 1, "netdev": "eth0", "link_layer": "Ethernet",
                             "up": 1, "rx_bytes_total": rx, "tx_bytes_total": tx})
    return [Batch.from_rows(GPU_SAMPLE, gpu_rows), Batch.from_rows(NIC_SAMPLE, nic_rows)]


def run(args: argparse.Namespace) -> int:
    data = Path(args.data).resolve()
    if not args.keep and data.exists():
        shutil.rmtree(data)
    cfg = config_from_args(args, store__dsn=f"chdb://{data / 'store'}", sink__spool_dir=str(data / "spool"))
    print("railscope demo: the cluster simulator is not built yet; this run sends synthetic GPU/NIC samples")
    print(f"through the real pipeline into the embedded store at {data / 'store'}.")
    t0 = time.perf_counter()
    store = open_store(cfg, migrate=True)
    start_ms = (int(time.time()) // 60 - args.minutes) * 60_000
    batches = _samples(args.nodes, args.minutes, args.seed, start_ms)
    pipeline = Pipeline([], [clickhouse_sink(cfg, store)], build_transforms(cfg))
    n = pipeline.publish(batches)
    pipeline.close()
    print(f"  wrote {n:,} records in {time.perf_counter() - t0:.1f}s")
    for kind in (GPU_SAMPLE, NIC_SAMPLE):
        print(f"  {kind.table:<14} {store.count(kind):>10,} rows")
    top = store.query_rows(
        f"SELECT node, round(avg(power_watts)), round(avg(utilization_ratio), 3) FROM {store.table(GPU_SAMPLE)} "
        "GROUP BY node ORDER BY avg(power_watts) DESC LIMIT 3"
    )
    print("  hottest nodes by mean GPU power:")
    for node, w, u in top:
        print(f"    {node}  {w:.0f} W  util {u:.3f}")
    print("next: RAILSCOPE_DSN=chdb://%s railscope db status" % (data / "store"))
    return 0
