"""Pod-resources replay (List response as protobuf JSON) and resource-name matching."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporters.node.podresources import JsonPodResources, Matcher, PodResourcesError

from .conftest import NODE8

M = Matcher(["nvidia.com/gpu", "nvidia.com/mig-"], ["nvidia.com/rdma_", "openshift.io/"])


def test_matcher_exact_and_prefix() -> None:
    assert M.wanted("nvidia.com/gpu")
    assert M.wanted("nvidia.com/mig-1g.10gb")
    assert M.wanted("nvidia.com/rdma_vf")
    assert M.wanted("openshift.io/mlnx_sriov_rdma")
    assert not M.wanted("nvidia.com/gpu.shared")
    assert not M.wanted("cpu")


def test_replay_maps_gpus_and_vfs_to_pods() -> None:
    a = JsonPodResources(NODE8 / "podresources.json", M).fetch()
    assert a is not None
    o = a.get("GPU-5a1c0002-7e3b-4c2d-9f10-000000000002")
    assert o is not None and (o.pod, o.namespace, o.container) == (
        "llama-train-worker-0",
        "team-a",
        "trainer",
    )
    assert a.get("GPU-5a1c0004-7e3b-4c2d-9f10-000000000004") is None
    assert a.owners["mlx5_1"].resource == "nvidia.com/rdma_vf"  # by device name
    assert a.allocatable == {"nvidia.com/gpu": 8}


def test_missing_capture_is_nothing(tmp_path: Path) -> None:
    assert JsonPodResources(tmp_path / "none.json", M).fetch() is None


def test_malformed_capture_names_file(tmp_path: Path) -> None:
    p = tmp_path / "podresources.json"
    p.write_text('{"podResources": [{"name": 5, "bogus": 1}]}')
    with pytest.raises(PodResourcesError, match=r"podresources\.json") as e:
        JsonPodResources(p, M).fetch()
    assert e.value.reason == "malformed_podresources"
