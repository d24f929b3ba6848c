"""ClickHouse store: DSNs, schema, migrations and the client used by sinks and the engine.

The client (`Store`, which imports pyarrow) loads on first use: a process that only parses a DSN
(`telemetry.store.dsn`, config validation) does not import it."""

from typing import TYPE_CHECKING, Any

from telemetry.store.dsn import DEFAULT_DSN, Dsn, parse_dsn

if TYPE_CHECKING:
    from telemetry.store.client import Store, first_line, table_ref, time_range

_CLIENT = ("Store", "first_line", "table_ref", "time_range")


def __getattr__(name: str) -> Any:
    if name in _CLIENT:
        from telemetry.store import client

        return getattr(client, name)
    raise AttributeError(f"module 'telemetry.store' has no attribute {name!r}")


__all__ = ["DEFAULT_DSN", "Dsn", "Store", "first_line", "parse_dsn", "table_ref", "time_range"]
