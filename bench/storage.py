"""What railscope's tables cost on disk, measured from the engine's own accounting (system.parts,
system.columns): the coefficients `railscope sizing` reads (telemetry/sizing.yaml).

  python bench/storage.py --store DEMO/store     # an existing store (e.g. railscope demo --scenario large)
  python bench/storage.py --flows 1000000        # sampled flows at volume, through one attribution tick

Per table (`--store`): rows, active parts, bytes uncompressed (as ClickHouse holds the columns in
memory), compressed and on disk, bytes per row, the compression ratio (uncompressed / compressed),
the entities (distinct sorting-key values less time) and rows per entity per 10 s over the
table's time span. With `--flows N`: N sampled RoCEv2 flows (frame sizes, ports, QPs and PSNs as
sFlow reports them; leases and nodes as bench/correlate.py builds them) inserted and attributed
by one engine tick (`attribute_window`), then bytes per sample of flow_samples and
attributed_flows, job_port_intervals rows per sample and their bytes, and the tick's wall and CPU
seconds. Each store is opened in a process of its own. Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.results import report  # noqa: E402
from telemetry.records import KINDS  # noqa: E402
from telemetry.store import Store  # noqa: E402
from telemetry.store.schema import entity_columns  # noqa: E402


def tables(store: Store) -> dict[str, dict[str, Any]]:
    """Every table of the store's database with rows: sizes from system.parts (active parts)."""
    rows = store.query_rows(
        """SELECT table, sum(rows), count(), sum(data_uncompressed_bytes),
                  sum(data_compressed_bytes), sum(bytes_on_disk)
           FROM system.parts WHERE database = {d:String} AND active
           GROUP BY table HAVING sum(rows) > 0 ORDER BY table""",
        {"d": store.database},
    )
    out: dict[str, dict[str, Any]] = {}
    by_table = {k.table: k for k in KINDS.values()}
    for table, n, parts, unc, comp, disk in rows:
        n = int(n)
        r: dict[str, Any] = {
            "rows": n,
            "parts": int(parts),
            "uncompressed_bytes": int(unc),
            "compressed_bytes": int(comp),
            "disk_bytes": int(disk),
            "bytes_per_row_uncompressed": round(int(unc) / n, 1),
            "bytes_per_row_disk": round(int(disk) / n, 1),
            "compression": round(int(unc) / max(int(comp), 1), 2),
        }
        kind = by_table.get(table)
        if kind is not None and "valid_to" not in kind.by_name:
            ents = entity_columns(kind)
            tcol = kind.time_field
            ent, lo, hi = store.query_rows(
                f"SELECT uniqExact({', '.join(f'`{c}`' for c in ents)}), "
                f"toUnixTimestamp64Milli(min(`{tcol}`)), toUnixTimestamp64Milli(max(`{tcol}`)) "
                f"FROM {store.table(kind)}"
            )[0]
            intervals = (int(hi) - int(lo)) / 10_000 + 1
            r["entities"] = int(ent)
            r["span_s"] = round((int(hi) - int(lo)) / 1000)
            r["rows_per_entity_per_10s"] = round(n / max(int(ent), 1) / intervals, 3)
        out[table] = r
    return out


def store_phase(path: str, database: str) -> dict[str, Any]:
    store = Store(f"chdb://{path}", database=database)
    t = tables(store)
    # the largest columns of the largest tables: where the bytes go
    cols = store.query_rows(
        """SELECT table, name, data_uncompressed_bytes, data_compressed_bytes FROM system.columns
           WHERE database = {d:String} ORDER BY data_compressed_bytes DESC LIMIT 15""",
        {"d": database},
    )
    return {
        "store": path,
        "tables": t,
        "top_columns": [
            {"table": a, "column": b, "uncompressed": int(c), "compressed": int(d)}
            for a, b, c, d in cols
        ],
    }


def realistic_flows(
    n: int, ips: int, t0: int, seconds: float, rng: np.random.Generator
) -> pa.Table:
    """bench/correlate.py's flows within `seconds` from t0 (1 M in 1 s: a fabric sampling 1 M
    per second), with what sFlow reports filled as a rail leaf would: the leaf the source node
    hangs off (16 nodes per leaf) and one of its 32 uplinks as the egress port, frame sizes
    (mostly full 4 kB RoCE frames, some ACK/CNP-sized), destination QP and PSN, sampling rate
    1-in-400,000 and bytes/packets scaled by it."""
    from bench.correlate import flows
    from telemetry.records import FLOW_SAMPLE

    fl = flows(n, ips, t0, rng)
    ts = np.sort(rng.integers(t0, t0 + int(seconds * 1000), n))
    src = rng.integers(0, ips, n)  # the source IP's index: its node is src % 2048 (leases())

    leaf = (src % 2048) // 16
    frame = np.where(rng.random(n) < 0.85, 4096 + 58, rng.choice([64, 106, 1078], n)).astype(
        np.uint32
    )
    rate = 400_000
    ip = np.char.add(
        np.char.add(np.char.add("10.", ((src >> 16) & 255).astype(str)), "."),
        np.char.add(np.char.add(((src >> 8) & 255).astype(str), "."), (src & 255).astype(str)),
    )
    cols = {
        "ts": pa.array(ts).cast(pa.timestamp("ms", "UTC")),
        "src_ip": pa.array(ip),
        "agent": pa.array(np.char.add("10.255.0.", leaf.astype(str))),
        "switch": pa.array(np.char.add("leaf-", leaf.astype(str))),
        "in_port": pa.array(np.char.add("Ethernet", ((src % 16) * 8).astype(str))),
        "out_port": pa.array(
            np.char.add("Ethernet", (256 + rng.integers(0, 32, n) * 8).astype(str))
        ),
        "bth_opcode": pa.array(np.full(n, 10, np.uint8)),
        "dest_qp": pa.array(rng.integers(0x100, 0x40000, n).astype(np.uint32)),
        "psn": pa.array(rng.integers(0, 1 << 24, n).astype(np.uint32)),
        "frame_bytes": pa.array(frame),
        "sampling_rate": pa.array(np.full(n, rate, np.uint32)),
        "bytes": pa.array(frame.astype(np.uint64) * rate),
        "packets": pa.array(np.full(n, rate, np.uint64)),
    }
    for name, col in cols.items():
        fl = fl.set_column(fl.schema.get_field_index(name), name, col)
    return FLOW_SAMPLE.conform(fl)


def flows_phase(path: str, n: int, seconds: float) -> dict[str, Any]:
    from bench.correlate import HOUR_MS, leases, settle
    from telemetry.correlate.attribution import Ancestry, attribute_window
    from telemetry.correlate.registry import Context, Window
    from telemetry.correlate.thresholds import default_thresholds
    from telemetry.records import FLOW_SAMPLE, GPU_NIC_AFFINITY, NODE, POD, POD_IP_LEASE
    from tests.inventory_rows import rail_affinities

    store = Store(f"chdb://{path}", database="bench")
    store.migrate()
    t0 = (int(time.time() * 1000) // HOUR_MS - 3) * HOUR_MS
    ls, pods = leases(100_000, t0)
    store.insert(POD_IP_LEASE, ls)
    store.insert(POD, pods)
    nodes = [f"n{i}" for i in range(2048)]
    store.insert(
        NODE,
        NODE.to_arrow(
            [
                {
                    "cluster": "b",
                    "node": x,
                    "su": f"su{i // 32}",
                    "idc": f"idc{i // 1024}",
                    "gpus": 8,
                    "valid_from": t0 - HOUR_MS,
                    "updated_at": t0,
                }
                for i, x in enumerate(nodes)
            ]
        ),
    )
    store.insert(
        GPU_NIC_AFFINITY,
        GPU_NIC_AFFINITY.to_arrow(rail_affinities("b", nodes, range(8), t0 - HOUR_MS)),
    )
    anc = Ancestry(
        {
            x: [f"su{i // 32}", f"pod{i // 256}", f"plane{i // 1024}", "root"]
            for i, x in enumerate(nodes)
        },
        {
            **{f"su{k}": 1 for k in range(64)},
            **{f"pod{k}": 2 for k in range(8)},
            "plane0": 3,
            "plane1": 3,
            "root": 4,
        },
    )
    store.insert(
        FLOW_SAMPLE,
        realistic_flows(n, 50_000, t0 + HOUR_MS // 4, seconds, np.random.default_rng(3)),
    )
    settle(store)
    start = datetime.fromtimestamp(t0 / 1000, UTC)
    ctx = Context(
        store, Window(start, start + timedelta(hours=1)), default_thresholds(), "b", {"memo": {}}
    )
    w, c = time.perf_counter(), time.process_time()
    counts = attribute_window(ctx, anc)
    wall, cpu = time.perf_counter() - w, time.process_time() - c
    settle(store)
    store.client.command("OPTIMIZE TABLE bench.flow_samples FINAL")
    store.client.command("OPTIMIZE TABLE bench.attributed_flows FINAL")
    t = tables(store)
    fs, af, jp = t["flow_samples"], t["attributed_flows"], t.get("job_port_intervals", {"rows": 0})
    return {
        "flows": n,
        "seconds": seconds,
        "attributed": counts["flows"],
        "tick_wall_s": round(wall, 2),
        "tick_cpu_s": round(cpu, 2),
        "flow_samples": fs,
        "attributed_flows": af,
        "job_port_intervals": jp,
        "job_port_interval_rows_per_sample": round(jp["rows"] / n, 4),
        "disk_bytes_per_sample_raw_and_attributed": round(
            (fs["disk_bytes"] + af["disk_bytes"]) / n, 1
        ),
    }


def child(args: list[str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, *args], check=True, stdout=subprocess.PIPE, text=True
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--store", help="an existing embedded store directory (not in use)")
    ap.add_argument("--database", default="railscope")
    ap.add_argument("--flows", type=int, default=0, help="sampled flows to attribute (0: none)")
    ap.add_argument(
        "--flow-seconds", type=float, default=1.0, help="the flows' time span (1 M in 1 s: 1 M/s)"
    )
    ap.add_argument("--phase", choices=("store", "flows"), help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.phase == "store":
        print(json.dumps(store_phase(a.path, a.database)))
        return
    if a.phase == "flows":
        print(json.dumps(flows_phase(a.path, a.flows, a.flow_seconds)))
        return
    if not a.store and not a.flows:
        ap.error("give --store DIR and/or --flows N")
    result: dict[str, Any] = {"bench": "storage"}
    lines = []
    if a.store:
        st = child(
            ["--phase", "store", "--path", str(Path(a.store).resolve()), "--database", a.database]
        )
        result["store"] = st
        for name, r in st["tables"].items():
            lines.append(
                f"{name:28s} {r['rows']:>12,} rows {r['bytes_per_row_uncompressed']:>8} B/row "
                f"x{r['compression']:<6} {r['bytes_per_row_disk']:>7} B/row on disk"
                + (
                    f"  {r['rows_per_entity_per_10s']} rows/entity/10s"
                    if "rows_per_entity_per_10s" in r
                    else ""
                )
            )
    if a.flows:
        with tempfile.TemporaryDirectory(prefix="rs-bench-storage-") as tmp:
            fl = child(
                [
                    "--phase",
                    "flows",
                    "--path",
                    f"{tmp}/store",
                    "--flows",
                    str(a.flows),
                    "--flow-seconds",
                    str(a.flow_seconds),
                ]
            )
        result["flows"] = fl
        lines.append(
            f"{a.flows:,} flow samples: flow_samples {fl['flow_samples']['bytes_per_row_disk']} B/sample, "
            f"attributed_flows {fl['attributed_flows']['bytes_per_row_disk']} B/sample on disk; "
            f"job_port_intervals {fl['job_port_interval_rows_per_sample']} rows/sample; "
            f"tick {fl['tick_wall_s']} s wall, {fl['tick_cpu_s']} CPU-s"
        )
    report(result, *lines)


if __name__ == "__main__":
    main()
