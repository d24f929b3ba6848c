"""The `pool` scenario through the real pipeline: the pool it declares is what the store holds
(GPU models per SU, queues, fragmented H200 nodes, the pending gangs), pool accounting sees the
jobs' queue above its deserved share, and each pool detector finds its injected fault — the
gang and queue ones a few minutes in, the idle holder once it has been idle for 30 minutes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from telemetry import pool
from telemetry.correlate import Correlator
from telemetry.correlate import findings as fstore
from telemetry.sim import build
from telemetry.sim.run import ingest
from telemetry.sim.scenario import load_scenario
from telemetry.sinks.clickhouse import ClickHouseSink
from telemetry.transforms import StampCluster

C = "simpool"


def test_pool_scenario_store_accounting_and_findings(store: Any, tmp_path: Path) -> None:
    sim = build(load_scenario("pool"))
    sink = ClickHouseSink(store, spool_dir=str(tmp_path / "spool"), batch_rows=50_000)
    ingest(sim, [sink], [StampCluster(C)])
    truth = sim.ground_truth()
    assert {(f.kind, f.subject) for f in truth.faults} == {
        ("gpu_idle_allocated", "team-ml/trainer-0"),
        ("gang_blocked_by_fragmentation", "team-batch/sweep-17"),
        ("queue_over_guarantee_starving", "research"),
    }
    models = dict(
        store.query_rows(
            f"SELECT gpu_model, count() FROM {store.table('node', final=True)} "
            f"WHERE cluster = '{C}' GROUP BY gpu_model"
        )
    )
    assert models == {"NVIDIA-H100-80GB-HBM3": 8, "NVIDIA-H200": 8}
    start = datetime.fromtimestamp(truth.start_ms / 1000, UTC)
    end = datetime.fromtimestamp(truth.end_ms / 1000, UTC)
    # at minute 10: free GPUs per H200 node are the 4 the fillers leave, never a whole node
    at = start + timedelta(minutes=10)
    by_model = pool.accounting(store, at, at + timedelta(minutes=1), by="gpu-model", cluster=C)
    h200 = by_model.filter(by_model["key"] == "NVIDIA-H200").to_dicts()[0]
    assert h200["total_gpus"] == 64 and h200["free_gpus"] >= 16
    free_per_node = store.query_rows(
        f"SELECT n.node, 8 - sum(p.gpu_requests) FROM {store.table('node', final=True, alias='n')} "
        f"JOIN {store.table('pod', final=True, alias='p')} ON p.node = n.node AND p.cluster = n.cluster "
        f"WHERE n.cluster = '{C}' AND n.gpu_model = 'NVIDIA-H200' AND p.valid_to IS NULL "
        "GROUP BY n.node"
    )
    assert max(f for _, f in free_per_node) < 8
    queues = pool.accounting(store, at, at + timedelta(minutes=1), by="queue", cluster=C)
    prod = queues.filter(queues["key"] == "prod").to_dicts()[0]
    assert prod["allocated_gpus"] > 2 * prod["deserved_gpus"] - 1
    assert prod["idle_allocated_gpus"] == 8  # the idle holder's whole node

    (pre,) = pool.preemptions(store, start, end, cluster=C).to_dicts()  # a Spot pod, for whom
    assert (pre["pod"], pre["provisioning"], pre["gpus"]) == ("spot-0", "Spot", 8)
    assert (pre["preempted_for"], pre["for_provisioning"]) == ("serving/serve-0", "Reserved")

    Correlator(
        store, cluster=C, only=["gang_blocked_by_fragmentation", "queue_over_guarantee_starving"]
    ).run(start + timedelta(minutes=6), start + timedelta(minutes=7))
    Correlator(store, cluster=C, only=["gpu_idle_allocated"]).run(end - timedelta(minutes=1), end)
    got = {(f["kind"], f["subject"]) for f in fstore.read(store)}
    assert got == {(f.kind, f.subject) for f in truth.faults}
