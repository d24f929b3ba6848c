"""Pool detectors on the real embedded store: 4 H100 nodes with 4 GPUs each held (16 free over
4 nodes), an empty A100 node; an 8-per-node gang blocked, a 4-per-node gang that fits; one idle
holder, one idle notebook inside its longer grace; a queue over its deserved share while the
blocked gang's queue is under its guarantee."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from telemetry.correlate import Correlator
from telemetry.correlate import findings as fstore
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


def fill(store: Store, s: datetime, minutes: int) -> None:
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
            for g in range(8):
                held = g < 4
                samples.append(
                    {"ts": ms(s + timedelta(seconds=10 * i)), "cluster": C, "node": n, "gpu": g,
                     "uuid": f"{n}-{g}", "mig": "", "model": H100, "pci_bus_id": "",
                     "pod": f"fill-{k}" if held else "", "namespace": "team-x" if held else "",
                     "up": 1, "utilization_ratio": util[f"fill-{k}"] if held else 0.0}
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
