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
from pathlib import Path
from typing import Any

import pytest
import yaml

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


def write_serve_config(
    tmp_path: Path, interval: int, qport: int, mport: int, sources: dict[str, Any]
) -> Path:
    """tmp_path/railscope.yaml for a `railscope serve` test: the store and spool in tmp_path,
    /metrics on `mport`, the ClickHouse endpoint on `qport`, a 5 s engine tick, `sources`."""
    cfg = {
        "interval_seconds": interval,
        "store": {"dsn": f"chdb://{tmp_path / 'store'}"},
        "sink": {"spool_dir": str(tmp_path / "spool"), "batch_seconds": 1},
        "prometheus": {"listen": f"127.0.0.1:{mport}"},
        "correlate": {"thresholds": {"sliding": {"interval_seconds": 5}}},
        "serve": {"query_listen": f"127.0.0.1:{qport}"},
        "sources": sources,
    }
    path = tmp_path / "railscope.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


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
