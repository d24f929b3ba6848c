"""Sliding evaluation on the simulator: following live (the simulator feeding the store interval
by interval, the engine's clock injected) gives the same findings as a batch run over the same
data, and each fault kind becomes a finding within its latency bound after its onset. No
wall-clock sleeps: the clock moves only when the feed says an interval has ended."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from telemetry.correlate import findings as fstore
from telemetry.correlate.engine import Correlator, follow
from telemetry.sim import build
from telemetry.sim.engine import Simulation
from telemetry.sim.live import LiveFeed, latencies
from telemetry.sim.scenario import load_scenario
from telemetry.sim.score import read_findings, score
from telemetry.sinks.clickhouse import ClickHouseSink
from telemetry.store import Store
from telemetry.transforms import StampCluster
from tests.conftest import ScenarioRun

# the live run goes into the batch run's database (the session's ScenarioRun, tests/conftest.py)
# as a cluster of its own: every query the engine runs is per cluster
LIVE = "live"
# onset-to-finding bounds (issue 13 acceptance), in collection intervals
FAST = {
    "pfc_storm",
    "gpu_xid",
    "gpu_lost",
    "gpu_throttle",
    "link_flap",
    "nic_pcie_stall",
    "dci_saturation",
}


def _sim(ref: ScenarioRun) -> Simulation:
    """The scenario of `ref` again, over the same window."""
    return build(load_scenario(ref.name).with_overrides(start=ref.iso_start))


def run_live(store: Store, sim: Simulation, spool: Path, cluster: str = LIVE) -> Correlator:
    """The simulator feeds the store interval by interval while `follow` runs in a thread on
    the same injected clock, in lockstep."""
    sink = ClickHouseSink(store, spool_dir=str(spool))
    feed = LiveFeed(sim, [sink], [StampCluster(cluster)], lockstep=True)
    corr = Correlator(store, cluster=cluster)
    stop = threading.Event()
    errors: list[BaseException] = []

    def target() -> None:
        try:
            follow(store, None, stop, clock=feed.clock, corr=corr)
        except BaseException as e:  # surfaced below: a dead follower must fail the test
            errors.append(e)

    th = threading.Thread(target=target, daemon=True)
    th.start()
    assert feed.clock.wait_idle(), "the follower never waited for its first tick"
    feed.run()
    stop.set()
    th.join(60)
    assert not errors, errors
    return corr


def check_batch(ref: ScenarioRun) -> None:
    """The batch run of the ScenarioRun began `lead` (20 minutes) before the data: those ticks
    hold nothing and were skipped, not evaluated - and its findings must still equal the live
    run's (which evaluated every tick)."""
    assert ref.result.failed == {}
    # (less one more: a device takes its first sample up to one interval before the run's start,
    # at its own phase)
    assert ref.result.skipped >= ref.lead / timedelta(seconds=ref.corr.interval) - 2, (
        ref.result.skipped
    )


def spans(store: Store, cluster: str) -> list[tuple[str, str, datetime, datetime]]:
    return sorted(
        (f["kind"], f["subject"], f["first_seen"], f["last_seen"])
        for f in fstore.read(store, cluster=cluster, limit=100_000)
    )


def same_findings(store: Store, batch: str, interval: float) -> None:
    a, b = spans(store, LIVE), spans(store, batch)
    assert a, "no findings at all: nothing was compared"
    assert [x[:2] for x in a] == [x[:2] for x in b]
    tol = timedelta(seconds=interval)
    for x, y in zip(a, b, strict=True):
        assert abs(x[2] - y[2]) <= tol and abs(x[3] - y[3]) <= tol, (x, y)


@pytest.mark.slow
@pytest.mark.scenario("small")
def test_small_live_equals_batch_and_latency_bounds(
    scenario_run: Callable[[str], ScenarioRun], tmp_path: Path
) -> None:
    ref = scenario_run("small")  # the batch run; the live run goes into its store as LIVE
    check_batch(ref)
    sim = _sim(ref)
    corr = run_live(ref.store, sim, tmp_path / "a")
    same_findings(ref.store, ref.cluster, corr.interval)

    truth = sim.ground_truth()
    found = read_findings(ref.store, LIVE, truth.start_ms, truth.end_ms)
    s = score(truth, found)
    for k in s.kinds:  # following live keeps detection quality
        assert (k.precision, k.recall, k.localization) == (1.0, 1.0, 1.0), k
    lat = latencies(truth, found)
    assert {x.kind for x in lat} >= FAST | {"ecmp_collision", "placement_violation"}
    # one bound for injected faults and conditions the workload made on its own (a 1-QP job's
    # ECMP collision from its start: its piled flows show it early, ecmp.min_seconds_with_flows)
    for x in lat:
        bound = (2 if x.kind in FAST else 6) * corr.interval
        assert x.seconds is not None and x.seconds <= bound, x


@pytest.mark.slow
@pytest.mark.scenario("multi-idc")
def test_multi_idc_live_equals_batch(
    scenario_run: Callable[[str], ScenarioRun], tmp_path: Path
) -> None:
    ref = scenario_run("multi-idc")
    check_batch(ref)
    corr = run_live(ref.store, _sim(ref), tmp_path / "a")
    same_findings(ref.store, ref.cluster, corr.interval)
