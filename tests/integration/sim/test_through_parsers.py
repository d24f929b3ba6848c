"""The simulator's scores earned through the real parsers: each scenario is ingested once with
records straight from the simulator (fast path) and once rendered step by step into device files
read back by the real sources (through-parsers path), each into its own database of the embedded
store; the correlation engine runs on both and `sim score` must give the same result, 100 %."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from telemetry.config import load_config
from telemetry.sim import build, load_scenario
from telemetry.sim.run import ingest
from telemetry.sinks.clickhouse import ClickHouseSink
from telemetry.store import Store
from telemetry.transforms import StampCluster
from tests.sim_score import correlate_and_score


def _scored(store: Store, scenario: str, start: str, spool: Path, parsers: bool) -> dict:
    sim = build(load_scenario(scenario).with_overrides(start=start))
    sink = ClickHouseSink(store, spool_dir=str(spool), batch_rows=50_000)
    cfg = load_config(None, env={}) if parsers else None
    res = ingest(sim, [sink], [StampCluster("simtest")], through_parsers=cfg)
    assert res.rows > 0
    return correlate_and_score(store, sim, "simtest")


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["small", "rail-2nic", "multi-idc"])
def test_sim_score_is_the_same_through_the_parsers(
    store: Store, tmp_path: Path, scenario: str
) -> None:
    # recent (the tables have TTLs) and pinned: both paths simulate the same window
    start = datetime.fromtimestamp((int(time.time()) // 60 - 30) * 60, UTC)
    iso = start.strftime("%Y-%m-%dT%H:%M:%SZ")
    fast = _scored(store, scenario, iso, tmp_path / "fast", parsers=False)
    other = Store(store.dsn, database=store.database + "_tp")
    other.migrate()
    try:
        parsed = _scored(other, scenario, iso, tmp_path / "tp", parsers=True)
    finally:
        store.client.command(f"DROP DATABASE IF EXISTS `{other.database}`")
    assert parsed == fast
    kinds = {k["kind"]: k for k in parsed["kinds"]}
    assert kinds and parsed["findings_total"] > 0
    for k in kinds.values():
        assert (k["precision"], k["recall"], k["localization"]) == (1.0, 1.0, 1.0), k
