"""Simulated collectives (NCCL Inspector records) end to end on the embedded store: the small
scenario's first four minutes, where the injected ECMP collision slows rl-c and llm-a and a
throttled GPU makes one of llm-a's ranks straggle. The ground truth ties each consequence to its
cause, the detectors find them, and the job report of the job behind the collision ranks the
collision first."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from telemetry.correlate import findings as fstore
from telemetry.correlate.engine import Correlator
from telemetry.correlate.report import job_report
from telemetry.sim import build, load_scenario
from telemetry.sim.collectives import comm_id
from telemetry.sim.run import ingest
from telemetry.sim.score import read_findings, score
from telemetry.sinks.clickhouse import ClickHouseSink
from telemetry.store import Store
from telemetry.transforms import StampCluster


def test_ecmp_collision_slows_collectives_and_ranks_first_in_the_job_report(
    store: Store, tmp_path: Path
) -> None:
    sim = build(load_scenario("small").with_overrides(minutes=4), now_s=time.time() - 3600)
    res = ingest(sim, [ClickHouseSink(store, spool_dir=str(tmp_path))], [StampCluster("default")])
    assert res.rows_by_kind["collective_sample"] == 24 * 2 * 8 * (
        2 + 24 + 4
    )  # steps x coll x ranks
    start = datetime.fromtimestamp(sim.start_ms / 1000, UTC)
    end = start + timedelta(seconds=sim.steps * sim.dt)
    assert Correlator(store).run(start, end).failed == {}

    truth = sim.ground_truth()
    ecmp = next(f for f in truth.faults if f.kind == "ecmp_collision" and f.origin == "injected")
    slow = {f.subject: f for f in truth.faults if f.kind == "collective_slowdown"}
    rl_c = f"team-c/rl-c/{comm_id('team-c/rl-c')}"
    assert set(slow) == {rl_c, f"team-a/llm-a/{comm_id('team-a/llm-a')}"}
    assert {f.detail["cause"] for f in slow.values()} == {ecmp.id}
    (strag,) = [f for f in truth.faults if f.kind == "collective_straggler"]
    throttle = next(f for f in truth.faults if f.kind == "gpu_throttle")
    assert (strag.subject, strag.detail["cause"]) == (throttle.subject, throttle.id)

    s = score(truth, read_findings(store, "default", truth.start_ms, truth.end_ms))
    kinds = {k.kind: k for k in s.kinds}
    for k in ("collective_slowdown", "collective_straggler"):
        assert (kinds[k].precision, kinds[k].recall, kinds[k].localization) == (1.0, 1.0, 1.0)

    # the job behind the collision: its report ranks the collided uplink first ...
    t0 = datetime.fromtimestamp(ecmp.start_ms / 1000, UTC)
    rep = job_report(store, "team-c/rl-c", t0, t0 + timedelta(minutes=2))
    top = next(h for h in rep.hops if h.evidence_for)
    assert (top.layer, top.name) == ("fabric_port", ecmp.subject)
    # ... and so does its collective_slowdown finding
    (f,) = [
        f
        for f in fstore.read(store, limit=1000)
        if f["kind"] == "collective_slowdown" and f["subject"] == rl_c
    ]
    ev = f["evidence"]
    assert ev["causes"][0]["name"] == ecmp.subject, ev["causes"]
    assert f"top cause: fabric_port {ecmp.subject}" in f["summary"]
