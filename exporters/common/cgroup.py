"""Which pod a process belongs to, from `/proc/PID/cgroup` under the host's proc root (injectable,
like every root: /host/proc in the DaemonSet). The kubelet names each pod's cgroup after its UID
(`kubepods-burstable-pod<uid>.slice` with the systemd driver, `kubepods/burstable/pod<uid>` with
cgroupfs) and each container's after its id. Shared by the node exporter (GPU processes) and the
NCCL Inspector source (ranks)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

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


class PodOwners:
    """pid -> Owner through `/proc/PID/cgroup`, cached per pid (a pid is not reused while the
    process lives; `retain` forgets the ended ones)."""

    def __init__(self, proc_root: str | Path = "/proc") -> None:
        self.proc_root = Path(proc_root)
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


__all__ = ["Owner", "PodOwners", "owner_from_cgroup"]
