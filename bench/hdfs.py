"""Benchmark: DataNode clienttrace and fsck parsing, lines per second on one core.

Generates N clienttrace lines (both `duration:` and `duration(ns):` forms) and N fsck lines
(file headers + block lines with -racks locations), then times (CPU time of this single-threaded
process, so rates are per core), in the same run:
  - railscope's parsers (exporters/hdfs/clienttrace.py, fsck.py),
  - a naive baseline: one regex with named groups per line, a dict per record,
  - polars (one thread): one regex over the whole column, vectorised,
  - the full clienttrace path: parse + IDC/rack mapping + Arrow batch (HdfsSource).
Target: >= 200,000 clienttrace lines/s per core. The last line printed is one JSON object.

    python bench/hdfs.py [--lines 1000000]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# One polars thread: the comparison is per core (must be set before polars is first imported).
os.environ["POLARS_MAX_THREADS"] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.results import report, timed
from exporters.hdfs import clienttrace, fsck
from exporters.hdfs.config import HdfsConfig
from exporters.hdfs.source import HdfsSource

TRACE_RE = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*?src: /?(?P<src>[^,]+), dest: /?(?P<dest>[^,]+), "
    r"bytes: (?P<bytes>\d+), op: (?P<op>\w+), cliID: (?P<cli>[^,]*), offset: (?P<off>\d+), srvID: (?P<srv>[^,]*), "
    r"blockid: (?P<blk>[^,]+), duration(?:\(ns\))?: (?P<dur>\d+)"
)
BLOCK_RE = re.compile(
    r"^(?P<i>\d+)\. (?P<blk>\S+) len=(?P<len>\d+) (?:Live_)?repl=(?P<repl>\d+)\s*\[(?P<locs>.*)\]"
)
FILE_RE = re.compile(r"^(?P<path>/.*?) (?P<size>\d+) bytes, .*?(?P<n>\d+) block\(s\)")


def gen_trace(n: int, seed: int = 1) -> list[str]:
    rnd = random.Random(seed)
    dns = [f"10.{i}.{r}.{h}" for i in (1, 2) for r in range(8) for h in range(1, 21)]
    clients = [f"10.{i}.100.{h}" for i in (1, 2) for h in range(1, 200)]
    out = []
    base = 1_700_000_000
    for k in range(n):
        t = base + k // 2000
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) + f",{k % 1000:03d}"
        read = rnd.random() < 0.6
        dn = rnd.choice(dns)
        cl = rnd.choice(clients)
        src, dest = (
            (f"{dn}:9866", f"{cl}:{40000 + k % 20000}")
            if read
            else (f"{cl}:{40000 + k % 20000}", f"{dn}:9866")
        )
        dur = "duration(ns)" if k % 2 else "duration"
        out.append(
            f"{stamp} INFO org.apache.hadoop.hdfs.server.datanode.DataNode.clienttrace: src: /{src}, dest: /{dest}, "
            f"bytes: {rnd.randrange(1, 1 << 27)}, op: {'HDFS_READ' if read else 'HDFS_WRITE'}, "
            f"cliID: DFSClient_NONMAPREDUCE_{k % 977}_1, offset: 0, srvID: 6e1a3c2b-{k % 50:04d}, "
            f"blockid: BP-360285305-10.1.0.11-1444619256876:blk_{1073741824 + k}_{1001 + k}, {dur}: {rnd.randrange(10**9)}\n"
        )
    return out


def gen_fsck(n: int, seed: int = 2) -> list[str]:
    rnd = random.Random(seed)
    dns = [
        f"/idc{i}/rack{r}/10.{i}.{r}.{h}:9866"
        for i in (1, 2)
        for r in range(8)
        for h in range(1, 21)
    ]
    out = [
        "FSCK started by hdfs (auth:SIMPLE) from /10.1.0.100 for path / at Mon Mar 04 10:00:00 UTC 2024\n"
    ]
    k = 0
    while len(out) < n:
        nb = rnd.randrange(1, 8)
        out.append(
            f"/warehouse/db{k % 20}/t{k % 300}/part-{k:06d} {nb * 134217728} bytes, replicated: "
            f"replication=4, {nb} block(s):  OK\n"
        )
        for i in range(nb):
            locs = ", ".join(rnd.sample(dns, 4))
            out.append(
                f"{i}. BP-1-10.1.0.100-1700000000000:blk_{1073741824 + k * 8 + i}_{1001 + k} "
                f"len=134217728 Live_repl=4  [{locs}]\n"
            )
        k += 1
    return out[:n]


def naive_trace(lines: list[str]) -> int:
    rows: list[dict[str, Any]] = []
    for ln in lines:
        m = TRACE_RE.match(ln)
        if m and m["op"] in ("HDFS_READ", "HDFS_WRITE"):
            d = m.groupdict()
            d["bytes"] = int(d["bytes"])
            d["dur"] = int(d["dur"]) / 1e9
            d["ts"] = time.mktime(time.strptime(d["ts"][:19], "%Y-%m-%d %H:%M:%S"))
            rows.append(d)
    return len(rows)


POLARS_TRACE = (
    r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*?src: /?(?P<src>[^,]+), dest: /?(?P<dest>[^,]+), "
    r"bytes: (?P<bytes>\d+), op: (?P<op>HDFS_READ|HDFS_WRITE), cliID: (?P<cli>[^,]*), offset: \d+, "
    r"srvID: [^,]*, blockid: (?P<blk>[^,]+), duration(?:\(ns\))?: (?P<dur>\d+)"
)


def polars_trace(lines: list[str]) -> int:
    """Vectorised alternative: one Rust regex over the whole column (polars, one thread)."""
    import polars as pl

    df = (
        pl.Series("l", lines)
        .str.extract_groups(POLARS_TRACE)
        .struct.unnest()
        .filter(pl.col("op").is_not_null())
        .with_columns(
            pl.col("bytes").cast(pl.UInt64),
            pl.col("dur").cast(pl.Int64) / 1e9,
            pl.col("ts").str.to_datetime("%Y-%m-%d %H:%M:%S,%3f"),
        )
    )
    return int(df.height)


def naive_fsck(lines: list[str]) -> int:
    blocks = []
    path = ""
    for ln in lines:
        m = FILE_RE.match(ln)
        if m:
            path = m["path"]
            continue
        m = BLOCK_RE.match(ln)
        if m:
            locs = [x.rpartition("/") for x in m["locs"].split(", ")]
            blocks.append({"path": path, "block": m["blk"], "len": int(m["len"]), "locs": locs})
    return len(blocks)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--lines", type=int, default=1_000_000)
    args = ap.parse_args()
    n = args.lines

    trace = gen_trace(n)
    t_fast, parsed = timed(clienttrace.parse_lines, trace)
    assert len(parsed) == n, len(parsed)
    t_naive, got = timed(naive_trace, trace)
    assert got == n
    polars_trace(trace[:1000])  # import and compile outside the timing
    t_polars, got = timed(polars_trace, trace)
    assert got == n
    del parsed

    fl = gen_fsck(n)
    t_ffast, rep = timed(fsck.parse_fsck, fl)
    t_fnaive, nblocks = timed(naive_fsck, fl)
    assert len(rep.blocks) == nblocks and not rep.errors
    del rep, fl

    # Full path: file -> parse -> topology -> Arrow batch (what `railscope hdfs --from` does).
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "dn.log"
        log.write_text("".join(trace))
        topo = Path(d) / "topo.txt"
        topo.write_text(
            "".join(
                f"10.{i}.{r}.{h} /idc{i}/rack{r}\n"
                for i in (1, 2)
                for r in range(8)
                for h in range(1, 21)
            )
            + "".join(f"10.{i}.100.{h} /idc{i}/gpu\n" for i in (1, 2) for h in range(1, 200))
        )
        src = HdfsSource(HdfsConfig(topology_file=str(topo)), from_path=str(log))
        t_full, batches = timed(src.collect)
        assert sum(b.num_rows for b in batches if b.kind.name == "hdfs_transfer") == n

    res = {
        "bench": "hdfs",
        "lines": n,
        "cpu_count": os.cpu_count(),
        "clienttrace_lines_per_second": round(n / t_fast),
        "clienttrace_naive_regex_lines_per_second": round(n / t_naive),
        "clienttrace_speedup_vs_naive": round(t_naive / t_fast, 2),
        "clienttrace_polars_1thread_lines_per_second": round(n / t_polars),
        "clienttrace_end_to_end_lines_per_second": round(n / t_full),
        "clienttrace_target_met": n / t_fast >= 200_000,
        "fsck_lines_per_second": round(n / t_ffast),
        "fsck_naive_regex_lines_per_second": round(n / t_fnaive),
        "fsck_speedup_vs_naive": round(t_fnaive / t_ffast, 2),
        "fsck_blocks": nblocks,
    }
    report(
        res,
        f"clienttrace: {res['clienttrace_lines_per_second']:,} lines/s (naive regex "
        f"{res['clienttrace_naive_regex_lines_per_second']:,}, polars 1 thread "
        f"{res['clienttrace_polars_1thread_lines_per_second']:,}); "
        f"end to end {res['clienttrace_end_to_end_lines_per_second']:,}",
        f"fsck: {res['fsck_lines_per_second']:,} lines/s (naive regex "
        f"{res['fsck_naive_regex_lines_per_second']:,})",
    )


if __name__ == "__main__":
    main()
