"""(hostname, pid) -> container -> pod, and rank -> GPU, for NCCL Inspector rows.

A process's pod is read from `/proc/PID/cgroup` under the host's proc root (injectable, like the
node exporter's sysfs root: the DaemonSet mounts the host's /proc at /host/proc). The kubelet
names each pod's cgroup after its UID (`kubepods-burstable-pod<uid>.slice` with the systemd
driver, `kubepods/burstable/pod<uid>` with cgroupfs) and each container's after its id
(`cri-containerd-<id>.scope`, `docker-<id>.scope`, `crio-<id>.scope`, or the bare id). The pod's
name, namespace, job and GPU assignment come from the inventory (`pods` in the store) by UID.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_POD_UID = re.compile(
    r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})"
)
_CONTAINER = re.compile(
    r"^(?:cri-containerd-|docker-|crio-|containerd-)?([0-9a-f]{64})(?:\.scope)?$"
)


@dataclass(frozen=True)
class Owner:
    pod_uid: str
    container_id: str


def owner_from_cgroup(text: str) -> Owner | None:
    """The pod UID and container id in a `/proc/PID/cgroup` file's text (v1 or v2 lines
    `ID:controllers:path`), or None when the process is not in a pod's cgroup."""
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        m = _POD_UID.search(path)
        if m is None:
            continue
        uid = m[1].replace("_", "-")
        container = ""
        for part in reversed(path.split("/")):
            c = _CONTAINER.match(part)
            if c:
                container = c[1]
                break
        return Owner(uid, container)
    return None


@dataclass(frozen=True)
class PodInfo:
    namespace: str
    pod: str
    job: str
    gpus: tuple[str, ...]  # the pod's GPU assignment (indices or UUIDs), in order
    uid: str = ""


class Attributor:
    """Who ran each rank. `pods(uid)` looks up a pod's inventory facts by UID, `named(name)` by
    pod name (None: not known yet); owners are cached per pid (a pid is not reused while its
    file is being written)."""

    def __init__(
        self,
        proc_root: str | Path = "/proc",
        pods: Callable[[str], PodInfo | None] = lambda uid: None,
        named: Callable[[str], PodInfo | None] = lambda name: None,
    ) -> None:
        self.proc_root = Path(proc_root)
        self.pods = pods
        self.named = named
        self._owners: dict[int, Owner | None] = {}

    def owner(self, pid: int) -> Owner | None:
        if pid in self._owners:
            return self._owners[pid]
        try:
            text = (self.proc_root / str(pid) / "cgroup").read_text(errors="replace")
        except OSError:  # gone (the job ended) or not visible: unattributed, asked again later
            return None
        o = self._owners[pid] = owner_from_cgroup(text)
        return o

    def retain(self, pids: set[int]) -> None:
        """Forget the owners of pids not in `pids` (processes that ended: their pid may be
        reused by another pod's process)."""
        for pid in [p for p in self._owners if p not in pids]:
            del self._owners[pid]

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
    "Owner",
    "PodInfo",
    "owner_from_cgroup",
    "parse_gpus",
    "pod_directory",
    "rank_gpu",
]
