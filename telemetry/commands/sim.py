"""cluster simulator: run, score, scenarios, render

Run the cluster simulator into a store, score findings against its ground truth, list and show
scenarios, and render small scenarios as device files.

  railscope sim run --scenario small --data DIR       simulate + ingest, write DIR/ground_truth.json
  railscope sim score --data DIR                      precision / recall / localization per fault kind
  railscope sim scenarios                             built-in scenarios
  railscope sim show SCENARIO                         the validated scenario as YAML
  railscope sim render --scenario small --out DIR     device path: what real devices would show
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from telemetry.commands.common import (
    Verb,
    add_json_arg,
    add_out_arg,
    add_store_args,
    add_timing_arg,
    arg,
    store_from_args,
)
from telemetry.errors import UserError
from telemetry.sinks.configured import clickhouse_sink


def _scenario_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scenario", default="small", help="built-in scenario name or YAML file (default small)"
    )
    p.add_argument("--seed", type=int, help="random seed (default: the scenario's)")
    p.add_argument("--minutes", type=float, help="simulated minutes (default: the scenario's)")
    p.add_argument("--nodes", type=int, help="GPU servers (default: the scenario's)")
    p.add_argument("--start", help="pin the start time (ISO with zone); default: the run ends now")
    add_timing_arg(p)


def _target_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data", help="directory: embedded store DATA/store, ground truth DATA/ground_truth.json"
    )
    add_store_args(p)
    p.add_argument(
        "--ground-truth",
        dest="ground_truth",
        help="ground-truth file (default DATA/ground_truth.json or ./ground_truth.json with --dsn)",
    )


def _paths(args: argparse.Namespace) -> tuple[dict[str, Any], Path]:
    over: dict[str, Any] = {}
    if args.data and args.dsn:
        raise UserError("give --data or --dsn, not both")
    if args.data:
        data = Path(args.data).resolve()
        over = {"store__dsn": f"chdb://{data / 'store'}", "sink__spool_dir": str(data / "spool")}
        truth = Path(args.ground_truth) if args.ground_truth else data / "ground_truth.json"
    else:
        truth = Path(args.ground_truth or "ground_truth.json")
    return over, truth


def _load(args: argparse.Namespace) -> Any:
    from telemetry.sim import build
    from telemetry.sim.scenario import load_scenario

    sc = load_scenario(args.scenario).with_overrides(
        seed=args.seed, minutes=args.minutes, nodes=args.nodes, start=args.start, timing=args.timing
    )
    return build(sc)


def _run(args: argparse.Namespace) -> int:
    from telemetry.sim.run import fingerprint, ingest
    from telemetry.transforms import build_transforms

    over, truth_path = _paths(args)
    sim = _load(args)
    if args.through_parsers:
        from telemetry.sim.through_parsers import check_size

        check_size(sim)
    cfg, store = store_from_args(args, **over)

    def progress(done: int, total: int, rows: int) -> None:
        unit = "step" if args.through_parsers else "chunk"
        print(f"\r  {unit} {done}/{total}, {rows:,} records", end="", file=sys.stderr, flush=True)

    res = ingest(
        sim,
        [clickhouse_sink(cfg, store)],
        build_transforms(cfg),
        progress=progress,
        through_parsers=cfg if args.through_parsers else None,
    )
    print(file=sys.stderr)
    # after the steps: the truth includes what the workload did by itself (natural collisions)
    sim.ground_truth().write(truth_path)
    print(
        f"scenario {sim.scenario.name} seed {sim.scenario.seed}: {res.rows:,} records in {res.seconds:.1f}s "
        f"({res.rows / max(res.seconds, 1e-9):,.0f}/s) into {store.dsn.redacted()}"
    )
    print(
        f"ground truth: {truth_path} ({len(sim.faults)} faults); fingerprint {fingerprint(store, sim, cfg.cluster)}"
    )
    return 0


def _score(args: argparse.Namespace) -> int:
    from telemetry.sim.model import GroundTruth
    from telemetry.sim.score import read_findings, read_incidents, render, score, score_incidents

    over, truth_path = _paths(args)
    truth = GroundTruth.read(truth_path)
    cfg, store = store_from_args(args, reading=True, **over)
    findings = read_findings(store, cfg.cluster, truth.start_ms, truth.end_ms)
    result = score(truth, findings, tolerance_s=args.tolerance)
    if findings:
        roots = read_incidents(store, cfg.cluster, truth.start_ms, truth.end_ms)
        result.incidents = score_incidents(truth, roots, tolerance_s=args.tolerance)
    if args.json:
        print(json.dumps(result.to_json(), sort_keys=True))
    else:
        print(render(result, truth))
    return 0


def _scenarios(args: argparse.Namespace) -> int:
    from telemetry.sim.scenario import builtin_names, load_scenario

    for name in builtin_names():
        sc = load_scenario(name)
        print(
            f"{name:<12} {sc.total_servers:>5} servers  {sc.duration_minutes:>5g} min  {len(sc.faults):>2} faults  {sc.description}"
        )
    return 0


def _show(args: argparse.Namespace) -> int:
    import yaml

    from telemetry.sim.scenario import load_scenario

    print(yaml.safe_dump(load_scenario(args.scenario).model_dump(), sort_keys=False), end="")
    return 0


def _render(args: argparse.Namespace) -> int:
    from telemetry.sim.render import render_devices
    from telemetry.sim.through_parsers import check_size

    sim = _load(args)
    check_size(sim)
    written = render_devices(sim, Path(args.out), step=args.step)
    for kind, n in sorted(written.items()):
        print(f"  {kind:<12} {n} file(s)")
    print(f"device files in {Path(args.out).resolve()} (formats: docs/simulator.md)")
    return 0


# `railscope sim VERB` (registered by telemetry.cli)
VERBS = [
    Verb(
        "run",
        "simulate a scenario and ingest it through the pipeline",
        _run,
        [
            _scenario_args,
            _target_args,
            arg(
                "--through-parsers",
                action="store_true",
                help="render every step as device files and ingest them through the real sources "
                "(slower; scenarios up to 64 servers)",
            ),
        ],
    ),
    Verb(
        "score",
        "compare stored findings with the ground truth",
        _score,
        [
            _target_args,
            arg(
                "--tolerance",
                type=float,
                default=60.0,
                metavar="SECONDS",
                help="a finding may start/end this long outside the fault's window (default 60)",
            ),
            lambda p: add_json_arg(p, "the score (one object)"),
        ],
    ),
    Verb("scenarios", "list the built-in scenarios", _scenarios),
    Verb(
        "show",
        "print a scenario after validation (defaults filled in)",
        _show,
        [arg("scenario", help="built-in name or YAML file")],
    ),
    Verb(
        "render",
        "write what real devices would show at one step (sysfs, ethtool, NVML, SONiC, "
        "sFlow pcap, kubectl JSON, HDFS logs/fsck/JMX) for a small scenario",
        _render,
        [
            _scenario_args,
            lambda p: add_out_arg(p, "directory to write the device files into"),
            arg("--step", type=int, help="which simulated step to render (default: the last)"),
        ],
    ),
]
