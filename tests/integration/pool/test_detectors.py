"""Pool detectors on the real embedded store: 4 H100 nodes with 4 GPUs each held (16 free over
4 nodes), an empty A100 node; an 8-per-node gang blocked, a 4-per-node gang that fits; one idle
holder, one idle notebook inside its longer grace; a queue over its deserved share while the
blocked gang's queue is under its guarantee. gpu_idle_allocated's set-based form judges as its
per-tick form, tick by tick."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from telemetry.correlate import Correlator
from telemetry.correlate import findings as fstore
from telemetry.correlate.registry import Context, Window, detectors
from telemetry.correlate.thresholds import default_thresholds, merge_thresholds
from telemetry.records import GPU_SAMPLE, JOB, NODE, POD, PODGROUP, PRIORITY_CLASS, QUEUE
from telemetry.store import Store
from tests.integration.pool.test_accounting import C, inv, ms, pclass, queue, t0

H100, A100 = "NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"
ONLY = ["gpu_idle_allocated", "gang_blocked_by_fragmentation", "queue_over_guarantee_starving"]


def pod(ns: str, name: str, node: str, phase: str, gpus: int, **kw: Any) -> dict[str, Any]:
    base = dict(namespace=ns, pod=name, uid=name, node=node, job=kw.pop("job", ""), phase=phase,
                gpus="", gpu_requests=gpus, priority_class=kw.pop("pc", "train"),
                podgroup=kw.pop("pg", ""), gpu_model=kw.pop("model", ""))  # fmt: skip
    return inv(POD, kw.pop("start"), **base)


def podgroup(ns: str, name: str, queue: str, members: int, gpus: int, start: datetime) -> Any:
    return inv(PODGROUP, start, namespace=ns, podgroup=name, job="", queue=queue,
               priority_class="train", min_member=members, min_gpus=gpus, phase="Pending",
               unschedulable=True, reason="NotEnoughResources: 2/2 tasks in gang unschedulable")  # fmt: skip


def fill(
    store: Store,
    s: datetime,
    minutes: int,
    busy: Callable[[str, int], float | None] = lambda pod, i: None,
    at: Callable[[str, int], float | None] = lambda node, i: 10.0 * i,
) -> None:
    """`busy(pod, i)`: the utilization of `pod`'s GPUs at sample i (10 s apart) where not None,
    in place of its own; `at(node, i)`: when node takes sample i, seconds after `s` (None: the
    poll is lost)."""
    early = s - timedelta(hours=1)
    nodes = [f"h{i}" for i in range(4)]
    rows: dict[Any, list[dict[str, Any]]] = {
        NODE: [inv(NODE, early, node=n, labels="{}", idc="", su="", gpus=8, gpu_capacity=8,
                   gpu_model=H100) for n in nodes]
        + [inv(NODE, early, node="a0", labels="{}", idc="", su="", gpus=8, gpu_capacity=8,
               gpu_model=A100)],
        POD: [pod("team-x", f"fill-{i}", n, "Running", 4, job="fill", start=early,
                  pc="notebook" if i == 1 else "train") for i, n in enumerate(nodes)]
        + [pod("team-a", f"big-{i}", "", "Pending", 8, pg="big", model=H100, start=s)
           for i in range(2)]
        + [pod("team-b", f"small-{i}", "", "Pending", 4, pg="small", model=H100, start=s)
           for i in range(2)],
        PODGROUP: [podgroup("team-a", "big", "q-a", 2, 16, s),
                   podgroup("team-b", "small", "q-b", 2, 8, s)],
        JOB: [inv(JOB, early, namespace="team-x", job="fill", queue="q-over", replicas=4,
                  topology_mode="", highest_tier_allowed=None, highest_tier_name=None,
                  allocated_hypernode="")],
        QUEUE: [queue(early, "q-over", 4, None), queue(early, "q-a", 16, 8),
                queue(early, "q-b", 8, None)],
        PRIORITY_CLASS: [pclass(early, "train", 100, "Reserved", "Training"),
                         pclass(early, "notebook", 50, "Spot", "Interactive")],
    }  # fmt: skip
    util = {"fill-0": 0.0, "fill-1": 0.01, "fill-2": 0.8, "fill-3": 0.7}
    samples = []
    for i in range(minutes * 6 + 1):
        for k, n in enumerate(nodes):
            if (when := at(n, i)) is None:
                continue
            for g in range(8):
                held = g < 4
                samples.append(
                    {"ts": ms(s + timedelta(seconds=when)), "cluster": C, "node": n, "gpu": g,
                     "uuid": f"{n}-{g}", "mig": "", "model": H100, "pci_bus_id": "",
                     "pod": f"fill-{k}" if held else "", "namespace": "team-x" if held else "",
                     "up": 1, "utilization_ratio": (busy(f"fill-{k}", i) if held else None)
                     or (util[f"fill-{k}"] if held else 0.0)}
                )  # fmt: skip
    rows[GPU_SAMPLE] = samples
    for kind, rs in rows.items():
        store.insert(kind, kind.to_arrow(rs))


def test_pool_findings(store: Store) -> None:
    s = t0()
    fill(store, s, minutes=5)
    th = {"pool": {"idle_allocated_seconds": 120,
                   "idle_allocated_seconds_by_purpose": {"Interactive": 600}}}  # fmt: skip
    Correlator(store, cluster=C, thresholds=th, only=ONLY).run(s, s + timedelta(minutes=5))
    got = {(f["kind"], f["subject"]): f for f in fstore.read(store)}
    assert set(got) == {
        ("gpu_idle_allocated", "team-x/fill-0"),  # fill-1 is a notebook: 600 s grace
        ("gang_blocked_by_fragmentation", "team-a/big"),  # team-b/small fits
        ("queue_over_guarantee_starving", "q-a"),  # q-b has no guarantee
    }

    ev = got[("gang_blocked_by_fragmentation", "team-a/big")]["evidence"]
    assert (ev["free_gpus"], ev["largest_placeable_members"], ev["members"]) == (16, 0, 2)
    assert ev["free_gpus_per_node"] == {"h0": 4, "h1": 4, "h2": 4, "h3": 4}  # not the A100
    ev = got[("gpu_idle_allocated", "team-x/fill-0")]["evidence"]
    assert (ev["gpus"], ev["queue"], ev["job"]) == (4, "q-over", "fill")
    assert ev["idle_gpu_hours"] >= 4 * 120 / 3600
    ev = got[("queue_over_guarantee_starving", "q-a")]["evidence"]
    assert ev["over_deserved"] == {"q-over": {"allocated_gpus": 16, "deserved_gpus": 4}}
    assert ev["waiting_gangs"] == ["team-a/big"]


# each node's own phase after the grid: h0's jitter carries some of its samples across the
# boundary of the next 10 s interval
PHASE_S = {"h0": 8.9, "h1": 0.4, "h2": 5.3, "h3": 3.1, "a0": 7.6}


def _off_grid(node: str, i: int) -> float | None:
    """Each node at its own phase, +-1.5 s of jitter, and a lost poll now and then: as real
    exporters sample."""
    k = sum(map(ord, node))
    if (k + i) % 11 == 0:
        return None
    return 10.0 * i + PHASE_S[node] + ((k * 7 + i * 13) % 31 - 15) / 10


@pytest.mark.parametrize("timing", ["grid", "off-grid"])
def test_idle_allocated_set_based_judges_as_the_loop(store: Store, timing: str) -> None:
    """Over 5 minutes of ticks: fill-0 busy for its first minute, then idle (found once its 120 s
    window holds no busy sample, idle since its last busy one); the notebook fill-1 idle all
    along but found only once 240 s (its purpose's grace) of samples lie behind the tick; a pod
    idle on the A100 node that ends (Succeeded) after 150 s: found while it runs, not after. The
    set-based form (one evaluation over every tick) finds what the per-tick form finds at each,
    with samples on the grid and with each node at its own phase, jittered, polls lost."""
    s = t0()
    at = _off_grid if timing == "off-grid" else (lambda node, i: 10.0 * i)
    fill(store, s, minutes=5, busy=lambda pod, i: 0.9 if pod == "fill-0" and i < 6 else None,
         at=at)  # fmt: skip
    gone, early = s + timedelta(seconds=150), s - timedelta(hours=1)
    store.insert(POD, POD.to_arrow([
        {**pod("team-x", "gone", "a0", "Running", 1, job="fill", start=early),
         "valid_to": ms(gone)},
        pod("team-x", "gone", "a0", "Succeeded", 1, job="fill", start=gone),
    ]))  # fmt: skip
    store.insert(GPU_SAMPLE, GPU_SAMPLE.to_arrow([
        {"ts": ms(s + timedelta(seconds=10 * i)), "cluster": C, "node": "a0", "gpu": 0,
         "uuid": "a0-0", "mig": "", "model": A100, "pci_bus_id": "", "pod": "gone",
         "namespace": "team-x", "up": 1, "utilization_ratio": 0.0}
        for i in range(16)
    ]))  # fmt: skip
    th = merge_thresholds(default_thresholds(), {"pool": {
        "idle_allocated_seconds": 120, "idle_allocated_seconds_by_purpose": {"Interactive": 240}}})  # fmt: skip
    spec = detectors()["gpu_idle_allocated"]
    assert spec.over is not None
    ticks = [s + timedelta(seconds=10 * i) for i in range(1, 31)]
    span = timedelta(seconds=120)
    loop = {}
    for t in ticks:
        if found := spec.fn(Context(store, Window(t - span, t), th, C)):
            loop[t] = found
    over = spec.over(Context(store, Window(ticks[0] - span, ticks[-1]), th, C, ticks=tuple(ticks)))
    assert {t: [repr(f) for f in fs] for t, fs in over.items()} == {
        t: [repr(f) for f in fs] for t, fs in loop.items()
    }

    def seen_at(subject: str) -> list[int]:
        return sorted((t - s).seconds for t, fs in loop.items() for f in fs if f.subject == subject)

    seen = {f.subject for fs in loop.values() for f in fs}
    assert seen == {"team-x/fill-0", "team-x/fill-1", "team-x/gone"}
    if timing == "off-grid":  # when each is first found follows the samples' own times
        return
    assert seen_at("team-x/fill-0")[0] == 180  # the busy sample at 50 s leaves the window
    assert seen_at("team-x/fill-1")[0] == 220  # 240 s back, less the 20 s slack
    assert seen_at("team-x/gone") == [100, 110, 120, 130, 140]  # Succeeded as of 150 s
    (f,) = [f for f in loop[ticks[-1]] if f.subject == "team-x/fill-0"]
    assert f.evidence["idle_since"] == (s + timedelta(seconds=50)).isoformat()
    assert (f.evidence["gpus"], f.evidence["queue"]) == (4, "q-over")
