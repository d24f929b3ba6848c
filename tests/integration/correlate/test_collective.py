"""collective_slowdown and collective_straggler on collective_samples in the real embedded store:
each fires on its condition with the cause ranked / the rank localized, and stays quiet on a
healthy job."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from telemetry.correlate.detectors.collective import collective_slowdown, collective_straggler
from telemetry.correlate.registry import Context, Window
from telemetry.correlate.report import job_report
from telemetry.correlate.thresholds import default_thresholds
from telemetry.records import COLLECTIVE_SAMPLE, GPU_NIC_AFFINITY, GPU_SAMPLE, POD
from telemetry.store import Store

END = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
START = END - timedelta(seconds=60)  # the judged window; the baseline is the 10 min before


def ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def samples(
    job: str,
    *,
    slow_from: datetime | None = None,
    straggler: int | None = None,
    ranks: int = 4,
) -> list[dict[str, Any]]:
    """A job's AllReduce (256 MiB) every 5 s for 11 minutes on `ranks` ranks over 2 nodes (rank r
    on node n{r // 2 + 1}, GPU r % 2): 300 GB/s, 150 GB/s from `slow_from`; rank `straggler`
    takes twice the others' time."""
    out = []
    t = END - timedelta(seconds=660)
    sn = 0
    while t < END:
        bw = 150.0 if slow_from is not None and t >= slow_from else 300.0
        for r in range(ranks):
            secs = (1 << 28) / (bw * 1e9 / 1.5)
            out.append(
                {
                    "ts": ms(t),
                    "cluster": "c",
                    "node": f"n{r // 2 + 1}",
                    "namespace": "team",
                    "pod": f"{job}-{r // 2}",
                    "job": job,
                    "comm_id": f"0x{job}",
                    "collective": "AllReduce",
                    "msg_size_bucket": "256MiB",
                    "rank": r,
                    "gpu": str(r % 2),
                    "pid": 100 + r,
                    "n_ranks": ranks,
                    "n_nodes": 2,
                    "coll_sn": sn,
                    "msg_size_bytes": 1 << 28,
                    "exec_time_seconds": secs * (2 if r == straggler else 1),
                    "algo_bandwidth_gbs": bw / 1.5,
                    "bus_bandwidth_gbs": bw,
                }
            )
        sn += 1
        t += timedelta(seconds=5)
    return out


def pods(job: str) -> list[dict[str, Any]]:
    t = ms(END - timedelta(hours=1))
    return [
        {
            "cluster": "c",
            "namespace": "team",
            "pod": f"{job}-{i}",
            "uid": f"u-{job}-{i}",
            "node": f"n{i + 1}",
            "job": job,
            "phase": "Running",
            "gpus": json.dumps(["0", "1"]),
            "valid_from": t,
            "updated_at": t,
        }
        for i in range(2)
    ]


def ctx(store: Store) -> Context:
    return Context(store, Window(START, END), default_thresholds(), "c")


def test_slowdown_against_own_baseline_with_the_throttled_gpus_as_top_cause(store: Store) -> None:
    store.insert(
        COLLECTIVE_SAMPLE,
        COLLECTIVE_SAMPLE.to_arrow(samples("slow", slow_from=START) + samples("fine")),
    )
    store.insert(POD, POD.to_arrow(pods("slow") + pods("fine")))
    gpu = [  # n2's GPUs throttled by power during the window; n1's not
        {
            "ts": ms(START) + i * 10_000,
            "cluster": "c",
            "node": n,
            "gpu": g,
            "up": 1,
            "utilization_ratio": 0.9,
            "clock_event_reasons": 0x4 if n == "n2" else 0,
        }
        for i in range(6)
        for n in ("n1", "n2")
        for g in (0, 1)
    ]
    store.insert(GPU_SAMPLE, GPU_SAMPLE.to_arrow(gpu))
    (f,) = collective_slowdown(ctx(store))
    assert (f.kind, f.subject_type, f.subject) == (
        "collective_slowdown",
        "communicator",
        "team/slow/0xslow",
    )
    (c,) = f.evidence["collectives"]
    assert (c["collective"], c["msg_size_bucket"]) == ("AllReduce", "256MiB")
    assert (c["bus_bandwidth_gbs"], c["baseline_gbs"], c["drop_ratio"]) == (150.0, 300.0, 0.5)
    assert f.evidence["causes"][0]["layer"] == "gpu"
    assert f.evidence["causes"][0]["name"] == "n2/gpus"
    assert "top cause: gpu n2/gpus" in f.summary
    # the causes are the job report's path hops with evidence, ranked as it ranks them
    rep = job_report(store, "team/slow", START, END, cluster="c")
    assert (
        f.evidence["causes"]
        == [
            {"layer": h.layer, "name": h.name, "score": h.score, "evidence": h.evidence_for[:2]}
            for h in rep.hops
            if h.evidence_for
        ][:3]
    )
    assert len(f.evidence["causes"]) >= 2  # the throttled GPUs and the other node's
    assert collective_straggler(ctx(store)) == []  # every rank equally slow: no straggler


def test_causes_are_kept_across_ticks_and_refreshed(store: Store, monkeypatch: Any) -> None:
    """With the engine's memo, a slowed job's causes are recomputed every tick while they name
    nothing, then kept until `collective.causes_refresh_seconds` have passed."""
    import telemetry.correlate.detectors.collective as mod

    slow_from = START - timedelta(seconds=120)  # slow in every window below
    store.insert(
        COLLECTIVE_SAMPLE, COLLECTIVE_SAMPLE.to_arrow(samples("slow", slow_from=slow_from))
    )
    store.insert(POD, POD.to_arrow(pods("slow")))
    calls: list[datetime] = []
    answers = iter(
        [[], [{"layer": "gpu", "name": "n2/gpus"}]] + [[{"layer": "nic", "name": "x"}]] * 9
    )

    def ranked(c: Context, job: str) -> list[dict[str, Any]]:
        calls.append(c.window.end)
        return next(answers)

    monkeypatch.setattr(mod, "_ranked_causes", ranked)
    memo: dict[str, Any] = {}
    causes = []
    for tick in range(9):  # 10 s ticks: 0 s (none yet), 10 s (found), kept until 70 s
        end = END - timedelta(seconds=80 - 10 * tick)
        c = Context(
            store,
            Window(end - timedelta(seconds=60), end),
            default_thresholds(),
            "c",
            {"memo": memo},
        )
        (f,) = collective_slowdown(c)
        causes.append(f.evidence["causes"][0]["name"] if f.evidence["causes"] else "")
    first = END - timedelta(seconds=80)
    assert calls == [first, first + timedelta(seconds=10), first + timedelta(seconds=70)]
    assert causes == [
        "",
        "n2/gpus",
        "n2/gpus",
        "n2/gpus",
        "n2/gpus",
        "n2/gpus",
        "n2/gpus",
        "x",
        "x",
    ]


def test_straggler_localized_to_node_gpu_and_nic(store: Store) -> None:
    store.insert(
        COLLECTIVE_SAMPLE,
        COLLECTIVE_SAMPLE.to_arrow(samples("s", straggler=3) + samples("ok", ranks=4)),
    )
    store.insert(
        GPU_NIC_AFFINITY,
        GPU_NIC_AFFINITY.to_arrow(
            [
                {
                    "ts": ms(START),
                    "cluster": "c",
                    "node": "n2",
                    "gpu": g,
                    "nic": f"mlx5_{g}",
                    "direct_nic": 1,
                }
                for g in (0, 1)
            ]
        ),
    )
    (f,) = collective_straggler(ctx(store))
    assert (f.kind, f.subject_type, f.subject) == ("collective_straggler", "gpu", "n2/gpu1")
    e = f.evidence
    assert (e["job"], e["rank"], e["node"], e["gpu"], e["nic"]) == (
        "team/s",
        3,
        "n2",
        "1",
        "mlx5_1",
    )
    assert e["slow_collectives"] == e["collectives"] == 12  # every collective of the window
    assert collective_slowdown(ctx(store)) == []  # bandwidth steady: no slowdown


def test_second_slowdown_right_after_a_first_is_still_seen(store: Store) -> None:
    """A baseline holding an earlier slowdown (300 GB/s, then 200 GB/s for its last half) is not
    noise: the window's 100 GB/s is a new slowdown. The MAD around the baseline's median (about
    50 GB/s here) would have hidden it; the step-to-step noise of the baseline is ~0."""
    rows = samples("twice")
    for r in rows:
        t = r["ts"]
        bw = 100.0 if t >= ms(START) else 200.0 if t >= ms(START) - 300_000 else 300.0
        r["bus_bandwidth_gbs"], r["algo_bandwidth_gbs"] = bw, bw / 1.5
    store.insert(COLLECTIVE_SAMPLE, COLLECTIVE_SAMPLE.to_arrow(rows))
    (f,) = collective_slowdown(ctx(store))
    assert f.subject == "team/twice/0xtwice"
    (c,) = f.evidence["collectives"]
    assert c["bus_bandwidth_gbs"] == 100.0 and 200.0 <= c["baseline_gbs"] <= 300.0
