"""The simulated fabric read over gNMI: the through-parsers path serves every simulated switch
from a gNMI target (telemetry/sim/gnmi_target.py, SONiC telemetry paths) to one streaming switch
source instead of replaying the COUNTERS_DB dumps, and `sim score` gives what the fast path
gives on the small scenario, but for the one finding that needs the first step's rates."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from telemetry.config import load_config
from telemetry.pipeline import Pipeline
from telemetry.sim import build
from telemetry.sim.scenario import load_scenario
from telemetry.sim.through_parsers import ThroughParsersSource
from telemetry.sinks.clickhouse import ClickHouseSink
from telemetry.store import Store
from telemetry.transforms import StampCluster
from tests.conftest import ScenarioRun
from tests.sim_score import correlate_and_score


def _over_gnmi(store: Store, start: str, spool: Path, leaf_times: bool = False) -> dict[str, Any]:
    sim = build(load_scenario("small").with_overrides(start=start))
    sink = ClickHouseSink(store, spool_dir=str(spool), batch_rows=50_000)
    src = ThroughParsersSource(
        sim, load_config(None, env={}), switch_transport="gnmi", leaf_times=leaf_times
    )
    pipe = Pipeline([src], [sink], [StampCluster("simgnmi")])
    try:
        while not src.done:
            pipe.run_once()
    finally:
        pipe.close()
        src.close()
    # every simulated switch answered over gNMI at every step, nothing failed to parse (the
    # node source's problems are the scenario's injected faults: a lost GPU)
    switch = {k: n for k, n in src.stats.errors.items() if k.startswith("switch")}
    assert not switch, switch
    assert sink.stats.failed == 0 and sink.stats.dropped == 0
    return correlate_and_score(store, sim, "simgnmi")


@pytest.mark.slow
@pytest.mark.scenario("small")
def test_sim_score_over_gnmi_equals_the_fast_path(
    store: Store, tmp_path: Path, scenario_run: Callable[[str], ScenarioRun]
) -> None:
    ref = scenario_run("small")  # the same window (pinned start), through the fast path
    fast = ref.score
    over_gnmi = _over_gnmi(store, ref.iso_start, tmp_path / "gnmi")
    # the switches' records did come through gNMI: one status row per switch per step
    n = store.query_rows(
        f"SELECT count(), countIf(up = 1) FROM {store.table('switch_status')} "
        "WHERE cluster = 'simgnmi'"
    )[0]
    assert n[0] > 0 and n[0] == n[1]
    # Reading counters over gNMI has one inherent difference: SONiC telemetry has no RATES path,
    # so a port's rate needs two samples and the first step has none. small's collisions stay hot
    # well past ecmp.min_seconds, so every fault kind scores the same through both paths.
    fk = {k["kind"]: k for k in fast["kinds"]}
    gk = {k["kind"]: k for k in over_gnmi["kinds"]}
    assert set(gk) == set(fk) and over_gnmi["findings_total"] > 0
    for kind, k in fk.items():
        assert gk[kind] == k, (kind, gk[kind], k)
        assert (k["precision"], k["recall"], k["localization"]) == (1.0, 1.0, 1.0), k
    # consequence findings judged on rates (ecn hotspots) may start one step later over gNMI
    assert fast["findings_total"] - 2 <= over_gnmi["findings_total"] <= fast["findings_total"]


@pytest.mark.slow
@pytest.mark.scenario("small")
def test_targets_that_stamp_each_leaf_with_its_own_time(
    store: Store, tmp_path: Path, scenario_run: Callable[[str], ScenarioRun]
) -> None:
    """Every simulated switch a gNMI target at its own phase that stamps each port with its own
    time (up to 0.5 s apart within a sample): the switch source keeps the targets' times, so the
    store's port samples are off the grid and apart from one another, and the ECMP, PFC and DCI
    detectors (which compare ports, or time them) still find and localize every fault."""
    ref = scenario_run("small")
    got = _over_gnmi(store, ref.iso_start, tmp_path / "gnmi", leaf_times=True)
    (times, rows) = store.query_rows(
        f"SELECT uniqExact(ts), count() FROM {store.table('switch_port_sample')} "
        "WHERE cluster = 'simgnmi' AND switch = 'leaf-idc-a-s000-r0'"
    )[0]
    assert times > rows / 2  # ports of one switch at their own times, not one per poll
    on_grid = store.query_rows(
        f"SELECT countIf(toUnixTimestamp64Milli(ts) % 10000 = 0) / count() "
        f"FROM {store.table('switch_port_sample')} WHERE cluster = 'simgnmi'"
    )[0][0]
    assert on_grid < 0.05
    kinds = {k["kind"]: k for k in got["kinds"]}
    for kind in ("ecmp_collision", "pfc_storm", "dci_saturation", "link_flap"):
        k = kinds[kind]
        assert (k["precision"], k["recall"], k["localization"]) == (1.0, 1.0, 1.0), k


def test_a_step_over_gnmi_equals_the_dump(tmp_path: Path) -> None:
    """Two steps of the small fabric through both switch transports: every port, priority,
    queue, LLDP and status value equal, rates aside (gNMI derives them from the previous step's
    counters, so the first step has none and later ones agree to the counters' rounding)."""
    sim = build(load_scenario("small"))
    cfg = load_config(None, env={})
    a = ThroughParsersSource(sim, cfg, tmp_path / "dump", switch_transport="dump")
    b = ThroughParsersSource(sim, cfg, tmp_path / "gnmi", switch_transport="gnmi")
    keys = {
        "switch_port_sample": ("switch", "port"),
        "switch_priority_sample": ("switch", "port", "priority"),
        "switch_queue_sample": ("switch", "port", "queue_type", "queue"),
        "lldp_link": ("local_device", "local_port"),
        "switch_status": ("switch",),
    }
    rates = ("rx_bytes_per_second", "tx_bytes_per_second", "tx_utilization_ratio")
    try:
        for step in range(2):
            ra = {x.kind.name: x.table.to_pylist() for x in a.collect()}
            rb = {x.kind.name: x.table.to_pylist() for x in b.collect()}
            compared = 0
            for kind, key in keys.items():
                da = {tuple(r[k] for k in key): r for r in ra[kind]}
                db = {tuple(r[k] for k in key): r for r in rb[kind]}
                assert set(da) == set(db) and da, kind
                for k, r in da.items():
                    for f, v in r.items():
                        if f == "poll_duration_seconds":
                            continue
                        if f in rates:
                            if step and v is not None:
                                assert db[k][f] == pytest.approx(v, rel=1e-6), (kind, k, f)
                            continue
                        assert db[k][f] == v, (step, kind, k, f, db[k][f], v)
                        compared += 1
            assert compared > 10_000
    finally:
        a.close()
        b.close()
