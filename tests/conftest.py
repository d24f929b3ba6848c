"""Test session setup: TZ=UTC, one embedded ClickHouse path per session (the engine allows one per
process) and a fresh random database per test."""

from __future__ import annotations

import os
import socket
import time
import uuid

os.environ["TZ"] = "UTC"
time.tzset()

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def chdb_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("chdb") / "store")


@pytest.fixture(scope="session")
def chdb_dsn(chdb_path: str) -> str:
    return f"chdb://{chdb_path}"


@pytest.fixture
def store(chdb_dsn: str):  # type: ignore[no-untyped-def]
    """A migrated Store on the session's embedded engine, in its own database."""
    from telemetry.store import Store

    s = Store(chdb_dsn, database=f"t_{uuid.uuid4().hex[:12]}")
    s.migrate()
    yield s
    s.client.command(f"DROP DATABASE IF EXISTS `{s.database}`")


@pytest.fixture
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def now_ms() -> int:
    """Recent timestamps: tables have TTLs, so rows from long ago would expire on insert."""
    return int(time.time() * 1000)
