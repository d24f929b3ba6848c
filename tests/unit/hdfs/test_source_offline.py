"""The `hdfs` source offline: a two-IDC topology and a synthetic clienttrace stream -> exact bytes
per IDC pair, cross-IDC reads flagged, unknown hosts counted; --from recognizes files by content."""

from __future__ import annotations

import gzip
import json
import random
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from exporters.hdfs.config import HdfsConfig
from exporters.hdfs.source import HdfsSource
from telemetry.errors import UserError
from tests.cli import rs

FIX = Path(__file__).parents[2] / "fixtures" / "hdfs"
IDC = {"10.1": "idcA", "10.2": "idcB"}


def trace_line(
    sec: int, op: str, src: str, dest: str, nbytes: int, cli: str, blk: int, new: bool
) -> str:
    dur = "duration(ns)" if new else "duration"
    return (
        f"2024-03-01 08:{sec // 60:02d}:{sec % 60:02d},{sec % 1000:03d} INFO "
        "org.apache.hadoop.hdfs.server.datanode.DataNode.clienttrace: "
        f"src: /{src}, dest: /{dest}, bytes: {nbytes}, op: {op}, cliID: {cli}, offset: 0, srvID: s-{blk % 7}, "
        f"blockid: BP-9-10.1.0.100-1700000000000:blk_{blk}_{blk + 1000}, {dur}: {nbytes * 3}"
    )


def synthetic_stream(
    n: int, seed: int = 7
) -> tuple[list[str], Counter[tuple[str, str, str]], list[tuple[str, str]]]:
    """Lines plus the expected bytes per (src_idc, dest_idc, op) and the cross-IDC reads (client, block)."""
    rnd = random.Random(seed)
    dns = [f"10.{i}.0.{j}" for i in (1, 2) for j in (1, 2, 3, 4)]
    clients = ["10.1.9.9", "10.2.9.9"]
    lines, want, cross = [], Counter[tuple[str, str, str]](), []
    for k in range(n):
        nbytes = rnd.randrange(1, 1 << 27)
        cli = f"DFSClient_NONMAPREDUCE_{k % 5}_1"
        if rnd.random() < 0.6:
            src, dest, op = rnd.choice(dns), rnd.choice(clients), "HDFS_READ"
        else:
            src, dest, op = rnd.choice(clients + dns), rnd.choice(dns), "HDFS_WRITE"
        a, b = IDC[src[:4]], IDC[dest[:4]]
        want[(a, b, op)] += nbytes
        if op == "HDFS_READ" and a != b:
            cross.append((cli, f"BP-9-10.1.0.100-1700000000000:blk_{1000 + k}_{2000 + k}"))
        lines.append(
            trace_line(
                k % 3000,
                op,
                f"{src}:{9866 if src in dns else 40000 + k % 999}",
                f"{dest}:{9866 if dest in dns else 50000 + k % 999}",
                nbytes,
                cli,
                1000 + k,
                k % 2 == 0,
            )
        )
    return lines, want, cross


def run_offline(path: Path, **cfg: object) -> tuple[HdfsSource, dict[str, list[dict]]]:
    src = HdfsSource(
        HdfsConfig.model_validate(cfg), from_path=str(path), clock=lambda: 1_700_000_000.0
    )
    batches = src.collect()
    out: dict[str, list[dict]] = {}
    for b in batches:
        out.setdefault(b.kind.name, []).extend(b.table.to_pylist())
    return src, out


def test_two_idc_stream_exact_pair_bytes_and_cross_idc_reads(tmp_path: Path) -> None:
    lines, want, cross = synthetic_stream(4000)
    # plus traffic from a host the topology does not know: counted, never given an IDC
    lines.append(
        trace_line(
            1,
            "HDFS_READ",
            "10.1.0.1:9866",
            "172.16.5.5:41000",
            12345,
            "DFSClient_stray_1",
            999999,
            True,
        )
    )
    (tmp_path / "dn.log").write_text("\n".join(lines) + "\n")
    src, out = run_offline(
        tmp_path / "dn.log",
        topology_file=str(FIX / "topology_two_idcs.txt"),
        dci={"interval_seconds": 3600, "capacity": {"idcA-idcB": "10Gbit"}},
    )
    rows = out["hdfs_transfer"]
    assert len(rows) == 4001
    got = Counter[tuple[str, str, str]]()
    for r in rows:
        if r["dest_idc"]:
            got[(r["src_idc"], r["dest_idc"], r["op"])] += r["bytes"]
    assert got == want
    flagged = [
        (r["client_id"], r["block_id"]) for r in rows if r["cross_idc"] and r["op"] == "HDFS_READ"
    ]
    assert flagged == cross and len(flagged) > 100
    assert [(c["client_id"], c["block_id"]) for c in src.cross_idc_reads] == cross
    stray = rows[-1]
    assert (stray["src_idc"], stray["dest_idc"], stray["dest_rack"], stray["cross_idc"]) == (
        "idcA",
        "",
        "",
        False,
    )
    assert src.topology.unknown == {"172.16.5.5": 1}
    assert src.stats.extra["unknown_hosts"] == 1.0
    assert src.stats.extra["cross_idc_reads"] == float(len(cross))
    # DCI budget: one hour-long interval holds everything; bytes/s = cross-IDC bytes / 3600
    dci = {(r["src_idc"], r["dest_idc"]): r for r in out["dci_usage"]}
    assert set(dci) == {("idcA", "idcB"), ("idcB", "idcA")}
    ab = dci[("idcA", "idcB")]
    assert ab["read_bytes_per_second"] == pytest.approx(want[("idcA", "idcB", "HDFS_READ")] / 3600)
    assert ab["sync_write_bytes_per_second"] == pytest.approx(
        want[("idcA", "idcB", "HDFS_WRITE")] / 3600
    )
    assert ab["async_replication_bytes_per_second"] == 0.0
    assert ab["capacity_bytes_per_second"] == 1.25e9
    assert ab["headroom_bytes_per_second"] == pytest.approx(1.25e9 - ab["total_bytes_per_second"])
    assert src.stats.extra["dci_unplaced_bytes"] == 12345.0


def test_directory_of_real_captures_recognized_by_content(tmp_path: Path) -> None:
    # Names say nothing: content decides.
    for i, f in enumerate(sorted(FIX.glob("*"))):
        (tmp_path / f"capture{i}.bin").write_bytes(f.read_bytes())
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "other.json").write_text('{"status": "ok"}')  # JSON, but not ours
    src, out = run_offline(
        tmp_path,
        topology_file=str(FIX / "topology_two_idcs.txt"),
        policy={"mode": "per_idc", "replicas": 2, "per_idc": 1},
    )
    assert out["hdfs_namenode_sample"][0]["namenode"] == "apio:8020"
    assert out["hdfs_namenode_sample"][0]["corrupt_blocks"] == 3
    assert out["hdfs_datanode_sample"][0]["datanode"] == "dn0.hadoop.local"
    assert out["hdfs_datanode_sample"][0]["capacity_bytes"] == 105554829312
    # 11 Hadoop 2.7 reads + the real Hadoop 3 logs' 5 writes (35, 4948 and 3 x 48551864 bytes)
    assert len(out["hdfs_transfer"]) == 16
    assert sum(r["bytes"] for r in out["hdfs_transfer"]) == 29884416 + 35 + 4948 + 3 * 48551864
    # the EC file's internal blocks sit on hosts this topology does not know: unverifiable
    assert [(r["path"], r["violation"]) for r in out["hdfs_block_placement"]] == [
        ("/user/grandes/1", True),
        ("/user/grandes/1", True),
        ("/dblp/author-large.txt", False),
        ("/dblp/author-large.txt", False),
    ]
    # PROVENANCE.md, the topology table and other.json are not captures: skipped, counted; so are
    # the Hadoop 3 logs' 19 lines that are not transfers (9 + 4 + 6)
    assert src.stats.dropped == 3 + 19
    # the clienttrace hosts (10.130.1.x) are not in this topology: reported, not placed
    assert {"10.130.1.29", "10.130.1.28", "dn0.hadoop.local"} <= set(src.topology.unknown)


ISSUE_LINE = (  # the Hadoop 3 shape issue 15 quotes: thread context, empty volume, duration(ns)
    "2026-01-01 12:00:{s:02d},000 DEBUG org.apache.hadoop.hdfs.server.datanode.DataNode.clienttrace "
    "(DataXceiver for client DFSClient_x_1 at /10.1.9.9:4{s:04d} [Sending block BP-1-10.1.0.100-1:"
    "blk_{s}_1]): src: /10.2.0.1:9866, dest: /10.1.9.9:4{s:04d}, volume: , bytes: {n}, op: HDFS_READ, "
    "cliID: DFSClient_x_1, offset: 0, srvID: u, blockid: BP-1-10.1.0.100-1:blk_{s}_1, duration(ns): 7\n"
)
NOISE = (
    "2026-01-01 12:00:00,001 INFO org.apache.hadoop.hdfs.server.datanode.DataNode: STARTUP_MSG: \n"
    "/************************************************************\n"
    "STARTUP_MSG: Starting DataNode\n"
)


def test_rotated_and_gzipped_logs_oldest_first(tmp_path: Path) -> None:
    # synthetic: log4j's RollingFileAppender set, the older ones compressed by logrotate
    d = tmp_path / "logs"
    d.mkdir()
    big = NOISE * 20000  # ~2.5 MB before the first transfer: recognized by its DataNode loggers
    with gzip.open(d / "hadoop-hdfs-datanode-dn1.log.2.gz", "wt") as f:
        f.write(big + ISSUE_LINE.format(s=1, n=100))
    (d / "hadoop-hdfs-datanode-dn1.log.1").write_text(NOISE + ISSUE_LINE.format(s=2, n=20))
    (d / "hadoop-hdfs-datanode-dn1.log").write_text(ISSUE_LINE.format(s=3, n=3))
    src, out = run_offline(d, topology_file=str(FIX / "topology_two_idcs.txt"))
    assert [(r["bytes"], r["cross_idc"]) for r in out["hdfs_transfer"]] == [
        (100, True),
        (20, True),
        (3, True),
    ]
    assert src.stats.failed == 0 and src.stats.dropped == 3 * 20001
    # one .gz file alone, and a truncated one: what was read counts, the rest is one problem
    _, out = run_offline(d / "hadoop-hdfs-datanode-dn1.log.2.gz")
    assert [r["bytes"] for r in out["hdfs_transfer"]] == [100]
    raw = gzip.compress((ISSUE_LINE.format(s=4, n=7) * 2000).encode())
    (tmp_path / "cut.log.3.gz").write_bytes(raw[: len(raw) // 2])
    src, out = run_offline(tmp_path / "cut.log.3.gz")
    assert 0 < len(out["hdfs_transfer"]) < 2000
    assert src.stats.errors == {"clienttrace_unreadable": 1}


def test_webhdfs_file_and_errors(tmp_path: Path) -> None:
    doc = {
        "BlockLocations": {
            "BlockLocation": [
                {
                    "hosts": ["a", "b"],
                    "names": ["10.1.0.1:9866", "10.1.0.2:9866"],
                    "length": 7,
                    "offset": 0,
                    "topologyPaths": ["/idcA/rack1/10.1.0.1:9866", "/idcA/rack1/10.1.0.2:9866"],
                }
            ]
        }
    }
    (tmp_path / "loc.json").write_text(json.dumps(doc))
    src = HdfsSource(HdfsConfig(), from_path=str(tmp_path / "loc.json"), hdfs_path="/user/x/data")
    (pl, tot) = [b.table.to_pylist() for b in src.collect()]
    assert (
        pl[0]["path"] == "/user/x/data"
        and pl[0]["reason"] == "under-replicated: 2 of 3; all 2 replicas on one rack (/idcA/rack1)"
    )
    assert tot[-1]["prefix"] == "/user/x"
    (tmp_path / "junk.txt").write_text("hello\n")
    with pytest.raises(UserError, match=r"junk.txt: not recognized: expected Hadoop /jmx JSON"):
        HdfsSource(from_path=str(tmp_path / "junk.txt")).collect()
    (tmp_path / "t.json").write_text('{"beans": [')
    with pytest.raises(UserError, match=r"t.json: invalid JSON"):
        HdfsSource(from_path=str(tmp_path / "t.json")).collect()
    with pytest.raises(UserError, match="no such file"):
        HdfsSource(from_path=str(tmp_path / "nope")).collect()


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return rs("hdfs", *args, cwd=cwd, timeout=120)


def test_cli_from_jsonl_and_user_errors(tmp_path: Path) -> None:
    log, topology = FIX / "datanode_clienttrace_hdfs_read.log", FIX / "topology_two_idcs.txt"
    r = cli("--from", str(log), "--output", "jsonl", "--topology", str(topology), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    recs = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["_kind"] for x in recs] == ["hdfs_transfer"] * 11
    assert recs[0]["bytes"] == 2555904 and recs[0]["duration_seconds"] == 1.083375057
    assert "2 host(s) not in the topology" in r.stderr
    (tmp_path / "junk").write_text("x\n")
    r = cli("--from", str(tmp_path / "junk"), "--output", "jsonl", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "junk: not recognized" in r.stderr
    r = cli("--from", str(tmp_path / "junk"), "--dci-capacity", "idcA=1G", cwd=tmp_path)
    assert r.returncode == 2 and "not an IDC pair: 'idcA'" in r.stderr
    # storing (no --output): a bad capture is still exit 2 before anything runs
    r = cli("--from", str(tmp_path / "junk"), "--dsn", f"chdb://{tmp_path}/store", cwd=tmp_path)
    assert r.returncode == 2 and "junk: not recognized" in r.stderr
    r = cli("--once", cwd=tmp_path)
    assert r.returncode == 2 and "nothing to collect" in r.stderr
