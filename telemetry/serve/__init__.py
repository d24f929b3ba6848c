"""`railscope serve`: one process over the embedded store, with ClickHouse's HTTP interface on it.

The engine and the HTTP server (aiohttp) load on first use: every CLI command imports this
package's config at start."""

from __future__ import annotations

from typing import Any

from telemetry.serve.config import ServeConfig, ServeUser

__all__ = ["Engine", "EngineError", "QueryServer", "ServeConfig", "ServeUser"]


def __getattr__(name: str) -> Any:
    if name in ("Engine", "EngineError"):
        from telemetry.serve import engine

        return getattr(engine, name)
    if name == "QueryServer":
        from telemetry.serve.http import QueryServer

        return QueryServer
    raise AttributeError(name)
