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
from telemetry.correlate.report import job_report, render_text
from telemetry.sim import build
from telemetry.sim.engine import Simulation
from telemetry.sim.nccl import comm_id
from telemetry.sim.run import ingest
from telemetry.sim.scenario import load_scenario
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
        2 + 24 + 4 + 2
    )  # steps x coll x ranks (rl-c, llm-a, ft-b, ar-d)
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
    # ... above the hops, what the job felt: its AllReduce bandwidth fell against the minutes
    # before the collision (the simulator slows the job's pace by the collided uplink's share)
    (coll,) = rep.collectives
    assert coll["collective"] == "AllReduce" and coll["samples"] > 0
    assert coll["change_ratio"] is not None and coll["change_ratio"] < -0.2, coll
    text = render_text(rep)
    assert text.index("collectives (NCCL Inspector)") < text.index("rank  score")
    assert f"{coll['change_ratio']:+.0%}" in text
    # ... with the job's communicator: its comm id, every rank and node of it reporting
    (comm,) = rep.communicators
    assert comm["comm_id"] == comm_id("team-c/rl-c") and comm["collectives"] == ["AllReduce"]
    assert comm["ranks_seen"] == comm["n_ranks"] > 1 and len(comm["nodes"]) == comm["n_nodes"]
    assert f"communicator {comm['comm_id']}: {comm['n_ranks']} of {comm['n_ranks']} ranks" in text
    # ... and so does its collective_slowdown finding
    (f,) = [
        f
        for f in fstore.read(store, limit=1000)
        if f["kind"] == "collective_slowdown" and f["subject"] == rl_c
    ]
    ev = f["evidence"]
    assert ev["causes"][0]["name"] == ecmp.subject, ev["causes"]
    assert f"top cause: fabric_port {ecmp.subject}" in f["summary"]
    # llm-a is behind the same collision without sampled flows on the collided uplink in this
    # window: the leaf pauses its NIC (PFC), and the congestion on that leaf that fills its buffer
    # (the collided uplink, a cause) ranks first, above the paused port and NIC (the victims)
    llm = job_report(store, "team-a/llm-a", t0, t0 + timedelta(minutes=2))
    top = next(h for h in llm.hops if h.evidence_for)
    assert (top.layer, top.name) == ("fabric_port", ecmp.subject), [
        (h.score, h.name) for h in llm.hops[:4]
    ]
    assert any(e.startswith("congestion on the switch that pauses") for e in top.evidence_for)


def test_inspector_files_the_simulator_writes_parse_exactly(tmp_path: Path) -> None:
    """The through-parsers path: each collective, written as an Inspector JSON line or Prom
    textfile sample and read back by live nccl sources (pid -> rendered cgroup -> pod), is the
    simulator's own record: same time, rank, pod, job, bandwidths and time."""
    from telemetry.config import load_config
    from telemetry.sim.through_parsers import ThroughParsersSource

    def sim() -> Simulation:
        return build(load_scenario("small").with_overrides(minutes=1, start="2026-11-01T00:00:00Z"))

    key = ("node", "rank", "coll_sn")
    fast = {
        tuple(r[k] for k in key): r
        for batches in sim().batches()
        for b in batches
        if b.kind.name == "collective_sample"
        for r in b.table.to_pylist()
    }
    src = ThroughParsersSource(sim(), load_config(None, env={}), workdir=tmp_path)
    parsed: list[dict] = []
    while not src.done:
        parsed += [
            r
            for b in src.collect()
            if b.kind.name == "collective_sample"
            for r in b.table.to_pylist()
        ]
    src.close()
    assert not src.stats.errors
    assert len(parsed) == len(fast) == 6 * 2 * 8 * 32
    assert {r["format_version"] for r in parsed} == {"v4.2", "prom"}
    for r in parsed:
        f = fast[tuple(r[k] for k in key)]
        for k in ("ts", "namespace", "pod", "pod_uid", "job", "comm_id", "pid", "n_ranks",
                  "n_nodes", "msg_size_bytes", "msg_size_bucket", "collective",
                  "algorithm", "protocol"):  # fmt: skip
            assert r[k] == f[k], (k, r, f)
        for k in ("bus_bandwidth_gbs", "algo_bandwidth_gbs", "exec_time_seconds"):
            assert abs(r[k] - f[k]) <= 1e-6 * max(1.0, f[k]), (k, r, f)
    # how each ran, as written (JSON coll_algo / coll_proto, the textfile's algo_proto label)
    assert {(r["job"], r["algorithm"], r["protocol"]) for r in parsed} == {
        ("rl-c", "NVLS_TREE", "SIMPLE"),
        ("llm-a", "NVLS_TREE", "SIMPLE"),
        ("ft-b", "NVLS_TREE", "SIMPLE"),
        ("ar-d", "RING", "SIMPLE"),
    }
