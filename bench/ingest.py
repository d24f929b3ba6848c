"""Ingest throughput: the pipeline path (source batches -> transforms -> ClickHouse sink with its
write-ahead spool and dedup tokens) against a raw `client.insert_arrow` of the same rows, in the
same run on the same embedded engine. Last line: one JSON object.

Both clocks time what happens to rows that exist: the raw path's rows are made before its clock
starts, and the pipeline's source makes its rows inside `run_once`, so the time it spends making
them (`pipeline_source_seconds`) is taken off the pipeline's.

    python bench/ingest.py [--rows 1000000] [--rounds 3] [--repeat 1] [--profile]

Each path runs in its own process (the embedded store admits one process), so `peak_rss_mib` is
the pipeline's alone; it is reported next to `batch_arrow_mib`, the Arrow size of the batch the
sink seals (target: at most 3x). On a shared machine one measurement is noise: the two paths
alternate, `--rounds` times (pipeline then raw, then raw then pipeline, ...), each process timing
`--repeat` inserts, and each path's figure is its best (fastest) of all its measurements, so a
load spike that hits one path's turn does not decide the ratio. Two clocks: wall seconds
(`ratio_vs_raw`, the issue's figure) and the process's CPU seconds, every thread of it, the
embedded engine's included (`cpu_ratio_vs_raw`: what to quote when others share the cores).

`--profile` runs each timed insert under cProfile with the CPU clock and adds, per path, where
its CPU went (`profile`: seconds by stage, from the best repeat).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

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
        # making the rows: the source's cost, which the raw path's clocks skip
        self.seconds = 0.0
        self.cpu_seconds = 0.0

    def collect(self) -> list[Batch]:
        t, c = time.perf_counter(), time.process_time()
        out = [
            Batch(GPU_SAMPLE, gpu_table(min(self.chunk, self.rows - o), self.ts0, offset=o))
            for o in range(0, self.rows, self.chunk)
        ]
        self.seconds += time.perf_counter() - t
        self.cpu_seconds += time.process_time() - c
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


# Where a path's CPU goes: stage -> the functions whose cumulative CPU it is (file, function).
# A stage's figure includes what it calls; "insert" is the engine's own work on either path.
STAGES: dict[str, dict[str, tuple[tuple[str, str], ...]]] = {
    "pipeline": {
        "source": (("bench/ingest.py", "collect"),),  # made by the source: not the pipeline's
        "transforms": (("telemetry/pipeline.py", "apply_transforms"),),
        "spool_write": (("telemetry/store/spool.py", "append"),),  # its fsync costs wall time
        "insert": (("telemetry/store/client.py", "insert_arrow_file"),),
        "allocator_release": (
            ("telemetry/store/client.py", "release_memory"),
            ("telemetry/sinks/clickhouse.py", "release_freed_memory"),
        ),
        "spool_remove": (("telemetry/store/spool.py", "remove"),),
    },
    "raw": {
        "arrow_serialize": (("clickhouse_connect/driver/query.py", "arrow_buffer"),),
        "temp_file_write": (("_backend/chdb_backend.py", "_write_block_to_file"),),
        "insert": (("_backend/chdb_backend.py", "_run"),),
    },
}


def stage_seconds(prof: cProfile.Profile, path: str) -> dict[str, float]:
    """CPU seconds by stage (STAGES) of one profiled repeat, the rest (`other`: Python between
    the stages) and the total."""
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    out: dict[str, float] = {}
    for stage, funcs in STAGES[path].items():
        out[stage] = round(
            sum(
                v[3]
                for (file, _line, func), v in stats.items()
                if any(file.endswith(f) and func == fn for f, fn in funcs)
            ),
            3,
        )
    total = sum(v[2] for v in stats.values())  # every function's own time, once
    out["other"] = round(total - sum(out.values()), 3)
    out["total"] = round(total, 3)
    return out


def phase(args: argparse.Namespace) -> dict[str, object]:
    """One path, timed, in this (fresh) process: its peak RSS is that path's alone."""
    store = Store(f"chdb://{args.dir / 'store'}", database="bench")
    store.migrate()
    target = store.table(GPU_SAMPLE)
    seconds: list[float] = []
    cpu_seconds: list[float] = []
    source_seconds: list[float] = []
    profiles: list[dict[str, float]] = []
    arrow_bytes = 0
    for r in range(args.repeat):
        store.client.command(f"TRUNCATE TABLE {target}")
        prof = cProfile.Profile(time.process_time) if args.profile else None
        if args.phase == "raw":
            table = StampCluster("bench").process(Batch(GPU_SAMPLE, gpu_table(args.rows, args.ts0)))
            arrow_bytes = table.table.nbytes
            t, c = time.perf_counter(), time.process_time()
            if prof:
                prof.enable()
            store.client.insert_arrow(target, table.table)
            if prof:
                prof.disable()
            seconds.append(time.perf_counter() - t)
            cpu_seconds.append(time.process_time() - c)
            del table
        else:
            spool = args.dir / f"spool-{args.round}-{r}"
            sink = ClickHouseSink(store, spool_dir=str(spool), batch_rows=args.rows)
            size = Measure()
            src = Replay(args.rows, 100_000, args.ts0)
            p = Pipeline([src], [sink], [StampCluster("bench"), size])
            t, c = time.perf_counter(), time.process_time()
            if prof:
                prof.enable()
            p.run_once()
            p.close()
            if prof:
                prof.disable()
            # the raw path's rows are made before its clock starts: so are the pipeline's
            seconds.append(time.perf_counter() - t - src.seconds)
            cpu_seconds.append(time.process_time() - c - src.cpu_seconds)
            source_seconds.append(src.seconds)
            arrow_bytes = size.bytes  # the sealed batch: every row the sink buffered
        if prof:
            profiles.append(stage_seconds(prof, args.phase))
        n = store.count(GPU_SAMPLE)
        assert n == args.rows, n
    return {
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "source_seconds": source_seconds,
        "arrow_bytes": arrow_bytes,
        "peak_rss_mib": peak_rss_mib(),
        "profiles": profiles,
    }


def run_phase(name: str, rnd: int, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--phase", name, "--dir", str(args.dir), "--round", str(rnd)]
    cmd += ["--rows", str(args.rows), "--repeat", str(args.repeat), "--ts0", str(args.ts0)]
    cmd += ["--profile"] if args.profile else []
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def gather(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One path's measurements over every round: all of them, in order, and the best profile."""
    out: dict[str, Any] = {
        "seconds": [x for r in runs for x in r["seconds"]],
        "cpu_seconds": [x for r in runs for x in r["cpu_seconds"]],
        "source_seconds": [x for r in runs for x in r["source_seconds"]],
        "arrow_bytes": runs[-1]["arrow_bytes"],
        "peak_rss_mib": max(float(r["peak_rss_mib"]) for r in runs),
    }
    profiles = [p for r in runs for p in r["profiles"]]
    out["profile"] = min(profiles, key=lambda p: p["total"] - p.get("source", 0.0), default=None)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3, help="alternations of the two paths")
    ap.add_argument("--repeat", type=int, default=1, help="timed inserts per path per round")
    ap.add_argument("--profile", action="store_true", help="CPU by stage (cProfile)")
    ap.add_argument("--phase", choices=("raw", "pipeline"), help=argparse.SUPPRESS)
    ap.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--ts0", type=int, default=int(time.time() * 1000) - 3_600_000)
    args = ap.parse_args()
    if args.phase:
        print(json.dumps(phase(args)))
        return
    args.dir = Path(tempfile.mkdtemp(prefix="rs-bench-"))
    # each path in its own process (the embedded store admits one process), alternating, the
    # order swapped every round so that neither path always runs on the warmer page cache
    runs: dict[str, list[dict[str, Any]]] = {"pipeline": [], "raw": []}
    try:
        for rnd in range(args.rounds):
            order = ("pipeline", "raw") if rnd % 2 == 0 else ("raw", "pipeline")
            for name in order:
                runs[name].append(run_phase(name, rnd, args))
    finally:
        shutil.rmtree(args.dir, ignore_errors=True)  # the store: ~230 MiB left on a shared disk
    pipe, raw = gather(runs["pipeline"]), gather(runs["raw"])
    batch_mib = float(pipe["arrow_bytes"]) / (1 << 20)
    raw_best, pipe_best = min(raw["seconds"]), min(pipe["seconds"])
    raw_cpu, pipe_cpu = min(raw["cpu_seconds"]), min(pipe["cpu_seconds"])
    n = args.rounds * args.repeat
    out = {
        "rows": args.rows,
        "columns": len(GPU_SAMPLE.fields),
        "best_of": n,
        "raw_insert_arrow_rows_per_s": round(args.rows / raw_best),
        "pipeline_rows_per_s": round(args.rows / pipe_best),
        "ratio_vs_raw": round(raw_best / pipe_best, 3),
        "cpu_ratio_vs_raw": round(raw_cpu / pipe_cpu, 3),
        "raw_seconds": [round(x, 3) for x in raw["seconds"]],
        "pipeline_seconds": [round(x, 3) for x in pipe["seconds"]],
        "raw_cpu_seconds": [round(x, 3) for x in raw["cpu_seconds"]],
        "pipeline_cpu_seconds": [round(x, 3) for x in pipe["cpu_seconds"]],
        "pipeline_source_seconds": [round(x, 3) for x in pipe["source_seconds"]],
        "batch_arrow_mib": round(batch_mib),
        "peak_rss_mib": round(pipe["peak_rss_mib"]),
        "peak_rss_vs_batch": round(pipe["peak_rss_mib"] / batch_mib, 2),
        "raw_peak_rss_mib": round(raw["peak_rss_mib"]),
    }
    if args.profile:
        out["profile"] = {"pipeline": pipe["profile"], "raw": raw["profile"]}
    print(f"raw insert_arrow : {out['raw_insert_arrow_rows_per_s']:>12,} rows/s  (best of {n})")
    print(
        f"pipeline         : {out['pipeline_rows_per_s']:>12,} rows/s  (spool + token + transforms)"
    )
    print(
        f"ratio            : {out['ratio_vs_raw']:.3f} wall, {out['cpu_ratio_vs_raw']:.3f} CPU "
        f"(best {raw_cpu:.2f} s raw, {pipe_cpu:.2f} s pipeline)  (target >= 1.0)"
    )
    if args.profile:
        for name in ("pipeline", "raw"):
            print(f"CPU by stage, {name:8s}: {json.dumps(out['profile'][name])}")
    print(
        f"pipeline peak RSS: {out['peak_rss_mib']:>8} MiB = {out['peak_rss_vs_batch']}x the "
        f"{out['batch_arrow_mib']} MiB batch (target <= 3x); raw insert's process "
        f"{out['raw_peak_rss_mib']} MiB"
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
