"""Ingest throughput: the pipeline path (source batches -> transforms -> ClickHouse sink with its
write-ahead spool and dedup tokens) against a raw `client.insert_arrow` of the same rows, in the
same run on the same embedded engine. Last line: one JSON object.

    python bench/ingest.py [--rows 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from telemetry.pipeline import Batch, ComponentStats, Pipeline
from telemetry.records import GPU_SAMPLE
from telemetry.sinks.clickhouse import ClickHouseSink
from telemetry.store import Store
from telemetry.transforms import StampCluster


def gpu_table(n: int, ts0: int) -> pa.Table:
    """n GPU samples with the value columns a real H100 reports filled in."""
    rng = np.random.default_rng(7)
    i = np.arange(n)
    cols: dict[str, pa.Array] = {
        "ts": pa.array(ts0 + (i // 1024) * 1000, pa.timestamp("ms", tz="UTC")),
        "cluster": pa.array(np.full(n, ""), pa.string()),
        "node": pa.array(np.char.add("gpu-", ((i // 8) % 128).astype(str)), pa.string()),
        "gpu": pa.array((i % 8).astype(np.uint16)),
        "uuid": pa.array(np.char.add("GPU-", (i % 1024).astype(str)), pa.string()),
        "model": pa.array(np.full(n, "NVIDIA H100 80GB HBM3"), pa.string()),
        "up": pa.array(np.ones(n, np.uint8)),
    }
    for f in GPU_SAMPLE.values():
        if f.name in cols:
            continue
        if f.type == "counter":
            cols[f.name] = pa.array(np.cumsum(rng.integers(0, 1000, n)).astype(np.uint64))
        elif f.type == "f64":
            cols[f.name] = pa.array(rng.random(n) * 500)
        elif f.type == "u64":
            cols[f.name] = pa.array(rng.integers(0, 4, n).astype(np.uint64))
    return GPU_SAMPLE.conform(pa.table(cols))


class Replay:
    name = "bench"

    def __init__(self, table: pa.Table, chunk: int) -> None:
        self.batches = [
            Batch(GPU_SAMPLE, table.slice(o, chunk)) for o in range(0, table.num_rows, chunk)
        ]
        self.stats = ComponentStats("source:bench")

    def collect(self) -> list[Batch]:
        return self.batches


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rs-bench-"))
    store = Store(f"chdb://{tmp / 'store'}", database="bench")
    store.migrate()
    ts0 = int(time.time() * 1000) - 3_600_000
    table = gpu_table(args.rows, ts0)
    stamped = StampCluster("bench").process(Batch(GPU_SAMPLE, table)).table
    target = store.table(GPU_SAMPLE)
    raw_s, pipe_s = [], []
    for r in range(args.repeat):
        store.client.command(f"TRUNCATE TABLE {target}")
        t = time.perf_counter()
        store.client.insert_arrow(target, stamped)
        raw_s.append(time.perf_counter() - t)
        assert store.count(GPU_SAMPLE) == args.rows

        store.client.command(f"TRUNCATE TABLE {target}")
        sink = ClickHouseSink(store, spool_dir=str(tmp / f"spool{r}"), batch_rows=args.rows)
        p = Pipeline([Replay(table, 100_000)], [sink], [StampCluster("bench")])
        t = time.perf_counter()
        p.run_once()
        p.close()
        pipe_s.append(time.perf_counter() - t)
        n = store.count(GPU_SAMPLE)
        assert n == args.rows, n
    raw, pipe = min(raw_s), min(pipe_s)
    out = {
        "rows": args.rows,
        "columns": len(GPU_SAMPLE.fields),
        "raw_insert_arrow_rows_per_s": round(args.rows / raw),
        "pipeline_rows_per_s": round(args.rows / pipe),
        "ratio_vs_raw": round(raw / pipe, 3),
        "raw_seconds": [round(x, 3) for x in raw_s],
        "pipeline_seconds": [round(x, 3) for x in pipe_s],
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    print(
        f"raw insert_arrow : {out['raw_insert_arrow_rows_per_s']:>12,} rows/s  (best of {args.repeat})"
    )
    print(
        f"pipeline         : {out['pipeline_rows_per_s']:>12,} rows/s  (spool + token + transforms)"
    )
    print(f"ratio            : {out['ratio_vs_raw']:.3f}  (target >= 0.8)")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
