"""the insert gateway: many agents' small batches in, few large inserts out (ClickHouse HTTP)

Agents (`railscope node` on every GPU server, the other sources) point their store DSN at it and
insert as they would into ClickHouse; it answers each batch once it is in its write-ahead log
(ingest.spool_dir), merges each record kind's batches and inserts them into the store (--dsn)
every ingest.flush_seconds, with deduplication tokens kept end to end: nothing is lost and
nothing is stored twice. A table then gets gateways / flush_seconds inserts per second, not one
per agent. Read-only queries (an agent's start-up checks) pass through to the store.

SIGTERM/SIGINT: stop intake, commit what was taken, try one last merged insert, exit 0 (what is
left stays in the log for the next start). See docs/deploying.md, "Ingest at scale".
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from typing import Any

from telemetry.commands.common import add_command, add_listen_arg, add_store_args, config_from_args

log = logging.getLogger("railscope.ingest")


def register(sub: Any) -> list[str]:
    p = add_command(sub, "ingest", __doc__)
    add_store_args(p)
    p.add_argument(
        "--ingest-listen",
        metavar="HOST:PORT",
        help="where agents insert (default ingest.listen, 127.0.0.1:8124)",
    )
    p.add_argument(
        "--spool-dir", metavar="DIR", help="the write-ahead log (default ingest.spool_dir)"
    )
    add_listen_arg(p)
    p.add_argument("--no-metrics", action="store_true", help="do not serve /metrics")
    p.set_defaults(func=run)
    return ["ingest"]


def _loopback(host: str) -> bool:
    import ipaddress

    try:
        return host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def run(args: argparse.Namespace) -> int:
    from telemetry.commands.common import open_store
    from telemetry.errors import ConfigError

    cfg = config_from_args(
        args,
        ingest__listen=args.ingest_listen,
        ingest__spool_dir=args.spool_dir,
        prometheus__listen=args.listen,
    )
    icfg = cfg.ingest
    host = icfg.listen.rpartition(":")[0]
    if not icfg.users and not _loopback(host):
        raise ConfigError(
            f"ingest: listening on {icfg.listen} without ingest.users would let anyone who reaches "
            "it write to the store: configure ingest.users or listen on 127.0.0.1"
        )
    from telemetry.ingest.gateway import IngestService
    from telemetry.serve.service import own_store

    store = open_store(cfg)
    service = IngestService(store, icfg, merge_store=own_store(store))
    prom = None
    if not args.no_metrics and cfg.prometheus.enabled:
        from telemetry.sinks.prometheus import PrometheusSink

        prom = PrometheusSink(components=service.components, health=service.health)
        mhost, _, mport = cfg.prometheus.listen.rpartition(":")
        prom.serve(mhost, int(mport), **cfg.prometheus.server_options())
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("ingest: %s: stopping intake and flushing", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    bound = service.start()
    log.info(
        "ingest: agents insert at %s:%s; merged inserts into %s every %.1fs",
        *bound,
        store.dsn.redacted(),
        icfg.flush_seconds,
    )
    try:
        while not stop.wait(1.0):
            pass
    finally:
        service.stop()
        if prom is not None:
            prom.close()
    return 0
