"""`railscope node --capture DIR` then `--from DIR`: the replay reproduces the live collection
(sysfs with its symlinks, ethtool text, pod-resources JSON from a real gRPC server, NVML snapshot)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from exporters.node import nvml
from exporters.node.capture import capture
from exporters.node.ethtool import TextEthtool
from exporters.node.source import NodeSource
from telemetry.contracts import Batch
from telemetry.errors import UserError


def by_kind(batches: list[Batch]) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for b in batches:
        rows = [{k: v for k, v in r.items() if k != "ts"} for r in b.table.to_pylist()]
        out[b.kind.name] = sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))
    return out


def test_capture_then_replay_gives_the_same_records(
    node8_copy: Path, tmp_path: Path, server
) -> None:
    sock, _ = server
    spec = json.loads((node8_copy / "nvml.json").read_text())
    for g in spec["gpus"]:
        g.pop("xid", None)  # XID events are transient: not part of a snapshot
    live = NodeSource.live(
        sysfs_root=str(node8_copy / "sys"),
        node_name="n1",
        gpu_backend_impl=nvml.FakeNvml.from_dict(spec),
        podresources_socket=sock,
        ethtool_reader=TextEthtool(node8_copy / "ethtool"),
    )
    bundle = tmp_path / "bundle"
    summary = capture(live, bundle)
    assert summary["problems"] == []
    assert summary["gpus"] == 8 and summary["ethtool_files"] == 8 and summary["podresources"]
    assert (bundle / "sys" / "class" / "infiniband" / "mlx5_0").is_symlink()
    want = by_kind(live.collect())
    replay = NodeSource.replay(str(bundle), node_name="n1")
    got = by_kind(replay.collect())
    assert set(got) == set(want)
    for kind in want:
        assert got[kind] == want[kind], kind
    assert {r["pod"] for r in got["gpu_sample"]} == {"train-0", ""}
    live.close()
    replay.close()


def test_capture_refuses_a_non_empty_dir(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("keep me")
    src = NodeSource.live(sysfs_root=str(tmp_path), gpu_backend="none", node_name="n")
    with pytest.raises(UserError, match="not empty"):
        capture(src, tmp_path)
    assert (tmp_path / "x").read_text() == "keep me"
