"""Fuzzing the HDFS parsers with inputs seeded from the real captures (tests/fixtures/hdfs): the
clienttrace and fsck parsers never raise (every rejected line is counted under a declared
reason, which the source turns into railscope_component_failed_total{reason=...}); /jmx and
WebHDFS parsing lets only UserError out. >= 100,000 inputs per parser; marked slow."""

from __future__ import annotations

import contextlib
import json
import random
from pathlib import Path
from typing import Any

import pytest

from exporters.hdfs import clienttrace, fsck, jmx, webhdfs
from telemetry.errors import UserError
from tests.fuzz import PER_EXAMPLE, fuzz, inputs, json_value, mutate

pytestmark = pytest.mark.slow
FIX = Path(__file__).parents[2] / "fixtures" / "hdfs"


def seed_lines(*names: str) -> list[str]:
    return [ln for n in names for ln in (FIX / n).read_text().splitlines() if ln.strip()]


TRACE = seed_lines(
    "datanode_clienttrace_hdfs_read.log",
    "datanode_hadoop3_alpha2.log",
    "datanode_hadoop3_cdh.log",
    "datanode_hadoop3_hdp_pipeline.log",
)
TRACE.append(  # Hadoop 3.4's volume field and the thread-context layout
    "2024-03-01 08:00:02,250 DEBUG org.apache.hadoop.hdfs.server.datanode.DataNode.clienttrace "
    "(DataXceiver for client DFSClient_1 at /10.1.9.9:52002 [Sending block BP-1:blk_5_1]): "
    "src: /10.2.0.1:9866, dest: /10.1.9.9:52002, volume: /data1, bytes: 4096, op: HDFS_READ, "
    "cliID: DFSClient_1, offset: 0, srvID: bb, blockid: BP-1:blk_5_1, duration(ns): 3000000"
)
FSCK = seed_lines("fsck_files_blocks_racks_dataproc.txt", "fsck_ec_rs_3_2_hadoop336.txt")


def test_clienttrace_parser_never_raises() -> None:
    def check(rnd: random.Random) -> int:
        datanode = rnd.choice(["", "10.0.0.1:9866"])
        batch = inputs(rnd, TRACE, PER_EXAMPLE)
        st_ = clienttrace.ParseStats()
        t = clienttrace.parse_lines(batch, datanode=datanode, stats=st_)
        assert st_.lines == len(batch)
        assert set(st_.errors) <= set(clienttrace.REASONS)
        assert st_.transfers + st_.skipped + st_.failed == len(batch)
        assert all(b >= 0 for b in t.bytes) and len(t.src) == len(t)
        return len(batch)

    fuzz(check)


def test_fsck_parser_never_raises() -> None:
    def check(rnd: random.Random) -> int:
        batch = inputs(rnd, FSCK, PER_EXAMPLE)
        rep = fsck.parse_fsck(batch)
        assert rep.lines == len(batch) and set(rep.errors) <= set(fsck.REASONS)
        for b in rep.blocks:
            assert b.length >= 0 and all(isinstance(h, str) for h, _ in b.replicas)
        return len(batch)

    fuzz(check)


def _jmx_seeds() -> list[str]:
    docs = [json.loads((FIX / f).read_text()) for f in ("namenode.jmx.json", "datanode.jmx.json")]
    # one bean per seed keeps each input small; the bean list is what the parser walks
    return [json.dumps({"beans": [b]}) for d in docs for b in d["beans"]]


JMX = _jmx_seeds()


def _doc(rnd: random.Random) -> Any:
    """A mutated real bean (JSON text edited, then parsed when it still parses), or a generated
    value where a bean, a WebHDFS BlockLocation or a LocatedBlock belongs."""
    k = rnd.random()
    if k < 0.6:
        try:
            return json.loads(mutate(rnd, rnd.choice(JMX)))
        except ValueError:
            return None  # the source rejects it as jmx_invalid_json before any parser runs
    v = json_value(rnd)
    if k < 0.75:
        return {"beans": [v, {"name": "Hadoop:service=NameNode,name=NameNodeInfo", "LiveNodes": v}]}
    if k < 0.9:
        return {"BlockLocations": {"BlockLocation": [v]}}
    return {"LocatedBlocks": {"locatedBlocks": [v]}}


def test_jmx_and_webhdfs_let_only_user_error_out() -> None:
    def check(rnd: random.Random) -> int:
        for _ in range(PER_EXAMPLE):
            doc = _doc(rnd)
            role = jmx.role_of(doc)
            if role:
                row = jmx.sample(doc, role)
                assert all(isinstance(v, int | float | str) for v in row.values())
                with contextlib.suppress(UserError):
                    jmx.live_nodes(doc)
            if isinstance(doc, dict) and webhdfs.looks_like_webhdfs(doc):
                with contextlib.suppress(UserError):
                    webhdfs.parse_block_locations(doc, "/f")
        return PER_EXAMPLE

    fuzz(check)
