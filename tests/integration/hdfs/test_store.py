"""Offline HDFS captures through the pipeline into the embedded ClickHouse store: per-IDC-pair
bytes and the cross-IDC reads come back exactly from SQL; placement violations are queryable."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from exporters.hdfs.config import HdfsConfig
from exporters.hdfs.source import HdfsSource
from telemetry.pipeline import Pipeline
from telemetry.sinks.clickhouse import ClickHouseSink

FIX = Path(__file__).parents[2] / "fixtures" / "hdfs"


def line(t: float, op: str, src: str, dest: str, nbytes: int, blk: int) -> str:
    stamp = datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S,%f")[:23]
    return (
        f"{stamp} INFO org.apache.hadoop.hdfs.server.datanode.DataNode.clienttrace: src: /{src}, dest: /{dest}, "
        f"bytes: {nbytes}, op: {op}, cliID: DFSClient_job{blk % 3}_1, offset: 0, srvID: s, "
        f"blockid: BP-1-10.1.0.100-1:blk_{blk}_1, duration(ns): 1000"
    )


def test_transfers_and_placement_in_store(store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    t0 = time.time() - 3600  # recent: the tables have TTLs
    lines = [
        line(t0 + 1, "HDFS_READ", "10.1.0.1:9866", "10.1.9.9:40001", 100, 1),  # local read in idcA
        line(
            t0 + 2, "HDFS_READ", "10.2.0.1:9866", "10.1.9.9:40002", 7000, 2
        ),  # cross-IDC read B->A
        line(t0 + 3, "HDFS_WRITE", "10.1.9.9:40003", "10.1.0.2:9866", 300, 3),
        line(t0 + 4, "HDFS_WRITE", "10.1.0.2:9866", "10.2.0.2:9866", 300, 3),  # pipeline hop A->B
        line(t0 + 5, "HDFS_READ", "10.2.0.3:9866", "10.1.9.9:40004", 11, 4),  # cross-IDC read B->A
    ]
    cap = tmp_path / "cap"
    cap.mkdir()
    (cap / "dn.log").write_text("\n".join(lines) + "\n")
    (cap / "fsck.txt").write_text((FIX / "fsck_files_blocks_racks_dataproc.txt").read_text())
    cfg = HdfsConfig.model_validate(
        {
            "topology_file": str(FIX / "topology_two_idcs.txt"),
            "policy": {"mode": "per_idc", "replicas": 4, "per_idc": 2},
            "dci": {"interval_seconds": 3600, "capacity": {"idcA-idcB": 1000}},
        }
    )
    src = HdfsSource(cfg, from_path=str(cap))
    sink = ClickHouseSink(
        store, spool_dir=str(tmp_path / "spool"), batch_rows=1000, batch_seconds=1
    )
    p = Pipeline([src], [sink])
    p.run_once()
    p.close()
    q = store.query_rows
    pairs = q(
        f"SELECT src_idc, dest_idc, op, sum(bytes) FROM {store.table('hdfs_transfer')} "
        "GROUP BY src_idc, dest_idc, op ORDER BY src_idc, dest_idc, op"
    )
    assert pairs == [
        ("idcA", "idcA", "HDFS_READ", 100),
        ("idcA", "idcA", "HDFS_WRITE", 300),
        ("idcA", "idcB", "HDFS_WRITE", 300),
        ("idcB", "idcA", "HDFS_READ", 7011),
    ]
    cross = q(
        f"SELECT client_id, block_id FROM {store.table('hdfs_transfer')} "
        "WHERE cross_idc AND op = 'HDFS_READ' ORDER BY ts"
    )
    assert cross == [
        ("DFSClient_job2_1", "BP-1-10.1.0.100-1:blk_2_1"),
        ("DFSClient_job1_1", "BP-1-10.1.0.100-1:blk_4_1"),
    ]
    budget = q(
        f"SELECT src_idc, dest_idc, read_bytes_per_second * 3600, sync_write_bytes_per_second * 3600, "
        f"headroom_bytes_per_second FROM {store.table('dci_usage')} ORDER BY src_idc"
    )
    assert [(a, b, round(r), round(w)) for a, b, r, w, _ in budget] == [
        ("idcA", "idcB", 0, 300),
        ("idcB", "idcA", 7011, 0),
    ]
    assert budget[1][4] == 1000 - 7011 / 3600
    viol = q(
        f"SELECT path, block_id, reason FROM {store.table('hdfs_block_placement')} WHERE violation ORDER BY block_id"
    )
    assert [v[1][-4:] for v in viol] == ["1003", "1004"]
    assert viol[0][2].startswith("under-replicated: 2 of 4")
    totals = q(
        f"SELECT prefix, blocks, violations FROM {store.table('hdfs_placement_total')} ORDER BY prefix"
    )
    assert totals == [("/", 2, 2), ("/dblp", 2, 2)]
