"""The sinks a config turns on: the ClickHouse sink with the config's `sink` section, and the
extra sinks (`otlp.enabled`). Every command and `railscope serve` build them here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from telemetry.config import Config
    from telemetry.store import Store


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
