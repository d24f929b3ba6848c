"""Ingest throughput: the pipeline path (source batches -> transforms -> ClickHouse sink with its
write-ahead spool and dedup tokens) against a raw `client.insert_arrow` of the same rows, in the
same run on the same embedded engine. Last line: one JSON object.

Both clocks time what happens to rows that exist: the raw path's rows are made before its clock
starts, and the pipeline's source makes its rows inside `run_once`, so the time it spends making
them (`pipeline_source_seconds`) is taken off the pipeline's.

    python bench/ingest.py [--rows 1000000] [--repeat 3]

Each path runs in its own process, so `peak_rss_mib` is the pipeline's alone; it is reported next
to `batch_arrow_mib`, the Arrow size of the batch the sink seals (target: at most 3x).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from telemetry.contracts import Batch, ComponentStats
from telemetry.pipeline import Pipeline
from telemetry.records import GPU_SAMPLE
from telemetry.sinks.clickhouse import ClickHouseSink
from telemetry.store import Store
from telemetry.transforms import StampCluster


def gpu_table(n: int, ts0: int, offset: int = 0) -> pa.Table:
    """n GPU samples (rows `offset`.. of a run) with the value columns a real H100 reports."""
    rng = np.random.default_rng(7 + offset)
    i = np.arange(offset, offset + n)
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
    """A source that makes each cycle's rows as it is asked for them and keeps none, like a real
    one: what the pipeline holds is then the pipeline's own doing."""

    name = "bench"

    def __init__(self, rows: int, chunk: int, ts0: int) -> None:
        self.rows, self.chunk, self.ts0 = rows, chunk, ts0
        self.stats = ComponentStats("source:bench")
        self.seconds = 0.0  # making the rows: the source's cost, which the raw path's clock skips

    def collect(self) -> list[Batch]:
        t = time.perf_counter()
        out = [
            Batch(GPU_SAMPLE, gpu_table(min(self.chunk, self.rows - o), self.ts0, offset=o))
            for o in range(0, self.rows, self.chunk)
        ]
        self.seconds += time.perf_counter() - t
        return out


class Measure:
    """The last transform: adds up the Arrow size of what reaches the sink."""

    name = "measure"
    bytes = 0

    def process(self, batch: Batch) -> Batch:
        self.bytes += batch.table.nbytes
        return batch


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def phase(args: argparse.Namespace) -> dict[str, object]:
    """One path, timed, in this (fresh) process: its peak RSS is that path's alone."""
    store = Store(f"chdb://{args.dir / 'store'}", database="bench")
    store.migrate()
    target = store.table(GPU_SAMPLE)
    seconds = []
    source_seconds: list[float] = []
    arrow_bytes = 0
    for r in range(args.repeat):
        store.client.command(f"TRUNCATE TABLE {target}")
        if args.phase == "raw":
            table = StampCluster("bench").process(Batch(GPU_SAMPLE, gpu_table(args.rows, args.ts0)))
            arrow_bytes = table.table.nbytes
            t = time.perf_counter()
            store.client.insert_arrow(target, table.table)
            seconds.append(time.perf_counter() - t)
            del table
        else:
            sink = ClickHouseSink(
                store, spool_dir=str(args.dir / f"spool{r}"), batch_rows=args.rows
            )
            size = Measure()
            src = Replay(args.rows, 100_000, args.ts0)
            p = Pipeline([src], [sink], [StampCluster("bench"), size])
            t = time.perf_counter()
            p.run_once()
            p.close()
            # the raw path's rows are made before its clock starts: so are the pipeline's
            seconds.append(time.perf_counter() - t - src.seconds)
            source_seconds.append(src.seconds)
            arrow_bytes = size.bytes  # the sealed batch: every row the sink buffered
        n = store.count(GPU_SAMPLE)
        assert n == args.rows, n
    return {
        "seconds": seconds,
        "source_seconds": source_seconds,
        "arrow_bytes": arrow_bytes,
        "peak_rss_mib": peak_rss_mib(),
    }


def run_phase(name: str, args: argparse.Namespace) -> dict[str, object]:
    cmd = [sys.executable, __file__, "--phase", name, "--dir", str(args.dir)]
    cmd += ["--rows", str(args.rows), "--repeat", str(args.repeat), "--ts0", str(args.ts0)]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--phase", choices=("raw", "pipeline"), help=argparse.SUPPRESS)
    ap.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--ts0", type=int, default=int(time.time() * 1000) - 3_600_000)
    args = ap.parse_args()
    if args.phase:
        print(json.dumps(phase(args)))
        return
    args.dir = Path(tempfile.mkdtemp(prefix="rs-bench-"))
    # each path in its own process, one after the other (the embedded store admits one process)
    pipe = run_phase("pipeline", args)
    raw = run_phase("raw", args)
    raw_s, pipe_s = list(raw["seconds"]), list(pipe["seconds"])  # type: ignore[call-overload]
    batch_mib = float(pipe["arrow_bytes"]) / (1 << 20)  # type: ignore[arg-type]
    raw_best, pipe_best = min(raw_s), min(pipe_s)
    out = {
        "rows": args.rows,
        "columns": len(GPU_SAMPLE.fields),
        "raw_insert_arrow_rows_per_s": round(args.rows / raw_best),
        "pipeline_rows_per_s": round(args.rows / pipe_best),
        "ratio_vs_raw": round(raw_best / pipe_best, 3),
        "raw_seconds": [round(x, 3) for x in raw_s],
        "pipeline_seconds": [round(x, 3) for x in pipe_s],
        "pipeline_source_seconds": [round(x, 3) for x in pipe["source_seconds"]],  # type: ignore[attr-defined]
        "batch_arrow_mib": round(batch_mib),
        "peak_rss_mib": round(float(pipe["peak_rss_mib"])),  # type: ignore[arg-type]
        "peak_rss_vs_batch": round(float(pipe["peak_rss_mib"]) / batch_mib, 2),  # type: ignore[arg-type]
        "raw_peak_rss_mib": round(float(raw["peak_rss_mib"])),  # type: ignore[arg-type]
    }
    print(
        f"raw insert_arrow : {out['raw_insert_arrow_rows_per_s']:>12,} rows/s  (best of {args.repeat})"
    )
    print(
        f"pipeline         : {out['pipeline_rows_per_s']:>12,} rows/s  (spool + token + transforms)"
    )
    print(f"ratio            : {out['ratio_vs_raw']:.3f}  (target >= 1.0)")
    print(
        f"pipeline peak RSS: {out['peak_rss_mib']:>8} MiB = {out['peak_rss_vs_batch']}x the "
        f"{out['batch_arrow_mib']} MiB batch (target <= 3x); raw insert's process "
        f"{out['raw_peak_rss_mib']} MiB"
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
