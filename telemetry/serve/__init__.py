"""`railscope serve`: one process over the embedded store, with ClickHouse's HTTP interface on it."""

from telemetry.serve.config import ServeConfig, ServeUser
from telemetry.serve.engine import Engine, EngineError
from telemetry.serve.http import QueryServer

__all__ = ["Engine", "EngineError", "QueryServer", "ServeConfig", "ServeUser"]
