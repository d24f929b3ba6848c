"""ClickHouse store: DSNs, schema, migrations and the client used by sinks and the engine."""

from telemetry.store.client import Store, table_ref, time_range
from telemetry.store.dsn import DEFAULT_DSN, Dsn, parse_dsn

__all__ = ["DEFAULT_DSN", "Dsn", "Store", "parse_dsn", "table_ref", "time_range"]
