"""Shared CLI plumbing: config from flags, store and sinks from config, record output."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from datetime import datetime
from typing import IO, Any

from telemetry.config import Config, load_config, set_in
from telemetry.pipeline import Batch, ComponentStats
from telemetry.store import Store


def add_store_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dsn",
        help="store: chdb://PATH or http(s)://user:pass@host:port/db (default $RAILSCOPE_DSN)",
    )


def config_from_args(args: argparse.Namespace, **dotted: Any) -> Config:
    overrides: dict[str, Any] = {}
    set_in(overrides, "store.dsn", getattr(args, "dsn", None))
    for key, value in dotted.items():
        set_in(overrides, key.replace("__", "."), value)
    return load_config(getattr(args, "config", None), overrides=overrides)


def store_from_config(cfg: Config) -> Store:
    return Store(
        cfg.store.dsn,
        database=cfg.store.database,
        cluster=cfg.store.cluster,
        ttl_overrides=cfg.store.ttl_days,
    )


def open_store(cfg: Config, *, migrate: bool | None = None) -> Store:
    """Open the store and make sure its schema is current. Embedded stores are migrated on the
    spot; a server must be migrated by `railscope db migrate` (one place runs cluster DDL)."""
    from telemetry.errors import StoreUnavailable

    store = store_from_config(cfg)
    store.ping()
    if migrate if migrate is not None else store.dsn.embedded:
        store.migrate()
    elif store.pending():
        raise StoreUnavailable(
            f"store {store.dsn.redacted()} needs migrations: run `railscope db migrate`"
        )
    return store


def clickhouse_sink(cfg: Config, store: Store) -> Any:
    from telemetry.sinks.clickhouse import ClickHouseSink

    s = cfg.sink
    return ClickHouseSink(
        store,
        spool_dir=s.spool_dir,
        batch_rows=s.batch_rows,
        batch_seconds=s.batch_seconds,
        spool_max_bytes=s.spool_max_bytes,
        retry_initial_seconds=s.retry_initial_seconds,
        retry_max_seconds=s.retry_max_seconds,
        replay_batches_per_cycle=s.replay_batches_per_cycle,
    )


def extra_sinks(cfg: Config) -> list[Any]:
    """Sinks besides ClickHouse and /metrics that the config turns on (`otlp.enabled`)."""
    if not cfg.otlp.enabled:
        return []
    from telemetry.sinks.otlp import OtlpSink

    return [OtlpSink(endpoint=cfg.otlp.endpoint, interval_seconds=cfg.otlp.interval_seconds)]


def _jsonable(v: Any) -> Any:
    if isinstance(v, datetime):
        return v.isoformat().replace("+00:00", "Z")
    return str(v)


def write_jsonl(batches: Iterable[Batch], out: IO[str] | None = None) -> int:
    """One JSON object per record: the kind's field names, plus `_kind`."""
    out = out or sys.stdout  # looked up per call: sys.stdout may be replaced after import
    n = 0
    for b in batches:
        for row in b.table.to_pylist():
            out.write(
                json.dumps({"_kind": b.kind.name, **row}, default=_jsonable, separators=(",", ":"))
            )
            out.write("\n")
            n += 1
    return n


def write_output(
    batches: list[Batch],
    fmt: str,
    components: Iterable[ComponentStats] = (),
    out: IO[str] | None = None,
) -> None:
    out = out or sys.stdout
    if fmt == "jsonl":
        write_jsonl(batches, out)
    else:
        from telemetry.sinks.prometheus import render_prometheus

        out.write(render_prometheus(batches, components))
    out.flush()


def prometheus_text(*families: Any) -> str:
    """Prometheus text exposition of metric families built by hand (GaugeMetricFamily ...)."""
    from prometheus_client import CollectorRegistry, generate_latest

    class _Families:
        def collect(self) -> Any:
            yield from families

    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Families())  # type: ignore[arg-type]
    return generate_latest(reg).decode()
