"""Sinks share one contract: export(batch) -> ExportResult, flush(), close().

Each loads on first use: the /metrics-only node exporter imports the Prometheus sink and not the
ClickHouse one (pyarrow, the client)."""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from telemetry.sinks.clickhouse import ClickHouseSink
    from telemetry.sinks.memory import MemorySink
    from telemetry.sinks.prometheus import PrometheusSink, render_prometheus

_WHERE = {
    "ClickHouseSink": "clickhouse",
    "MemorySink": "memory",
    "PrometheusSink": "prometheus",
    "render_prometheus": "prometheus",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"telemetry.sinks.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'telemetry.sinks' has no attribute {name!r}")


__all__ = ["ClickHouseSink", "MemorySink", "PrometheusSink", "render_prometheus"]
