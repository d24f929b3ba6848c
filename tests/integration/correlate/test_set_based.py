"""Set-based evaluation against its oracle: the same stored scenario correlated by the per-tick
loop (`Correlator(per_tick=True)`, `correlate --per-tick`) and by the default path (flows
attributed over ranges of ticks, detectors with a set-based form judged over many ticks in one
statement) writes the same findings, incidents, incident members, attributed flows and
job_port_intervals sums, under realistic and harsh collection timing."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from telemetry.correlate.engine import Correlator
from telemetry.correlate.registry import Context, Window, detectors
from telemetry.correlate.sql import lldp_links
from telemetry.correlate.thresholds import default_thresholds
from telemetry.records import LLDP_LINK
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
    inventory: Callable[[Store, datetime], None] | None = None,
    counts: dict[str, int] | None = None,
) -> dict[str, Any]:
    """The engine's outputs over the scenario. `inventory(store, start)` changes the stored
    inventory before the run; `counts` gets the run's evaluations and its reads of the shared
    node facts (Correlator.facts_reads)."""
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
        if inventory is not None:
            inventory(store, start)
        corr = Correlator(store, per_tick=per_tick, only=only, thresholds=thresholds)
        res = corr.run(start, end)
        assert not res.failed
        if counts is not None:
            counts.update(windows=res.windows, facts_reads=corr.facts_reads)
        return outputs(store)
    finally:
        store.client.command(f"DROP DATABASE IF EXISTS `{store.database}`")


# the detectors given a set-based form by the last change to it (each must find something in
# the test below, so that their comparison with the loop is not an empty one)
CONVERTED = {
    "collective_algorithm_underperforms",
    "collective_slowdown",
    "collective_straggler",
    "dci_near_capacity",
    "cross_tenant_rdma",
    "ecmp_imbalance",
    "gpu_idle_allocated",
    "gpu_memory_degraded",
    "gpu_without_direct_nic",
    "gpu_xid",
    "hdfs_cross_idc_read",
    "hdfs_replica_violation",
    "low_flow_entropy",
    "network_bound",
    "pcie_replays",
    "placement_violation",
}


def test_some_detectors_have_a_set_based_form() -> None:
    assert {"gpu_lost", "gpu_throttle", "pfc_storm", *CONVERTED} <= {
        n for n, d in detectors().items() if d.over
    }


def test_every_set_based_form_judges_as_the_loop(chdb_dsn: str, tmp_path: Path) -> None:
    """Only the detectors with a set-based form, each path on its own copy of one scenario whose
    servers' odd GPUs are declared without a NIC on their PCIe switch (gpu_without_direct_nic),
    network_bound's limits lowered until its jobs qualify, the DCI links' background load (a
    fifth of capacity) counted as near capacity (the DCI fault comes after these six minutes), and
    a pod's GPUs idle under 80 % busy for a minute (gpu_idle_allocated: the training steps'
    pauses)."""
    only = sorted(n for n, d in detectors().items() if d.over)
    kw: dict[str, Any] = {
        "no_direct_nic": (1, 3, 5, 7),
        "only": only,
        "thresholds": {
            "network_bound": {"gpu_idle_ratio": 1.01, "port_utilization": 0.3},
            "dci": {"near_capacity_ratio": 0.1},
            "gpu": {"uncorrected_ecc_errors": 1, "pcie_replays_per_minute": -1},
            "pool": {"busy_utilization_floor": 0.8, "idle_allocated_seconds": 60},
        },
    }
    oracle = correlated(chdb_dsn, tmp_path / "a", "harsh", True, **kw)
    got = correlated(chdb_dsn, tmp_path / "b", "harsh", False, **kw)
    found = {r[2] for r in oracle["findings"]}  # kind: the third column (finding_id, cluster)
    assert found >= CONVERTED, sorted(CONVERTED - found)
    for table, rows in oracle.items():
        assert got[table] == rows, table


def _move_a_node(store: Store, start: datetime) -> None:
    """Three minutes in (on a tick), a node of a job that runs in one scalable unit moves to a
    scalable unit of its own: a new version of the node begins there, the old one ends."""
    su = dict(store.query_rows(f"SELECT node, su FROM {store.table('node', final=True)}"))
    jobs: dict[str, set[str]] = {}
    for job, node in store.query_rows(
        f"SELECT job, node FROM {store.table('pod', final=True)} WHERE job != '' AND node != ''"
    ):
        jobs.setdefault(job, set()).add(node)
    one_su = sorted((len(ns), job) for job, ns in jobs.items() if len({su[n] for n in ns}) == 1)
    assert one_su, "no job within one scalable unit"
    node = min(jobs[one_su[-1][1]])
    at = {"n": node, "at": start + timedelta(minutes=3)}
    store.client.command(
        f"INSERT INTO {store.table('node')} SELECT * REPLACE ({{at:DateTime64(3, 'UTC')}} AS "
        f"valid_from, 'su-moved' AS su) FROM {store.table('node', final=True)} "
        "WHERE node = {n:String} AND valid_to IS NULL",
        parameters=at,
    )
    store.client.command(
        f"ALTER TABLE {store.table('node')} UPDATE valid_to = {{at:DateTime64(3, 'UTC')}} "
        "WHERE node = {n:String} AND valid_from < {at:DateTime64(3, 'UTC')} AND valid_to IS NULL "
        "SETTINGS mutations_sync = 1",
        parameters=at,
    )


def test_node_facts_reused_between_ticks_until_the_inventory_changes(
    chdb_dsn: str, tmp_path: Path
) -> None:
    """A batch run reads the HyperNode ancestry and node SU/IDC again only where a node or
    HyperNode version began or ended (engine._facts_hold), and writes what the loop, which
    reads them at every tick, writes: here a node moves to another scalable unit mid-run, and
    its job is found spanning two from then on."""
    kw: dict[str, Any] = {
        "only": ["job_spans_su", "placement_violation"],
        "inventory": _move_a_node,
    }
    loop: dict[str, int] = {}
    batch: dict[str, int] = {}
    oracle = correlated(chdb_dsn, tmp_path / "a", "realistic", True, counts=loop, **kw)
    got = correlated(chdb_dsn, tmp_path / "b", "realistic", False, counts=batch, **kw)
    assert any("su-moved" in str(r) for r in oracle["findings"])  # the move was seen
    for table, rows in oracle.items():
        assert got[table] == rows, table
    assert loop["facts_reads"] == loop["windows"]
    # read at the first tick, again where the move lies within a tick's state window
    assert 2 <= batch["facts_reads"] < batch["windows"] // 2, batch


@pytest.mark.slow
@pytest.mark.parametrize("timing", ["realistic", "harsh"])
def test_set_based_writes_what_per_tick_writes(chdb_dsn: str, tmp_path: Path, timing: str) -> None:
    oracle = correlated(chdb_dsn, tmp_path / "a", timing, per_tick=True)
    got = correlated(chdb_dsn, tmp_path / "b", timing, per_tick=False)
    assert oracle["findings"] and oracle["attributed_flows"] and oracle["incidents"]
    for table, rows in oracle.items():
        assert got[table] == rows, table


def test_state_as_of_a_tick_read_again_only_where_it_changed(chdb_dsn: str) -> None:
    """Context.as_of_state: facts that are the state as of the tick (here the latest LLDP
    neighbours) come from the memo while the engine's epoch of their kinds is unchanged, and are
    read again under a new one; without epochs (live ticks, the loop) they are read every tick."""
    store = Store(chdb_dsn, database=f"as_of_state_{uuid.uuid4().hex[:8]}")
    store.migrate()
    t0 = round(START.timestamp() * 1000)
    try:
        for at, spine in ((t0, "spine-a"), (t0 + 60_000, "spine-b")):
            row = {"ts": at, "cluster": "c", "local_device": "leaf-1", "local_port": "Ethernet0",
                   "remote_device": spine, "remote_port": "Ethernet1", "source": "t"}  # fmt: skip
            store.insert(LLDP_LINK, LLDP_LINK.to_arrow([row]))
        memo: dict[str, Any] = {}

        def neighbour(seconds: int, epochs: dict[str, int] | None) -> str:
            end = START + timedelta(seconds=seconds)
            extra: dict[str, Any] = {"memo": memo, "tick_cache": {}}
            if epochs is not None:
                extra["state_epochs"] = epochs
            w = Window(end - timedelta(seconds=10), end)
            ctx = Context(store, w, default_thresholds(), "c", extra)
            return str(lldp_links(ctx)[0]["remote_device"])

        assert neighbour(30, {"lldp_link": 1}) == "spine-a"
        assert neighbour(90, {"lldp_link": 1}) == "spine-a"  # the engine's word: unchanged
        assert neighbour(90, {"lldp_link": 2}) == "spine-b"
        assert neighbour(30, None) == "spine-a"  # no epochs: read as of each tick
        assert neighbour(90, None) == "spine-b"
    finally:
        store.client.command(f"DROP DATABASE IF EXISTS `{store.database}`")
