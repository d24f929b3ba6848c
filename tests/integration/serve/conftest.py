"""A ClickHouse HTTP endpoint with users on the session's embedded engine, for the serve tests."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from telemetry.config import load_config
from telemetry.serve import Engine, QueryServer
from telemetry.store import Store
from tests.cli import ROOT, rs

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
    serve = {
        "max_request_bytes": LIMIT,
        "users": [
            {"name": "admin", "password": "s3cret"},
            {"name": "reader", "password_file": str(secret), "readonly": True},
            {"name": "grafana", "password": "g", "readonly": 2},
        ],
    }
    cfg = load_config(env={}, overrides={"serve": serve}).serve  # password_file read there
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


# railscope subprocesses read no config from the environment, and serve no /metrics unless asked
ENV = {
    **os.environ,
    "PYTHONPATH": str(ROOT),
    "RAILSCOPE_CONFIG": "",
    "RAILSCOPE__PROMETHEUS__ENABLED": "false",
}


def railscope(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`railscope ARGS` as a separate process running this checkout's code (`env`: more
    variables)."""
    return rs(*args, env={"RAILSCOPE__PROMETHEUS__ENABLED": "false", **(env or {})})


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ping(
    url: str, proc: subprocess.Popen[str], why: Callable[[], str], timeout: float = 90
) -> None:
    """Until `url`/ping answers Ok. (serve is up), failing with why() if `proc` exits first."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, why()
        try:
            with urllib.request.urlopen(f"{url}/ping", timeout=2) as r:
                if r.read() == b"Ok.\n":
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, why()
        time.sleep(0.3)
