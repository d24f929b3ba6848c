"""Sinks share one contract (telemetry.contracts.Sink): export(batch) -> ExportResult, flush(),
close(). One module per sink, imported by name where it is used: the /metrics-only node exporter
imports the Prometheus sink and not the ClickHouse one (pyarrow, the client)."""
