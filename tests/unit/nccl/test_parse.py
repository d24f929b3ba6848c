"""NCCL Inspector parsing (exporters/nccl/parse.py) and cgroup attribution on the example files
in tests/fixtures/nccl: exact values, every bad line counted under its reason, fuzzed lines
never escape as exceptions."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given

from exporters.common.cgroup import Owner, owner_from_cgroup
from exporters.nccl import parse
from exporters.nccl.attribution import parse_gpus, rank_gpu
from tests.fuzz import FUZZ, SEED, inputs, json_value

FIX = Path(__file__).parents[2] / "fixtures" / "nccl"
JSON_FILES = sorted((FIX / "inspector-json").iterdir())
PROM = FIX / "inspector-prom" / "nccl_inspector_GPU2.prom"
# The first line of gpu-node-1-pid163945.log, as a row.
ROW0 = {
    "ts": 1763852498000,
    "node": "gpu-node-1",
    "pid": 163945,
    "comm_id": "0x7f8c496ae9f661",
    "rank": 2,
    "n_ranks": 16,
    "n_nodes": 2,
    "collective": "AllReduce",
    "coll_sn": 1400,
    "msg_size_bytes": 1073741824,
    "exec_time_us": 5200.0,
    "timing_source": "kernel_gpu",
    "algo_bandwidth_gbs": 206.488812,
    "bus_bandwidth_gbs": 387.166523,
    "gpu": "",
    "format_version": "v4.0",
    # v4.0 says nothing of how the collective ran
    "algorithm": "",
    "protocol": "",
    "channels": None,
    "comm_name": "",
}
SEEDS = [ln for f in JSON_FILES for ln in f.read_text().splitlines() if ln.strip()]


def test_json_fixture_lines_parse_exactly() -> None:
    rows = parse.Rows()
    for f in JSON_FILES:
        with f.open("rb") as fh:
            parse.parse_json_lines(fh, rows)
    assert len(rows) == 7 and rows.errors == {}
    assert rows.row(0) == ROW0
    assert rows.cols["coll_sn"][:6] == [1400, 1401, 1402, 1403, 1404, 1405]
    # the verbose line (event traces) of the second process
    v = rows.row(6)
    assert (v["pid"], v["comm_id"], v["collective"], v["coll_sn"]) == (
        163946,
        "0xe62dedaa97644a",
        "ReduceScatter",
        1231,
    )
    assert (v["msg_size_bytes"], v["exec_time_us"], v["bus_bandwidth_gbs"]) == (
        2147483648,
        41057.0,
        49.036065,
    )
    assert v["channels"] == 1  # its kernel events ran on channel 0 alone
    # every value equals json.loads' own reading of the line
    for i, line in enumerate(SEEDS):
        doc = json.loads(line)
        assert rows.cols["bus_bandwidth_gbs"][i] == (doc["coll_perf"]["coll_busbw_gbs"])
        assert rows.cols["ts"][i] == doc["metadata"]["dump_timestamp_us"] // 1000


def test_prom_fixture_parses_exactly_and_matches_the_json_line() -> None:
    rows = parse.parse_prom(PROM.read_text(), mtime_ms=123)
    assert rows.errors == {}
    assert rows.row(0) == {
        **ROW0,
        "ts": 123,  # no timestamp in the file: its mtime
        "coll_sn": 1405,
        "exec_time_us": 10302.0,
        "algo_bandwidth_gbs": 104.22,
        "bus_bandwidth_gbs": 195.42,
        "gpu": "GPU2",
        "format_version": "prom",
    }
    # "1.00GB" is binary units: the JSON line of coll_sn 1405 says 1073741824 bytes
    assert rows.cols["msg_size_bytes"] == [1 << 30]
    j = parse.parse_json_lines(SEEDS)
    i = j.cols["coll_sn"].index(1405)
    assert j.cols["msg_size_bytes"][i] == rows.cols["msg_size_bytes"][0]


def test_prom_sample_timestamp_and_bad_lines() -> None:
    labels = (
        'comm_id="0x1",collective="AllGather",hostname="h",rank="0",pid="7",n_ranks="2",'
        'n_nodes="1",coll_sn="9",message_size="256.00KB"'
    )
    text = "\n".join(
        [
            f"nccl_bus_bandwidth_gbs{{{labels}}} 10.5 1763852498123",
            f"nccl_collective_exec_time_microseconds{{{labels}}} 20",
            "nccl_bus_bandwidth_gbs{comm_id=broken} 1",
            "garbage line",
            'other_metric{a="b"} 1',
        ]
    )
    rows = parse.parse_prom(text, mtime_ms=0)
    assert len(rows) == 1
    r = rows.row(0)
    assert (r["ts"], r["msg_size_bytes"], r["bus_bandwidth_gbs"], r["algo_bandwidth_gbs"]) == (
        1763852498123,
        256 * 1024,
        10.5,
        0.0,
    )
    assert rows.errors == {"malformed_prom": 2}


GOOD = SEEDS[0]


def _with(path: tuple[str, ...], value: object) -> str:
    doc = json.loads(GOOD)
    d = doc
    for k in path[:-1]:
        d = d[k]
    if value is KeyError:
        del d[path[-1]]
    else:
        d[path[-1]] = value
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (GOOD[:-5], "malformed_json"),
        ("[1, 2]", "malformed_json"),
        (_with(("metadata", "inspector_output_format_version"), "v5.0"), "unknown_version"),
        (_with(("metadata", "inspector_output_format_version"), KeyError), "missing_field"),
        (_with(("coll_perf",), KeyError), "missing_field"),
        (_with(("coll_perf",), [1]), "missing_field"),
        (_with(("coll_perf", "coll_busbw_gbs"), KeyError), "missing_field"),
        (_with(("coll_perf", "coll_busbw_gbs"), "fast"), "bad_value"),
        (_with(("coll_perf", "coll_msg_size_bytes"), -1), "bad_value"),
        (_with(("header", "rank"), 2**40), "bad_value"),
        (_with(("header", "rank"), True), "bad_value"),
        (GOOD[:-1] + " " * parse.MAX_LINE_BYTES + "}", "line_too_long"),
    ],
)
def test_bad_json_lines_are_counted_by_reason(line: str, reason: str) -> None:
    rows = parse.parse_json_lines([line, "", GOOD])
    assert len(rows) == 1  # the good line after it still counts
    assert rows.errors == {reason: 1}


def _v42(doc: dict) -> dict:
    """A v4.2 record (NVIDIA's comm-patterns README): comm_name in the header, coll_algo and
    coll_proto in coll_perf, no git_rev or rec_mechanism."""
    doc = json.loads(json.dumps(doc))
    doc["header"]["comm_name"] = "DP Group 0"
    doc["metadata"]["inspector_output_format_version"] = "v4.2"
    for k in ("git_rev", "rec_mechanism"):
        doc["metadata"].pop(k, None)
    doc["coll_perf"].update(coll_algo="RING", coll_proto="LL")
    return doc


def test_later_v4_formats_are_read_and_their_other_records_skipped() -> None:
    """v4.1 adds a per-dump `dump_stats` record, v4.2 adds fields; point-to-point operations come
    as `p2p_perf` records. Collectives of any v4.N are read for v4.0's fields; the other
    records are counted as skipped, not as errors; the ring-buffer drops a dump_stats record
    reports are summed. A bandwidth the plugin wrote as "nan" (its writer's NaN) gives no row
    and no error. Another major version, or a version not of that shape, is refused."""
    good = json.loads(GOOD)
    meta = {**good["metadata"], "inspector_output_format_version": "v4.1"}
    stats = {
        "header": good["header"],
        "metadata": meta,
        "dump_stats": {"coll_records": 1024, "coll_dropped_total": 4096,
                       "coll_dropped_since_last_dump": 512, "p2p_records": 0},
    }  # fmt: skip
    p2p = {
        "header": good["header"],
        "metadata": meta,
        "p2p_perf": {"p2p": "Recv", "p2p_sn": 1, "p2p_peer": 10, "p2p_msg_size_bytes": 1048576,
                     "p2p_exec_time_us": 4, "p2p_algobw_gbs": 262.144, "p2p_busbw_gbs": 262.144},
    }  # fmt: skip
    v41 = {**good, "metadata": meta}
    lines = [json.dumps(d) for d in (stats, v41, p2p, _v42(good), stats)]
    lines.append(json.dumps({"header": good["header"], "metadata": meta, "other": {}}))
    versions = ("v4", "v4.1b", "v4.17")  # the last one a later minor version: read
    lines += [_with(("metadata", "inspector_output_format_version"), v) for v in versions]
    lines.append(_with(("coll_perf", "coll_busbw_gbs"), "nan"))  # how the plugin writes NaN
    rows = parse.parse_json_lines(lines)
    assert [rows.row(i)["format_version"] for i in range(len(rows))] == ["v4.1", "v4.2", "v4.17"]
    v42_only = ("format_version", "algorithm", "protocol", "comm_name")
    assert {k: v for k, v in rows.row(1).items() if k not in v42_only} == {
        k: v for k, v in rows.row(0).items() if k not in v42_only
    }
    assert [rows.row(i)["algorithm"] for i in range(3)] == ["", "RING", ""]
    assert (rows.row(1)["protocol"], rows.row(1)["comm_name"]) == ("LL", "DP Group 0")
    assert rows.skipped == {"dump_stats": 2, "p2p_perf": 1, "nan_bandwidth": 1}
    assert rows.inspector_dropped == 1024
    assert rows.errors == {"missing_field": 1, "unknown_version": 2}


V42 = FIX / "inspector-json-v4.2" / "gpu-node-2-pid2001.log"
PROM_ALGO = FIX / "inspector-prom-algo" / "nccl_inspector_GPU3.prom"


def test_v42_capture_reads_algorithm_protocol_and_channels_value_for_value() -> None:
    """Inspector v4.2 lines carry coll_algo / coll_proto (NCCL's profiler spelling) and the
    communicator's name; the channel count comes from coll_n_channels where a build writes it,
    else from the verbose trace's distinct channels; the Prom textfile's algo_proto label
    (`Ring_simple`) splits into the same two names. Every value is the line's own."""
    lines = V42.read_text().splitlines()
    rows = parse.parse_json_lines(lines)
    assert rows.errors == {} and len(rows) == len(lines) == 7
    got = [
        (r["coll_sn"], r["algorithm"], r["protocol"], r["channels"], r["msg_size_bytes"])
        for r in (rows.row(i) for i in range(len(rows)))
    ]
    assert got == [
        (500, "NVLS_TREE", "SIMPLE", None, 1 << 30),
        (501, "NVLS_TREE", "SIMPLE", None, 1 << 30),
        (502, "RING", "SIMPLE", None, 1 << 30),
        (503, "RING", "LL128", None, 32 << 20),
        (504, "TREE", "LL", None, 512 << 10),
        (505, "RING", "SIMPLE", 4, 1 << 30),
        (506, "NVLS_TREE", "SIMPLE", 16, 1 << 30),
    ]
    for i, line in enumerate(lines):
        doc = json.loads(line)
        r = rows.row(i)
        assert r["algorithm"] == doc["coll_perf"]["coll_algo"]
        assert r["protocol"] == doc["coll_perf"]["coll_proto"]
        assert r["comm_name"] == doc["header"]["comm_name"] == "DP Group 0"
        assert r["bus_bandwidth_gbs"] == doc["coll_perf"]["coll_busbw_gbs"]
        assert r["format_version"] == "v4.2"
    # the line-by-line path reads the same
    slow = parse.Rows()
    for ln in lines:
        parse.parse_json_line(ln, slow)
    assert slow.tuples == rows.tuples
    # older spellings (ncclAlgoStr of NCCL < 2.19: "NVLSTree", lower-case protocols) are the same
    old = json.loads(lines[0])
    old["coll_perf"].update(coll_algo="NVLSTree", coll_proto="Simple")
    r = parse.parse_json_lines([json.dumps(old)]).row(0)
    assert (r["algorithm"], r["protocol"]) == ("NVLS_TREE", "SIMPLE")
    bad = json.loads(lines[0])
    bad["coll_perf"]["coll_algo"] = 3
    assert parse.parse_json_lines([json.dumps(bad)]).errors == {"bad_value": 1}
    prom = parse.parse_prom(PROM_ALGO.read_text(), mtime_ms=1)
    assert prom.errors == {} and len(prom) == 1
    p = prom.row(0)
    assert (p["algorithm"], p["protocol"], p["comm_name"], p["coll_sn"]) == (
        "RING",
        "SIMPLE",
        "DP Group 0",
        507,
    )
    assert (p["bus_bandwidth_gbs"], p["algo_bandwidth_gbs"], p["exec_time_us"]) == (
        186.4,
        99.41,
        10801.0,
    )


def test_objects_laid_out_over_lines() -> None:
    """The Inspector README's examples (and `jq .` of a dump) lay each object over many lines:
    read as one compact line per object; a broken object at the end is one malformed line."""
    docs = [json.loads(GOOD), _v42(json.loads(GOOD))]
    text = "\n".join(json.dumps(d, indent=2) for d in docs)
    assert parse.pretty_printed(text.encode()) and not parse.pretty_printed(GOOD.encode())
    broken = json.dumps(docs[0], indent=2)[:-40]
    lines = parse.compact_objects(text + "\n\n" + broken)
    assert len(lines) == 3 and "\n" in lines[2]
    rows = parse.parse_json_lines(lines)
    assert [rows.row(i) for i in range(len(rows))] == [
        parse.parse_json_lines([json.dumps(d)]).row(0) for d in docs
    ]
    assert rows.errors == {"malformed_json": 1}


def test_size_bucket_and_message_size() -> None:
    assert [parse.size_bucket(n) for n in (0, 1, 1000, 1024, 3 << 20, 1 << 30, 5 << 30)] == [
        "0B",
        "1B",
        "512B",
        "1KiB",
        "2MiB",
        "1GiB",
        "4GiB",
    ]
    assert parse.message_size_bytes("1.00GB") == 1 << 30
    assert parse.message_size_bytes("512B") == 512
    assert parse.message_size_bytes("1.5 MiB") == 3 << 19
    assert parse.message_size_bytes("lots") is None


@FUZZ
@given(SEED)
def test_fuzzed_lines_never_escape(seed: int) -> None:
    rnd = random.Random(seed)
    lines: list[str | bytes] = list(inputs(rnd, SEEDS, 200))
    lines += [json.dumps(json_value(rnd)) for _ in range(20)]
    doc = json.loads(GOOD)  # right shape, random leaves
    for _ in range(20):
        for part in ("header", "metadata", "coll_perf"):
            k = rnd.choice(list(doc[part]))
            doc[part][k] = json_value(rnd)
        lines.append(json.dumps(doc))
    lines += [ln.encode("utf-8", "surrogatepass")[:-3] for ln in lines[:10] if isinstance(ln, str)]
    rows = parse.parse_json_lines(lines)
    assert len(rows) + sum(rows.errors.values()) <= len(lines)
    slow = parse.Rows()  # the fast path accepts exactly what the line-by-line checks accept
    for ln in lines:
        parse.parse_json_line(ln, slow)
    assert (rows.tuples, rows.errors) == (slow.tuples, slow.errors)
    assert set(rows.errors) <= set(parse.REASONS)
    prom = PROM.read_text()
    for text in inputs(rnd, [prom, *prom.splitlines()], 50):
        r = parse.parse_prom(text, 0)
        assert set(r.errors) <= set(parse.REASONS)


# --- attribution --------------------------------------------------------------------------------
UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
CID = "ab" * 32


@pytest.mark.parametrize(
    "text",
    [
        # cgroup v2, systemd driver, containerd
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID.replace('-', '_')}"
        f".slice/cri-containerd-{CID}.scope\n",
        # cgroup v1, cgroupfs driver, docker: several hierarchies
        f"12:memory:/kubepods/besteffort/pod{UID}/{CID}\n11:cpu,cpuacct:/kubepods/besteffort/pod{UID}/{CID}\n",
        # guaranteed QoS (no class level), CRI-O
        f"0::/kubepods.slice/kubepods-pod{UID.replace('-', '_')}.slice/crio-{CID}.scope\n",
    ],
)
def test_owner_from_cgroup(text: str) -> None:
    assert owner_from_cgroup(text) == Owner(UID, CID)


def test_not_a_pod() -> None:
    assert owner_from_cgroup("0::/user.slice/user-1000.slice/session-3.scope\n") is None
    assert owner_from_cgroup("") is None


def test_rank_gpu() -> None:
    assert rank_gpu(("3",), 5, 16, 2) == "3"
    assert rank_gpu(("0", "1", "2", "3"), 6, 8, 2) == "2"  # local rank 2 of node 2
    assert rank_gpu(("0", "1", "2", "3"), 6, 16, 2) == ""  # layout unknown: not guessed
    assert rank_gpu((), 0, 1, 1) == ""
    assert parse_gpus('["GPU-a", 1]') == ("GPU-a", "1") and parse_gpus("x") == ()
