"""Benchmark: NCCL Inspector JSON lines parsed per second on one core.

Generates N Inspector lines (format v4.0: AllReduce / AllGather / ReduceScatter over several
communicators and ranks, 1 in 10 verbose with event traces, as bytes read from a file) and
times, in the same run (CPU time of this single-threaded process, so rates are per core):
  - railscope's parser (exporters/nccl/parse.py): every field checked, rows column-wise,
  - a plain `json.loads` loop over the same lines (decoding only, no checks, no rows),
  - the full path: the same lines from a file through NcclSource (parse + Arrow batch).
Target: >= 200,000 lines/s per core. Best of --repeat runs each. The last line printed is one
JSON object.

    python bench/nccl.py [--lines 500000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from exporters.nccl import parse
from exporters.nccl.config import NcclConfig
from exporters.nccl.source import NcclSource

COLLS = ("AllReduce", "AllGather", "ReduceScatter", "Broadcast")


def gen_lines(n: int, seed: int = 1) -> list[bytes]:
    rnd = random.Random(seed)
    comms = [f"0x{rnd.getrandbits(56):x}" for _ in range(8)]
    t0 = 1_763_852_498_000_000
    out = []
    for k in range(n):
        size = 1 << rnd.randrange(10, 32)
        us = max(5, size // rnd.randrange(50_000, 400_000))
        algo = size / us / 1e3
        perf: dict[str, object] = {
            "coll": COLLS[k % 4],
            "coll_sn": k,
            "coll_msg_size_bytes": size,
            "coll_exec_time_us": us,
            "coll_timing_source": "kernel_gpu",
            "coll_algobw_gbs": round(algo, 6),
            "coll_busbw_gbs": round(algo * 1.875, 6),
        }
        if k % 10 == 0:
            perf["event_trace_sn"] = {
                "coll_start_sn": 1,
                "coll_stop_sn": 2,
                "kernel_events": [
                    {
                        "channel_id": c,
                        "kernel_start_sn": 3,
                        "kernel_stop_sn": 48,
                        "kernel_record_sn": 47,
                    }
                    for c in range(2)
                ],
            }
        doc = {
            "header": {"id": comms[k % 8], "rank": k % 16, "n_ranks": 16, "nnodes": 2},
            "metadata": {
                "inspector_output_format_version": "v4.0",
                "git_rev": "",
                "rec_mechanism": "profiler_plugin",
                "dump_timestamp_us": t0 + k * 70,
                "hostname": f"gpu-node-{k % 2}",
                "pid": 163945 + k % 8,
            },
            "coll_perf": perf,
        }
        out.append(json.dumps(doc).encode() + b"\n")
    return out


def best(fn: Callable[[], int], repeat: int) -> tuple[float, int]:
    """(best CPU seconds, what fn returned) over `repeat` runs."""
    times, got = [], 0
    for _ in range(repeat):
        gc.collect()
        t = time.process_time()
        got = fn()
        times.append(time.process_time() - t)
    return min(times), got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=500_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    lines = gen_lines(a.lines)
    n = len(lines)

    def railscope() -> int:
        rows = parse.parse_json_lines(lines)
        assert not rows.errors
        return len(rows)

    def plain() -> int:
        loads = json.loads
        k = 0
        for ln in lines:
            loads(ln)
            k += 1
        return k

    with tempfile.TemporaryDirectory() as d:
        dump = Path(d) / "dump"
        dump.mkdir()
        (dump / "gpu-node-0-pid1.log").write_bytes(b"".join(lines))

        def source() -> int:
            src = NcclSource(NcclConfig(), from_path=str(dump))
            return sum(b.num_rows for b in src.collect())

        t_rs, got_rs = best(railscope, a.repeat)
        t_json, got_json = best(plain, a.repeat)
        t_src, got_src = best(source, a.repeat)
    assert got_rs == got_json == got_src == n
    result = {
        "lines": n,
        "railscope_lines_per_s": round(n / t_rs),
        "json_loads_lines_per_s": round(n / t_json),
        "source_lines_per_s": round(n / t_src),
        "ratio_vs_json_loads": round(t_json / t_rs, 2),
        "target_lines_per_s": 200_000,
        "met": n / t_rs >= 200_000,
        "bytes_per_line": round(sum(map(len, lines)) / n),
    }
    for k, v in result.items():
        print(f"{k:>24}: {v}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
