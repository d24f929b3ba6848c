"""Kubernetes / Volcano objects as the API server returns them, for the inventory tests: only the
fields railscope reads, with the defaults most tests want."""

from __future__ import annotations

from typing import Any


def pod(
    name: str,
    ip: str | None,
    phase: str = "Running",
    node: str = "gpu-1",
    ns: str = "team-a",
) -> dict[str, Any]:
    """A Pod on `node`; `ip` None: no podIP yet (Pending)."""
    status: dict[str, Any] = {"phase": phase}
    if ip:
        status["podIP"] = ip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": f"u-{name}"},
        "spec": {"nodeName": node},
        "status": status,
    }


def volcano_job(
    name: str, ns: str, *, mode: str, tier: int, replicas: int, queue: str | None = None
) -> dict[str, Any]:
    """A Volcano Job with one task and a networkTopology (`mode` hard|soft up to `tier`)."""
    spec: dict[str, Any] = {
        "networkTopology": {"mode": mode, "highestTierAllowed": tier},
        "tasks": [{"replicas": replicas}],
    }
    if queue is not None:
        spec["queue"] = queue
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def podgroup_of(job: str, ns: str, allocated: str) -> dict[str, Any]:
    """The PodGroup Volcano creates for Job `job`, with the HyperNode it allocated."""
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": f"{job}-uid",
            "namespace": ns,
            "annotations": {"volcano.sh/job-allocated-hypernode": allocated},
            "ownerReferences": [
                {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": job}
            ],
        },
    }
