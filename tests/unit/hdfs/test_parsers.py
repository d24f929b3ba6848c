"""Parsers on the real captures (tests/fixtures/hdfs) and on synthetic lines of other versions."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from exporters.common.tail import Tailer, TailOffsets
from exporters.hdfs import clienttrace, fsck, jmx, webhdfs
from telemetry.errors import UserError

FIX = Path(__file__).parents[2] / "fixtures" / "hdfs"


def ms(s: str) -> int:
    return int(datetime.fromisoformat(s).replace(tzinfo=UTC).timestamp() * 1000)


# --- JMX ------------------------------------------------------------------------------------------
ABSENT = "<absent>"

# what the parser reads from each real capture
JMX_CAPTURES = {
    "namenode": {
        # FSNamesystem wins over FSNamesystemState (2 vs 0 under-replicated in this capture).
        "under_replicated_blocks": 2,
        "pending_replication_blocks": 1,
        "corrupt_blocks": 3,
        "missing_blocks": 0,
        "live_datanodes": 1,
        "dead_datanodes": 0,
        "capacity_total_bytes": 1999007744,
        "capacity_remaining_bytes": 1997860864,
        "files": 1,
        "blocks": 0,
        "ha_state": "active",
    },
    "datanode": {
        "capacity_bytes": 105554829312,
        "dfs_used_bytes": 24576,
        "remaining_bytes": 99181457408,
        "xceivers": 1,
        "read_bytes_total": 0,
        "remote_read_bytes_total": 0,
        "failed_volumes": 0,
        "ha_state": ABSENT,
    },
}


@pytest.mark.parametrize("role", sorted(JMX_CAPTURES))
def test_jmx_capture(role: str) -> None:
    doc = json.loads((FIX / f"{role}.jmx.json").read_text())
    assert jmx.role_of(doc) == role
    s = jmx.sample(doc, role)
    assert {k: s.get(k, ABSENT) for k in JMX_CAPTURES[role]} == JMX_CAPTURES[role]


def test_namenode_info_alone_fills_the_namenode_fields() -> None:
    """A `?qry=...NameNodeInfo` scrape (a real Hadoop 3.1.3 one): NameNodeInfo's names for the
    numbers FSNamesystem carries, and the DataNodes its LiveNodes / DeadNodes list."""
    doc = json.loads((FIX / "namenode_info_only_hadoop313.jmx.json").read_text())
    assert jmx.role_of(doc) == "namenode"
    s = jmx.sample(doc, "namenode")
    assert s == {
        "missing_blocks": 0,
        "blocks": 0,
        "files": 1,
        "capacity_total_bytes": 62725623808,
        "capacity_used_bytes": 24576,
        "capacity_remaining_bytes": 55830482944,
        "live_datanodes": 1,
        "dead_datanodes": 0,
    }
    # beside FSNamesystem / FSNamesystemState (a full /jmx), theirs win
    full = json.loads((FIX / "namenode.jmx.json").read_text())
    info = next(b for b in full["beans"] if b["name"].endswith("name=NameNodeInfo"))
    fsn = next(b for b in full["beans"] if b["name"].endswith("name=FSNamesystem"))
    mixed = {"beans": [dict(info, Total=1, TotalFiles=2), fsn]}
    s = jmx.sample(mixed, "namenode")
    assert (s["capacity_total_bytes"], s["files"]) == (fsn["CapacityTotal"], fsn["FilesTotal"])
    assert s["live_datanodes"] == len(json.loads(info["LiveNodes"]))
    broken = {"beans": [{"name": "Hadoop:service=NameNode,name=NameNodeInfo", "LiveNodes": "{"}]}
    assert "live_datanodes" not in jmx.sample(broken, "namenode")


def test_namenode_jmx_lists_live_datanodes() -> None:
    doc = json.loads((FIX / "namenode.jmx.json").read_text())
    nodes = jmx.live_nodes(doc)
    assert nodes == [jmx.LiveNode("localhost", "127.0.0.1:50075", "127.0.0.1:0", "127.0.0.1:50010")]


# Hadoop 3.x bean layouts, written from the metrics2 sources (FSNamesystem @Metric gauges,
# ReplicatedBlocksMBean/ECBlockGroupsMBean, FsDatasetImpl, DataNodeMetrics): synthetic values.
# 3.0-3.4 print the 2.x names too (deprecated) with the same numbers; a build without them must
# still fill every field from the 3.x names.
H3_NAMENODE = {
    "beans": [
        {
            "name": "Hadoop:service=NameNode,name=FSNamesystem",
            "tag.HAState": "standby",
            "LowRedundancyBlocks": 7,
            "PendingReconstructionBlocks": 4,
            "MissingBlocks": 1,
            "CorruptBlocks": 2,
            "BlocksTotal": 100,
            "FilesTotal": 50,
            "LowRedundancyECBlockGroups": 3,
            "LowRedundancyReplicatedBlocks": 4,
        },
        {
            "name": "Hadoop:service=NameNode,name=ECBlockGroupsState",
            "LowRedundancyECBlockGroups": 3,
        },
        {"name": "Hadoop:service=NameNode,name=FSNamesystemState", "NumLiveDataNodes": 9},
    ]
}


def test_jmx_hadoop3_names_first_2x_names_as_fallback() -> None:
    s = jmx.sample(H3_NAMENODE, "namenode")
    assert s["under_replicated_blocks"] == 7 and s["pending_replication_blocks"] == 4
    assert (s["missing_blocks"], s["corrupt_blocks"], s["live_datanodes"]) == (1, 2, 9)
    assert s["ha_state"] == "standby"
    # 3.0-3.4: both names, 3.x wins (they agree in Hadoop; a disagreement shows which one is read)
    fs = dict(H3_NAMENODE["beans"][0], UnderReplicatedBlocks=99, PendingReplicationBlocks=98)
    s = jmx.sample({"beans": [fs]}, "namenode")
    assert (s["under_replicated_blocks"], s["pending_replication_blocks"]) == (7, 4)
    dn = {
        "beans": [
            {"name": "Hadoop:service=DataNode,name=FSDatasetState", "Capacity": 10, "DfsUsed": 3},
            {
                "name": "Hadoop:service=DataNode,name=DataNodeActivity-dn9.example-9866",
                "BytesRead": 5,
            },
        ]
    }  # 3.x: FSDatasetState without the 2.x "-<storage id>" suffix; port 9866
    s = jmx.sample(dn, "datanode")
    assert (s["capacity_bytes"], s["dfs_used_bytes"], s["read_bytes_total"]) == (10, 3, 5)


def test_jmx_values_scaled_and_non_numbers_skipped() -> None:
    doc = {
        "beans": [
            {
                "name": "Hadoop:service=DataNode,name=DataNodeActivity-dn7-9866",
                "PacketAckRoundTripTimeNanosAvgTime": 2_500_000.0,
                "BytesRead": "oops",
                "RemoteBytesRead": 123456789012,
                "ReadsFromRemoteClient": True,
            }
        ]
    }
    s = jmx.sample(doc, "datanode")
    assert s["packet_ack_round_trip_seconds"] == pytest.approx(0.0025)
    assert s["remote_read_bytes_total"] == 123456789012
    assert "read_bytes_total" not in s  # a string is not a number: null, not 0
    assert "remote_client_reads_total" not in s  # a bool is not a counter


def test_live_nodes_wildcard_and_bad_json() -> None:
    doc = {
        "beans": [
            {
                "name": "Hadoop:service=NameNode,name=NameNodeInfo",
                "LiveNodes": json.dumps(
                    {
                        "dn1.a:9866": {
                            "infoAddr": "0.0.0.0:9864",
                            "infoSecureAddr": "0.0.0.0:0",
                            "xferaddr": "10.1.0.1:9866",
                        }
                    }
                ),
            }
        ]
    }
    assert jmx.live_nodes(doc)[0].info_addr == "dn1.a:9864"
    doc["beans"][0]["LiveNodes"] = '{"dn1":'
    with pytest.raises(UserError, match="LiveNodes is not valid JSON"):
        jmx.live_nodes(doc)
    assert jmx.role_of({"beans": [{"name": "java.lang:type=Memory"}]}) == ""
    assert jmx.role_of([1, 2]) == ""


# --- clienttrace ----------------------------------------------------------------------------------
def test_clienttrace_capture_old_duration_form() -> None:
    st = clienttrace.ParseStats()
    t = clienttrace.parse_lines((FIX / "datanode_clienttrace_hdfs_read.log").open(), stats=st)
    assert (st.lines, st.transfers, st.skipped, st.errors) == (11, 11, 0, {})
    rows = list(t.rows())
    assert rows[0] == {
        "ts": ms("2016-07-10 21:31:34.263"),
        "datanode": "10.130.1.29:50010",
        "op": "HDFS_READ",
        "src": "10.130.1.29:50010",
        "dest": "10.130.1.28:55243",
        "bytes": 2555904,
        "client_id": "DFSClient_NONMAPREDUCE_1984924661_1",
        "block_id": "BP-360285305-10.130.1.11-1444619256876:blk_1109360829_35627143",
        "duration_seconds": 1.083375057,
        "write_mode": "",
    }
    assert rows[-1]["ts"] == ms("2016-07-10 21:31:47.679")
    assert rows[-1]["bytes"] == 2490368
    assert rows[-1]["duration_seconds"] == pytest.approx(0.026523774)
    assert sum(t.bytes) == 29884416


NEW_WRITE = (
    "2024-03-01 08:00:00,007 INFO org.apache.hadoop.hdfs.server.datanode.DataNode.clienttrace: "
    "src: /10.1.9.9:41022, dest: /10.1.0.1:9866, volume: /data1, bytes: 134217728, op: HDFS_WRITE, "
    "cliID: DFSClient_attempt_1_0001_m_000001_0_-1_1, offset: 0, srvID: 7f1c, "
    "blockid: BP-1-10.1.0.100-1700000000000:blk_1073741900_1076, duration(ns): 1500000000"
)
NEW_READ = (
    "2024-03-01 08:00:01,500 INFO org.apache.hadoop.hdfs.server.datanode.DataNode.clienttrace: "
    "src: /10.2.0.1:9866, dest: /10.1.9.9:52001, bytes: 1000, op: HDFS_READ, cliID: DFSClient_X_1, "
    "offset: 0, srvID: aa, blockid: BP-1-10.1.0.100-1700000000000:blk_1073741901_1077, duration(ns): 2000"
)


def test_clienttrace_hadoop3_forms_with_and_without_volume() -> None:
    # Hadoop 3.0-3.3: `duration(ns):`; 3.4 inserts `volume: V` after dest (V may be empty).
    st = clienttrace.ParseStats()
    empty_volume = NEW_WRITE.replace("volume: /data1", "volume: ")
    no_volume = NEW_WRITE.replace("volume: /data1, ", "")
    t = clienttrace.parse_lines([NEW_WRITE, NEW_READ, empty_volume, no_volume], stats=st)
    assert st.errors == {} and st.transfers == 4
    assert t.op == ["HDFS_WRITE", "HDFS_READ", "HDFS_WRITE", "HDFS_WRITE"]
    assert t.duration_seconds == [1.5, 2e-6, 1.5, 1.5] and t.bytes[0] == 134217728
    assert t.datanode == ["10.1.0.1:9866", "10.2.0.1:9866", "10.1.0.1:9866", "10.1.0.1:9866"]
    assert t.write_mode == ["sync", "", "sync", "sync"]
    # a 10th field that is not `volume:` is drift: an error, not a guess
    st = clienttrace.ParseStats()
    clienttrace.parse_lines([NEW_WRITE.replace("volume: /data1", "disk: /data1")], stats=st)
    assert st.errors == {"field_count": 1}


# The other log4j layouts Hadoop distributions ship: thread context `%c (%t): ` (the line)
# and Ambari/HDP's `%c{2} (%F:%M(%L)) - `, each with `duration:` (2.x) and `duration(ns):` (3.x).
THREAD_READ = (
    "2024-03-01 08:00:02,250 DEBUG org.apache.hadoop.hdfs.server.datanode.DataNode.clienttrace "
    "(DataXceiver for client DFSClient_NONMAPREDUCE_1_1 at /10.1.9.9:52002 [Sending block "
    "BP-1-10.1.0.100-1700000000000:blk_1073741905_1081]): src: /10.2.0.1:9866, dest: /10.1.9.9:52002, "
    "volume: , bytes: 4096, op: HDFS_READ, cliID: DFSClient_NONMAPREDUCE_1_1, offset: 0, srvID: bb, "
    "blockid: BP-1-10.1.0.100-1700000000000:blk_1073741905_1081, duration(ns): 3000000"
)
LOCATION_WRITE_OLD = (
    "2024-03-01 08:00:03,000 INFO  DataNode.clienttrace (BlockReceiver.java:finalizeBlock(1490)) - "
    "src: /10.1.9.9:41023, dest: /10.1.0.2:50010, bytes: 512, op: HDFS_WRITE, cliID: DFSClient_c_2, "
    "offset: 0, srvID: cc, blockid: BP-1-10.1.0.100-1700000000000:blk_1073741906_1082, duration: 250000000"
)


def test_clienttrace_layouts_and_other_ops() -> None:
    other_op = THREAD_READ.replace("op: HDFS_READ", "op: HDFS_COPY")
    st = clienttrace.ParseStats()
    t = clienttrace.parse_lines([THREAD_READ, LOCATION_WRITE_OLD, other_op], stats=st)
    assert st.errors == {} and st.skipped == 1
    assert list(t.rows()) == [
        {
            "ts": ms("2024-03-01 08:00:02.250"),
            "datanode": "10.2.0.1:9866",
            "op": "HDFS_READ",
            "src": "10.2.0.1:9866",
            "dest": "10.1.9.9:52002",
            "bytes": 4096,
            "client_id": "DFSClient_NONMAPREDUCE_1_1",
            "block_id": "BP-1-10.1.0.100-1700000000000:blk_1073741905_1081",
            "duration_seconds": 0.003,
            "write_mode": "",
        },
        {
            "ts": ms("2024-03-01 08:00:03"),
            "datanode": "10.1.0.2:50010",
            "op": "HDFS_WRITE",
            "src": "10.1.9.9:41023",
            "dest": "10.1.0.2:50010",
            "bytes": 512,
            "client_id": "DFSClient_c_2",
            "block_id": "BP-1-10.1.0.100-1700000000000:blk_1073741906_1082",
            "duration_seconds": 0.25,
            "write_mode": "sync",
        },
    ]
    assert all(clienttrace.looks_like_clienttrace(x) for x in (THREAD_READ, LOCATION_WRITE_OLD))


def test_real_hadoop3_datanode_logs() -> None:
    """Excerpts of three real Hadoop 3 DataNode logs (see PROVENANCE.md), other lines included."""
    got = {}
    for name in ("alpha2", "cdh", "hdp_pipeline"):
        path = FIX / f"datanode_hadoop3_{name}.log"
        assert clienttrace.looks_like_clienttrace(path.read_text())
        st = clienttrace.ParseStats()
        t = clienttrace.parse_lines(path.open(), stats=st)
        assert st.errors == {}
        got[name] = (st.lines, st.skipped, st.continuation, t)
    lines, skipped, cont, t = got["alpha2"]
    assert (lines, skipped, cont) == (10, 9, 5)  # 5 lines of one multi-line message
    assert list(t.rows()) == [
        {
            "ts": ms("2017-03-05 03:44:22.333"),
            "datanode": "10.64.33.126:9866",
            "op": "HDFS_WRITE",
            "src": "10.64.33.125:58489",
            "dest": "10.64.33.126:9866",
            "bytes": 35,
            "client_id": "DFSClient_NONMAPREDUCE_1121327099_1",
            "block_id": "BP-1444699866-10.64.33.125-1488652735000:blk_1073741834_1010",
            "duration_seconds": 0.007601332,
            "write_mode": "sync",
        }
    ]
    lines, skipped, cont, t = got["cdh"]
    assert (lines, skipped, len(t)) == (5, 4, 1)
    assert (t.bytes, t.duration_seconds) == ([4948], [1.610281611])
    assert t.src == ["10.104.6.159:56820"] and t.datanode == ["10.104.6.156:9866"]
    lines, skipped, cont, t = got["hdp_pipeline"]
    assert (lines, skipped, len(t)) == (9, 6, 3)
    # one block through a three-DataNode pipeline: each hop is a transfer of the whole block
    assert t.src == ["10.12.68.18:37166", "10.12.68.18:39452", "10.12.64.74:28970"]
    assert t.datanode == ["10.12.68.18:1019", "10.12.64.74:1019", "10.12.64.3:1019"]
    assert t.bytes == [48551864] * 3
    assert t.duration_seconds == [380.461993891, 380.462834937, 380.465797665]
    assert t.ts[0] == ms("2025-09-19 03:58:59.645")


STACK_TRACE = """2024-03-01 08:00:04,100 ERROR org.apache.hadoop.hdfs.server.datanode.DataNode: dn1:9866:DataXceiver error processing READ_BLOCK operation  src: /10.1.9.9:52003 dst: /10.2.0.1:9866
java.io.IOException: Connection reset by peer
	at sun.nio.ch.FileDispatcherImpl.write0(Native Method)
	at org.apache.hadoop.hdfs.server.datanode.BlockSender.sendPacket(BlockSender.java:620)
	at org.apache.hadoop.hdfs.server.datanode.DataXceiver.readBlock(DataXceiver.java:606)
Caused by: java.io.IOException: src: /10.2.0.1:9866, dest: /10.1.9.9:52003, bytes: 1, op: HDFS_READ
	... 3 more
"""


def test_full_datanode_log_with_stack_traces_is_not_an_error() -> None:
    # synthetic: the layouts above around a Java stack trace whose message looks like a transfer
    lines = [NEW_WRITE, *STACK_TRACE.splitlines(), THREAD_READ, "", LOCATION_WRITE_OLD]
    st = clienttrace.ParseStats()
    t = clienttrace.parse_lines(lines, stats=st)
    assert st.errors == {} and len(t) == 3
    assert (st.lines, st.skipped, st.continuation) == (11, 8, 7)
    assert clienttrace.looks_like_clienttrace(STACK_TRACE)  # a DataNode log, even without transfers


def test_clienttrace_rejects_and_skips() -> None:
    st = clienttrace.ParseStats()
    lines = [
        "2024-03-01 08:00:00,000 INFO DataNode: Receiving BP-1:blk_1_1 src: /1.1.1.1:1 dest: /2.2.2.2:2",
        NEW_READ.replace("bytes: 1000", "bytes: lots"),
        NEW_READ.replace("duration(ns): 2000", "elapsed: 2000"),
        "2024-03-01 08:00:02,000 INFO DataNode.clienttrace: src: 127.0.0.1, dest: 127.0.0.1, "
        "op: REQUEST_SHORT_CIRCUIT_FDS, blockid: 1, srvID: x, success: true",
        "some unrelated line",
        NEW_READ.replace("2024-03-01", "2024-13-01"),
        "yesterday!",
    ]
    t = clienttrace.parse_lines(lines, stats=st)
    assert len(t) == 0
    assert st.errors == {"bad_number_or_time": 2, "no_duration": 1}
    assert st.skipped == 4 and st.lines == 7 and st.continuation == 2


def test_replication_line_needs_datanode() -> None:
    line = (
        "2024-03-01 08:00:03,000 INFO org.apache.hadoop.hdfs.server.datanode.DataNode: Received "
        "BP-1-10.1.0.100-1700000000000:blk_1073741902_1078 on volume /data2 size 67108864 from /10.1.0.2:50010"
    )
    st = clienttrace.ParseStats()
    assert len(clienttrace.parse_lines([line], stats=st)) == 0
    assert st.failed == 1
    t = clienttrace.parse_lines([line], datanode="10.2.0.1:9866")
    assert list(t.rows()) == [
        {
            "ts": ms("2024-03-01 08:00:03"),
            "datanode": "10.2.0.1:9866",
            "op": "replication",
            "src": "10.1.0.2:50010",
            "dest": "10.2.0.1:9866",
            "bytes": 67108864,
            "client_id": "",
            "block_id": "BP-1-10.1.0.100-1700000000000:blk_1073741902_1078",
            "duration_seconds": None,
            "write_mode": "async",
        }
    ]


def test_replication_line_with_both_ends() -> None:
    # DataXceiver's form for DataNode-to-DataNode writes (Hadoop 2.x; 3.x adds "volume: V").
    lines = [
        "2024-03-01 08:00:04,000 INFO org.apache.hadoop.hdfs.server.datanode.DataNode: Received "
        "BP-1-10.1.0.100-1700000000000:blk_1073741903_1079 src: /10.1.0.3:43210 dest: /10.2.0.2:9866 "
        "of size 1048576",
        "2024-03-01 08:00:05,000 INFO org.apache.hadoop.hdfs.server.datanode.DataNode: Received "
        "BP-1-10.1.0.100-1700000000000:blk_1073741904_1080 src: /10.1.0.4:43211 dest: /10.2.0.3:9866 "
        "volume: /data3 of size 2048",
    ]
    st = clienttrace.ParseStats()
    t = clienttrace.parse_lines(lines, stats=st)
    assert st.errors == {} and st.transfers == 2
    assert t.src == ["10.1.0.3:43210", "10.1.0.4:43211"] and t.dest == [
        "10.2.0.2:9866",
        "10.2.0.3:9866",
    ]
    assert (
        t.bytes == [1048576, 2048] and t.op == ["replication"] * 2 and t.write_mode == ["async"] * 2
    )
    assert t.datanode == ["10.2.0.2:9866", "10.2.0.3:9866"]


def test_log_timezone() -> None:
    tz = clienttrace.local_tz("+08:00")
    assert tz == timezone(timedelta(hours=8))
    t = clienttrace.parse_lines([NEW_READ], tz=tz)
    assert t.ts == [ms("2024-03-01 00:00:01.500")]
    assert clienttrace.local_tz("Asia/Shanghai").utcoffset(datetime(2024, 3, 1)) == timedelta(
        hours=8
    )


def test_tailer_follows_rotation(tmp_path: Path) -> None:
    log = tmp_path / "hadoop-hdfs-datanode.log"
    log.write_text("old line\n")
    tl = Tailer(log)
    assert tl.read() == []  # starts at the end
    with log.open("a") as f:
        f.write("a\nb\npart")
    assert tl.read() == ["a", "b"]
    with log.open("a") as f:
        f.write("ial\nc\n")
    # log4j rolls: hadoop.log -> hadoop.log.1, a new hadoop.log begins
    log.rename(tmp_path / "hadoop-hdfs-datanode.log.1")
    log.write_text("d\n")
    assert tl.read() == ["partial", "c", "d"]
    assert tl.rotations == 1
    log.write_text("")  # truncated in place (copytruncate)
    assert tl.read() == []
    with log.open("a") as f:
        f.write("e\n")
    assert tl.read() == ["e"]
    log.unlink()
    assert tl.read() == []  # between rotation and re-creation: quiet
    assert Tailer(tmp_path / "hadoop-hdfs-datanode.log.1", from_start=True).read() == [
        "old line",
        "a",
        "b",
        "partial",
        "c",
    ]


def test_tailer_resumes_after_restart_without_double_counting(tmp_path: Path) -> None:
    log = tmp_path / "dn.log"
    state = TailOffsets(tmp_path / "spool" / "offsets.json")
    log.write_text("a\nb\npar")
    tl = Tailer(log, from_start=True, resume=state.load().get(str(log)))
    assert tl.read() == ["a", "b"]
    state.save({str(log): tl.position()})  # type: ignore[dict-item]
    assert state.load() == {str(log): (log.stat().st_ino, 4)}  # after "b\n": the partial line waits
    with log.open("a") as f:
        f.write("tial\nc\n")
    # restart: a new tailer from the saved offset sees each line once, the partial one whole
    tl = Tailer(log, resume=state.load()[str(log)])
    assert tl.read() == ["partial", "c"]
    state.save({str(log): tl.position()})  # type: ignore[dict-item]
    # down while the log rolled twice: dn.log -> dn.log.1 -> dn.log.2
    with log.open("a") as f:
        f.write("d\n")
    log.rename(tmp_path / "dn.log.1")
    (tmp_path / "dn.log.1").rename(tmp_path / "dn.log.2")
    (tmp_path / "dn.log.1").write_text("e\nf")
    log.write_text("g\n")
    tl = Tailer(log, resume=state.load()[str(log)])
    assert tl.read() == ["d", "e", "f", "g"]
    assert tl.rotations == 1
    # a state file that is not ours starts over (from the end, as a first start does)
    (tmp_path / "spool" / "offsets.json").write_text("{not json")
    assert state.load() == {}


# --- fsck -----------------------------------------------------------------------------------------
def test_fsck_capture() -> None:
    rep = fsck.parse_fsck((FIX / "fsck_files_blocks_racks_dataproc.txt").open())
    assert rep.files == 1 and rep.status == "HEALTHY" and rep.errors == {}
    assert [b.block_id for b in rep.blocks] == [
        "BP-634013962-10.154.0.34-1580405307126:blk_1073741827_1003",
        "BP-634013962-10.154.0.34-1580405307126:blk_1073741828_1004",
    ]
    b0, b1 = rep.blocks
    assert (b0.path, b0.length, b0.live_replicas, b0.replication) == (
        "/dblp/author-large.txt",
        134217728,
        2,
        None,
    )
    assert b1.length == 89064187
    assert list(b0.replicas) == [
        ("10.154.0.33:9866", "/default-rack"),
        ("10.154.0.32:9866", "/default-rack"),
    ]
    assert rep.summary["Total blocks (validated)"] == 2
    assert rep.summary["Default replication factor"] == 2
    assert rep.summary["Number of racks"] == 1
    assert rep.summary["Corrupt blocks"] == 0


HADOOP3_FSCK = """\
FSCK started by hdfs (auth:KERBEROS_SSL) from /10.1.0.100 for path /warehouse at Mon Mar 04 10:00:00 CST 2024
/warehouse/t1/part-0 268435456 bytes, replicated: replication=4, 2 block(s):  OK
0. BP-1-10.1.0.100-1700000000000:blk_1073741825_1001 len=134217728 Live_repl=4  [/idcA/rack1/10.1.0.1:9866, /idcA/rack2/10.1.0.3:9866, /idcB/rack1/10.2.0.1:9866, /idcB/rack2/10.2.0.3:9866]
1. BP-1-10.1.0.100-1700000000000:blk_1073741826_1002 len=134217728 Live_repl=3  [DatanodeInfoWithStorage[10.1.0.1:9866,DS-1,DISK], DatanodeInfoWithStorage[10.1.0.2:9866,DS-2,DISK], DatanodeInfoWithStorage[10.2.0.1:9866,DS-3,DISK]]

/warehouse/t1/part 1 99 bytes, replicated: replication=4, 1 block(s):  MISSING 1 blocks of total size 99 B
0. BP-1-10.1.0.100-1700000000000:blk_1073741827_1003 len=99 MISSING!
2. BP-1-10.1.0.100-1700000000000:blk_oops
Status: CORRUPT
"""


def test_fsck_hadoop3_forms() -> None:
    rep = fsck.parse_fsck(HADOOP3_FSCK.splitlines())
    assert rep.files == 2 and rep.status == "CORRUPT"
    assert rep.errors == {"block_line": 1}
    a, b, c = rep.blocks
    assert a.replication == 4 and a.live_replicas == 4
    assert [r[1] for r in a.replicas] == [
        "/idcA/rack1",
        "/idcA/rack2",
        "/idcB/rack1",
        "/idcB/rack2",
    ]
    assert list(b.replicas) == [("10.1.0.1:9866", ""), ("10.1.0.2:9866", ""), ("10.2.0.1:9866", "")]
    assert c.path == "/warehouse/t1/part 1" and c.missing and c.replicas == () and c.length == 99


def test_fsck_real_erasure_coded_file() -> None:
    """Hadoop 3.3.6, RS-3-2-1024k, -files -blocks -locations (see PROVENANCE.md)."""
    rep = fsck.parse_fsck((FIX / "fsck_ec_rs_3_2_hadoop336.txt").open())
    assert (rep.files, rep.status, rep.errors) == (1, "HEALTHY", {})
    g0, g1 = rep.blocks
    assert g0.block_id == "BP-1236072688-172.19.0.2-1697554321959:blk_-9223372036854775792_1040"
    assert (g0.length, g0.live_replicas, g0.replication) == (201326592, 5, 5)
    assert (g0.ec_policy, g0.parity_units) == ("RS-3-2-1024k", 2)
    assert [h for h, _ in g0.replicas] == [
        "172.19.0.8:9866",
        "172.19.0.7:9866",
        "172.19.0.4:9866",
        "172.19.0.5:9866",
        "172.19.0.10:9866",
    ]
    assert g1.length == 165675008 and g1.replicas[2] == ("172.19.0.10:9866", "")
    # the two summaries do not overwrite each other
    assert rep.summary["Total size"] == 0 and rep.summary["EC Total size"] == 367001600
    assert rep.summary["EC Total block groups (validated)"] == 2


# Written from NamenodeFsck.getReplicaInfo (apache/hadoop, Hadoop 3): with -racks a striped group's
# internal block is "blk_<id>:" + NodeBase.getPath(node) = "/rack/ip:port". Synthetic.
EC_RACKS = """/ec/small 2057 bytes, erasure-coded: policy=RS-6-3-1024k, 1 block(s):  OK
0. BP-1-10.1.0.100-1:blk_-9223372036854775536_4409 len=2057 Live_repl=4  [blk_-9223372036854775536:/idcA/rack1/10.1.0.1:9866, blk_-9223372036854775530:/idcA/rack2/10.1.0.3:9866, blk_-9223372036854775529:/idcB/rack1/10.2.0.1:9866, blk_-9223372036854775528:/idcB/rack2/10.2.0.3:9866]
/ec/odd 5 bytes, erasure-coded: policy=LRC-x, 1 block(s):  OK
0. BP-1-10.1.0.100-1:blk_-9223372036854775000_1 len=5 Live_repl=1  [blk_-9223372036854775000:/idcA/rack1/10.1.0.1:9866]
/open 5 bytes, replicated: replication=3, 1 block(s), OPENFORWRITE:  OK

Under Construction Block:
0. BP-1-10.1.0.100-1:blk_1073741830_1006 len=5 Expected_repl=3 [/idcA/rack1/10.1.0.1:9866]
"""


def test_fsck_ec_racks_policy_names_and_under_construction() -> None:
    rep = fsck.parse_fsck(EC_RACKS.splitlines())
    assert rep.errors == {"ec_policy": 1}  # LRC-x: not a policy name we can size
    (g,) = rep.blocks  # the unknown policy's group and the block under construction are not audited
    # 2057 bytes fill one 1 MiB cell: 1 data + 3 parity internal blocks are expected, not 9
    assert (g.replication, g.parity_units, g.live_replicas) == (4, 3, 4)
    assert g.replicas == (
        ("10.1.0.1:9866", "/idcA/rack1"),
        ("10.1.0.3:9866", "/idcA/rack2"),
        ("10.2.0.1:9866", "/idcB/rack1"),
        ("10.2.0.3:9866", "/idcB/rack2"),
    )
    assert fsck.ec_policy("RS-LEGACY-6-3-1024k") == ("RS-LEGACY-6-3-1024k", 6, 3, 1 << 20)
    assert fsck.ec_policy("XOR-2-1-1024k").internal_blocks(6970734) == 3  # type: ignore[union-attr]
    assert fsck.ec_policy("RS-10-4-1024k").internal_blocks(1 << 30) == 14  # type: ignore[union-attr]


# --- WebHDFS --------------------------------------------------------------------------------------
def test_webhdfs_getfileblocklocations() -> None:
    doc = {
        "BlockLocations": {
            "BlockLocation": [
                {
                    "cachedHosts": [],
                    "corrupt": False,
                    "hosts": ["dn1", "dn5"],
                    "length": 134217728,
                    "names": ["10.1.0.1:9866", "10.2.0.1:9866"],
                    "offset": 0,
                    "storageIds": ["DS-1", "DS-5"],
                    "storageTypes": ["DISK", "DISK"],
                    "topologyPaths": ["/idcA/rack1/10.1.0.1:9866", "/idcB/rack1/10.2.0.1:9866"],
                },
                {"hosts": [], "names": [], "length": 5, "offset": 134217728, "topologyPaths": []},
            ]
        }
    }
    a, b = webhdfs.parse_block_locations(doc, "/data/f")
    assert (a.block_id, a.length, a.path) == ("offset=0", 134217728, "/data/f")
    assert list(a.replicas) == [("10.1.0.1:9866", "/idcA/rack1"), ("10.2.0.1:9866", "/idcB/rack1")]
    assert b.missing and b.block_id == "offset=134217728"


def test_webhdfs_located_blocks_and_errors() -> None:
    doc = {
        "LocatedBlocks": {
            "fileLength": 10,
            "locatedBlocks": [
                {
                    "block": {
                        "blockId": 1073741825,
                        "blockPoolId": "BP-1",
                        "generationStamp": 1001,
                        "numBytes": 10,
                    },
                    "locations": [
                        {
                            "hostName": "dn1",
                            "ipAddr": "10.1.0.1",
                            "xferPort": 9866,
                            "networkLocation": "/idcA/rack1",
                        }
                    ],
                }
            ],
        }
    }
    (a,) = webhdfs.parse_block_locations(doc, "/f")
    assert a.block_id == "BP-1:blk_1073741825_1001" and a.replicas[0][0] == "10.1.0.1:9866"
    with pytest.raises(UserError, match="malformed"):
        webhdfs.parse_block_locations(
            {"LocatedBlocks": {"locatedBlocks": [{"block": {}}]}}, "/f", origin="x.json"
        )
    with pytest.raises(UserError, match="not a WebHDFS"):
        webhdfs.parse_block_locations({"beans": []}, "/f")
