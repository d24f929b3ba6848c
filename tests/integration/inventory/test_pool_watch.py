"""GPU pool objects through list+watch: the test API server serves Volcano's published Queues
and PodGroup, Kubernetes' PriorityClasses and ResourceQuota and pod Events; the store gets the
versioned facts and one row per preemption/eviction, with `fieldSelector` narrowing events."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from exporters.inventory.objects import load_dump
from exporters.inventory.source import InventorySource
from telemetry.transforms import StampCluster
from tests.integration.inventory.fake_kube import FakeKube
from tests.integration.inventory.test_watch import api, kubeconfig, until

FIX = Path(__file__).parents[2] / "fixtures" / "pool"
__all__ = ["api"]  # the API server fixture, shared with test_watch


async def test_pool_objects_listed_watched_and_stored(
    api: tuple[FakeKube, str], store: Any, tmp_path: Path
) -> None:
    kube, url = api
    for f in sorted(FIX.glob("*.yaml")):
        for obj in load_dump(f):
            await kube.put(copy.deepcopy(obj))
    cfg = InventorySource.Config(kubeconfig=kubeconfig(tmp_path, url, kube.token))
    src = InventorySource(config=cfg, store=store, cluster="default")

    def sync_store() -> None:
        for b in src.collect():
            store.insert(b.kind, StampCluster("default").process(b).table)

    try:
        sync_store()
        await until(
            lambda: src.watcher is not None and "Queue" in src.watcher.resource_versions,
            "initial lists",
        )
        await until(lambda: src.watcher.relists.get("Event") == 1, "events listed")
        sync_store()
        # a watch event: the PodGroup is scheduled, its Unschedulable condition goes away
        (pg,) = [copy.deepcopy(o) for o in load_dump(FIX / "volcano_podgroup.yaml")]
        pg["status"]["conditions"] = pg["status"]["conditions"][1:]
        rv = await kube.put(pg)
        await until(lambda: src.watcher.resource_versions.get("PodGroup") == str(rv), "event")
        sync_store()
    finally:
        src.close()

    q = store.query_rows(
        f"SELECT queue, parent, capability_gpus FROM {store.table('queue')} FINAL ORDER BY queue"
    )
    assert ("ml-team", "", 4) in q and ("backend-team", "engineering", None) in q and len(q) == 6
    assert store.query_rows(
        f"SELECT unschedulable, reason, valid_to IS NULL FROM {store.table('podgroup')} FINAL "
        "ORDER BY valid_from, updated_at"
    ) == [
        (
            True,
            "NotEnoughResources: 1/0 tasks in gang unschedulable: pod group is not ready, "
            "1 minAvailable.",
            False,
        ),
        (False, "", True),
    ]
    assert store.query_rows(
        f"SELECT priority_class, preemption_policy FROM {store.table('priority_class')} FINAL "
        "ORDER BY priority_class"
    ) == [("high-priority", "PreemptLowerPriority"), ("high-priority-nonpreempting", "Never")]
    assert store.query_rows(
        f"SELECT namespace, gpus_hard FROM {store.table('resource_quota')} FINAL"
    ) == [("myspace", 4)]
    assert store.query_rows(
        f"SELECT pod, reason, node FROM {store.table('pod_event')} FINAL ORDER BY pod"
    ) == [("spot-train-0", "Preempted", "gpu-node-3"), ("spot-train-1", "Evict", "")]
    ev_lists = kube.list_requests("Event")
    assert ev_lists and all(q.get("fieldSelector") == "involvedObject.kind=Pod" for q in ev_lists)
    assert src.watcher.missing == set()
