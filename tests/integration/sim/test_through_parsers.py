"""The simulator's scores earned through the real parsers: each scenario is ingested once with
records straight from the simulator (fast path: the session's ScenarioRun, tests/conftest.py) and
once rendered step by step into device files read back by the real sources (through-parsers
path), each into its own database of the embedded store; the correlation engine runs on both and
`sim score` must give the same result, 100 %."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from telemetry.config import load_config
from telemetry.sim import build
from telemetry.sim.run import ingest
from telemetry.sim.scenario import load_scenario
from telemetry.sinks.clickhouse import ClickHouseSink
from telemetry.store import Store
from telemetry.transforms import StampCluster
from tests.conftest import ScenarioRun
from tests.sim_score import correlate_and_score


def _parsed(store: Store, scenario: str, start: str, spool: Path) -> dict:
    sim = build(load_scenario(scenario).with_overrides(start=start))
    sink = ClickHouseSink(store, spool_dir=str(spool), batch_rows=50_000)
    res = ingest(sim, [sink], [StampCluster("simtest")], through_parsers=load_config(None, env={}))
    assert res.rows > 0
    return correlate_and_score(store, sim, "simtest")


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["small", "rail-2nic", "multi-idc"])
def test_sim_score_is_the_same_through_the_parsers(
    store: Store, tmp_path: Path, scenario: str, scenario_run: Callable[[str], ScenarioRun]
) -> None:
    fast = scenario_run(scenario)  # the same window (pinned start), through the fast path
    parsed = _parsed(store, scenario, fast.iso_start, tmp_path / "tp")
    assert parsed == fast.score
    kinds = {k["kind"]: k for k in parsed["kinds"]}
    assert kinds and parsed["findings_total"] > 0
    for k in kinds.values():
        assert (k["precision"], k["recall"], k["localization"]) == (1.0, 1.0, 1.0), k
