"""GPU / SR-IOV VF -> pod from the kubelet pod-resources API (v1.PodResourcesLister: List and
GetAllocatableResources on the kubelet's unix socket), or from a captured List response (JSON).

Read-only; it never calls anything but List/GetAllocatableResources, and a node without the
socket (not a Kubernetes node) is "nothing here", not an error.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class PodResourcesError(Exception):
    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


@dataclass(frozen=True)
class Owner:
    pod: str
    namespace: str
    container: str
    resource: str


@dataclass
class Assignments:
    """device id (GPU/MIG UUID, VF PCI address or RDMA device name) -> owner."""

    owners: dict[str, Owner] = field(default_factory=dict)
    allocatable: dict[str, int] = field(default_factory=dict)  # resource -> device count

    def get(self, *ids: str) -> Owner | None:
        for i in ids:
            if i and i in self.owners:
                return self.owners[i]
        return None


def _pb() -> Any:
    from exporters.node import podresources_v1_pb2

    return podresources_v1_pb2


class Matcher:
    """Which resource names to attach. A name ending in `-`, `_` or `/` is a prefix
    (`nvidia.com/mig-` matches every MIG profile)."""

    def __init__(self, gpu_resources: list[str], nic_resources: list[str]) -> None:
        self.names = [*gpu_resources, *nic_resources]

    def wanted(self, resource: str) -> bool:
        return any(
            resource == n or (n.endswith(("-", "_", "/")) and resource.startswith(n))
            for n in self.names
        )


def assignments_from_list(
    resp: Any, matcher: Matcher, allocatable: Any | None = None
) -> Assignments:
    out = Assignments()
    for pod in resp.pod_resources:
        for c in pod.containers:
            for d in c.devices:
                if matcher.wanted(d.resource_name):
                    for dev_id in d.device_ids:
                        out.owners[dev_id] = Owner(pod.name, pod.namespace, c.name, d.resource_name)
    if allocatable is not None:
        for d in allocatable.devices:
            if matcher.wanted(d.resource_name):
                out.allocatable[d.resource_name] = out.allocatable.get(d.resource_name, 0) + len(
                    d.device_ids
                )
    return out


class GrpcPodResources:
    """Live client. The channel stays open between cycles (one connect per process)."""

    def __init__(self, socket_path: str, matcher: Matcher, timeout: float = 2.0) -> None:
        self.socket_path = socket_path
        self.matcher = matcher
        self.timeout = timeout
        self._channel: Any = None
        self._stub: Any = None

    def fetch(self) -> Assignments | None:
        got = self.raw()
        if got is None:
            return None
        return assignments_from_list(got[0], self.matcher, got[1])

    def raw(self) -> tuple[Any, Any] | None:
        """(ListPodResourcesResponse, AllocatableResourcesResponse or None); None without a socket."""
        if not os.path.exists(self.socket_path):
            return None  # not a kubelet node (or pod-resources not mounted): nothing to attach
        import grpc

        from exporters.node import podresources_v1_pb2_grpc

        pb = _pb()
        if self._stub is None:
            self._channel = grpc.insecure_channel(f"unix://{os.path.abspath(self.socket_path)}")
            self._stub = podresources_v1_pb2_grpc.PodResourcesListerStub(self._channel)
        try:
            resp = self._stub.List(pb.ListPodResourcesRequest(), timeout=self.timeout)
        except grpc.RpcError as e:
            raise PodResourcesError(
                "podresources_rpc",
                f"{self.socket_path}: List failed: {e.code().name}: {e.details()}",
            ) from None
        alloc = None
        try:
            alloc = self._stub.GetAllocatableResources(
                pb.AllocatableResourcesRequest(), timeout=self.timeout
            )
        except grpc.RpcError as e:
            # Older kubelets (< 1.23 without the feature gate) do not serve it; List is enough.
            if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise PodResourcesError(
                    "podresources_rpc",
                    f"{self.socket_path}: GetAllocatableResources failed: {e.code().name}",
                ) from None
        return resp, alloc

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = self._stub = None


class JsonPodResources:
    """Replay: a List response captured as protobuf JSON (`{"podResources": [...]}`), optionally
    with `"allocatable": {AllocatableResourcesResponse JSON}`."""

    def __init__(self, path: Path, matcher: Matcher) -> None:
        self.path = Path(path)
        self.matcher = matcher

    def fetch(self) -> Assignments | None:
        if not self.path.is_file():
            return None
        return parse_json(self.path.read_text(), self.matcher, source=str(self.path))

    def close(self) -> None:
        pass


def parse_json(text: str, matcher: Matcher, *, source: str = "podresources") -> Assignments:
    """A captured List response (protobuf JSON, optionally with `"allocatable"`). Anything that
    is not one raises PodResourcesError("malformed_podresources")."""
    from google.protobuf import json_format

    pb = _pb()
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        alloc_raw = data.pop("allocatable", None)
        if alloc_raw is not None and not isinstance(alloc_raw, dict):
            raise ValueError(f"allocatable: expected an object, got {type(alloc_raw).__name__}")
        resp = json_format.ParseDict(data, pb.ListPodResourcesResponse())
        alloc = (
            json_format.ParseDict(alloc_raw, pb.AllocatableResourcesResponse())
            if alloc_raw
            else None
        )
    except (ValueError, json_format.ParseError) as e:
        raise PodResourcesError("malformed_podresources", f"{source}: {e}") from None
    return assignments_from_list(resp, matcher, alloc)


def attach(
    gpu_rows: list[dict[str, Any]], nic_rows: list[dict[str, Any]], a: Assignments, stats: Any
) -> None:
    """Label GPUs (by GPU/MIG UUID) and NICs/VFs (by PCI address or RDMA device name) with the
    pod holding them, and count the node's allocatable devices per resource (self-metrics).
    Collected, not enriched: the kubelet socket exists only on this node."""
    for r in gpu_rows:
        o = a.get(r.get("uuid", ""))
        if o is not None:
            r.update(pod=o.pod, namespace=o.namespace)
    for r in nic_rows:
        o = a.get(r.get("_pci", ""), r["device"])
        if o is not None:
            r.update(pod=o.pod, namespace=o.namespace, container=o.container)
    for res, n in a.allocatable.items():
        stats.extra[f"allocatable_{res.replace('.', '_').replace('/', '_').replace('-', '_')}"] = (
            float(n)
        )
