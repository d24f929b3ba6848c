"""Simulator throughput: records/s and peak memory for `small` and `large`, generation alone and
generation + ingest through the pipeline into an embedded store, how time grows with the number
of GPU servers (the `large` fabric at several sizes), and the through-parsers path (every step
rendered as device files and read back by the real sources) next to the fast path for `small`,
`rail-2nic` and `multi-idc`.

Each measurement runs in its own process (the embedded engine allows one data path per process;
peak RSS is per process). The baseline is the smallest size of the same run. Last line: one JSON
object.

  python bench/sim.py                      # small + large + sizes 128, 512, 2048 (10 min)
  python bench/sim.py --no-large-ingest    # skip the longest step (large into the store)
  python bench/sim.py --only-parsers       # only the through-parsers vs fast comparison
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def child(
    scenario: str, nodes: int | None, minutes: float | None, mode: str, data: str
) -> dict[str, float]:
    from telemetry.sim import build
    from telemetry.sim.scenario import load_scenario

    t0 = time.perf_counter()
    sc = load_scenario(scenario).with_overrides(nodes=nodes, minutes=minutes)
    sim = build(sc)
    if mode == "gen":
        rows = sum(b.num_rows for batches in sim.batches() for b in batches)
    else:  # ingest (fast path) or parsers (through-parsers path)
        from telemetry.commands.common import open_store
        from telemetry.config import load_config
        from telemetry.sim.run import ingest
        from telemetry.sinks.configured import clickhouse_sink
        from telemetry.transforms import build_transforms

        cfg = load_config(
            env={},
            overrides={
                "store": {"dsn": f"chdb://{data}/store"},
                "sink": {"spool_dir": f"{data}/spool"},
            },
        )
        store = open_store(cfg, migrate=True)
        rows = ingest(
            sim,
            [clickhouse_sink(cfg, store)],
            build_transforms(cfg),
            through_parsers=cfg if mode == "parsers" else None,
        ).rows
    secs = time.perf_counter() - t0
    return {
        "servers": len(sim.fabric.nodes),
        "gpus": len(sim.fabric.nodes) * sim.fabric.gpus_per_node,
        "steps": sim.steps,
        "rows": rows,
        "seconds": round(secs, 2),
        "records_per_second": round(rows / secs),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def run_child(
    scenario: str, nodes: int | None, minutes: float | None, mode: str
) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="railscope-bench-sim-") as d:
        cmd = [
            sys.executable,
            __file__,
            "--child",
            scenario,
            str(nodes or 0),
            str(minutes or 0),
            mode,
            d,
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if out.returncode:
            sys.exit(
                f"bench child failed ({' '.join(cmd[2:])}): {out.stderr.strip().splitlines()[-1:]}"
            )
        res = json.loads(out.stdout.strip().splitlines()[-1])
    label = f"{scenario}{'/' + str(nodes) if nodes else ''} {mode}"
    print(
        f"  {label:<24} {res['servers']:>5} servers {res['rows']:>11,} rows {res['seconds']:>7.1f}s "
        f"{res['records_per_second']:>10,}/s peak {res['peak_rss_mb']:>6,} MB",
        flush=True,
    )
    return res


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    ap.add_argument(
        "--sizes",
        default="128,512,2048",
        help="server counts for the growth curve (10 simulated min)",
    )
    ap.add_argument(
        "--no-large-ingest", action="store_true", help="skip ingesting `large` into the store"
    )
    ap.add_argument(
        "--only-parsers", action="store_true", help="only the through-parsers vs fast comparison"
    )
    a = ap.parse_args()
    if a.child:
        sc, nodes, minutes, mode, data = a.child
        print(json.dumps(child(sc, int(nodes) or None, float(minutes) or None, mode, data)))
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    result: dict[str, object] = {"bench": "sim"}
    print("through the parsers vs the fast path (generate + ingest):")
    tp: dict[str, dict[str, float]] = {}
    for sc in ("small", "rail-2nic", "multi-idc"):
        fast = run_child(sc, None, None, "ingest")
        parsed = run_child(sc, None, None, "parsers")
        result[f"{sc}_through_parsers"] = parsed
        tp[sc] = {
            "fast_seconds": fast["seconds"],
            "through_parsers_seconds": parsed["seconds"],
            "slowdown": round(parsed["seconds"] / fast["seconds"], 1),
        }
    result["through_parsers_seconds"] = tp
    if a.only_parsers:
        print(json.dumps(result, sort_keys=True))
        return
    print("scenarios:")
    for sc in ("small", "large"):
        result[f"{sc}_gen"] = run_child(sc, None, None, "gen")
        if sc == "small" or not a.no_large_ingest:
            result[f"{sc}_ingest"] = run_child(sc, None, None, "ingest")
    print("growth with servers (large fabric, 10 simulated minutes, generate + ingest):")
    sizes = [int(x) for x in a.sizes.split(",")]
    growth = [run_child("large", n, 10, "ingest") for n in sizes]
    base = growth[0]
    for g in growth:
        g["time_vs_smallest"] = round(g["seconds"] / base["seconds"], 2)
        g["servers_vs_smallest"] = round(g["servers"] / base["servers"], 2)
    # exponent k in time ~ servers^k between the smallest and largest size (1.0 = linear)
    k = math.log(growth[-1]["seconds"] / base["seconds"]) / math.log(
        growth[-1]["servers"] / base["servers"]
    )
    result["growth"] = growth
    result["growth_exponent"] = round(k, 2)
    print(
        f"time grows as servers^{k:.2f} from {base['servers']} to {growth[-1]['servers']} servers"
    )
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
