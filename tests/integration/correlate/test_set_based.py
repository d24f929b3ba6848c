"""Set-based evaluation against its oracle: the same stored scenario correlated by the per-tick
loop (`Correlator(per_tick=True)`, `correlate --per-tick`) and by the default path (flows
attributed over ranges of ticks, detectors with a set-based form judged over many ticks in one
statement) writes the same findings, incidents, incident members, attributed flows and
job_port_intervals sums, under realistic and harsh collection timing."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from telemetry.correlate.engine import Correlator
from telemetry.correlate.registry import detectors
from telemetry.sim import build
from telemetry.sim.run import ingest
from telemetry.sim.scenario import load_scenario
from telemetry.sinks.clickhouse import ClickHouseSink
from telemetry.store import Store
from telemetry.transforms import StampCluster

# an hour ago, on a minute: inside every table's TTL
START = datetime.fromtimestamp((int(time.time()) // 60 - 60) * 60, UTC)


def outputs(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """What the engine wrote, in a comparable order (the rollup summed: readers sum it)."""
    got = {  # updated_at: when a row was written (wall clock), not what it says
        t: store.query_rows(
            f"SELECT * EXCEPT (updated_at) FROM {store.table(k, final=True)} ORDER BY ALL"
        )
        for t, k in (
            ("findings", "finding"),
            ("incidents", "incident"),
            ("incident_findings", "incident_finding"),
        )
    }
    got["attributed_flows"] = store.query_rows(
        f"SELECT * FROM {store.table('attributed_flow')} ORDER BY ALL"
    )
    got["job_port_intervals"] = store.query_rows(
        f"SELECT * EXCEPT (flows, bytes), sum(flows), sum(bytes) "
        f"FROM `{store.database}`.job_port_intervals GROUP BY ALL ORDER BY ALL"
    )
    return got


def correlated(
    dsn: str,
    spool: Path,
    timing: str,
    per_tick: bool,
    *,
    no_direct_nic: tuple[int, ...] = (),
    only: list[str] | None = None,
    thresholds: dict[str, Any] | None = None,
) -> dict[str, Any]:
    sc = load_scenario("small").with_overrides(
        start=START.strftime("%Y-%m-%dT%H:%M:%SZ"), timing=timing, minutes=6
    )
    sim = build(sc)
    store = Store(dsn, database=f"set_based_{uuid.uuid4().hex[:8]}")
    store.migrate()
    try:
        sink = ClickHouseSink(store, spool_dir=str(spool), batch_rows=50_000)
        assert ingest(sim, [sink], [StampCluster("default")]).rows > 0
        if no_direct_nic:  # the inventory as a server with fewer NICs than GPUs reports it
            store.client.command(
                f"ALTER TABLE {store.table('gpu_nic_affinity')} UPDATE direct_nic = 0 "
                f"WHERE gpu IN {list(no_direct_nic)} SETTINGS mutations_sync = 1"
            )
        start = datetime.fromtimestamp(sim.start_ms / 1000, UTC)
        end = datetime.fromtimestamp(sim.end_ms / 1000, UTC)
        corr = Correlator(store, per_tick=per_tick, only=only, thresholds=thresholds)
        res = corr.run(start, end)
        assert not res.failed
        return outputs(store)
    finally:
        store.client.command(f"DROP DATABASE IF EXISTS `{store.database}`")


# the detectors given a set-based form by the last change to it (each must find something in
# the test below, so that their comparison with the loop is not an empty one)
CONVERTED = {
    "collective_algorithm_underperforms",
    "collective_straggler",
    "dci_near_capacity",
    "cross_tenant_rdma",
    "gpu_without_direct_nic",
    "hdfs_cross_idc_read",
    "hdfs_replica_violation",
    "network_bound",
}


def test_some_detectors_have_a_set_based_form() -> None:
    assert {"gpu_lost", "gpu_throttle", "pfc_storm", *CONVERTED} <= {
        n for n, d in detectors().items() if d.over
    }


def test_every_set_based_form_judges_as_the_loop(chdb_dsn: str, tmp_path: Path) -> None:
    """Only the detectors with a set-based form, each path on its own copy of one scenario whose
    servers' odd GPUs are declared without a NIC on their PCIe switch (gpu_without_direct_nic),
    network_bound's limits lowered until its jobs qualify, and the DCI links' background load
    (a fifth of capacity) counted as near capacity (the DCI fault comes after these six minutes)."""
    only = sorted(n for n, d in detectors().items() if d.over)
    kw: dict[str, Any] = {
        "no_direct_nic": (1, 3, 5, 7),
        "only": only,
        "thresholds": {
            "network_bound": {"gpu_idle_ratio": 1.01, "port_utilization": 0.3},
            "dci": {"near_capacity_ratio": 0.1},
        },
    }
    oracle = correlated(chdb_dsn, tmp_path / "a", "harsh", True, **kw)
    got = correlated(chdb_dsn, tmp_path / "b", "harsh", False, **kw)
    found = {r[2] for r in oracle["findings"]}  # kind: the third column (finding_id, cluster)
    assert found >= CONVERTED, sorted(CONVERTED - found)
    for table, rows in oracle.items():
        assert got[table] == rows, table


@pytest.mark.slow
@pytest.mark.parametrize("timing", ["realistic", "harsh"])
def test_set_based_writes_what_per_tick_writes(chdb_dsn: str, tmp_path: Path, timing: str) -> None:
    oracle = correlated(chdb_dsn, tmp_path / "a", timing, per_tick=True)
    got = correlated(chdb_dsn, tmp_path / "b", timing, per_tick=False)
    assert oracle["findings"] and oracle["attributed_flows"] and oracle["incidents"]
    for table, rows in oracle.items():
        assert got[table] == rows, table
