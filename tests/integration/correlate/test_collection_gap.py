"""collection_gap of an NCCL Inspector writer (detectors/collection.py) in the embedded store,
through both engine paths: a writer silent while its job's other nodes complete collectives is a
gap; a job whose collectives all stop (a hang: the rank that never entered the collective and the
ranks that wait for it complete nothing, so no Inspector writes) is not, even when one node
resumes a second before another, and neither is any part of a writer's silence the job shared."""

from __future__ import annotations

import pytest

from telemetry.correlate import findings as fstore
from telemetry.records import COLLECTIVE_SAMPLE
from telemetry.store import Store
from tests.integration.correlate.test_detectors import ms, run, t0

NODES = ("n1", "n2")


def _collectives(store: Store, quiet: dict[str, list[tuple[float, float]]], *,
                 offset_s: dict[str, float] | None = None, minutes: int = 10) -> None:  # fmt: skip
    """Two ranks per node of job `j`, one AllReduce record per rank every 5 s (the node's clock
    `offset_s` off), except in each node's `quiet` spans (seconds from t0, [a, b))."""
    s, rows = t0(), []
    for i in range(minutes * 60 // 5):
        for k, node in enumerate(NODES):
            at = i * 5 + (offset_s or {}).get(node, 0.0)
            if any(a <= at < b for a, b in quiet.get(node, [])):
                continue
            for r in (2 * k, 2 * k + 1):
                rows.append(
                    {
                        "ts": ms(s) + int(at * 1000),
                        "cluster": "c",
                        "node": node,
                        "namespace": "team",
                        "pod": f"j-{k}",
                        "job": "j",
                        "comm_id": "0xc",
                        "collective": "AllReduce",
                        "msg_size_bucket": "1GiB",
                        "rank": r,
                        "gpu": str(r % 2),
                        "pid": 4000 + r,
                        "n_ranks": 4,
                        "n_nodes": 2,
                        "coll_sn": i,
                        "msg_size_bytes": 1 << 30,
                        "exec_time_seconds": 0.05,
                        "algo_bandwidth_gbs": 20.0,
                        "bus_bandwidth_gbs": 30.0,
                    }
                )
    store.insert(COLLECTIVE_SAMPLE, COLLECTIVE_SAMPLE.to_arrow(rows))


def _writer_gaps(store: Store) -> set[str]:
    return {
        f["subject"]
        for f in fstore.read(store, kinds=["collection_gap"])
        if "/nccl" in f["subject"]
    }


@pytest.mark.parametrize("per_tick", [False, True], ids=["set-based", "per-tick"])
def test_a_writer_silent_while_its_job_runs_is_a_gap(store: Store, per_tick: bool) -> None:
    _collectives(store, {"n2": [(200.0, 600.0)]})
    run(store, t0(), 10, per_tick=per_tick)
    assert _writer_gaps(store) == {"n2/nccl"}
    (f,) = [f for f in fstore.read(store, kinds=["collection_gap"]) if f["subject"] == "n2/nccl"]
    assert f["evidence"]["job_paused_seconds"] == 0


@pytest.mark.parametrize("per_tick", [False, True], ids=["set-based", "per-tick"])
def test_a_hung_job_resuming_one_node_first_is_no_gap(store: Store, per_tick: bool) -> None:
    """Every collective stops for 90 s (a rank never entered one); n1's clock runs 1 s ahead and
    n2's 1.5 s behind, so the job resumes at 289 s on n1 and 291.5 s on n2: the tick at 290 s
    sees n1 report and n2 92.5 s behind it, all of it the job's hang."""
    hang = [(198.0, 288.0)]
    _collectives(store, {"n1": hang, "n2": hang}, offset_s={"n1": -1.0, "n2": 1.5})
    run(store, t0(), 10, per_tick=per_tick)
    assert _writer_gaps(store) == set()


@pytest.mark.parametrize("per_tick", [False, True], ids=["set-based", "per-tick"])
def test_a_writer_that_stays_silent_after_the_hang_is_a_gap(store: Store, per_tick: bool) -> None:
    """n2 stops when the job hangs and never reports again while n1 resumes: its silence counts
    from the resumption, so it is a gap once the job has run `time.gap_seconds` without it."""
    _collectives(store, {"n1": [(200.0, 290.0)], "n2": [(200.0, 600.0)]})
    run(store, t0(), 10, per_tick=per_tick)
    assert _writer_gaps(store) == {"n2/nccl"}
    (f,) = [f for f in fstore.read(store, kinds=["collection_gap"]) if f["subject"] == "n2/nccl"]
    assert f["evidence"]["job_paused_seconds"] >= 85
    # first judged once the job had run 60 s without it: it is at most a few ticks old then
    assert f["evidence"]["silent_seconds"] >= 60


def test_a_job_wide_quiet_inside_a_writers_silence_is_not_counted(store: Store) -> None:
    """n1 quiet for 40 s in the middle of n2's silence: no node reported then, so those 40 s are
    the job's pause, not part of n2's gap (which is still found: the job ran without it)."""
    _collectives(store, {"n1": [(300.0, 340.0)], "n2": [(200.0, 600.0)]})
    run(store, t0(), 10)
    (f,) = [f for f in fstore.read(store, kinds=["collection_gap"]) if f["subject"] == "n2/nccl"]
    assert 35 <= f["evidence"]["job_paused_seconds"] <= 45
