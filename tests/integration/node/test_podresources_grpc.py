"""Pod-resources against a real gRPC server on a unix socket speaking v1.PodResourcesLister."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exporters.node import nvml
from exporters.node.podresources import GrpcPodResources, Matcher, PodResourcesError
from exporters.node.source import NodeSource

from .conftest import GPU_UUIDS

M = Matcher(["nvidia.com/gpu", "nvidia.com/mig-"], ["nvidia.com/rdma_"])


def test_list_and_allocatable(server) -> None:
    sock, lister = server
    c = GrpcPodResources(sock, M)
    a = c.fetch()
    c.close()
    assert a is not None
    assert a.owners[GPU_UUIDS[1]].pod == "train-0"
    assert a.owners["MIG-abc"].namespace == "team-b"
    assert a.owners["0000:3b:00.0"].container == "trainer"
    assert a.get(GPU_UUIDS[5]) is None  # resource name not configured
    assert a.allocatable == {"nvidia.com/gpu": 8, "nvidia.com/rdma_vf": 2}
    assert lister.calls == ["List", "GetAllocatableResources"]


@pytest.mark.parametrize("server", [False], indirect=True)
def test_old_kubelet_without_allocatable(server) -> None:
    sock, _ = server
    a = GrpcPodResources(sock, M).fetch()
    assert a is not None and a.owners[GPU_UUIDS[0]].pod == "train-0" and a.allocatable == {}


def test_missing_socket_is_nothing(tmp_path: Path) -> None:
    assert GrpcPodResources(str(tmp_path / "absent.sock"), M).fetch() is None


def test_dead_socket_is_named(tmp_path: Path) -> None:
    dead = tmp_path / "dead.sock"
    import socket

    s = socket.socket(socket.AF_UNIX)
    s.bind(str(dead))  # exists but nobody listens
    s.close()
    with pytest.raises(PodResourcesError, match=r"dead\.sock: List failed") as e:
        GrpcPodResources(str(dead), M, timeout=0.5).fetch()
    assert e.value.reason == "podresources_rpc"


def test_node_source_labels_gpus_and_vfs(server, node8_copy: Path) -> None:
    sock, _ = server
    fake = nvml.FakeNvml.from_dict(json.loads((node8_copy / "nvml.json").read_text()))
    src = NodeSource.live(
        sysfs_root=str(node8_copy / "sys"),
        node_name="n1",
        gpu_backend_impl=fake,
        podresources_socket=sock,
        nic_resources=["nvidia.com/rdma_"],
        collectors=frozenset({"gpu", "rdma", "pcie", "podresources"}),
    )
    batches = {b.kind.name: b.table.to_pylist() for b in src.collect()}
    gpus = {r["gpu"]: r for r in batches["gpu_sample"]}
    assert (gpus[0]["pod"], gpus[0]["namespace"]) == ("train-0", "team-a")
    assert gpus[1]["pod"] == "train-0" and gpus[2]["pod"] == ""
    nics = {r["device"]: r for r in batches["nic_sample"]}
    # 0000:3b:00.0 is mlx5_1's PCI function in the fixture tree
    assert (nics["mlx5_1"]["pod"], nics["mlx5_1"]["container"]) == ("train-0", "trainer")
    assert nics["mlx5_0"]["pod"] in ("", None)
    assert src.stats.extra["allocatable_nvidia_com_gpu"] == 8.0
    src.close()
