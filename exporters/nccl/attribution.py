"""(hostname, pid) -> container -> pod, and rank -> GPU, for NCCL Inspector rows.

A process's pod comes from its cgroup (exporters/common/cgroup.py, shared with the node
exporter); the pod's name, namespace, job and GPU assignment come from the inventory (`pods` in
the store) by UID.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporters.common.cgroup import PodOwners


@dataclass(frozen=True)
class PodInfo:
    namespace: str
    pod: str
    job: str
    gpus: tuple[str, ...]  # the pod's GPU assignment (indices or UUIDs), in order
    uid: str = ""


class Attributor(PodOwners):
    """Who ran each rank. `pods(uid)` looks up a pod's inventory facts by UID, `named(name)` by
    pod name (None: not known yet); a pid's pod comes from its cgroup (PodOwners)."""

    def __init__(
        self,
        proc_root: str | Path = "/proc",
        pods: Callable[[str], PodInfo | None] = lambda uid: None,
        named: Callable[[str], PodInfo | None] = lambda name: None,
    ) -> None:
        super().__init__(proc_root)
        self.pods = pods
        self.named = named

    def attribute(
        self, pid: int, rank: int, n_ranks: int, n_nodes: int, gpu: str, *, host: str = ""
    ) -> dict[str, Any]:
        """The pod columns of one row (every key present; '' when unknown): by pid through
        `/proc/PID/cgroup` when `host` is empty (the rank ran in this node's pid namespace),
        else by pod name = `host` (a pod's hostname is its name)."""
        out = {"pod_uid": "", "container_id": "", "namespace": "", "pod": "", "job": "", "gpu": gpu}
        if host:
            info = self.named(host)
        else:
            o = self.owner(pid)
            if o is None:
                return out
            out["pod_uid"], out["container_id"] = o.pod_uid, o.container_id
            info = self.pods(o.pod_uid)
        if info is None:
            return out
        out["pod_uid"] = out["pod_uid"] or info.uid
        out.update(namespace=info.namespace, pod=info.pod, job=info.job)
        if not gpu:
            out["gpu"] = rank_gpu(info.gpus, rank, n_ranks, n_nodes)
        return out


def rank_gpu(gpus: tuple[str, ...], rank: int, n_ranks: int, n_nodes: int) -> str:
    """The GPU a rank ran on, where the pod's assignment says it: the pod's only GPU, or (ranks
    laid out node by node, one per GPU, as torchrun/mpirun place them: n_ranks = n_nodes x GPUs
    per pod) the pod's GPU at the local rank `rank % len(gpus)`. '' when it cannot be known."""
    if len(gpus) == 1:
        return gpus[0]
    if gpus and n_nodes and n_ranks == n_nodes * len(gpus):
        return gpus[rank % len(gpus)]
    return ""


def pod_directory(
    store: Any,
    cluster: str,
    *,
    by: str = "uid",
    node: str | None = None,
    retry_seconds: float = 30.0,
    clock: Callable[[], float] = time.monotonic,
) -> Callable[[str], PodInfo | None]:
    """`key -> PodInfo` from the inventory in `store` (the latest version of each pod), by `uid`
    or by pod `name` (then only a name that one pod holds, on `node` when given), queried once
    per unknown key and cached; a key not found is asked again `retry_seconds` later (the
    inventory may not have stored a new pod yet)."""
    cache: dict[str, PodInfo] = {}
    missed: dict[str, float] = {}
    column = {"uid": "uid", "name": "pod"}[by]
    on_node = " AND node = {n:String}" if node is not None else ""

    def lookup(key: str) -> PodInfo | None:
        if key in cache:
            return cache[key]
        if clock() - missed.get(key, -math.inf) < retry_seconds:
            return None
        rows = store.query_rows(
            "SELECT namespace, pod, argMax(job, valid_from), argMax(gpus, valid_from), any(uid) "
            f"FROM {store.table('pod', final=True)} "
            f"WHERE cluster = {{c:String}} AND {column} = {{k:String}}{on_node} "
            "GROUP BY namespace, pod LIMIT 2",
            {"c": cluster, "k": key, "n": node or ""},
        )
        if len(rows) != 1:  # unknown, or a name two namespaces share: not guessed
            missed[key] = clock()
            return None
        ns, pod, job, gpus, uid = rows[0]
        cache[key] = PodInfo(ns, pod, job, parse_gpus(gpus), uid)
        return cache[key]

    return lookup


def parse_gpus(text: str) -> tuple[str, ...]:
    """The pods.gpus JSON list as strings; anything else is no assignment."""
    try:
        v = json.loads(text or "[]")
    except ValueError:
        return ()
    return tuple(str(g) for g in v) if isinstance(v, list) else ()


__all__ = [
    "Attributor",
    "PodInfo",
    "parse_gpus",
    "pod_directory",
    "rank_gpu",
]
