"""`railscope serve`: every enabled source, `correlate --follow`, /metrics and a ClickHouse HTTP
endpoint in one process over the store (docs/serve.md). SIGTERM/SIGINT: stop intake, flush every
batch, exit 0; a second signal exits at once (the spool keeps what was not written)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import tempfile
from pathlib import Path
from typing import Any

import yaml

from telemetry.commands.common import add_store_args, open_store
from telemetry.config import Config, load_config, set_in
from telemetry.errors import ConfigError, UserError
from telemetry.pipeline import SOURCES, Source
from telemetry.serve.config import ServeConfig, parse_listen

log = logging.getLogger("railscope.serve")


def register(sub: Any) -> list[str]:
    p = sub.add_parser(
        "serve",
        help="run every enabled source, the correlation engine, /metrics and a ClickHouse HTTP endpoint in one process",
        description="One process over one store: every source whose config section has "
        "`enabled: true`, correlate --follow, /metrics, and ClickHouse's HTTP interface on the "
        "embedded store (other commands and Grafana query it with --dsn http://HOST:PORT).",
    )
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
    p.add_argument(
        "--lag",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="correlate a window this long after it ends, for late data (default 60)",
    )
    p.set_defaults(func=run_serve)
    return ["serve"]


def _load(args: argparse.Namespace) -> tuple[Config, ServeConfig, dict[str, dict[str, Any]]]:
    """The config, the `serve` section and each source section's raw dict.

    Today's config model rejects `serve:` and the `enabled`/`from` keys of source sections, so
    they are taken out before validation. TODO(merge): once telemetry/config.py knows them, load
    with config_from_args and read cfg.serve / the source sections directly.
    """
    path = getattr(args, "config", None) or os.environ.get("RAILSCOPE_CONFIG") or None
    overrides: dict[str, Any] = {}
    set_in(overrides, "store.dsn", args.dsn)
    if not path:
        return load_config(None, overrides=overrides), ServeConfig(), {}
    try:
        raw = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError):
        load_config(path)  # raises its own one-line ConfigError
        raise
    if not isinstance(raw, dict):
        load_config(path)
        raise ConfigError(f"config {path}: the top level must be a mapping")
    serve_cfg = ServeConfig.parse(raw.pop("serve", None), source=f"config {path}")
    sections = {k: dict(v or {}) for k, v in (raw.get("sources") or {}).items()}
    raw["sources"] = {
        k: {kk: vv for kk, vv in v.items() if kk not in ("enabled", "from")}
        for k, v in sections.items()
    }
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as tmp:
        yaml.safe_dump(raw, tmp)
    try:
        cfg = load_config(tmp.name, overrides=overrides)
    except ConfigError as e:
        raise ConfigError(str(e).replace(tmp.name, str(path))) from None
    finally:
        os.unlink(tmp.name)
    return cfg, serve_cfg, sections


def _build_source(name: str, cfg: Config, from_path: str | None = None) -> Source:
    """One source from its config section, as `railscope NAME` builds it.
    TODO(merge): telemetry.registry.build_source(name, cfg, from_path=from_path)."""
    spec = SOURCES.get(name)
    if spec is None:
        raise ConfigError(f"sources.{name}: unknown source (known: {', '.join(sorted(SOURCES))})")
    parser = argparse.ArgumentParser(add_help=False)
    adder = getattr(spec.cls, "add_arguments", None)
    if adder is not None:
        adder(parser)  # the source's own flags, at their defaults: config decides
    ns = parser.parse_args(
        [], argparse.Namespace(once=False, from_path=from_path, output=None, dsn=None)
    )
    return spec.cls.from_args(ns, cfg)  # type: ignore[no-any-return]


def _loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run_serve(args: argparse.Namespace) -> int:
    from telemetry.serve.service import Service

    cfg, serve_cfg, sections = _load(args)
    listen = args.query_listen or serve_cfg.query_listen
    host, _ = parse_listen(listen)  # a bad flag is one line before anything starts
    if not serve_cfg.users and not _loopback(host):
        raise ConfigError(
            f"serve: --query-listen {listen} without serve.users would let anyone who reaches it "
            "read and write the store: configure serve.users (docs/serve.md) or listen on 127.0.0.1"
        )
    store = open_store(cfg)
    enabled = {n: s for n, s in sections.items() if s.get("enabled") is True}
    if not enabled:
        log.warning("serve: no source has `enabled: true` in its config section; serving the store")
    sources = {n: _build_source(n, cfg, s.get("from")) for n, s in enabled.items()}
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
