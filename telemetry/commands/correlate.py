"""run the correlation engine over a time range

Evaluate every detector every sliding.interval_seconds over its own trailing window (thresholds
in telemetry/correlate/thresholds.yaml) and store findings: a finding opens when its condition
first holds and closes after sliding.hysteresis_seconds without. Batch (--since/--until) and
--follow evaluate the same ticks; re-running a range is idempotent.

`railscope findings` (same module) lists the stored findings.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timedelta
from typing import Any

from telemetry.commands.common import (
    add_command,
    add_lag_arg,
    add_listen_arg,
    add_listing_args,
    add_range_args,
    add_store_args,
    print_listing,
    store_from_args,
)
from telemetry.errors import UserError
from telemetry.times import parse_time


def time_range(corr: Any, since: str | None, until: str | None) -> tuple[datetime, datetime] | None:
    """--since/--until, each defaulting to the start/end of the stored data; None when neither is
    given and the store holds nothing the detectors read."""
    if since and until:
        start, end = parse_time(since), parse_time(until)
    else:
        span = corr.data_span()
        if span is None:
            return None
        start = parse_time(since) if since else span[0]
        end = parse_time(until) if until else span[1] + timedelta(milliseconds=1)
    if end <= start:
        raise UserError(f"--until ({end.isoformat()}) is not after --since ({start.isoformat()})")
    return start, end


def register(sub: Any) -> list[str]:
    c = add_command(sub, "correlate", __doc__)
    add_range_args(c)
    c.add_argument(
        "--only", action="append", metavar="DETECTOR", help="run only these detectors (repeatable)"
    )
    c.add_argument(
        "--follow",
        action="store_true",
        help="keep running: evaluate each tick as the clock passes it (plus --lag), serve findings on /metrics",
    )
    add_lag_arg(c, "with --follow: ")
    c.add_argument(
        "--per-tick",
        action="store_true",
        help="debug: evaluate every detector tick by tick and attribute flows once per tick "
        "(the oracle of the set-based path; same findings, slower)",
    )
    c.add_argument(
        "--cycles",
        type=int,
        metavar="N",
        help="with --follow: stop after N ticks (default: run until stopped)",
    )
    add_listen_arg(c, "with --follow: ")
    add_store_args(c)
    c.set_defaults(func=run_correlate)

    f = sub.add_parser("findings", help="list findings from the store")
    f.add_argument("--kind", action="append", help="only these kinds (repeatable)")
    f.add_argument("--subject", help="subject contains this text")
    add_listing_args(f)
    add_store_args(f)
    f.set_defaults(func=run_findings)
    return ["correlate", "findings"]


def run_correlate(args: argparse.Namespace) -> int:
    from telemetry.correlate import Correlator

    cfg, store = store_from_args(args, reading=True)
    corr = Correlator(
        store,
        cluster=cfg.cluster,
        thresholds=cfg.correlate.thresholds,
        only=args.only,
        per_tick=args.per_tick,
    )
    if args.follow:
        return follow(corr, cfg, args)
    rng = time_range(corr, args.since, args.until)
    if rng is None:
        print("correlate: the store holds no data the detectors read; nothing to do")
        return 0
    start, end = rng
    from rich.console import Console

    from telemetry.commands.progress import Progress

    # progress on stderr: a bar on a terminal, a line every few seconds in a log
    with Progress(Console(stderr=True, highlight=False), "correlate", "ticks") as prog:
        res = corr.run(start, end, progress=prog.update)
    kinds: dict[str, int] = {}
    for f in res.findings:
        kinds[f.kind] = kinds.get(f.kind, 0) + 1
    print(
        f"correlated {res.windows} evaluation(s) {start:%Y-%m-%d %H:%M}Z .. {end:%Y-%m-%d %H:%M}Z "
        f"({res.skipped} tick(s) where nothing changed carried over): "
        f"{len({f.finding_id for f in res.findings})} finding(s)"
    )
    for k, n in sorted(kinds.items()):
        print(f"  {k:<24} {n}")
    for name, err in res.failed.items():
        print(f"  detector {name} FAILED: {err}", file=sys.stderr)
    return 1 if res.failed else 0


def run_findings(args: argparse.Namespace) -> int:
    from telemetry.correlate import findings as fstore

    _, store = store_from_args(args, reading=True)
    rows = fstore.read(
        store,
        kinds=args.kind,
        since=parse_time(args.since) if args.since else None,
        subject_like=f"%{args.subject}%" if args.subject else None,
        limit=args.limit,
    )
    print_listing(
        rows,
        args.format,
        "findings",
        lambda r: r,
        fstore.findings_prometheus,
        lambda r: (
            f"{r['severity']:<8} {r['kind']:<24} {r['subject']:<36} "
            f"{r['last_seen']:%Y-%m-%d %H:%M}Z  {r['summary']}"
        ),
    )
    return 0


def follow(corr: Any, cfg: Any, args: argparse.Namespace, on_cycle: Any = None) -> int:
    """Evaluate every tick live (telemetry.correlate.engine.follow on the wall clock); serve
    /metrics (findings + detector self-metrics). `on_cycle(host, port)` is called after each
    tick (tests scrape there); --cycles N stops after N ticks."""
    import logging
    import threading

    from telemetry.correlate import alertmanager
    from telemetry.correlate import findings as fstore
    from telemetry.correlate.engine import follow as follow_engine
    from telemetry.sinks.prometheus import PrometheusSink

    log = logging.getLogger("railscope.correlate")
    alerts = alertmanager.build(cfg)
    sink = PrometheusSink(
        components=lambda: [
            corr.attribution_stats,
            *corr.stats.values(),
            corr.incidents.stats,
            *([alerts.stats] if alerts else []),
        ]
    )
    sink.registry.register(fstore.FindingsCollector(corr.store, corr.cluster, corr.hysteresis))  # type: ignore[arg-type]
    host, _, port = (args.listen or cfg.prometheus.listen).rpartition(":")
    bound = sink.serve(host, int(port), **cfg.prometheus.server_options())
    log.info(
        "evaluating every %.0fs (lag %.0fs); findings on http://%s:%s/metrics",
        corr.interval,
        args.lag,
        *bound,
    )
    stop = threading.Event()
    cycles = 0

    def tick(_corr: Any, _t: datetime, _res: Any) -> None:
        nonlocal cycles
        cycles += 1
        if alerts is not None:
            alerts.on_cycle(_corr, _t, _res)
        if on_cycle is not None:
            on_cycle(*bound)
        if args.cycles is not None and cycles >= args.cycles:
            stop.set()

    try:
        follow_engine(corr.store, cfg, stop, corr=corr, lag_seconds=args.lag, on_cycle=tick)
    except KeyboardInterrupt:
        pass
    finally:
        if alerts is not None:
            alerts.close()
        sink.close()
    return 0
