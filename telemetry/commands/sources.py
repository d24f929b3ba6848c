"""The one CLI convention every source follows:

  railscope SOURCE [--once] [--from PATH] [--output prom|jsonl] [--dsn DSN] [source flags]

--once: one live cycle; --from: a capture in the source's real format instead of the live source;
--output: print one cycle's records instead of writing to the store; --dsn: the store.
Without --once/--from the source runs on an interval and serves /metrics.

The flags are folded into the source's config section (`sources.<name>`) and the source is built
by `telemetry.registry.build_source`, the same function `railscope serve` uses.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from functools import partial
from typing import Any

from pydantic import ValidationError

from telemetry.catalog import SOURCES, entry
from telemetry.commands.common import (
    add_from_arg,
    add_listen_arg,
    add_store_args,
    config_from_args,
    open_store,
    write_output,
)
from telemetry.config import Config, format_validation_error
from telemetry.contracts import Source
from telemetry.errors import ConfigError, UserError
from telemetry.pipeline import Pipeline
from telemetry.registry import build_source
from telemetry.sinks.configured import (
    clickhouse_sink,
    configured_pipeline,
    extra_sinks,
    serve_metrics,
)
from telemetry.transforms import build_transforms

log = logging.getLogger(__name__)


def add_source_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("common source options")
    g.add_argument(
        "--once", action="store_true", help="collect one cycle from the live source and exit"
    )
    add_from_arg(
        g,
        "read a captured file/directory in the source's real format instead of the live source",
        metavar="PATH",
    )
    g.add_argument(
        "--output",
        choices=["prom", "jsonl"],
        help="print what was collected (Prometheus text or one JSON object per record) instead of storing it",
    )
    g.add_argument(
        "--keep",
        action="store_true",
        help="with --from: keep rows older than their table's TTL, which a replay otherwise "
        "refuses before storing anything; the table's TTL is lengthened by the capture's age, so "
        "the rows are kept for the TTL counted from this load (docs/replay.md)",
    )
    add_store_args(g)  # type: ignore[arg-type]
    g.add_argument(
        "--interval",
        type=float,
        metavar="SECONDS",
        help="collection interval (default from config, 10 s)",
    )
    add_listen_arg(g)
    g.add_argument("--no-metrics", action="store_true", help="do not serve /metrics")


def register(sub: Any, only: str | None = None) -> list[str]:
    """A command per source (`only`: that source's alone)."""
    for e in SOURCES.values():
        if only is not None and e.name != only:
            continue
        cls = e.load()
        p = sub.add_parser(
            e.name,
            help=e.help,
            description=(cls.__doc__ or e.help).strip(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        add_source_args(p)
        adder = getattr(cls, "add_arguments", None)
        if adder:
            adder(p)
        p.set_defaults(func=partial(run_source, e.name))
    return list(SOURCES)


def config_for(name: str, args: argparse.Namespace, cfg: Config | None = None) -> Config:
    """The config (file, env, then `cfg` or the global flags) with this command line's source
    flags folded into `sources.<name>`: flags are one more layer of the section."""
    if cfg is None:
        cfg = config_from_args(
            args,
            interval_seconds=getattr(args, "interval", None),
            prometheus__listen=getattr(args, "listen", None),
        )
    section = dict(cfg.sources.get(name) or {})
    fold = getattr(entry(name).load(), "fold_args", None)
    if fold is not None:
        section = fold(args, section)
    if getattr(args, "from_path", None):
        section.pop("from_path", None)
        section["from"] = args.from_path
    try:  # the file and env were valid: a failure here is a flag's value
        entry(name).config_model().model_validate(section)
    except ValidationError as e:
        raise ConfigError(
            format_validation_error(e, prefix=f"sources.{name}", source=f"{name} options")
        ) from None
    return cfg.model_copy(update={"sources": {**cfg.sources, name: section}})


def source_from_args(args: argparse.Namespace, cfg: Config | None = None) -> Source:
    """What `railscope SOURCE ...` builds: `args.command`'s flags folded into its config
    section, then `build_source` (the one way to build a source)."""
    name = args.command
    cfg = config_for(name, args, cfg)
    return build_source(name, cfg, once=_one_shot(name, args, cfg))


def _one_shot(name: str, args: argparse.Namespace, cfg: Config) -> bool:
    return bool(args.once or args.output or cfg.source(name).from_path)


def run_source(name: str, args: argparse.Namespace) -> int:
    cfg = config_for(name, args)
    # A source may own extra verbs (e.g. `railscope inventory who IP --at T`): it returns an exit
    # code when it handled the invocation, None to run as a source.
    handler = getattr(entry(name).load(), "run_subcommand", None)
    if handler is not None:
        rc = handler(args, cfg, lambda: open_store(cfg))
        if rc is not None:
            return int(rc)
    one_shot = _one_shot(name, args, cfg)
    source: Any = build_source(name, cfg, once=one_shot)
    if args.output:
        stamp = build_transforms(cfg)
        try:
            collected = source.collect()
        except UserError:
            raise  # one line: the input named and what is wrong with it
        except Exception:
            print(
                f"railscope {name}: collection failed: {source.stats.last_error}",
                file=sys.stderr,
            )
            return 1
        finally:
            closer = getattr(source, "close", None)
            if closer is not None:
                closer()
        batches = [Pipeline([], [], stamp).apply_transforms(b) for b in collected]
        write_output(batches, args.output, components=[source.stats])
        if not source.stats.last_success:  # e.g. a truncated capture: printed, but it says so
            print(f"railscope {name}: {source.stats.last_error}", file=sys.stderr)
            return 1
        return 0
    store = open_store(cfg)
    bind = getattr(source, "bind_store", None)
    if bind is not None:  # e.g. inventory seeds its open facts from the store
        bind(store)
    admit = None
    if cfg.source(name).from_path:  # a capture: its rows are checked against the TTLs first
        from telemetry.store.retention import ReplayAdmission

        admit = ReplayAdmission(
            store, what=f"{name} --from {cfg.source(name).from_path}", keep=args.keep
        )
    pipeline, prom = configured_pipeline(
        cfg,
        [source],
        [clickhouse_sink(cfg, store), *extra_sinks(cfg)],
        metrics=not one_shot and not args.no_metrics and cfg.prometheus.enabled,
        admit=admit,
    )
    if prom is not None:
        log.info("serving /metrics on %s:%s", *serve_metrics(prom, cfg))
    if not one_shot:
        try:
            return _run_until_signalled(name, pipeline, source, cfg, store)
        finally:
            if prom is not None:
                prom.close()
    try:
        n = pipeline.run_once()
        if not source.stats.last_success:  # logged by the pipeline (one line); exit non-zero
            return 1
        for table, days in sorted((admit.lengthened if admit else {}).items()):
            log.warning("%s: --keep: %s now keeps %d days (TTL), counted from the rows' time",
                        name, table, days)  # fmt: skip
        log.info("%s: stored %d records in %s", name, n, store.dsn.redacted())
    finally:
        pipeline.close()
    return 0


def _run_until_signalled(
    name: str, pipeline: Pipeline, source: Any, cfg: Config, store: Any
) -> int:
    """Collect on the interval until SIGTERM/SIGINT, then stop intake and flush to the store or
    the spool within `sink.shutdown_grace_seconds` and exit 0. A second signal exits at once
    (the spool keeps what was sealed)."""
    signals = {"n": 0}

    def on_signal(signum: int, _frame: Any) -> None:
        signals["n"] += 1
        if signals["n"] > 1:
            os._exit(128 + signum)
        log.info("%s: %s: stopping intake and flushing", name, signal.Signals(signum).name)
        pipeline.stop()

    previous = {}
    if threading.current_thread() is threading.main_thread():  # embedded callers keep theirs
        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    log.info(
        "%s: collecting every %.1fs into %s", name, source.interval_seconds, store.dsn.redacted()
    )
    try:
        pipeline.run_supervised(source.interval_seconds)
    finally:
        grace = cfg.sink.shutdown_grace_seconds
        if pipeline.shutdown(grace):
            log.info("%s: stopped; every collected batch is in the store or the spool", name)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
