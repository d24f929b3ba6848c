"""A configured pipeline: the sinks a config turns on (the ClickHouse sink with the config's
`sink` section, the extra sinks of `otlp.enabled`), the config's transforms, and /metrics over the
pipeline's own components. Every source command, `railscope node` and `railscope serve` assemble
theirs here (the simulator drives a bare Pipeline with the transforms it is given)."""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from telemetry.pipeline import Pipeline

if TYPE_CHECKING:
    from telemetry.config import Config
    from telemetry.contracts import Batch, Sink, Source
    from telemetry.sinks.prometheus import PrometheusSink
    from telemetry.store import Store


def configured_pipeline(
    cfg: Config,
    sources: Sequence[Source],
    sinks: Sequence[Sink],
    *,
    metrics: bool = False,
    admit: Callable[[list[Batch]], None] | None = None,
) -> tuple[Pipeline, PrometheusSink | None]:
    """`sources` -> the config's transforms -> `sinks`, each cycle's self-report stored under
    this host's name. `metrics`: a Prometheus sink is added that serves this pipeline's
    components and health (start it with serve_metrics); returned beside the pipeline."""
    from telemetry.transforms import build_transforms

    holder: list[Pipeline] = []
    prom = None
    out = list(sinks)
    if metrics:
        from telemetry.sinks.prometheus import PrometheusSink

        prom = PrometheusSink(
            components=lambda: holder[0].components() if holder else [],
            health=lambda: holder[0].health() if holder else [],
        )
        out.append(prom)
    pipe = Pipeline(
        sources, out, build_transforms(cfg), report_host=socket.gethostname(), admit=admit
    )
    holder.append(pipe)
    return pipe, prom


def serve_metrics(prom: PrometheusSink, cfg: Config) -> tuple[str, int]:
    """Start /metrics on `prometheus.listen` with its TLS and limits; the bound address."""
    host, _, port = cfg.prometheus.listen.rpartition(":")
    return prom.serve(host, int(port), **cfg.prometheus.server_options())


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
