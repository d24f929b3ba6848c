"""Detection latency and evaluation cost of the sliding engine, on the simulator at live pace.

For each scenario (default small and multi-idc) the simulator feeds a fresh store interval by
interval (`telemetry.sim.live.LiveFeed`: each interval's records go through the pipeline when the
interval ends, then the injected clock moves there) while the engine's live loop
(`telemetry.correlate.engine.follow`, what `correlate --follow` runs) evaluates every tick in a
thread, in lockstep. Latency per fault = first_seen of the first finding that detects it (the
clock time of the evaluation that wrote it) - the fault's onset. Then CPU seconds per evaluation
cycle (process CPU: the engine's Python and the embedded ClickHouse's threads) at 128 / 512 /
2,048 servers, and the growth exponent (slope of log CPU over log servers); beside it the rest of
the run's process CPU per interval (`feed_cpu_s_per_interval`: simulating, the pipeline, the
inserts and the materialized views keeping the rollups). Then batch mode
(`Correlator.run`, what `correlate --since 2h` runs) over `--batch-hours` ending at the first
scenario's data end: wall seconds, ticks evaluated and ticks skipped (no data in any window).
Last line: one JSON object.

    python bench/latency.py [--scenarios small,multi-idc] [--sizes 128,512,2048] [--cycle-minutes 3]
                            [--batch-hours 2] [--timing realistic|harsh|ideal]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from telemetry.correlate.engine import Correlator, RunResult, follow
from telemetry.sim import build
from telemetry.sim.live import LiveFeed, latencies
from telemetry.sim.scenario import load_scenario
from telemetry.sim.score import read_findings, score
from telemetry.sinks.clickhouse import ClickHouseSink
from telemetry.store import Store
from telemetry.transforms import StampCluster

CLUSTER = "bench"


def live_run(
    dsn: str, spool: Path, sc: Any, now_s: float
) -> tuple[Store, Any, Correlator, list[RunResult]]:
    """Feed `sc` at live pace into a new database while follow() evaluates every tick."""
    store = Store(dsn, database=f"bench_{uuid.uuid4().hex[:10]}")
    store.migrate()
    sim = build(sc, now_s=now_s)
    feed = LiveFeed(
        sim, [ClickHouseSink(store, spool_dir=str(spool))], [StampCluster(CLUSTER)], lockstep=True
    )
    corr = Correlator(store, cluster=CLUSTER)
    cycles: list[RunResult] = []
    stop = threading.Event()
    th = threading.Thread(
        target=follow,
        args=(store, None, stop),
        kwargs={"clock": feed.clock, "corr": corr, "on_cycle": lambda c, t, r: cycles.append(r)},
        daemon=True,
    )
    th.start()
    feed.clock.wait_idle()
    feed.run()
    stop.set()
    th.join(120)
    return store, sim, corr, cycles


def pct(xs: list[float], q: float) -> float:
    return round(float(np.percentile(np.array(xs), q)), 1)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--scenarios", default="small,multi-idc")
    ap.add_argument("--sizes", default="128,512,2048", help="servers for the CPU-per-cycle runs")
    ap.add_argument(
        "--cycle-minutes", type=float, default=3.0, help="simulated minutes per CPU run"
    )
    ap.add_argument("--batch-hours", type=float, default=2.0, help="batch run range (0: none)")
    ap.add_argument(
        "--timing",
        default="realistic",
        choices=("ideal", "realistic", "harsh"),
        help="the simulator's collection timing (telemetry/sim/timing.py; default realistic)",
    )
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="railscope-latency-") as tmp:  # removed afterwards
        run(a, Path(tmp))


def run(a: argparse.Namespace, tmp: Path) -> None:
    dsn = f"chdb://{tmp / 'store'}"
    now_s = time.time() - 3600  # inside every table's TTL
    interval = 0.0
    by_kind: dict[str, list[float]] = {}
    missed: dict[str, int] = {}
    quality: dict[str, Any] = {}
    batch: dict[str, Any] = {}
    for name in [s for s in a.scenarios.split(",") if s]:
        t = time.perf_counter()
        sc = load_scenario(name).with_overrides(timing=a.timing)
        store, sim, corr, _ = live_run(dsn, tmp / f"spool-{name}", sc, now_s)
        interval = corr.interval
        truth = sim.ground_truth()
        found = read_findings(store, CLUSTER, truth.start_ms, truth.end_ms)
        scored = score(truth, found)
        quality[name] = {k.kind: [k.precision, k.recall, k.localization] for k in scored.kinds}
        for x in latencies(truth, found):
            if x.seconds is None:
                missed[x.kind] = missed.get(x.kind, 0) + 1
            else:
                by_kind.setdefault(x.kind, []).append(x.seconds)
        print(f"{name}: live run in {time.perf_counter() - t:.1f}s", file=sys.stderr)
        if a.batch_hours and not batch:
            end = datetime.fromtimestamp(truth.end_ms / 1000, UTC)
            bc = Correlator(store, cluster=CLUSTER)
            t = time.perf_counter()
            res = bc.run(end - timedelta(hours=a.batch_hours), end)
            batch = {
                "scenario": name,
                "hours": a.batch_hours,
                "wall_s": round(time.perf_counter() - t, 2),
                "ticks_evaluated": res.windows,
                "ticks_skipped": res.skipped,
                "findings": len(res.findings),
            }
            print(f"{name}: batch {batch}", file=sys.stderr)
    kinds = {
        k: {"p50_s": pct(v, 50), "p95_s": pct(v, 95), "faults": len(v)}
        for k, v in sorted(by_kind.items())
    }
    cpu: dict[str, Any] = {}
    for n in [int(x) for x in a.sizes.split(",") if x]:
        t = time.perf_counter()
        sc = load_scenario("small").with_overrides(
            nodes=n, minutes=a.cycle_minutes, timing=a.timing
        )
        cpu0 = time.process_time()
        _, _, corr, cycles = live_run(dsn, tmp / f"spool-{n}", sc, now_s)
        # the rest of the process CPU: simulating, the pipeline and the inserts (with the
        # materialized views that keep the rollups)
        feed = time.process_time() - cpu0 - sum(r.cpu_seconds for r in cycles)
        interval = corr.interval
        # after the trailing windows have filled (the longest lookback), every tick costs the same
        warm = int(max(corr.lookbacks.values()).total_seconds() // corr.interval)
        per = [r.cpu_seconds for r in cycles[warm + 1 :]] or [r.cpu_seconds for r in cycles]
        cpu[str(n)] = {
            "cpu_s_per_cycle_median": round(float(np.median(per)), 3),
            "cpu_s_per_cycle_p95": round(float(np.percentile(per, 95)), 3),
            "core_fraction_at_interval": round(float(np.median(per)) / corr.interval, 3),
            "cycles": len(per),
            "feed_cpu_s_per_interval": round(feed / max(len(cycles), 1), 3),
        }
        print(f"{n} servers: {cpu[str(n)]} ({time.perf_counter() - t:.1f}s)", file=sys.stderr)
    exponent = None
    if len(cpu) >= 2:
        xs = [math.log(int(k)) for k in cpu]
        ys = [math.log(max(v["cpu_s_per_cycle_median"], 1e-6)) for v in cpu.values()]
        exponent = round(float(np.polyfit(xs, ys, 1)[0]), 3)
    print(
        json.dumps(
            {
                "interval_s": interval,
                "timing": a.timing,
                "kinds": kinds,
                "missed": missed,
                "quality": quality,
                "cpu_per_cycle": cpu,
                "cpu_growth_exponent": exponent,
                "batch": batch,
            },
            sort_keys=False,
        )
    )


if __name__ == "__main__":
    main()
