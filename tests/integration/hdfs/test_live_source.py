"""The live `hdfs` source without HTTP: following a DataNode log across rotation, running the
configured fsck command, and emitting DCI budget rows only for intervals that have closed."""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from exporters.hdfs.config import HdfsConfig
from exporters.hdfs.source import HdfsSource
from telemetry.errors import UserError

FIX = Path(__file__).parents[2] / "fixtures" / "hdfs"
T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC).timestamp()


def line(sec: float, op: str, src: str, dest: str, nbytes: int, blk: int) -> str:
    stamp = datetime.fromtimestamp(T0 + sec, UTC).strftime("%Y-%m-%d %H:%M:%S,%f")[:23]
    return (
        f"{stamp} INFO org.apache.hadoop.hdfs.server.datanode.DataNode.clienttrace: src: /{src}, "
        f"dest: /{dest}, bytes: {nbytes}, op: {op}, cliID: DFSClient_c_1, offset: 0, srvID: s, "
        f"blockid: BP-1-10.1.0.100-1:blk_{blk}_1, duration(ns): 5\n"
    )


def kinds(batches: list[Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for b in batches:
        out.setdefault(b.kind.name, []).extend(b.table.to_pylist())
    return out


def test_live_tail_rotation_fsck_and_dci_intervals(tmp_path: Path) -> None:
    log = tmp_path / "hadoop-hdfs-datanode-dn5.log"
    log.write_text(
        line(-100, "HDFS_READ", "10.2.0.1:9866", "10.1.9.9:1", 999, 0)
    )  # before we started
    now = [T0]
    cfg = HdfsConfig.model_validate(
        {
            "clienttrace": [{"path": str(log), "datanode": "10.2.0.1:9866"}],
            "fsck_command": ["cat", str(FIX / "fsck_files_blocks_racks_dataproc.txt")],
            "topology_file": str(FIX / "topology_two_idcs.txt"),
            "dci": {"interval_seconds": 60, "capacity": {"idcA-idcB": 6000}},
        }
    )
    src = HdfsSource(cfg, clock=lambda: now[0])
    first = kinds(src.collect())
    assert "hdfs_transfer" not in first  # starts at the end of the log
    assert len(first["hdfs_block_placement"]) == 2  # fsck ran once
    with log.open("a") as f:
        f.write(line(10, "HDFS_READ", "10.2.0.1:9866", "10.1.9.9:40000", 6000, 1))
        f.write(line(20, "HDFS_WRITE", "10.1.9.9:40001", "10.1.0.1:9866", 700, 2))
    log.rename(tmp_path / "hadoop-hdfs-datanode-dn5.log.1")  # rotated mid-cycle
    with log.open("w") as f:
        f.write(line(70, "HDFS_READ", "10.2.0.1:9866", "10.1.9.9:40002", 1200, 3))
    now[0] = T0 + 90
    second = kinds(src.collect())
    assert [r["bytes"] for r in second["hdfs_transfer"]] == [6000, 700, 1200]
    assert "hdfs_block_placement" not in second  # fsck_every_seconds has not passed
    # only the 12:00-12:01 interval has closed at 12:01:30
    (usage,) = [r for r in second["dci_usage"] if r["src_idc"] == "idcB"]
    assert usage["ts"] == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert usage["read_bytes_per_second"] == 100.0 and usage["headroom_bytes_per_second"] == 5900.0
    now[0] = T0 + 200
    third = kinds(src.collect())
    ba = [r for r in third["dci_usage"] if r["src_idc"] == "idcB"]
    assert [(r["ts"].minute, r["read_bytes_per_second"]) for r in ba] == [(1, 20.0)]


def test_bad_config_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"dci.capacity[\s\S]*not an IDC pair"):
        HdfsConfig.model_validate({"dci": {"capacity": {"idcA": "1G"}}})
    with pytest.raises(Exception, match="unknown time zone"):
        HdfsConfig.model_validate({"log_timezone": "Mars/Olympus"})
    if importlib.util.find_spec("gssapi") is None:  # without the optional package: say so up front
        with pytest.raises(UserError, match="gssapi"):
            HdfsSource(HdfsConfig.model_validate({"kerberos": {"enabled": True}}))
    with pytest.raises(UserError, match=r"sources\.hdfs\.tls"):
        HdfsSource(HdfsConfig.model_validate({"tls": {"ca_file": str(tmp_path / "none.pem")}}))


def test_restart_resumes_from_saved_offsets_without_double_counting(tmp_path: Path) -> None:
    from telemetry.config import Config
    from telemetry.registry import build_source

    log = tmp_path / "dn.log"
    log.write_text(line(1, "HDFS_READ", "10.2.0.1:9866", "10.1.9.9:1", 1, 1))
    cfg = Config.model_validate(
        {
            "sink": {"spool_dir": str(tmp_path / "spool")},
            "sources": {"hdfs": {"clienttrace": [{"path": str(log), "from_start": True}]}},
        }
    )

    def run() -> list[int]:
        src = build_source("hdfs", cfg)  # a fresh process's source, same config
        return [r["bytes"] for r in kinds(src.collect()).get("hdfs_transfer", [])]

    assert run() == [1]
    state = tmp_path / "spool" / "hdfs-clienttrace-offsets.json"
    assert str(log) in state.read_text()  # next to the spool, by default
    with log.open("a") as f:
        f.write(line(2, "HDFS_READ", "10.2.0.1:9866", "10.1.9.9:1", 20, 2))
        f.write(line(3, "HDFS_READ", "10.2.0.1:9866", "10.1.9.9:1", 300, 3)[:40])  # half written
    assert run() == [20]  # restarted: not the first line again (from_start is for a first start)
    with log.open("a") as f:
        f.write(line(3, "HDFS_READ", "10.2.0.1:9866", "10.1.9.9:1", 300, 3)[40:])
    log.rename(tmp_path / "dn.log.1")
    log.write_text(line(4, "HDFS_WRITE", "10.1.9.9:2", "10.1.0.1:9866", 4000, 4))
    assert run() == [300, 4000]  # down across a rotation: the rest of .1, then the new file
    assert run() == []
    # the state file's path is injectable
    other = tmp_path / "elsewhere" / "offsets.json"
    cfg.sources["hdfs"]["offsets_file"] = str(other)
    assert run() == [4000]  # a state file of its own: a first start (from_start) again
    assert str(log) in other.read_text()
