"""Fixtures of the node exporter integration tests: fixture trees and a kubelet pod-resources
gRPC server on a unix socket."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from exporters.node import podresources_v1_pb2 as pb
from exporters.node import podresources_v1_pb2_grpc as pbg
from tests.sysfs_fixture import node8

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
NODE8 = node8()


@pytest.fixture
def node8_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "node8"
    shutil.copytree(NODE8, dst, symlinks=True)
    return dst


GPU_UUIDS = [f"GPU-5a1c{i:04x}-7e3b-4c2d-9f10-00000000{i:04x}" for i in range(8)]


class Lister(pbg.PodResourcesListerServicer):
    def __init__(self, allocatable: bool = True) -> None:
        self.allocatable = allocatable
        self.calls: list[str] = []

    def List(self, request, context):  # gRPC method name
        self.calls.append("List")
        return pb.ListPodResourcesResponse(
            pod_resources=[
                pb.PodResources(
                    name="train-0",
                    namespace="team-a",
                    containers=[
                        pb.ContainerResources(
                            name="trainer",
                            devices=[
                                pb.ContainerDevices(
                                    resource_name="nvidia.com/gpu",
                                    device_ids=GPU_UUIDS[:2],
                                    topology=pb.TopologyInfo(nodes=[pb.NUMANode(ID=0)]),
                                ),
                                pb.ContainerDevices(
                                    resource_name="nvidia.com/rdma_vf", device_ids=["0000:3b:00.0"]
                                ),
                            ],
                        ),
                    ],
                ),
                pb.PodResources(
                    name="infer-7",
                    namespace="team-b",
                    containers=[
                        pb.ContainerResources(
                            name="server",
                            devices=[
                                pb.ContainerDevices(
                                    resource_name="nvidia.com/mig-1g.10gb", device_ids=["MIG-abc"]
                                ),
                                pb.ContainerDevices(
                                    resource_name="example.com/other", device_ids=[GPU_UUIDS[5]]
                                ),
                            ],
                        ),
                    ],
                ),
            ]
        )

    def GetAllocatableResources(self, request, context):
        self.calls.append("GetAllocatableResources")
        if not self.allocatable:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "not enabled")
        return pb.AllocatableResourcesResponse(
            devices=[
                pb.ContainerDevices(resource_name="nvidia.com/gpu", device_ids=GPU_UUIDS),
                pb.ContainerDevices(
                    resource_name="nvidia.com/rdma_vf", device_ids=["0000:3b:00.0", "0000:3b:00.1"]
                ),
            ]
        )


@pytest.fixture
def server(tmp_path: Path, request) -> Iterator[tuple[str, Lister]]:
    sock = tmp_path / "kubelet.sock"
    lister = Lister(allocatable=getattr(request, "param", True))
    s = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pbg.add_PodResourcesListerServicer_to_server(lister, s)
    s.add_insecure_port(f"unix://{sock}")
    s.start()
    yield str(sock), lister
    s.stop(grace=None)
