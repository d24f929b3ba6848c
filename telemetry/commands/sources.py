"""The one CLI convention every source follows:

  railscope SOURCE [--once] [--from PATH] [--output prom|jsonl] [--dsn DSN] [source flags]

--once: one live cycle; --from: a capture in the source's real format instead of the live source;
--output: print what was collected instead of writing to the store; --dsn: the store.
Without --once/--from the source runs on an interval and serves /metrics.
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
from functools import partial
from typing import Any

from telemetry.commands.common import (
    add_store_args,
    clickhouse_sink,
    config_from_args,
    open_store,
    write_output,
)
from telemetry.errors import UserError
from telemetry.pipeline import SOURCES, Pipeline, SourceSpec
from telemetry.transforms import build_transforms

log = logging.getLogger(__name__)


def add_source_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("common source options")
    g.add_argument(
        "--once", action="store_true", help="collect one cycle from the live source and exit"
    )
    g.add_argument(
        "--from",
        dest="from_path",
        metavar="PATH",
        help="read a captured file/directory in the source's real format instead of the live source",
    )
    g.add_argument(
        "--output",
        choices=["prom", "jsonl"],
        help="print what was collected (Prometheus text or one JSON object per record) instead of storing it",
    )
    add_store_args(g)  # type: ignore[arg-type]
    g.add_argument(
        "--interval",
        type=float,
        metavar="SECONDS",
        help="collection interval (default from config, 10 s)",
    )
    g.add_argument(
        "--listen", metavar="HOST:PORT", help="serve /metrics here (default 0.0.0.0:9580)"
    )
    g.add_argument("--no-metrics", action="store_true", help="do not serve /metrics")


def register(sub: Any) -> list[str]:
    names = []
    for spec in SOURCES.values():
        p = sub.add_parser(
            spec.command,
            help=spec.help,
            description=(spec.cls.__doc__ or spec.help).strip(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        add_source_args(p)
        adder = getattr(spec.cls, "add_arguments", None)
        if adder:
            adder(p)
        p.set_defaults(func=partial(run_source, spec))
        names.append(spec.command)
    return names


def run_source(spec: SourceSpec, args: argparse.Namespace) -> int:
    cfg = config_from_args(args, interval_seconds=args.interval, prometheus__listen=args.listen)
    # A source may own extra verbs (e.g. `railscope inventory who IP --at T`): it returns an exit
    # code when it handled the invocation, None to run as a source.
    handler = getattr(spec.cls, "run_subcommand", None)
    if handler is not None:
        rc = handler(args, cfg)
        if rc is not None:
            return int(rc)
    source = spec.cls.from_args(args, cfg)
    one_shot = bool(args.once or args.from_path)
    if args.output:
        stamp = build_transforms(cfg)
        try:
            collected = source.collect()
        except UserError:
            raise
        except Exception:  # already logged by the source with its input named
            print(
                f"railscope {spec.command}: collection failed: {source.stats.last_error}",
                file=sys.stderr,
            )
            return 1
        finally:
            closer = getattr(source, "close", None)
            if closer is not None:
                closer()
        batches = [Pipeline([], [], stamp).apply_transforms(b) for b in collected]
        write_output(batches, args.output, components=[source.stats])
        return 0
    store = open_store(cfg)
    sinks: list[Any] = [clickhouse_sink(cfg, store)]
    prom = None
    if not one_shot and not args.no_metrics and cfg.prometheus.enabled:
        from telemetry.sinks.prometheus import PrometheusSink

        pipeline_ref: list[Pipeline] = []
        prom = PrometheusSink(
            components=lambda: pipeline_ref[0].components() if pipeline_ref else []
        )
        sinks.append(prom)
    pipeline = Pipeline(
        [source], sinks, transforms=build_transforms(cfg), report_host=socket.gethostname()
    )
    if prom is not None:
        pipeline_ref.append(pipeline)
        host, _, port = cfg.prometheus.listen.rpartition(":")
        bound = prom.serve(host, int(port))
        log.info("serving /metrics on %s:%s", *bound)
    try:
        if one_shot:
            n = pipeline.run_once()
            if (
                not source.stats.last_success
            ):  # the pipeline keeps going; a one-shot run must say so
                print(
                    f"railscope {spec.command}: collection failed: {source.stats.last_error}",
                    file=sys.stderr,
                )
                return 1
            log.info("%s: stored %d records in %s", spec.command, n, store.dsn.redacted())
        else:
            log.info(
                "%s: collecting every %.1fs into %s",
                spec.command,
                cfg.interval_seconds,
                store.dsn.redacted(),
            )
            pipeline.run(cfg.interval_seconds)
    finally:
        pipeline.close()
    return 0
