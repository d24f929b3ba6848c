"""Attribution throughput: flow samples joined, as of their own time, to the pods holding their
source and destination IPs (with lease ends honoured) and to those pods' jobs. railscope runs it
inside the embedded ClickHouse (`telemetry.correlate.attribution`: an evaluation tick reads the
window's flows, looks both ends up in the lease index, writes the attributed rows and their
job_port_intervals rollup). Contenders, in the same run on the same data:

- polars (`polars_s`, `ratio_vs_polars`): `join_asof` of the same data already in memory,
  computing the same output columns (pod, node, job, rail, NIC, leaf port, SU, IDC, lowest
  common HyperNode and tier on both ends); nothing read from or written to a store. A sample of
  flows (by source IP) is compared row for row with railscope's.
- railscope's attribution query alone (`clickhouse_joins_only_s`, `joins_only_ratio_vs_polars`):
  the same INSERT ... SELECT into a Null table, so the joins and output columns without the
  tick's storage work (the part written, the rollup, the counts): the like-for-like figure
  against polars' in-memory joins. It still reads the node facts and checks the lease index's
  fingerprint (about 0.06 s at 100,000 leases), as every tick does before its query.
- polars as the engine (`polars_engine_s`, `engine_ratio_vs_polars`): what a tick would cost
  with polars doing the joins: the window's flows read from the store, the same polars joins
  (inventory kept in memory between ticks, as railscope keeps its lease index), the rows
  inserted, the same rollup INSERT.
- railscope's first tick over an inventory (`clickhouse_cold_s`, `cold_ratio_vs_polars`), which
  builds the lease index, and a later one (`clickhouse_s`) over the same inventory with the
  same flows arriving anew, which reads it back: the steady state of `correlate --follow`,
  whose index is rebuilt only when the inventory changes, and whose memo across ticks tells
  it the inventory did not change without hashing it again (lease_index.ensure).

Steady-state figures are medians of `--repeats` runs after `--warmup` runs that do not count:
a process's first polars runs are slower (polars 2.1 at 1 M flows: 0.7-1.5 s for the first
one or two, 0.55-0.6 s from then on; `polars_first_s` is the first), as railscope's first tick
is for the embedded engine. The embedded engine's background merges run in this process: they are waited
out before each run (the wait after the last attribution is `clickhouse_merges_after_s`).
Last line: one JSON object.

    python bench/correlate.py [--sizes 1000000,3000000,10000000] [--leases 100000]
                              [--warmup 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.results import report
from telemetry.correlate.attribution import (
    Ancestry,
    _rollup_insert,
    attribute_window,
    statement,
)
from telemetry.correlate.registry import Context, Window
from telemetry.correlate.thresholds import default_thresholds
from telemetry.records import (
    ATTRIBUTED_FLOW,
    FLOW_SAMPLE,
    GPU_NIC_AFFINITY,
    NODE,
    POD,
    POD_IP_LEASE,
)
from telemetry.store import Store
from tests.inventory_rows import rail_affinities

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
        # half the leases on a rail network (Multus rdma-railN), half on the primary one
        "network": np.array([f"rdma-rail{i % 8}" if i % 2 else "" for i in range(n)]),
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


RAIL_RE = r"(?i)rail[-_]?(\d+)"


def polars_attribution(
    fl: pa.Table,
    ls: pa.Table,
    pods: pa.Table,
    nodes: dict[str, tuple[str, str]],
    anc: Ancestry,
    nics: list[tuple[str, int, str, str]],
) -> pl.DataFrame:
    """The same joins and the same output columns as `attribute_sql` (ATTRIBUTED_FLOW), in
    polars: lease as of the flow's time on each side (lease end honoured), the pod's job as of
    then, rail from the Multus network name, SU/IDC/ancestors per node, NIC and leaf port per
    (node, rail), lowest common HyperNode and its tier. `nodes`: node -> (su, idc); `nics`:
    (node, rail, nic, leaf port)."""
    f = pl.from_arrow(
        fl.select(
            [
                "ts",
                "cluster",
                "switch",
                "out_port",
                "src_ip",
                "dst_ip",
                "dst_port",
                "dest_qp",
                "bytes",
            ]
        )
    )
    assert isinstance(f, pl.DataFrame)
    f = f.sort("ts").with_columns((pl.col("dst_port") == 4791).alias("rdma"))
    lease = pl.from_arrow(
        ls.select(["ip", "valid_from", "valid_to", "namespace", "pod", "node", "network"])
    )
    assert isinstance(lease, pl.DataFrame)
    lease = lease.sort("valid_from")
    pj = pl.from_arrow(pods.select(["namespace", "pod", "valid_from", "valid_to", "job"]))
    assert isinstance(pj, pl.DataFrame)
    pj = pj.sort("valid_from")
    names = sorted(set(nodes) | set(anc.ancestors))
    node_info = pl.DataFrame(
        {
            "node": names,
            "su": [nodes.get(n, ("", ""))[0] for n in names],
            "idc": [nodes.get(n, ("", ""))[1] for n in names],
            "anc": [anc.ancestors.get(n, []) for n in names],
        },
        schema={"node": pl.String, "su": pl.String, "idc": pl.String, "anc": pl.List(pl.String)},
    )
    nic_info = pl.DataFrame(
        nics,
        schema={"node": pl.String, "rail": pl.Int64, "nic": pl.String, "leaf_port": pl.String},
        orient="row",
    )

    def side(df: pl.DataFrame, col: str, p: str) -> pl.DataFrame:
        j = df.join_asof(lease.rename({"ip": col}), left_on="ts", right_on="valid_from", by=col)
        ok = pl.col("valid_to").is_null() | (pl.col("ts") < pl.col("valid_to"))
        rail = pl.col("network").str.extract(RAIL_RE, 1).cast(pl.Int64, strict=False).fill_null(-1)
        j = j.with_columns(
            *(
                pl.when(ok).then(pl.col(c)).otherwise(pl.lit("")).fill_null("").alias(f"{p}_{c}")
                for c in ("namespace", "pod", "node")
            ),
            pl.when(ok).then(rail).otherwise(-1).alias(f"{p}_rail"),
        ).drop(["valid_from", "valid_to", "namespace", "pod", "node", "network"])
        j = j.join_asof(
            pj.rename({"namespace": f"{p}_namespace", "pod": f"{p}_pod"}),
            left_on="ts",
            right_on="valid_from",
            by=[f"{p}_namespace", f"{p}_pod"],
        )
        ok = pl.col("valid_to").is_null() | (pl.col("ts") < pl.col("valid_to"))
        j = j.with_columns(
            pl.when(ok).then(pl.col("job")).otherwise(pl.lit("")).fill_null("").alias(f"{p}_job")
        ).drop(["valid_from", "valid_to", "job"])
        j = j.join(
            node_info.rename(
                {"node": f"{p}_node", "su": f"{p}_su", "idc": f"{p}_idc", "anc": f"{p}_anc"}
            ),
            on=f"{p}_node",
            how="left",
        )
        j = j.join(
            nic_info.rename(
                {
                    "node": f"{p}_node",
                    "rail": f"{p}_rail",
                    "nic": f"{p}_nic",
                    "leaf_port": f"{p}_leaf_port",
                }
            ),
            on=[f"{p}_node", f"{p}_rail"],
            how="left",
        )
        return j.with_columns(
            pl.col(f"{p}_su", f"{p}_idc", f"{p}_nic", f"{p}_leaf_port").fill_null(""),
            pl.col(f"{p}_anc").fill_null([]),
        )

    out = side(side(f, "src_ip", "src"), "dst_ip", "dst")
    # the lowest common HyperNode: the first of the source's ancestors (lowest tier first) that
    # the destination also has, vectorised over the ancestor depth
    depth = max((len(v) for v in anc.ancestors.values()), default=0)
    cand = [pl.col("src_anc").list.get(k, null_on_oob=True) for k in range(depth)]
    tiers = pl.DataFrame(
        {"lca_hypernode": list(anc.tiers), "lca_tier": list(anc.tiers.values())},
        schema={"lca_hypernode": pl.String, "lca_tier": pl.UInt8},
    )
    return (
        out.with_columns(
            pl.coalesce(
                *(pl.when(pl.col("dst_anc").list.contains(c)).then(c) for c in cand), pl.lit("")
            ).alias("lca_hypernode")
        )
        .join(tiers, on="lca_hypernode", how="left")
        .with_columns(pl.col("lca_tier").fill_null(0))
        .drop("src_anc", "dst_anc")
    )


COMPARED = [c for c in ATTRIBUTED_FLOW.columns if c != "cluster"]


def settle(store: Store, limit_s: float = 120.0) -> float:
    """Wait until the embedded engine merges no part of the bench's tables (its background
    merges run in this process: left running, they would take the CPU of whatever is timed
    next); returns the seconds waited."""
    t = time.perf_counter()
    while time.perf_counter() - t < limit_s:
        (n,) = store.query_rows(
            "SELECT count() FROM system.merges WHERE database = {db:String}",
            {"db": store.database},
        )[0]
        if not n:
            break
        time.sleep(0.05)
    return time.perf_counter() - t


def timed(fn, *a):  # type: ignore[no-untyped-def]
    """(wall seconds, CPU seconds of this process, fn(*a)): both contenders run in this
    process (the embedded ClickHouse's threads and polars' pool alike), so on a machine others
    share the CPU seconds are the steadier figure, the wall seconds the one the ratio uses."""
    gc.collect()  # start each contender from the same heap state
    w, c = time.perf_counter(), time.process_time()
    r = fn(*a)
    return time.perf_counter() - w, time.process_time() - c, r


def steady(fn, *a, warmup: int, repeats: int, before=None):  # type: ignore[no-untyped-def]
    """(median wall s, that run's CPU s, the first run's wall s, the last result) of `fn(*a)`
    run `warmup` times uncounted, then `repeats` times; `before()` resets the store first."""
    runs, r = [], None
    for _ in range(warmup + max(1, repeats)):
        if before is not None:
            before()
        r = None  # the previous run's result freed first (10 M attributed rows: GBs)
        *run, r = timed(fn, *a)
        runs.append(run)
    wall, cpu = sorted(runs[warmup:])[(len(runs) - warmup - 1) // 2]
    return wall, cpu, runs[0][0], r


def polars_engine(store: Store, ctx: Context, *inventory) -> None:  # type: ignore[no-untyped-def]
    """A tick with polars as the engine: the window's flows read from the store, the polars
    joins against the inventory it holds, the attributed rows inserted, the same rollup."""
    fl = store.query_arrow(
        f"SELECT ts, cluster, switch, out_port, src_ip, dst_ip, dst_port, dest_qp, bytes "
        f"FROM {ctx.table('flow_sample')} WHERE {ctx.where('flow_sample')}",
        ctx.params(),
    )
    rows = polars_attribution(fl, *inventory).select(ATTRIBUTED_FLOW.columns).to_arrow()
    del fl
    store.insert(ATTRIBUTED_FLOW, rows)
    del rows
    rollup = _rollup_insert(ctx, rerun=False)
    if rollup is not None:
        ctx.command(rollup)


def joins_only(ctx: Context, anc: Ancestry) -> None:
    """railscope's attribution query alone, its rows discarded (INSERT into a Null table): the
    joins and output columns polars computes, none of the tick's storage work (the part written,
    the rollup, the counts); the node facts and the index's fingerprint are read first, as in a
    tick."""
    sql, params, _ = statement(ctx, anc)
    ctx.command(sql.replace(ctx.table("attributed_flow"), "bench.attributed_null", 1), params)


def compare(store: Store, df: pl.DataFrame, ips: list[str]) -> int:
    """Row for row, every output column: the ClickHouse attributed rows of flows from `ips`
    (a sample) against the polars rows of the same flows. Returns the rows compared."""
    cols = ", ".join(f"`{c}`" for c in COMPARED)
    ch = store.client.query_arrow(
        f"SELECT {cols} FROM {store.table('attributed_flow')} WHERE src_ip IN {{ips:Array(String)}}",
        parameters={"ips": ips},
    )
    a = pl.from_arrow(ch)
    assert isinstance(a, pl.DataFrame)
    b = df.filter(pl.col("src_ip").is_in(ips)).select(COMPARED)
    a = a.with_columns(pl.col(c).cast(b.schema[c]) for c in COMPARED).sort(COMPARED)
    b = b.sort(COMPARED)
    assert a.height == b.height, (a.height, b.height)
    for c in COMPARED:
        if not a[c].equals(b[c]):
            bad = (a[c] != b[c]).arg_true()[0]
            raise AssertionError(
                f"{c} differs: {a.row(bad, named=True)} vs {b.row(bad, named=True)}"
            )
    return a.height


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", default="1000000,3000000,10000000")
    ap.add_argument("--leases", type=int, default=100_000)
    ap.add_argument("--warmup", type=int, default=2, help="uncounted runs of each contender")
    ap.add_argument("--repeats", type=int, default=3, help="counted runs (the median is kept)")
    args = ap.parse_args()
    # the store is removed afterwards: left behind, each run's GBs filled the page cache, and
    # later runs spent several times the system time writing their parts
    with tempfile.TemporaryDirectory(prefix="rs-bench-corr-") as tmp:
        run(args, tmp)


def run(args: argparse.Namespace, tmp: str) -> None:
    runs = {"warmup": args.warmup, "repeats": args.repeats}
    sizes = [int(x) for x in args.sizes.split(",")]
    rng = np.random.default_rng(3)
    store = Store(f"chdb://{tmp}/store", database="bench")
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
    # 8 GPUs per node, GPU g on rail g through NIC mlx5_g (no LLDP: leaf ports stay empty)
    store.insert(
        GPU_NIC_AFFINITY,
        GPU_NIC_AFFINITY.to_arrow(rail_affinities("b", nodes, range(8), t0 - HOUR_MS)),
    )
    facts = {n: (f"su{i // 32}", f"idc{i // 1024}") for i, n in enumerate(nodes)}
    nics = [(n, g, f"mlx5_{g}", "") for n in nodes for g in range(8)]
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
    store.client.command(
        "CREATE TABLE bench.attributed_null AS bench.attributed_flows ENGINE = Null"
    )
    results = []
    for n in sizes:
        store.client.command("TRUNCATE TABLE bench.flow_samples")
        fl = flows(n, args.leases // 2, t0, rng)
        store.insert(FLOW_SAMPLE, fl)
        start = datetime.fromtimestamp(t0 / 1000, UTC)
        # the engine's memo across ticks (Correlator._memo), as `correlate --follow` keeps it
        memo: dict = {}
        ctx = Context(
            store,
            Window(start, start + timedelta(hours=1)),
            default_thresholds(),
            "b",
            {"memo": memo},
        )
        settle(store)  # the flows' insert merged: not in the attribution's time
        # the first tick over this inventory builds the lease index; a later one (same
        # inventory, new flows) reads it back: both timed, the later one is the steady state
        store.client.command("TRUNCATE TABLE bench.attribution_index")  # (an earlier size's)
        settle(store)
        cold_s, cold_cpu, counts = timed(attribute_window, ctx, anc)
        assert counts["index_built"]
        settle(store)
        inventory = (ls, pods, facts, anc, nics)
        pl_s, pl_cpu, pl_first, df = steady(polars_attribution, fl, *inventory, **runs)
        # same answer: owned-by-nobody counts agree, and a sample compared row for row
        pl_unowned = int((df["src_pod"] == "").sum())
        assert counts["flows"] == n and pl_unowned == counts["src_unowned"], (counts, pl_unowned)
        ips = df["src_ip"].unique().sort().gather_every(max(1, args.leases // 2 // 200)).to_list()
        df = df.filter(pl.col("src_ip").is_in(ips))  # the sample: all that is kept
        compared = compare(store, df, ips)

        def anew() -> None:  # the same flows arrive anew
            for t in ("attributed_flows", "job_port_intervals"):
                store.client.command(f"TRUNCATE TABLE bench.{t}")
            settle(store)

        ch_s, ch_cpu, _, counts = steady(attribute_window, ctx, anc, before=anew, **runs)
        merges_s = settle(store)
        assert not counts["index_built"] and counts["src_unowned"] == pl_unowned
        assert compare(store, df, ips) == compared
        join_s, join_cpu, _, _ = steady(joins_only, ctx, anc, **runs)
        eng_s, eng_cpu, _, _ = steady(polars_engine, store, ctx, *inventory, before=anew, **runs)
        assert compare(store, df, ips) == compared  # the polars engine's rows: the same
        store.release_memory()  # what the engine's allocator keeps, before the next size
        results.append(
            {
                "flows": n,
                "clickhouse_s": round(ch_s, 2),
                "polars_s": round(pl_s, 2),
                "polars_first_s": round(pl_first, 2),
                "clickhouse_joins_only_s": round(join_s, 2),
                "clickhouse_joins_only_cpu_s": round(join_cpu, 2),
                "joins_only_ratio_vs_polars": round(pl_s / join_s, 3),
                "polars_engine_s": round(eng_s, 2),
                "polars_engine_cpu_s": round(eng_cpu, 2),
                "engine_ratio_vs_polars": round(eng_s / ch_s, 3),
                "clickhouse_flows_per_s": round(n / ch_s),
                "polars_flows_per_s": round(n / pl_s),
                "ratio_vs_polars": round(pl_s / ch_s, 3),
                "clickhouse_cpu_s": round(ch_cpu, 2),
                "polars_cpu_s": round(pl_cpu, 2),
                "cpu_ratio_vs_polars": round(pl_cpu / ch_cpu, 3),
                "clickhouse_cold_s": round(cold_s, 2),
                "clickhouse_cold_cpu_s": round(cold_cpu, 2),
                "cold_ratio_vs_polars": round(pl_s / cold_s, 3),
                "clickhouse_merges_after_s": round(merges_s, 2),
                "unowned_src": pl_unowned,
                "rows_compared": compared,
            }
        )
        print(
            f"{n:>11,} flows  clickhouse {ch_s:6.2f}s ({n / ch_s:>12,.0f}/s)  polars {pl_s:6.2f}s ({n / pl_s:>12,.0f}/s)  "
            f"ratio {pl_s / ch_s:.2f}  (CPU s {ch_cpu:.2f} vs {pl_cpu:.2f}: {pl_cpu / ch_cpu:.2f})  "
            f"first tick {cold_s:.2f}s: ratio {pl_s / cold_s:.2f}  "
            f"joins only {join_s:.2f}s: ratio {pl_s / join_s:.2f}  "
            f"polars as the engine {eng_s:.2f}s: ratio {eng_s / ch_s:.2f}"
        )
    growth = results[-1]["clickhouse_s"] / max(results[0]["clickhouse_s"], 1e-9)
    report(
        {
            "bench": "correlate",
            "leases": args.leases,
            "sizes": results,
            "clickhouse_time_growth_first_to_last": round(growth, 2),
            "rows_per_s": results[-1]["clickhouse_flows_per_s"],
            "ratio_vs_polars": results[-1]["ratio_vs_polars"],
            "min_ratio_vs_polars": min(r["ratio_vs_polars"] for r in results),
            "min_cpu_ratio_vs_polars": min(r["cpu_ratio_vs_polars"] for r in results),
            "min_cold_ratio_vs_polars": min(r["cold_ratio_vs_polars"] for r in results),
            "min_joins_only_ratio_vs_polars": min(r["joins_only_ratio_vs_polars"] for r in results),
            "min_engine_ratio_vs_polars": min(r["engine_ratio_vs_polars"] for r in results),
            "warmup": args.warmup,
            "repeats": args.repeats,
        }
    )
    store.client.close()


if __name__ == "__main__":
    main()
