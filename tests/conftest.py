"""Test session setup: TZ=UTC, one embedded ClickHouse path per session (the engine allows one per
process) and a fresh random database per test."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

os.environ["TZ"] = "UTC"
time.tzset()

import pytest  # noqa: E402


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The suite runs on every CPU (pyproject: `-n logical --dist loadgroup`): the tests that
    read one built-in scenario through `scenario_run` join one xdist group, so one worker makes
    that run and the others never do. The scenario is the test's `scenario` parameter or its
    `@pytest.mark.scenario(name)`; a test with neither is refused here (it would make the
    scenario's run again on whichever worker it lands on: minutes of CI)."""
    for item in items:
        if "scenario_run" not in getattr(item, "fixturenames", ()):
            continue
        callspec = getattr(item, "callspec", None)
        name = callspec.params.get("scenario") if callspec is not None else None
        mark = item.get_closest_marker("scenario")
        if name is None and mark is not None:
            name = mark.args[0]
        if name is None:
            raise pytest.UsageError(
                f"{item.nodeid} takes scenario_run: give it a `scenario` parameter or "
                "@pytest.mark.scenario(name) (tests/conftest.py)"
            )
        item.add_marker(pytest.mark.xdist_group(f"scenario-{name}"))


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


@dataclass
class ScenarioRun:
    """A built-in scenario ingested through the fast path (records straight from the simulator)
    into a database of its own on the session's engine and correlated once, as a batch run from
    `lead` before its data (those ticks hold nothing and are skipped). Tests that need this
    reference read it instead of simulating and correlating the scenario again; they may write
    other clusters into `store`, never `cluster`."""

    name: str  # the built-in scenario's
    store: Any  # telemetry.store.Store
    sim: Any  # telemetry.sim.engine.Simulation
    cluster: str
    iso_start: str  # the pinned start, for another run of the same data (with_overrides)
    start: datetime
    end: datetime
    lead: timedelta
    corr: Any  # the Correlator that ran (its stats, incidents tracker)
    result: Any  # its RunResult
    score: dict[str, Any]  # `sim score` of its findings, as JSON


# one pinned start for the session: every test that compares a run with a ScenarioRun simulates
# the same window (an hour ago: inside every table's TTL for the rest of the session)
_SESSION_START = datetime.fromtimestamp((int(time.time()) // 60 - 60) * 60, UTC)


@pytest.fixture(scope="session")
def scenario_run(
    chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[str], ScenarioRun]]:
    """`scenario_run(name)`: that scenario's ScenarioRun, made on first use in the session."""
    runs: dict[str, ScenarioRun] = {}

    def get(name: str) -> ScenarioRun:
        if name not in runs:
            runs[name] = _scenario_run(chdb_dsn, tmp_path_factory, name)
        return runs[name]

    yield get
    for r in runs.values():
        r.store.client.command(f"DROP DATABASE IF EXISTS `{r.store.database}`")


def _scenario_run(dsn: str, tmp: pytest.TempPathFactory, name: str) -> ScenarioRun:
    from telemetry.correlate.engine import Correlator
    from telemetry.sim import build
    from telemetry.sim.run import ingest
    from telemetry.sim.scenario import load_scenario
    from telemetry.sim.score import read_findings, score
    from telemetry.sinks.clickhouse import ClickHouseSink
    from telemetry.store import Store
    from telemetry.transforms import StampCluster

    store = Store(dsn, database=f"run_{name.replace('-', '_')}_{uuid.uuid4().hex[:6]}")
    store.migrate()
    iso = _SESSION_START.strftime("%Y-%m-%dT%H:%M:%SZ")
    sim = build(load_scenario(name).with_overrides(start=iso))
    cluster = "default"
    sink = ClickHouseSink(store, spool_dir=str(tmp.mktemp("spool")), batch_rows=50_000)
    assert ingest(sim, [sink], [StampCluster(cluster)]).rows > 0
    start = datetime.fromtimestamp(sim.start_ms / 1000, UTC)
    end = start + timedelta(seconds=sim.steps * sim.dt)
    lead = timedelta(minutes=20)
    corr = Correlator(store, cluster=cluster)
    result = corr.run(start - lead, end)
    truth = sim.ground_truth()
    found = read_findings(store, cluster, truth.start_ms, truth.end_ms)
    return ScenarioRun(
        name,
        store,
        sim,
        cluster,
        iso,
        start,
        end,
        lead,
        corr,
        result,
        score(truth, found).to_json(),
    )
