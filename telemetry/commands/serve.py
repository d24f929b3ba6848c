"""run every enabled source, the correlation engine, /metrics and a ClickHouse HTTP endpoint in one process

One process over one store: every source whose config section has `enabled: true`, correlate
--follow, /metrics, and ClickHouse's HTTP interface on the embedded store (other commands and
Grafana query it with --dsn http://HOST:PORT). See docs/serve.md.

SIGTERM/SIGINT: stop intake, flush every batch, exit 0; a second signal exits at once (the spool
keeps what was not written).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
from typing import Any

from telemetry.commands.common import (
    add_command,
    add_lag_arg,
    add_store_args,
    config_from_args,
    open_store,
)
from telemetry.config import Config
from telemetry.contracts import Source
from telemetry.errors import ConfigError, UserError
from telemetry.serve.config import open_listen_problem, parse_listen

log = logging.getLogger("railscope.serve")


def register(sub: Any) -> list[str]:
    p = add_command(sub, "serve", __doc__)
    p.add_argument(
        "--config",
        metavar="FILE",
        default=argparse.SUPPRESS,  # the same as `railscope --config FILE serve`
        help="YAML config (default $RAILSCOPE_CONFIG)",
    )
    add_store_args(p)
    p.add_argument(
        "--query-listen",
        metavar="HOST:PORT",
        help="ClickHouse HTTP endpoint (default serve.query_listen, 127.0.0.1:8123)",
    )
    p.add_argument("--no-correlate", action="store_true", help="do not run the correlation engine")
    add_lag_arg(p)
    p.set_defaults(func=run_serve)
    return ["serve"]


def _enabled_sources(cfg: Config, store: Any) -> dict[str, Source]:
    """Every source whose section says `enabled: true`, built as `railscope NAME` builds it
    (replaying the section's `from` when set). Sources that keep state in the store get it."""
    from telemetry import registry

    out: dict[str, Source] = {}
    for name in cfg.sources:
        if not cfg.source(name).enabled:
            continue
        src = registry.build_source(name, cfg)
        binder = getattr(src, "bind_store", None)
        if binder is not None:
            binder(store)
        out[name] = src
    return out


def run_serve(args: argparse.Namespace) -> int:
    from telemetry.serve.service import Service

    cfg = config_from_args(args)
    serve_cfg = cfg.serve
    listen = args.query_listen or serve_cfg.query_listen
    host, _ = parse_listen(listen)  # a bad flag is one line before anything starts
    problem = open_listen_problem(serve_cfg, host)  # config check judged serve.query_listen
    if problem:
        raise ConfigError(
            "serve: " + problem.replace(f"serve.query_listen {host}", f"--query-listen {listen}", 1)
        )
    store = open_store(cfg)
    sources = _enabled_sources(cfg, store)
    if not sources:
        log.warning("serve: no source has `enabled: true` in its config section; serving the store")
    service = Service(
        store,
        cfg,
        serve_cfg,
        sources,
        query_listen=listen,
        correlate=not args.no_correlate,
        correlate_lag_seconds=args.lag,
    )
    signals = {"n": 0}

    def on_signal(signum: int, _frame: Any) -> None:
        signals["n"] += 1
        if signals["n"] > 1:  # the spool keeps whatever was not written
            os._exit(128 + signum)
        log.info("serve: %s: stopping intake and flushing", signal.Signals(signum).name)
        service.request_stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        service.start()
    except UserError:
        service.stop()
        raise
    while not service.wait(1.0):
        pass
    service.stop()
    return 0
