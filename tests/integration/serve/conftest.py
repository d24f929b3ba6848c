"""A ClickHouse HTTP endpoint with users on the session's embedded engine, for the serve tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from telemetry.serve import Engine, QueryServer, ServeConfig
from telemetry.store import Store

LIMIT = 1 << 20  # serve.max_request_bytes in these tests


@dataclass
class Endpoint:
    url: str
    host: str
    port: int
    server: QueryServer


@pytest.fixture(scope="module")
def endpoint(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    secret = tmp_path_factory.mktemp("serve") / "reader.password"
    secret.write_text("read-only-pw\n")
    cfg = ServeConfig.parse(
        {
            "max_request_bytes": LIMIT,
            "users": [
                {"name": "admin", "password": "s3cret"},
                {"name": "reader", "password_file": str(secret), "readonly": True},
                {"name": "grafana", "password": "g", "readonly": 2},
            ],
        }
    )
    store = Store(chdb_dsn)
    assert store.client is not None
    server = QueryServer(Engine(str(store.dsn.path)), cfg, port=0)
    host, port = server.start()
    yield Endpoint(f"http://{host}:{port}", host, port, server)
    server.stop()
    server.engine.close()


@pytest.fixture
def database(chdb_dsn: str) -> Iterator[str]:
    """A fresh database on the engine behind the endpoint."""
    name = f"s_{uuid.uuid4().hex[:12]}"
    store = Store(chdb_dsn)
    store.client.command(f"CREATE DATABASE `{name}`")
    yield name
    store.client.command(f"DROP DATABASE IF EXISTS `{name}`")
