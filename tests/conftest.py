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


# The store fixture runs on the embedded engine ("chdb") and, for the modules listed here, also
# through `railscope serve`'s ClickHouse HTTP endpoint ("http": clickhouse-connect's server code
# path). RAILSCOPE_TEST_STORE=http|both runs every store test that way.
HTTP_STORE_MODULES = frozenset({"tests.integration.core.test_store"})


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store_transport" not in metafunc.fixturenames:
        return
    mode = os.environ.get("RAILSCOPE_TEST_STORE", "")
    if mode == "http":
        metafunc.parametrize("store_transport", ["http"], indirect=True)
    elif mode == "both" or (not mode and metafunc.module.__name__ in HTTP_STORE_MODULES):
        metafunc.parametrize("store_transport", ["chdb", "http"], indirect=True)


@pytest.fixture
def store_transport(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "chdb"))


@pytest.fixture(scope="session")
def query_endpoint(chdb_dsn: str):  # type: ignore[no-untyped-def]
    """`http://127.0.0.1:PORT` of a ClickHouse HTTP endpoint on the session's embedded engine
    (no users configured: `default`, no password)."""
    from telemetry.serve import Engine, QueryServer
    from telemetry.store import Store

    store = Store(chdb_dsn)
    assert store.client is not None  # the process opens its store first, as `serve` does
    server = QueryServer(Engine(str(store.dsn.path)), port=0)
    host, port = server.start()
    yield f"http://{host}:{port}"
    server.stop()
    server.engine.close()


@pytest.fixture
def store(chdb_dsn: str, store_transport: str, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """A migrated Store on the session's embedded engine, in its own database."""
    from telemetry.store import Store

    dsn = chdb_dsn if store_transport == "chdb" else request.getfixturevalue("query_endpoint")
    s = Store(dsn, database=f"t_{uuid.uuid4().hex[:12]}")
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
