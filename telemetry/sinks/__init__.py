"""Sinks share one contract: export(batch) -> ExportResult, flush(), close()."""

from telemetry.sinks.clickhouse import ClickHouseSink
from telemetry.sinks.memory import MemorySink
from telemetry.sinks.prometheus import PrometheusSink, render_prometheus

__all__ = ["ClickHouseSink", "MemorySink", "PrometheusSink", "render_prometheus"]
