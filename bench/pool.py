"""GPU pool accounting for 16,384 GPUs (2,048 nodes x 8) over 1 h at 10 s — 5.9 M GPU samples
and 2,048 pods — in ClickHouse (`telemetry.pool.accounting`, the embedded engine) against the
same allocated/busy/idle arithmetic in polars over in-memory frames (`accounting_polars`), both
per 60 s interval and per queue; then the gang placement search (`place_gang`) on 2,048 nodes
under a 4-tier HyperNode tree. Both accountings must agree. Last line: one JSON object.

    python bench/pool.py [--nodes N] [--minutes M] [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pyarrow as pa

from telemetry import pool
from telemetry.records import GPU_SAMPLE, NODE, POD, PODGROUP, QUEUE
from telemetry.store import Store

C = "bench"
GPN = 8


def _ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def build(
    store: Store, nodes: int, start: datetime, minutes: int
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """One 8-GPU pod per node (1 in 8 idle), 8 queues; GPU samples every 10 s."""
    early = _ms(start - timedelta(hours=1))
    names = [f"node-{i:05d}" for i in range(nodes)]
    inv = {"cluster": C, "valid_from": early, "valid_to": None, "updated_at": early}
    store.insert(NODE, NODE.to_arrow(
        [{**inv, "node": n, "labels": "{}", "idc": "", "su": "", "gpus": GPN, "gpu_capacity": GPN,
          "gpu_model": "H100"} for n in names]))  # fmt: skip
    pods = [
        {**inv, "namespace": f"team-{i % 8}", "pod": f"w-{i}", "uid": str(i), "node": n,
         "job": "", "phase": "Running", "gpus": "", "gpu_requests": GPN, "priority_class": "",
         "podgroup": f"pg-{i}", "gpu_model": ""}
        for i, n in enumerate(names)
    ]  # fmt: skip
    store.insert(POD, POD.to_arrow(pods))
    store.insert(PODGROUP, PODGROUP.to_arrow(
        [{**inv, "namespace": p["namespace"], "podgroup": p["podgroup"], "job": "",
          "queue": f"q-{i % 8}", "priority_class": "", "min_member": 1, "min_gpus": GPN,
          "phase": "Running", "unschedulable": False, "reason": ""} for i, p in enumerate(pods)]))  # fmt: skip
    store.insert(QUEUE, QUEUE.to_arrow(
        [{**inv, "queue": f"q-{q}", "parent": "", "state": "Open", "weight": 1,
          "reclaimable": True, "capability_gpus": None, "deserved_gpus": nodes, "guarantee_gpus": None}
         for q in range(8)]))  # fmt: skip
    steps = minutes * 6
    n = nodes * GPN
    node_idx = np.repeat(np.arange(nodes), GPN)
    rng = np.random.default_rng(1)
    s_ms = _ms(start)
    pod_names = np.array([f"w-{i}" for i in range(nodes)], dtype=object)[node_idx]
    ns_names = np.array([f"team-{i % 8}" for i in range(nodes)], dtype=object)[node_idx]
    idle = node_idx % 8 == 7
    frames = []
    for t in range(steps):
        util = np.where(idle, 0.0, rng.uniform(0.3, 1.0, n))
        cols = {
            "ts": pa.array(np.full(n, s_ms + t * 10_000), pa.timestamp("ms", tz="UTC")),
            "cluster": pa.array([C] * n),
            "node": pa.array(np.array(names, dtype=object)[node_idx].tolist()),
            "gpu": pa.array(np.tile(np.arange(GPN), nodes), pa.uint16()),
            "uuid": pa.array([""] * n), "mig": pa.array([""] * n), "model": pa.array(["H100"] * n),
            "pci_bus_id": pa.array([""] * n), "pod": pa.array(pod_names.tolist()),
            "namespace": pa.array(ns_names.tolist()), "up": pa.array(np.ones(n, np.uint8)),
            "utilization_ratio": pa.array(util),
        }  # fmt: skip
        tbl = GPU_SAMPLE.conform(pa.table(cols))
        store.insert(GPU_SAMPLE, tbl)
        frames.append(
            pl.from_arrow(
                tbl.select(["ts", "node", "gpu", "namespace", "pod", "utilization_ratio"])
            )
        )
    samples = pl.concat(frames)  # type: ignore[arg-type]
    pods_df = store.query_df(f"SELECT * FROM {store.table(POD, final=True)} WHERE cluster = '{C}'")
    key = pl.DataFrame({"namespace": [p["namespace"] for p in pods], "pod": [p["pod"] for p in pods],
                        "key": [f"q-{i % 8}" for i in range(nodes)]})  # fmt: skip
    return pods_df, samples, key


def fragmentation(nodes: int, repeat: int) -> dict[str, float]:
    """place_gang on `nodes` nodes with random free GPUs under a 4-tier tree (8 per group)."""
    rng = np.random.default_rng(2)
    names = [f"node-{i:05d}" for i in range(nodes)]
    free = {n: int(f) for n, f in zip(names, rng.integers(0, GPN + 1, nodes), strict=True)}
    models = dict.fromkeys(names, "H100")
    anc = {
        n: [f"t1-{i // 8}", f"t2-{i // 64}", f"t3-{i // 512}", "t4-0"] for i, n in enumerate(names)
    }
    tiers = {h: int(h[1]) for a in anc.values() for h in a}
    gangs = [pool.Gang(16, 8, frozenset({"H100"}), tier) for tier in (1, 2, 3, None)]
    t = time.perf_counter()
    for _ in range(repeat):
        for g in gangs:
            pool.place_gang(g, free, models, anc, tiers)
    per = (time.perf_counter() - t) / (repeat * len(gangs))
    return {"fragmentation_search_ms": per * 1000, "fragmentation_nodes": nodes}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=2048)
    ap.add_argument("--minutes", type=int, default=60)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    end = start + timedelta(minutes=args.minutes)
    store = Store(f"chdb://{tempfile.mkdtemp(prefix='rs-bench-pool-')}/store", database="bench")
    store.migrate()
    t = time.perf_counter()
    pods, samples, key = build(store, args.nodes, start, args.minutes)
    load_s = time.perf_counter() - t
    out: dict[str, float | int | str] = {"gpus": args.nodes * GPN, "samples": samples.height,
                                         "load_s": round(load_s, 2)}  # fmt: skip
    best: dict[str, float] = {}
    for name, fn in (
        ("clickhouse_pool_s", lambda: pool.accounting(store, start, end, cluster=C)),
        ("clickhouse_queue_s", lambda: pool.accounting(store, start, end, by="queue", cluster=C)),
        ("polars_pool_s", lambda: pool.accounting_polars(pods, samples, start, end)),
        ("polars_queue_s", lambda: pool.accounting_polars(pods, samples, start, end, key=key)),
    ):
        for _ in range(args.repeat):
            t = time.perf_counter()
            res = fn()
            best[name] = min(best.get(name, 1e9), time.perf_counter() - t)
        out[name.replace("_s", "_rows")] = res.height
    ch = pool.accounting(store, start, end, by="queue", cluster=C).sort("interval_start", "key")
    po = pool.accounting_polars(pods, samples, start, end, key=key)
    cols = ["allocated_gpus", "busy_gpus", "idle_allocated_gpus"]
    agree = ch.select(cols).rows() == po.select(cols).rows()
    assert agree, "ClickHouse and polars disagree"
    out.update({k: round(v, 3) for k, v in best.items()})
    out["ratio_clickhouse_vs_polars_pool"] = round(
        best["polars_pool_s"] / best["clickhouse_pool_s"], 3
    )
    out["ratio_clickhouse_vs_polars_queue"] = round(
        best["polars_queue_s"] / best["clickhouse_queue_s"], 3
    )
    out["agree"] = "yes"
    out.update({k: round(v, 3) for k, v in fragmentation(args.nodes, 50).items()})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
