"""The correlation engine's cost per tick, per-tick loop against set-based evaluation: one stored
scenario (simulated and ingested once, into an embedded store of its own) is copied into one
database per mode, and each copy is correlated as the demo does (`Correlator.run` over the
scenario's window). The per-tick loop (`Correlator(per_tick=True)`, `correlate --per-tick`) is
the oracle: `identical` is true when both modes wrote the same findings, incidents (and their
members), attributed flows and job_port_intervals sums.

`statements_per_tick` counts the statements each mode sent to the engine (queries, commands,
inserts), divided by the ticks; `statements_per_tick_top` the same for the stages that send the
most (a detector, or `engine`: attribution, inventory, findings and incidents). `cpu_s` is each mode's process CPU (the embedded engine runs in this process), steadier than
wall time on a shared machine. `follow_tick_ms` is the median wall time of one live tick
(`rejudge` then `evaluate`, as `correlate --follow` does) over the scenario's last ticks, on a
third copy already correlated up to them. Wall seconds: the machine may be shared, so compare
the modes of one run. Last line: one JSON object.

    python bench/engine.py [--scenario small] [--nodes 512] [--minutes 10] [--follow-ticks 8]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.results import report
from telemetry.store import Store

# what the engine writes (compared between modes, never copied into a mode's database)
OUTPUTS = (
    "attributed_flows",
    "attribution_index",
    "findings",
    "incident_findings",
    "incidents",
    "job_port_intervals",
)


class Counter:
    """Statements sent through the store's client, counted once each (a client method that
    calls another counts once), in all and per `stage` (the detector being evaluated, or
    `engine`: attribution, inventory, findings and incidents)."""

    METHODS = ("query", "command", "raw_query", "query_arrow", "query_df", "insert", "raw_insert")

    def __init__(self, client: Any) -> None:
        self.n = 0
        self.stage = "engine"
        self.by_stage: collections.Counter[str] = collections.Counter()
        self._depth = 0
        for name in self.METHODS:
            setattr(client, name, self._wrap(getattr(client, name)))

    def _wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*a: Any, **k: Any) -> Any:
            if self._depth == 0:
                self.n += 1
                self.by_stage[self.stage] += 1
            self._depth += 1
            try:
                return fn(*a, **k)
            finally:
                self._depth -= 1

        return counted


def ingest(dsn: str, name: str, nodes: int | None, minutes: float | None, tmp: Path) -> Any:
    from telemetry.sim import build
    from telemetry.sim.run import ingest as publish
    from telemetry.sim.scenario import load_scenario
    from telemetry.sinks.clickhouse import ClickHouseSink
    from telemetry.transforms import StampCluster

    start = datetime.fromtimestamp((int(time.time()) // 60 - 60) * 60, UTC)  # inside every TTL
    sc = load_scenario(name).with_overrides(
        nodes=nodes, minutes=minutes, start=start.strftime("%Y-%m-%dT%H:%M:%SZ")
    )
    sim = build(sc)
    store = Store(dsn, database="bench_source")
    store.migrate()
    sink = ClickHouseSink(store, spool_dir=str(tmp / "spool"), batch_rows=50_000)
    publish(sim, [sink], [StampCluster("default")])
    return sim


def copy_of(src: Store, database: str) -> Store:
    """A database holding src's stored facts, migrated, without the engine's outputs (the
    materialized views fill the rollups from the copied samples)."""
    dst = Store(src.dsn, database=database)
    dst.migrate()
    rows = src.query_rows(
        "SELECT name, engine FROM system.tables WHERE database = {db:String}",
        {"db": src.database},
    )
    views = {n for n, e in rows if e == "MaterializedView"}
    targets = {v.removesuffix("_mv") for v in views}
    for name, _engine in rows:
        if name in views or name in targets or name in OUTPUTS or name == "schema_migrations":
            continue
        src.client.command(
            f"INSERT INTO `{database}`.`{name}` SELECT * FROM `{src.database}`.`{name}`"
        )
    return dst


def outputs(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """What a mode wrote, in a comparable order."""
    db = f"`{store.database}`"
    got = {}
    for table in ("findings", "incidents", "incident_findings"):
        # updated_at: when the row was written (wall clock), not what it says
        got[table] = store.query_rows(
            f"SELECT * EXCEPT (updated_at) FROM {db}.`{table}` FINAL ORDER BY ALL"
        )
    got["attributed_flows"] = store.query_rows(f"SELECT * FROM {db}.attributed_flows ORDER BY ALL")
    cols = store.query_rows(
        "SELECT name, type FROM system.columns WHERE database = {db:String} "
        "AND table = 'job_port_intervals' ORDER BY position",
        {"db": store.database},
    )
    keys = [f"`{n}`" for n, t in cols if not t.startswith(("UInt", "Int", "Float"))]
    sums = [f"sum(`{n}`)" for n, t in cols if t.startswith(("UInt", "Int", "Float"))]
    got["job_port_intervals"] = store.query_rows(
        f"SELECT {', '.join(keys + sums)} FROM {db}.job_port_intervals "
        f"GROUP BY {', '.join(keys)} ORDER BY ALL"
    )
    return got


def staged(corr: Any, counter: Counter) -> None:
    """Count `corr`'s statements per detector: each detector's forms (per tick and set-based)
    set the counter's stage while they run."""

    def wrap(name: str, fn: Callable[..., Any] | None) -> Callable[..., Any] | None:
        if fn is None:
            return None

        def run(ctx: Any) -> Any:
            counter.stage = name
            try:
                return fn(ctx)
            finally:
                counter.stage = "engine"

        return run

    corr.detectors = [
        dataclasses.replace(d, fn=wrap(d.name, d.fn), over=wrap(d.name, d.over))
        for d in corr.detectors
    ]


@contextmanager
def counting(counter: Counter) -> Iterator[list[int]]:
    before = counter.n
    box = [0]
    yield box
    box[0] = counter.n - before


def main() -> None:
    from telemetry.correlate.engine import Correlator, ticks

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="small")
    ap.add_argument("--nodes", type=int, help="GPU servers (default: the scenario's)")
    ap.add_argument("--minutes", type=float, help="simulated minutes (default: the scenario's)")
    ap.add_argument("--follow-ticks", type=int, default=8, help="live ticks timed (median)")
    ap.add_argument("--modes", default="per_tick,set_based")
    a = ap.parse_args()
    # the embedded engine keeps writing under its path until the process ends: what it still
    # writes there while the folder is removed is left, never a traceback after the figures
    with tempfile.TemporaryDirectory(prefix="bench-engine-", ignore_cleanup_errors=True) as tmp:
        dsn = f"chdb://{tmp}/store"
        t = time.perf_counter()
        sim = ingest(dsn, a.scenario, a.nodes, a.minutes, Path(tmp))
        ingest_s = time.perf_counter() - t
        src = Store(dsn, database="bench_source")
        counter = Counter(src.client)
        start = datetime.fromtimestamp(sim.start_ms / 1000, UTC)
        end = datetime.fromtimestamp(sim.end_ms / 1000, UTC)
        seconds: dict[str, float] = {}
        cpu: dict[str, float] = {}  # process CPU: the engine's threads are in this process
        statements: dict[str, float] = {}
        by_stage: dict[str, dict[str, float]] = {}
        wrote: dict[str, Any] = {}
        n_ticks = 0
        for mode in a.modes.split(","):
            store = copy_of(src, f"bench_{mode}_{uuid.uuid4().hex[:6]}")
            corr = Correlator(store, per_tick=mode == "per_tick")
            staged(corr, counter)
            counter.by_stage.clear()
            with counting(counter) as n:
                t, cpu0 = time.perf_counter(), time.process_time()
                res = corr.run(start, end)
                seconds[mode] = time.perf_counter() - t
                cpu[mode] = round(time.process_time() - cpu0, 2)
            n_ticks = res.windows + res.skipped
            statements[mode] = round(n[0] / max(n_ticks, 1), 1)
            by_stage[mode] = {
                k: round(v / max(n_ticks, 1), 2) for k, v in counter.by_stage.most_common(8)
            }
            wrote[mode] = outputs(store)
            print(
                f"{mode}: {seconds[mode]:.2f} s ({cpu[mode]} CPU-s), {n_ticks} ticks, {n[0]} statements, "
                f"{len(res.findings)} findings, failed {sorted(res.failed)}",
                flush=True,
            )
        modes = list(wrote)
        identical = all(wrote[m] == wrote[modes[0]] for m in modes)
        if not identical:
            for table in wrote[modes[0]]:
                a0, b0 = wrote[modes[0]][table], wrote[modes[-1]][table]
                if a0 != b0:
                    print(f"differs: {table}: {len(a0)} vs {len(b0)} rows", flush=True)
                    sa, sb = set(a0), set(b0)
                    print("  only per_tick:", sorted(sa - sb)[:3])
                    print("  only set_based:", sorted(sb - sa)[:3])
        # one live tick: the last ticks of a copy correlated up to them, one at a time
        store = copy_of(src, f"bench_follow_{uuid.uuid4().hex[:6]}")
        corr = Correlator(store)
        ts = list(ticks(start, end, corr.interval))
        live = ts[-a.follow_ticks :]
        corr.run(start, live[0] - timedelta(seconds=corr.interval))
        took, took_cpu = [], []
        with counting(counter) as n:
            for tick in live:
                t, cpu0 = time.perf_counter(), time.process_time()
                corr.rejudge(tick)
                corr.evaluate(tick)
                took.append((time.perf_counter() - t) * 1000)
                took_cpu.append((time.process_time() - cpu0) * 1000)
        per, setb = seconds.get("per_tick"), seconds.get("set_based")
        report(
            {
                "scenario": a.scenario,
                "nodes": len(sim.fabric.nodes),
                "ticks": n_ticks,
                "ingest_s": round(ingest_s, 2),
                "per_tick_s": round(per, 2) if per else None,
                "set_based_s": round(setb, 2) if setb else None,
                "speedup": round(per / setb, 2) if per and setb else None,
                "cpu_s": cpu,
                "cpu_speedup": (
                    round(cpu["per_tick"] / cpu["set_based"], 2)
                    if cpu.get("per_tick") and cpu.get("set_based")
                    else None
                ),
                "statements_per_tick": statements,
                "statements_per_tick_top": by_stage,  # the 8 stages sending the most
                "identical": identical,
                "follow_tick_ms": round(statistics.median(took[1:] or took), 1),
                "follow_tick_cpu_ms": round(statistics.median(took_cpu[1:] or took_cpu), 1),
                "follow_statements_per_tick": round(n[0] / len(live), 1),
            },
        )


if __name__ == "__main__":
    main()
