"""simulate a cluster with faults, ingest, correlate and score (embedded store)

The README's main job. Simulates a cluster (two scalable units, a data-center pair, ten minutes,
one fault of every kind by default), sends it through the real pipeline into an embedded store,
runs the correlation engine, and scores its findings against the ground truth written next to
the data (DATA/ground_truth.json).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

from telemetry.commands.common import (
    add_command,
    add_timing_arg,
    config_from_args,
    open_store,
)
from telemetry.sinks.configured import clickhouse_sink


def register(sub: Any) -> list[str]:
    p = add_command(sub, "demo", __doc__)
    p.add_argument(
        "--data",
        default="./demo-data",
        help="directory for the store and ground truth (default ./demo-data)",
    )
    p.add_argument(
        "--scenario",
        default="small",
        help="built-in scenario name or a scenario YAML file (default small)",
    )
    p.add_argument("--nodes", type=int, help="GPU servers (default: the scenario's, 32 for small)")
    p.add_argument(
        "--minutes", type=float, help="simulated minutes (default: the scenario's, 10 for small)"
    )
    p.add_argument(
        "--seed", type=int, help="random seed (same seed, same data; default: the scenario's)"
    )
    p.add_argument(
        "--start", help="pin the simulated start (ISO, e.g. 2026-01-01T00:00:00Z); default: end now"
    )
    add_timing_arg(p)
    p.add_argument(
        "--keep", action="store_true", help="keep existing data in --data instead of starting fresh"
    )
    p.add_argument(
        "--through-parsers",
        action="store_true",
        help="render every step as device files and ingest them through the real sources "
        "(slower; scenarios up to 64 servers); default: records straight from the simulator",
    )
    p.set_defaults(func=run)
    return ["demo"]


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from telemetry.sim import build
    from telemetry.sim.run import fingerprint
    from telemetry.sim.scenario import load_scenario

    con = Console(highlight=False, soft_wrap=True)
    sc = load_scenario(args.scenario).with_overrides(
        seed=args.seed, minutes=args.minutes, nodes=args.nodes, start=args.start, timing=args.timing
    )
    if sc.start:  # before anything is stored: rows the TTL would drop are refused in one line
        from telemetry.errors import UserError
        from telemetry.store.retention import outlived
        from telemetry.times import parse_time

        why = outlived(
            parse_time(sc.start, what="--start"),
            sc.duration_minutes,
            config_from_args(args).store.ttl_days,
        )
        if why:
            raise UserError(f"demo: --start {sc.start} is {why}; give a later --start, or none")
    sim = build(sc)
    if args.through_parsers:
        from telemetry.sim.through_parsers import check_size

        check_size(sim)
    data = Path(args.data).resolve()
    if not args.keep and data.exists():
        if (data / "store").exists() or (data / "ground_truth.json").exists():
            shutil.rmtree(data)
        elif any(data.iterdir()):
            from telemetry.errors import UserError

            raise UserError(
                f"--data {data}: exists and is not a railscope demo directory; choose another"
            )
    cfg = config_from_args(
        args, store__dsn=f"chdb://{data / 'store'}", sink__spool_dir=str(data / "spool")
    )
    fab = sim.fabric
    con.print(
        f"[bold]railscope demo[/]: scenario [cyan]{sc.name}[/] seed {sc.seed}: {len(fab.nodes)} GPU servers "
        f"({len(fab.nodes) * fab.gpus_per_node} GPUs, {fab.nics_per_node} NICs each) in "
        f"{len({n.su_global for n in fab.nodes})} SUs, {len(sc.fabric.idcs)} IDCs, {len(fab.switches)} switches; "
        f"{sc.duration_minutes:g} min at {sc.resolution_seconds} s, {sc.telemetry.profile} timing; "
        f"{len([f for f in sim.faults if f.origin == 'injected'])} faults"
    )
    store = open_store(cfg, migrate=True)
    result = _ingest(sim, cfg, store, con, through_parsers=args.through_parsers)
    # after the steps: the truth includes what the workload did by itself (natural collisions)
    truth_path = sim.ground_truth().write(data / "ground_truth.json")
    con.print(
        f"  stored {result.rows:,} records in {result.seconds:.1f}s ({result.rows / max(result.seconds, 1e-9):,.0f}/s)"
    )
    for kind, n in sorted(result.rows_by_kind.items(), key=lambda kv: -kv[1]):
        con.print(f"    {kind:<22} {n:>10,}")
    con.print(f"  data in {data}: embedded store {data / 'store'}, cluster {cfg.cluster!r}")
    con.print(
        f"  data fingerprint {fingerprint(store, sim, cfg.cluster)} (same scenario and seed -> same fingerprint)"
    )
    con.print(f"\n[bold]ground truth[/] ({truth_path}):")
    for f in sorted(sim.ground_truth().faults, key=lambda f: (f.start_ms, f.kind)):
        start = (f.start_ms - sim.start_ms) / 60000
        end = (f.end_ms - sim.start_ms) / 60000
        tag = {
            "injected": "",
            "consequence": f" (caused by {f.detail.get('cause') or 'load'})",
        }.get(f.origin, " (by the workload)")
        if not f.scored:
            tag += ", not scored (too close to a threshold, or nothing could show it)"
        con.print(f"  {start:5.1f}-{end:<5.1f} min  {f.kind:<23} {f.subject}{tag}")
    scored = _correlate(sim, cfg, store, con)
    dsn = f"chdb://{data / 'store'}"
    con.print("\n[bold]next[/]:")
    con.print(
        f"  railscope sim score --data {data}            # precision/recall/localization vs the ground truth"
    )
    con.print(f"  RAILSCOPE_DSN={dsn} railscope db status")
    if scored:
        con.print(f"  RAILSCOPE_DSN={dsn} railscope findings")
    con.print(
        f"  railscope demo --scenario multi-idc --data {data}-multi   # other scenarios: railscope sim scenarios"
    )
    return 0


def _ingest(sim: Any, cfg: Any, store: Any, con: Any, *, through_parsers: bool = False) -> Any:
    from telemetry.commands.progress import Progress
    from telemetry.sim.run import ingest
    from telemetry.transforms import build_transforms

    label = "simulate + render + parse" if through_parsers else "simulate + ingest"
    with Progress(con, label, "steps" if through_parsers else "chunks") as prog:
        return ingest(
            sim,
            [clickhouse_sink(cfg, store)],
            build_transforms(cfg),
            progress=lambda done, total, rows: prog.update(done, total, f"{rows:,} records"),
            through_parsers=cfg if through_parsers else None,
        )


def _correlate(sim: Any, cfg: Any, store: Any, con: Any) -> bool:
    """Run the correlation engine over the simulated window when it is built; score its findings."""
    from datetime import UTC, datetime

    from telemetry.commands.progress import Progress
    from telemetry.sim.score import read_findings, read_incidents, render, score, score_incidents

    try:
        from telemetry.correlate.engine import Correlator
    except ImportError:
        con.print(
            "\n[bold]correlation[/]: the correlation engine is not built yet; nothing to score. "
            "The ground truth above is what it should find."
        )
        return False
    start = datetime.fromtimestamp(sim.start_ms / 1000, UTC)
    end = datetime.fromtimestamp(sim.end_ms / 1000, UTC)
    try:
        with Progress(con, "correlate", "ticks") as prog:
            res = Correlator(store, cluster=cfg.cluster).run(start, end, progress=prog.update)
    except Exception as e:  # the engine is another component: report it, keep the demo's data
        con.print(
            f"\n[bold red]correlation failed[/]: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        )
        return False
    con.print(
        f"\n[bold]correlation[/]: {res.windows} window(s), {len(res.findings)} finding(s)"
        + (f"; detectors failed: {', '.join(sorted(res.failed))}" if res.failed else "")
    )
    truth = sim.ground_truth()
    result = score(truth, read_findings(store, cfg.cluster, sim.start_ms, sim.end_ms))
    # what a person is paged for: the incidents, scored by their root finding
    roots = read_incidents(store, cfg.cluster, sim.start_ms, sim.end_ms)
    result.incidents = score_incidents(truth, roots)
    con.print(render(result, truth), markup=False)
    return True
