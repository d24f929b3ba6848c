"""OTLP sink (optional extra `railscope[otlp]`): the latest values as OpenTelemetry observable
gauges through opentelemetry-sdk. The reader is injectable; with an endpoint it uses the OTLP
gRPC exporter (package opentelemetry-exporter-otlp)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from telemetry.contracts import Batch, ComponentStats, InMemorySink
from telemetry.errors import ConfigError
from telemetry.sinks.latest import LatestValues


class OtlpSink(InMemorySink):
    name = "otlp"

    def __init__(
        self, *, reader: Any = None, endpoint: str | None = None, interval_seconds: float = 10.0
    ) -> None:
        try:
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        except ImportError:
            raise ConfigError(
                "sink otlp: install the extra: pip install 'railscope[otlp]'"
            ) from None
        if reader is None:
            if not endpoint:
                raise ConfigError("sink otlp: set otlp.endpoint (e.g. http://collector:4317)")
            try:
                from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
                    OTLPMetricExporter,
                )
            except ImportError:
                raise ConfigError(
                    "sink otlp: endpoint needs opentelemetry-exporter-otlp installed"
                ) from None
            reader = PeriodicExportingMetricReader(
                OTLPMetricExporter(endpoint=endpoint), int(interval_seconds * 1000)
            )
        self.stats = ComponentStats("sink:otlp")
        self.latest = LatestValues()
        self.provider = MeterProvider(metric_readers=[reader])
        self.meter = self.provider.get_meter("railscope")
        self._instruments: set[str] = set()

    def _observe(self, metric: str) -> Iterable[Any]:
        from opentelemetry.metrics import Observation

        return [Observation(s.value, s.labels) for s in self.latest.series() if s.metric == metric]

    def _callback(self, metric: str) -> Any:
        return lambda _options: self._observe(metric)

    def keep(self, batch: Batch) -> None:
        self.latest.update(batch)
        for f in batch.kind.values():
            metric = f"railscope_{batch.kind.subsystem}_{f.name}"
            if metric not in self._instruments:
                self._instruments.add(metric)
                self.meter.create_observable_gauge(
                    metric,
                    callbacks=[self._callback(metric)],
                    unit=f.unit,
                    description=f.doc,
                )

    def flush(self, force: bool = False) -> None:
        self.provider.force_flush()

    def close(self) -> None:
        self.provider.shutdown()
