"""The log source end to end (tail -> parse -> batch) on a realistic node: `--files` CRI log files
of training pods (default 500, one container each), about 95 % NCCL INFO chatter that matches
nothing and 5 % lines of the grammar's kinds (channels via NET/IB, Init COMPLETE, Using network,
NCCL WARN completion errors of NCCL 2.2x and 2.30, watchdog timeouts and exceptions).
`LogsSource.collect()` cycles (each reads at most sources.logs.max_read_bytes_per_cycle) read
every file from its start, match, and build the log_event batches, until nothing is left.

A second tree of the same size with no line to match (chatter only) measures the screen alone
(`chatter_lines_per_s_per_core`): the rate at which a node's INFO noise is filtered.

Contender, in the same run on the same files: a naive Python loop that reads each file line by
line, splits the CRI prefix and tries every rule of the grammar on every line (no anchor screen,
no block search) — what a straightforward implementation does. Each side runs in its own child
process so that its peak RSS is its own; `lines_per_s_per_core` is lines over the child's CPU
time (user + system), so a loaded machine's waiting does not count.

Goal (issue 45): >= 1 M chatter lines/s per core, <= 64 MiB peak RSS. Last line: one JSON object.

    python bench/logs.py [--files 500] [--lines-per-file 2000] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHATTER = (
    "{h}:{p}:{t} [{d}] NCCL INFO Connected all rings",
    "{h}:{p}:{t} [{d}] NCCL INFO Connected NVLS tree",
    "{h}:{p}:{t} [{d}] NCCL INFO threadThresholds 8/8/64 | 512/8/64 | 512 | 512",
    "{h}:{p}:{t} [{d}] NCCL INFO 16 coll channels, 0 collnet channels, 16 nvls channels, 16 p2p channels, 1 p2p channels per peer",
    "{h}:{p}:{t} [{d}] NCCL INFO Channel {c:02d}/0 : {r}[{d}] -> {s}[{d}] via P2P/IPC",
    "{h}:{p}:{t} [{d}] NCCL INFO transport/net.cc:1298 -> 6",
    "{h}:{p}:{t} [{d}] NCCL INFO Trees [0] {s}/-1/-1->{r}->{c} [1] {s}/-1/-1->{r}->{c}",
    "{h}:{p}:{t} [{d}] NCCL INFO init.cc:1798 Cuda Host Alloc Size 4 pointer 0x82fa00000",
    "{h}:{p}:{t} [{d}] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
    "{h}:{p}:{t} [{d}] NCCL INFO comm 0x55cc8aa86c70 rank {r} nranks 64 cudaDev {d} nvmlDev {d} busId 1c000 commId 0x65e0bd6ee7449db4 - Init START",
    "{h}:{p}:{t} [{d}] NCCL INFO Setting affinity for GPU {d} to ffff,ffffffff",
    "{h}:{p}:{t} [{d}] NCCL INFO P2P Chunksize set to 524288",
    "step {c} loss=2.{r} grad_norm=1.41 lr=2.0e-06 tokens/s=183{t}",
)
MATCHED = (
    "{h}:{p}:{t} [{d}] NCCL INFO Channel {c:02d}/0 : {r}[{d}] -> {s}[{d}] [send] via NET/IB/{d}/GDRDMA",
    "{h}:{p}:{t} [{d}] NCCL INFO Channel {c:02d}/0 : {r}[{d}] -> {s}[{d}] [receive] via NET/IB/{d}(1)/GDRDMA",
    "{h}:{p}:{t} [{d}] NCCL INFO comm 0x557fe785f7a0 rank {r} nranks 64 cudaDev {d} nvmlDev {d} busId 9b000 commId 0x5ae77eb5ea4ec1ee - Init COMPLETE",
    "{h}:{p}:{t} [{d}] NCCL INFO Using network IB",
    "{h}:{p}:{t} [{d}] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.{c}.{r}<0>",
    "{h}:{p}:{t} [{d}] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 10.0.3.{r}<44206> with status=12 opcode=129 len=65536 vendor err 129 (Recv) localGid ::ffff:10.0.1.{s} remoteGids::ffff:10.0.3.{r}",
    "[rank{r}]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={t}, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.",
    "[2026-09-09 10:46:33] {h}:{p}:{t} [{d}] transport/net_ib/p2p.cc:648 NCCL WARN NET/IB: Got completion from peer 10.0.3.{r}<40554> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RECV_RDMA_WITH_IMM(129) vendor_err=129 localGid ::ffff:10.0.1.{s} remoteGids::ffff:10.0.3.{r} hca mlx5_{d}",
    "[rank{r}]:[E ProcessGroupNCCL.cpp:1537] [PG 1 Rank {r}] Timeout at NCCL work: {t}, last enqueued NCCL work: {t}, last completed NCCL work: {c}.",
)


def generate(root: Path, files: int, lines: int, seed: int, matched: float = 0.05) -> int:
    rnd = random.Random(seed)
    t0 = time.time() - 3600
    for i in range(files):
        d = root / f"team-{i % 7}_trainer-{i}_{i:08x}-0000-4000-8000-{i:012x}" / "pytorch"
        d.mkdir(parents=True)
        out = []
        for j in range(lines):
            tpl = rnd.choice(MATCHED) if rnd.random() < matched else rnd.choice(CHATTER)
            msg = tpl.format(
                h=f"gpu-{i % 64:03d}",
                p=4000 + i,
                t=9000 + j % 97,
                d=i % 8,
                c=j % 16,
                r=i % 64,
                s=(i + 1) % 64,
            )
            ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t0 + j * 0.01))
            out.append(f"{ts}.{j % 1000:03d}123456Z stdout F {msg}\n")
        (d / "0.log").write_text("".join(out))
    return files * lines


def child_source(root: str) -> dict[str, float]:
    from exporters.logs.config import LogsConfig
    from exporters.logs.source import LogsSource

    cfg = LogsConfig(
        pods_dir=root,
        kmsg="",
        from_start=True,
        rate_lines_per_second=1e12,
        rate_burst_lines=1_000_000_000,
        node_name="bench",
    )
    src = LogsSource(cfg)
    c0, w0 = time.process_time(), time.perf_counter()
    events = cycles = 0
    while True:  # cycles of at most max_read_bytes_per_cycle each, until every file is read
        seen = src.stats.received
        batches = src.collect()
        events += sum(b.num_rows for b in batches)
        del batches  # handed to the sinks: the source keeps none
        cycles += 1
        if src.stats.received == seen:
            break
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    return {
        "cpu_s": cpu,
        "wall_s": wall,
        "lines": float(src.stats.received),
        "events": float(events),
        "cycles": float(cycles),
    }


def child_baseline(root: str) -> dict[str, float]:
    from exporters.logs import grammar
    from exporters.logs.formats import cri_split, parse_rfc3339

    c0, w0 = time.process_time(), time.perf_counter()
    lines = events = 0
    for f in sorted(Path(root).glob("*/*/*.log")):
        with f.open("rb") as fh:
            for raw in fh:
                lines += 1
                parts = cri_split(raw.rstrip(b"\n"))
                if parts is None:
                    continue
                ts, _, _, msg = parts
                text = msg.decode("utf-8", "replace")
                for rule in grammar.RULES:  # every pattern on every line
                    fields = rule.parse(text)
                    if fields is not None:
                        parse_rfc3339(ts.decode())
                        events += 1
                        break
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    return {"cpu_s": cpu, "wall_s": wall, "lines": float(lines), "events": float(events)}


def run_child(kind: str, root: Path) -> dict[str, float]:
    r = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(root)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return dict(json.loads(r.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--files", type=int, default=500)
    ap.add_argument("--lines-per-file", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--child", nargs=2, metavar=("KIND", "DIR"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        kind, root = args.child
        out = child_source(root) if kind == "source" else child_baseline(root)
        out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(out))
        return
    with tempfile.TemporaryDirectory(prefix="railscope-bench-logs-") as tmp:
        root = Path(tmp) / "pods"
        total = generate(root, args.files, args.lines_per_file, args.seed)
        size = sum(f.stat().st_size for f in root.glob("*/*/*.log"))
        src = run_child("source", root)
        base = run_child("baseline", root)
        shutil.rmtree(root)
        generate(root, args.files, args.lines_per_file, args.seed, matched=0.0)
        chatter = run_child("source", root)
    assert src["lines"] == total, (src["lines"], total)
    if src["events"] != base["events"]:
        raise SystemExit(f"event counts differ: source {src['events']}, baseline {base['events']}")
    rate = total / src["cpu_s"]
    chatter_rate = total / chatter["cpu_s"]
    base_rate = total / base["cpu_s"]
    print(
        f"{total:,} lines in {args.files} files ({size / 2**20:.0f} MiB), {int(src['events']):,} events: "
        f"source {rate:,.0f} lines/s/core ({src['cpu_s']:.2f} s CPU, {src['wall_s']:.2f} s wall, "
        f"{src['peak_rss_mib']:.0f} MiB peak); naive loop {base_rate:,.0f} lines/s/core "
        f"({base['peak_rss_mib']:.0f} MiB peak); chatter only {chatter_rate:,.0f} lines/s/core",
        file=sys.stderr,
    )
    print(
        json.dumps(
            {
                "files": args.files,
                "lines": total,
                "events": int(src["events"]),
                "lines_per_s_per_core": round(rate),
                "chatter_lines_per_s_per_core": round(chatter_rate),
                "chatter_peak_rss_mib": round(chatter["peak_rss_mib"], 1),
                "baseline_lines_per_s": round(base_rate),
                "speedup": round(rate / base_rate, 1),
                "peak_rss_mib": round(src["peak_rss_mib"], 1),
                "baseline_peak_rss_mib": round(base["peak_rss_mib"], 1),
                "cycles": int(src["cycles"]),
                "cpu_s": round(src["cpu_s"], 3),
                "wall_s": round(src["wall_s"], 3),
            }
        )
    )


if __name__ == "__main__":
    main()
