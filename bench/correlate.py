"""Attribution throughput: flow samples joined, as of their own time, to the pods holding their
source and destination IPs (with lease ends honoured) and to those pods' jobs. railscope runs it
inside the embedded ClickHouse (ASOF JOINs, `telemetry.correlate.attribution`); the baseline is a
straightforward polars `join_asof` of the same data in the same run. Last line: one JSON object.

    python bench/correlate.py [--sizes 1000000,3000000,10000000] [--leases 100000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.results import report, timed
from telemetry.correlate.attribution import Ancestry, attribute_window
from telemetry.correlate.registry import Context, Window
from telemetry.correlate.thresholds import default_thresholds
from telemetry.records import FLOW_SAMPLE, NODE, POD, POD_IP_LEASE
from telemetry.store import Store

HOUR_MS = 3_600_000


def leases(n: int, t0: int) -> tuple[pa.Table, pa.Table]:
    """n leases over n/2 IPs: every IP held by two pods one after the other (reuse), 1 min gap."""
    ips = n // 2
    ip = np.array([f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}" for i in range(ips)])
    half = t0 + HOUR_MS // 2
    lease = {
        "cluster": np.full(n, "b"),
        "ip": np.concatenate([ip, ip]),
        "namespace": np.array([f"t{i % 50}" for i in range(n)]),
        "pod": np.array([f"p{i}" for i in range(n)]),
        "node": np.array([f"n{i % 2048}" for i in range(n)]),
        "primary": np.zeros(n, bool),
        "valid_from": np.concatenate([np.full(ips, t0 - HOUR_MS), np.full(ips, half + 60_000)]),
        "valid_to": pa.array(
            np.concatenate([np.full(ips, half), np.full(ips, 0)]),
            mask=np.concatenate([np.zeros(ips, bool), np.ones(ips, bool)]),
        ),
        "updated_at": np.full(n, t0),
    }
    pods = {
        "cluster": np.full(n, "b"),
        "namespace": lease["namespace"],
        "pod": lease["pod"],
        "node": lease["node"],
        "job": np.array([f"job{i % 500}" for i in range(n)]),
        "valid_from": lease["valid_from"],
        "valid_to": lease["valid_to"],
        "updated_at": lease["updated_at"],
    }

    def to(kind, d):  # type: ignore[no-untyped-def]
        return kind.conform(
            pa.table({c: (v if isinstance(v, pa.Array) else pa.array(v)) for c, v in d.items()})
        )

    return to(
        POD_IP_LEASE,
        {
            **lease,
            "valid_from": pa.array(lease["valid_from"]).cast(pa.timestamp("ms", "UTC")),
            "valid_to": lease["valid_to"].cast(pa.timestamp("ms", "UTC")),
            "updated_at": pa.array(lease["updated_at"]).cast(pa.timestamp("ms", "UTC")),
        },
    ), to(
        POD,
        {
            **pods,
            "valid_from": pa.array(pods["valid_from"]).cast(pa.timestamp("ms", "UTC")),
            "valid_to": pods["valid_to"].cast(pa.timestamp("ms", "UTC")),
            "updated_at": pa.array(pods["updated_at"]).cast(pa.timestamp("ms", "UTC")),
        },
    )


def flows(n: int, ips: int, t0: int, rng: np.random.Generator) -> pa.Table:
    def ip(idx: np.ndarray) -> pa.Array:
        a = pa.array(np.char.add(np.char.add("10.", ((idx >> 16) & 255).astype(str)), "."))
        b = np.char.add(np.char.add(((idx >> 8) & 255).astype(str), "."), (idx & 255).astype(str))
        import pyarrow.compute as pc

        return pc.binary_join_element_wise(a, pa.array(b), "")

    ts = np.sort(rng.integers(t0, t0 + HOUR_MS, n))
    return FLOW_SAMPLE.conform(
        pa.table(
            {
                "ts": pa.array(ts).cast(pa.timestamp("ms", "UTC")),
                "cluster": pa.array(np.full(n, "b")),
                "src_ip": ip(rng.integers(0, ips, n)),
                "dst_ip": ip(rng.integers(0, ips, n)),
                "src_port": pa.array(rng.integers(49152, 65535, n).astype(np.uint16)),
                "dst_port": pa.array(np.full(n, 4791, np.uint16)),
                "protocol": pa.array(np.full(n, 17, np.uint8)),
                "vlan": pa.array(np.zeros(n, np.uint16)),
                "dscp": pa.array(np.full(n, 26, np.uint8)),
                "ecn": pa.array(np.zeros(n, np.uint8)),
                "frame_bytes": pa.array(np.full(n, 4096, np.uint32)),
                "sampling_rate": pa.array(np.full(n, 1000, np.uint32)),
                "bytes": pa.array(np.full(n, 4_096_000, np.uint64)),
                "packets": pa.array(np.full(n, 1000, np.uint64)),
            }
        )
    )


def polars_attribution(fl: pa.Table, ls: pa.Table, pods: pa.Table) -> pl.DataFrame:
    f = pl.from_arrow(fl.select(["ts", "src_ip", "dst_ip", "bytes"])).sort("ts")
    lease = pl.from_arrow(ls.select(["ip", "valid_from", "valid_to", "namespace", "pod"])).sort(
        "valid_from"
    )
    pj = pl.from_arrow(pods.select(["namespace", "pod", "valid_from", "job"])).sort("valid_from")

    def side(df: pl.DataFrame, col: str, p: str) -> pl.DataFrame:
        j = df.join_asof(
            lease.rename({"ip": col}),
            left_on="ts",
            right_on="valid_from",
            by=col,
            strategy="backward",
        )
        ok = pl.col("valid_to").is_null() | (pl.col("ts") < pl.col("valid_to"))
        j = j.with_columns(
            pl.when(ok).then(pl.col("namespace")).otherwise(pl.lit("")).alias(f"{p}_namespace"),
            pl.when(ok).then(pl.col("pod")).otherwise(pl.lit("")).alias(f"{p}_pod"),
        ).drop(["valid_from", "valid_to", "namespace", "pod"])
        j = j.join_asof(
            pj.rename({"namespace": f"{p}_namespace", "pod": f"{p}_pod", "job": f"{p}_job"}),
            left_on="ts",
            right_on="valid_from",
            by=[f"{p}_namespace", f"{p}_pod"],
            strategy="backward",
        )
        return j.drop("valid_from")

    assert isinstance(f, pl.DataFrame)
    return side(side(f, "src_ip", "src"), "dst_ip", "dst")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", default="1000000,3000000,10000000")
    ap.add_argument("--leases", type=int, default=100_000)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    rng = np.random.default_rng(3)
    store = Store(f"chdb://{tempfile.mkdtemp(prefix='rs-bench-corr-')}/store", database="bench")
    store.migrate()
    t0 = (int(time.time() * 1000) // HOUR_MS - 3) * HOUR_MS
    ls, pods = leases(args.leases, t0)
    store.insert(POD_IP_LEASE, ls)
    store.insert(POD, pods)
    # 2,048 nodes under a 4-tier HyperNode tree (SU of 32 / pod of 256 / spine plane of 1,024 / root)
    nodes = [f"n{i}" for i in range(2048)]
    store.insert(
        NODE,
        NODE.to_arrow(
            [
                {
                    "cluster": "b",
                    "node": n,
                    "su": f"su{i // 32}",
                    "idc": f"idc{i // 1024}",
                    "gpus": 8,
                    "valid_from": t0 - HOUR_MS,
                    "updated_at": t0,
                }
                for i, n in enumerate(nodes)
            ]
        ),
    )
    anc = Ancestry(
        {
            n: [f"su{i // 32}", f"pod{i // 256}", f"plane{i // 1024}", "root"]
            for i, n in enumerate(nodes)
        },
        {
            **{f"su{k}": 1 for k in range(64)},
            **{f"pod{k}": 2 for k in range(8)},
            **{f"plane{k}": 3 for k in range(2)},
            "root": 4,
        },
    )
    results = []
    for n in sizes:
        store.client.command("TRUNCATE TABLE bench.flow_samples")
        fl = flows(n, args.leases // 2, t0, rng)
        store.insert(FLOW_SAMPLE, fl)
        start = datetime.fromtimestamp(t0 / 1000, UTC)
        ctx = Context(store, Window(start, start + timedelta(hours=1)), default_thresholds(), "b")
        ch_s, counts = timed(attribute_window, ctx, anc, clock=time.perf_counter)
        pl_s, df = timed(polars_attribution, fl, ls, pods, clock=time.perf_counter)
        # same answer: owned-by-nobody counts agree
        pl_unowned = int((df["src_pod"] == "").sum())
        assert counts["flows"] == n and pl_unowned == counts["src_unowned"], (counts, pl_unowned)
        results.append(
            {
                "flows": n,
                "clickhouse_s": round(ch_s, 2),
                "polars_s": round(pl_s, 2),
                "clickhouse_flows_per_s": round(n / ch_s),
                "polars_flows_per_s": round(n / pl_s),
                "ratio_vs_polars": round(pl_s / ch_s, 3),
                "unowned_src": pl_unowned,
            }
        )
        print(
            f"{n:>11,} flows  clickhouse {ch_s:6.2f}s ({n / ch_s:>12,.0f}/s)  polars {pl_s:6.2f}s ({n / pl_s:>12,.0f}/s)  "
            f"ratio {pl_s / ch_s:.2f}"
        )
    growth = results[-1]["clickhouse_s"] / max(results[0]["clickhouse_s"], 1e-9)
    report(
        {
            "leases": args.leases,
            "sizes": results,
            "clickhouse_time_growth_first_to_last": round(growth, 2),
            "rows_per_s": results[-1]["clickhouse_flows_per_s"],
            "ratio_vs_polars": results[-1]["ratio_vs_polars"],
        }
    )


if __name__ == "__main__":
    main()
