"""`railscope ingest`: the insert gateway that turns many agents' small batches into few large
inserts (docs/deploying.md, "Ingest at scale").

Its config section loads with every command; the gateway itself (pyarrow, aiohttp) on first use."""

from __future__ import annotations

from typing import Any

from telemetry.ingest.config import IngestConfig

__all__ = ["Gateway", "IngestConfig", "IngestService"]


def __getattr__(name: str) -> Any:
    if name in ("Gateway", "IngestService"):
        from telemetry.ingest import gateway

        return getattr(gateway, name)
    raise AttributeError(name)
