"""GPU pool inventory from real-format objects (tests/fixtures/pool: Volcano Queues and a
PodGroup from Volcano's docs, PriorityClasses and a ResourceQuota from Kubernetes' docs, pod
Events in the emitters' formats): the facts and rows the inventory keeps of them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from exporters.inventory.objects import GPU, load_dump
from exporters.inventory.state import InventoryState

FIX = Path(__file__).parents[2] / "fixtures" / "pool"


def rows_of(objs: list[dict[str, Any]], **kw: Any) -> tuple[InventoryState, dict[str, list]]:
    st = InventoryState(lambda: 1_800_000_000_000, **kw)
    st.apply_dump(objs)
    return st, st.drain_rows()


def by(rows: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    return {r[key]: r for r in rows}


def test_volcano_queues_quota_and_hierarchy() -> None:
    st, rows = rows_of(load_dump(FIX / "volcano_queues.yaml"))
    assert st.problems == []
    q = by(rows["queue"], "queue")
    assert set(q) == {"ml-team", "queue1", "q1", "engineering", "backend-team", "root-eng-prod"}
    assert q["ml-team"]["capability_gpus"] == 4  # "nvidia.com/gpu": "4" next to DRA dimensions
    assert q["ml-team"]["deserved_gpus"] is None and q["queue1"]["deserved_gpus"] is None
    assert q["q1"]["guarantee_gpus"] is None  # a guarantee of cpu/memory only
    assert (q["engineering"]["parent"], q["backend-team"]["parent"]) == ("root", "engineering")
    assert q["root-eng-prod"]["parent"] == "eng"  # from the volcano.sh/hierarchy annotation
    assert q["queue1"]["reclaimable"] is True and q["q1"]["weight"] == 1


def test_queue_gpu_quantities_and_a_bad_one() -> None:
    (obj,) = load_dump(FIX / "volcano_queues.yaml")[:1]
    obj = copy.deepcopy(obj)
    obj["spec"]["deserved"] = {"nvidia.com/gpu": 16}
    obj["spec"]["guarantee"] = {"resource": {"nvidia.com/gpu": "8"}}
    obj["spec"]["capability"]["nvidia.com/gpu"] = "1.5"
    st, rows = rows_of([obj])
    (r,) = rows["queue"]
    assert (r["deserved_gpus"], r["guarantee_gpus"], r["capability_gpus"]) == (16, 8, None)
    assert st.problems == [
        "Queue ml-team: capability nvidia.com/gpu '1.5' is not a whole number of GPUs; ignored"
    ]


def test_podgroup_unschedulable_condition_and_owner() -> None:
    _, rows = rows_of(load_dump(FIX / "volcano_podgroup.yaml"))
    (pg,) = rows["podgroup"]
    assert (pg["namespace"], pg["podgroup"], pg["job"], pg["queue"]) == (
        "default",
        "test",
        "test",
        "default",
    )
    assert (pg["min_member"], pg["min_gpus"], pg["phase"]) == (1, 0, "Running")
    assert pg["priority_class"] == "high-prority"  # as published
    assert pg["unschedulable"] is True
    assert pg["reason"] == (
        "NotEnoughResources: 1/0 tasks in gang unschedulable: pod group is not ready, 1 minAvailable."
    )
    assert "job" not in rows  # owned by a Job: the Job, not the PodGroup, is the job row


def test_standalone_podgroup_is_a_job_too_and_deletion_closes_both() -> None:
    (obj,) = load_dump(FIX / "volcano_podgroup.yaml")
    obj = copy.deepcopy(obj)
    obj["metadata"].pop("ownerReferences")
    obj["spec"]["minResources"]["nvidia.com/gpu"] = "16"
    st, rows = rows_of([obj])
    assert rows["podgroup"][0]["min_gpus"] == 16 and rows["podgroup"][0]["job"] == ""
    assert rows["job"][0]["job"] == "test"
    st.event("DELETED", obj, at=1_800_000_001_000)
    closed = st.drain_rows()
    assert {k: [r["valid_to"] for r in v] for k, v in closed.items()} == {
        "podgroup": [1_800_000_001_000],
        "job": [1_800_000_001_000],
    }


def test_priority_classes_with_configured_provisioning_and_purpose_keys() -> None:
    objs = copy.deepcopy(load_dump(FIX / "k8s_priorityclasses.yaml"))
    _, rows = rows_of(objs)
    pc = by(rows["priority_class"], "priority_class")
    assert pc["high-priority"]["value"] == 1_000_000
    assert pc["high-priority"]["preemption_policy"] == "PreemptLowerPriority"  # API default
    assert pc["high-priority-nonpreempting"]["preemption_policy"] == "Never"
    assert pc["high-priority"]["provisioning"] == "" and pc["high-priority"]["purpose"] == ""
    # the platform's own keys: a label wins over an annotation of another configured key
    objs[0]["metadata"]["labels"] = {"example.com/capacity": "Reserved"}
    objs[0]["metadata"]["annotations"] = {"example.com/tier": "Spot", "example.com/use": "Serving"}
    _, rows = rows_of(
        objs,
        provisioning_keys=("example.com/capacity", "example.com/tier"),
        purpose_keys=("example.com/use",),
    )
    pc = by(rows["priority_class"], "priority_class")
    assert (pc["high-priority"]["provisioning"], pc["high-priority"]["purpose"]) == (
        "Reserved",
        "Serving",
    )


def test_resource_quota_gpu_lines() -> None:
    obj = copy.deepcopy(load_dump(FIX / "k8s_resourcequota.yaml")[0])
    obj["status"] = {"hard": obj["spec"]["hard"], "used": {"requests.nvidia.com/gpu": "3"}}
    _, rows = rows_of([obj])
    (q,) = rows["resource_quota"]
    assert (q["namespace"], q["quota"], q["gpus_hard"], q["gpus_used"]) == (
        "myspace",
        "compute-resources",
        4,
        3,
    )


def test_pod_events_preemption_and_eviction_once_each() -> None:
    objs = load_dump(FIX / "k8s_events.yaml")
    st, rows = rows_of(objs)
    ev = by(rows["pod_event"], "pod")
    assert set(ev) == {"spot-train-0", "spot-train-1"}  # `Scheduled` is not a pool event
    pre = ev["spot-train-0"]
    assert (pre["reason"], pre["preemptor"], pre["node"], pre["source"]) == (
        "Preempted",
        "5f1d2a9c-8e7b-4c3d-9a0f-1b2c3d4e5f60",
        "gpu-node-3",
        "default-scheduler",
    )
    assert pre["ts"] == 1_795_169_702_000  # lastTimestamp 2026-11-20T10:15:02Z
    vol = ev["spot-train-1"]
    assert (vol["reason"], vol["preemptor"], vol["source"]) == ("Evict", "", "volcano")
    st.sync("Event", objs)  # a re-list repeats nothing
    assert st.drain_rows() == {}
    again = copy.deepcopy(objs[1])
    again["count"] = 2
    st.event("MODIFIED", again)
    assert [r["count"] for r in st.drain_rows()["pod_event"]] == [2]


def test_pod_gpu_requests_model_and_node_gpus() -> None:
    pod = {
        "kind": "Pod",
        "metadata": {
            "name": "w-0",
            "namespace": "team-a",
            "annotations": {"scheduling.k8s.io/group-name": "train-pg"},
        },
        "spec": {
            "nodeName": "gpu-1",
            "priorityClassName": "spot-training",
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            "containers": [
                {"name": "a", "resources": {"limits": {"nvidia.com/gpu": "4"}}},
                {"name": "b", "resources": {"requests": {"nvidia.com/gpu": 2}}},
                {"name": "c"},
            ],
            "initContainers": [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
        },
        "status": {"phase": "Running"},
    }
    node = {
        "kind": "Node",
        "metadata": {
            "name": "gpu-1",
            "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        },
        "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "7"}},
    }
    _, rows = rows_of([pod, node])
    (p,) = rows["pod"]
    assert (p["gpu_requests"], p["priority_class"], p["podgroup"], p["gpu_model"]) == (
        6,
        "spot-training",
        "train-pg",
        "NVIDIA-H100-80GB-HBM3",
    )
    (n,) = rows["node"]
    assert (n["gpus"], n["gpu_capacity"], n["gpu_model"]) == (7, 8, "NVIDIA-H100-80GB-HBM3")
    # a model set by required node affinity instead of a nodeSelector
    del pod["spec"]["nodeSelector"]
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "nvidia.com/gpu.product",
                                "operator": "In",
                                "values": ["NVIDIA-H200", "NVIDIA-H100-80GB-HBM3"],
                            }
                        ]
                    }
                ]
            }
        }
    }
    _, rows = rows_of([pod])
    assert rows["pod"][0]["gpu_model"] == "NVIDIA-H100-80GB-HBM3|NVIDIA-H200"


def test_resource_quota_of_1k_gpus_as_the_api_server_prints_it() -> None:
    """The API server prints a quantity of 1000 as `1k` (tests/fixtures/pool/quota/rq_1k.yaml)."""
    st, rows = rows_of(load_dump(FIX / "quota" / "rq_1k.yaml"))
    (q,) = rows["resource_quota"]
    assert (q["gpus_hard"], q["gpus_used"]) == (1000, 296)
    assert st.problems == []


@pytest.mark.parametrize(
    ("value", "gpus"),
    [
        ("1k", 1000),
        ("2Ki", 2048),
        ("1e3", 1000),
        ("1E3", 1000),
        ("2000m", 2),
        ("+8", 8),
        ("16.", 16),
        ("0.01k", 10),
        (8, 8),
        (1e3, 1000),  # a YAML float
        ("1500m", None),
        ("1.5", None),
        ("-1", None),
        ("1K", None),  # not a suffix
        ("1ki", None),
        ("8 ", None),
        ("0x10", None),
        ("1e99999", None),
        (True, None),
        ({"value": 8}, None),
    ],
)
def test_gpu_quantities_are_kubernetes_quantities(value: Any, gpus: int | None) -> None:
    """Every GPU count (Node capacity/allocatable, pod requests/limits, Queue capability/deserved/
    guarantee, PodGroup minResources, ResourceQuota hard/used) reads one quantity parser; what is
    not a whole quantity is a named warning and null, never a rounded number."""
    pod = {
        "kind": "Pod",
        "metadata": {"name": "w-0", "namespace": "team-a"},
        "spec": {"containers": [{"name": "a", "resources": {"limits": {GPU: value}}}]},
        "status": {"phase": "Pending"},
    }
    node = {"kind": "Node", "metadata": {"name": "gpu-1"}, "status": {"capacity": {GPU: value}}}
    queue = copy.deepcopy(load_dump(FIX / "volcano_queues.yaml")[0])
    queue["spec"]["capability"][GPU] = value
    pg = copy.deepcopy(load_dump(FIX / "volcano_podgroup.yaml")[0])
    pg["spec"]["minResources"][GPU] = value
    rq = copy.deepcopy(load_dump(FIX / "quota" / "rq_1k.yaml")[0])
    rq["spec"]["hard"]["requests." + GPU] = value
    st, rows = rows_of([pod, node, queue, pg, rq])
    got = (
        rows["pod"][0]["gpu_requests"],
        rows["node"][0]["gpu_capacity"],
        rows["queue"][0]["capability_gpus"],
        rows["podgroup"][0]["min_gpus"] or None,
        rows["resource_quota"][0]["gpus_hard"],
    )
    assert got == (gpus,) * 5
    assert len(st.problems) == (0 if gpus is not None else 5)
    assert all(f"{GPU} {value!r} is " in p and p.endswith("; ignored") for p in st.problems)
