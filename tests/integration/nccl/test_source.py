"""The `nccl` source on real files, processes and the embedded store: following Inspector JSON
files across a restart (offsets), Prom textfiles read once per rewrite, a spawned process
attributed to its pod through a fake proc root, and the CLI (--from, --output, --dsn)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exporters.common.tail import TailOffsets
from exporters.nccl.config import NcclConfig
from exporters.nccl.source import NcclSource
from telemetry.records import POD
from tests.conftest import now_ms

FIX = Path(__file__).parents[2] / "fixtures" / "nccl"
ROOT = Path(__file__).parents[3]
UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
CID = "cd" * 32


def line(
    sn: int, *, host: str = "node-a", pid: int = 4242, rank: int = 0, busbw: float = 300.0
) -> str:
    doc = {
        "header": {"id": "0xc0ffee", "rank": rank, "n_ranks": 8, "nnodes": 2},
        "metadata": {
            "inspector_output_format_version": "v4.0",
            "git_rev": "",
            "rec_mechanism": "profiler_plugin",
            "dump_timestamp_us": (now_ms() + sn) * 1000,
            "hostname": host,
            "pid": pid,
        },
        "coll_perf": {
            "coll": "AllReduce",
            "coll_sn": sn,
            "coll_msg_size_bytes": 1 << 28,
            "coll_exec_time_us": 1000,
            "coll_timing_source": "kernel_gpu",
            "coll_algobw_gbs": busbw / 1.75,
            "coll_busbw_gbs": busbw,
        },
    }
    return json.dumps(doc) + "\n"


def rows(batches: list[Any]) -> list[dict[str, Any]]:
    return [r for b in batches for r in b.table.to_pylist()]


def test_follow_restart_prom_and_foreign_files(tmp_path: Path) -> None:
    dump = tmp_path / "nccl-inspector-unknown-jobid"
    dump.mkdir()
    f = dump / "node-a-pid4242.log"
    f.write_text(line(1) + line(2) + line(3)[:40])  # the third line is still being written
    (dump / "notes.txt").write_text("not inspector output\n")
    offsets = TailOffsets(tmp_path / "offsets.json")
    cfg = NcclConfig(dump_dir=str(dump), node_name="elsewhere")
    src = NcclSource(cfg, offsets=offsets)
    assert [r["coll_sn"] for r in rows(src.collect())] == [1, 2]
    assert src.stats.errors == {"unrecognized_file": 1}
    with f.open("a") as fh:
        fh.write(line(3)[40:] + line(4))
    assert [r["coll_sn"] for r in rows(src.collect())] == [3, 4]
    assert src.collect() == []  # nothing new, and notes.txt is not counted again
    assert src.stats.errors == {"unrecognized_file": 1}
    # a restart resumes where the last one stopped: no line twice, none skipped
    with f.open("a") as fh:
        fh.write(line(5) + "{not json\n")
    (dump / "node-b-pid7.log").write_text(line(1, host="node-b", pid=7))  # a new process
    again = NcclSource(cfg, offsets=offsets)
    got = sorted((r["node"], r["coll_sn"]) for r in rows(again.collect()))
    assert got == [("node-a", 5), ("node-b", 1)]
    assert again.stats.errors == {"unrecognized_file": 1, "malformed_json": 1}
    # Prom textfiles: read when rewritten, never the same version twice
    prom = dump / "nccl_inspector_GPU2.prom"
    prom.write_text((FIX / "inspector-prom" / "nccl_inspector_GPU2.prom").read_text())
    first = rows(again.collect())
    assert [(r["coll_sn"], r["gpu"], r["bus_bandwidth_gbs"]) for r in first] == [
        (1405, "GPU2", 195.42)
    ]
    assert again.collect() == []
    text = prom.read_text().replace('coll_sn="1405"', 'coll_sn="1406"')
    prom.write_text(text)
    os.utime(prom, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert [r["coll_sn"] for r in rows(again.collect())] == [1406]


def test_dump_stats_drops_are_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A v4.1 dump: its dump_stats record is not a collective and not an error; the collectives
    the Inspector dropped before dumping are a warning and a self-metric."""
    dump = tmp_path / "nccl-inspector-7"
    dump.mkdir()
    doc = json.loads(line(1))
    doc["metadata"]["inspector_output_format_version"] = "v4.1"
    stats = {k: doc[k] for k in ("header", "metadata")}
    stats["dump_stats"] = {"coll_records": 2, "coll_dropped_total": 30,
                           "coll_dropped_since_last_dump": 30}  # fmt: skip
    (dump / "node-a-pid4242.log").write_text(
        json.dumps(stats) + "\n" + json.dumps(doc) + "\n" + line(2)
    )
    src = NcclSource(NcclConfig(dump_dir=str(dump), node_name="node-a"))
    with caplog.at_level("WARNING"):
        got = rows(src.collect())
    assert [(r["coll_sn"], r["format_version"]) for r in got] == [(1, "v4.1"), (2, "v4.0")]
    assert src.stats.errors == {}
    assert src.stats.received == 3
    assert src.stats.extra["inspector_dropped_records"] == 30
    assert "dropped 30 collective record(s)" in caplog.text


def test_a_pretty_printed_capture_is_read(tmp_path: Path) -> None:
    """--from a file whose objects are laid out over lines (as the Inspector README prints them):
    every collective read, nothing counted as malformed."""
    f = tmp_path / "readme-example.json"
    f.write_text("\n".join(json.dumps(json.loads(line(sn)), indent=2) for sn in (1, 2, 3)))
    src = NcclSource(NcclConfig(node_name="node-a"), from_path=str(f))
    assert [r["coll_sn"] for r in rows(src.collect())] == [1, 2, 3]
    assert src.stats.errors == {}


@pytest.fixture
def training_process() -> Iterator[int]:
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        yield p.pid
    finally:
        p.kill()
        p.wait()


def test_spawned_process_is_attributed_to_its_pod(
    tmp_path: Path, store: Any, training_process: int
) -> None:
    pid = training_process
    proc = tmp_path / "proc"
    (proc / str(pid)).mkdir(parents=True)
    (proc / str(pid) / "cgroup").write_text(
        "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
        f"{UID.replace('-', '_')}.slice/cri-containerd-{CID}.scope\n"
    )
    t = now_ms() - 60_000
    store.insert(
        POD,
        POD.to_arrow(
            [
                {
                    "cluster": "c1",
                    "namespace": "team-a",
                    "pod": "llm-worker-1",
                    "uid": UID,
                    "node": "node-a",
                    "job": "llm",
                    "phase": "Running",
                    "gpus": json.dumps(["0", "1", "2", "3"]),
                    "valid_from": t,
                    "updated_at": t,
                }
            ]
        ),
    )
    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / f"node-a-pid{pid}.log").write_text(
        line(1, pid=pid, rank=6)
        + line(1, host="pod-b", pid=pid, rank=1)
        # a rank in the pod's own pid namespace: its hostname is the pod's name
        + line(1, host="llm-worker-1", pid=1, rank=2)
    )
    cfg = NcclConfig(dump_dir=str(dump), proc_root=str(proc), node_name="node-a")
    src = NcclSource(cfg, cluster="c1")
    src.bind_store(store)
    batches = src.collect()
    mine, other, by_name = rows(batches)
    assert (mine["pod_uid"], mine["container_id"]) == (UID, CID)
    assert (mine["namespace"], mine["pod"], mine["job"]) == ("team-a", "llm-worker-1", "llm")
    assert mine["gpu"] == "2"  # rank 6 of 8 on 2 nodes: local rank 2 -> the pod's GPU "2"
    assert other["pod"] == "" and other["pod_uid"] == ""  # another host's pid: not looked up
    assert (by_name["pod"], by_name["pod_uid"], by_name["container_id"]) == (
        "llm-worker-1",
        UID,
        "",
    )
    assert by_name["gpu"] == "2"  # rank 2 of 8 on 2 nodes
    store.insert(batches[0].kind, batches[0].table)
    got = store.query_rows(
        f"SELECT pod, job, gpu, rank FROM {store.table('collective_sample')} ORDER BY rank"
    )
    assert got == [
        ("", "", "", 1),
        ("llm-worker-1", "llm", "2", 2),
        ("llm-worker-1", "llm", "2", 6),
    ]


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "telemetry.cli", "nccl", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
        check=False,
    )


def test_cli_from_output_and_store(tmp_path: Path) -> None:
    r = cli("--from", str(FIX / "inspector-json"), "--output", "jsonl")
    assert r.returncode == 0, r.stderr
    out = [json.loads(x) for x in r.stdout.splitlines()]
    assert [(o["collective"], o["coll_sn"], o["msg_size_bucket"]) for o in out][-1] == (
        "ReduceScatter",
        1231,
        "2GiB",
    )
    assert len(out) == 7
    bad = tmp_path / "notes.txt"
    bad.write_text("hello\n")
    r = cli("--from", str(bad), "--output", "jsonl")
    assert r.returncode == 2 and r.stderr.startswith("railscope: error: ")
    assert len(r.stderr.strip().splitlines()) == 1
    r = cli("--output", "jsonl")
    assert r.returncode == 2 and "dump_dir" in r.stderr
    cap = tmp_path / "cap"
    cap.mkdir()
    (cap / "node-a-pid1.log").write_text("".join(line(sn) for sn in range(1, 11)))
    r = cli("--from", str(cap), "--dsn", f"chdb://{tmp_path / 'db'}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    # read back in another process (one process holds an embedded store at a time)
    code = (
        "import sys; from telemetry.store import Store; s = Store(sys.argv[1]); "
        "print(s.query_rows('SELECT count(), min(coll_sn), max(coll_sn) FROM ' "
        "+ s.table('collective_sample')))"
    )
    q = subprocess.run(
        [sys.executable, "-c", code, f"chdb://{tmp_path / 'db'}"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
        check=False,
    )
    assert q.stdout.strip() == "[(10, 1, 10)]", q.stderr


def test_v42_capture_into_the_store_and_metrics(tmp_path: Path) -> None:
    """A v4.2 capture (coll_algo / coll_proto, a textfile's algo_proto label) and a v4.0 one in
    one directory: stored value for value (algorithm, protocol, channels, communicator name; ''
    and null channels for the v4.0 lines), and /metrics carries algorithm and protocol as labels."""
    cap = tmp_path / "cap"
    cap.mkdir()
    for sub in ("inspector-json-v4.2", "inspector-prom-algo", "inspector-json"):
        for f in (FIX / sub).iterdir():
            if f.suffix == ".prom":  # its time is the file's mtime: now
                (cap / f.name).write_bytes(f.read_bytes())
                continue
            docs = [json.loads(x) for x in f.read_text().splitlines()]
            for i, d in enumerate(docs):  # now, or the store's TTL drops the captured times
                d["metadata"]["dump_timestamp_us"] = (now_ms() + i) * 1000
            (cap / f.name).write_text("".join(json.dumps(d) + "\n" for d in docs))
    r = cli("--from", str(cap), "--dsn", f"chdb://{tmp_path / 'db'}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    code = (
        "import sys; from telemetry.store import Store; s = Store(sys.argv[1]); "
        "print(s.query_rows('SELECT format_version, algorithm, protocol, channels, comm_name, "
        "count() FROM ' + s.table('collective_sample') + ' GROUP BY ALL ORDER BY ALL'))"
    )
    q = subprocess.run(
        [sys.executable, "-c", code, f"chdb://{tmp_path / 'db'}"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
        check=False,
    )
    assert q.stdout.strip() == str(
        [
            ("prom", "RING", "SIMPLE", None, "DP Group 0", 1),
            ("v4.0", "", "", 1, "", 1),
            ("v4.0", "", "", None, "", 6),
            ("v4.2", "NVLS_TREE", "SIMPLE", 16, "DP Group 0", 1),
            ("v4.2", "NVLS_TREE", "SIMPLE", None, "DP Group 0", 2),
            ("v4.2", "RING", "LL128", None, "DP Group 0", 1),
            ("v4.2", "RING", "SIMPLE", 4, "DP Group 0", 1),
            ("v4.2", "RING", "SIMPLE", None, "DP Group 0", 1),
            ("v4.2", "TREE", "LL", None, "DP Group 0", 1),
        ]
    ), q.stderr
    r = cli("--from", str(cap / "gpu-node-2-pid2001.log"), "--output", "prom")
    assert r.returncode == 0, r.stderr
    ring = [ln for ln in r.stdout.splitlines() if "coll_sn" not in ln and "LL128" in ln]
    assert ring and all('algorithm="RING"' in ln for ln in ring), r.stdout[:2000]
