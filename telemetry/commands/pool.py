"""GPU pool accounting: allocated, busy, idle-allocated and free GPUs per interval

Per interval (--step): GPUs total/allocatable (nodes), allocated (Running pods' nvidia.com/gpu
requests), busy (mean utilization >= pool.busy_utilization_floor), idle-allocated and free, for
the whole pool or --by tenant, queue, priority, provisioning type, GPU model or HyperNode; per
queue its deserved/guarantee/capability; GPU-hours over the range. Definitions: docs/pool.md.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from telemetry.commands.common import (
    add_command,
    add_range_args,
    add_store_args,
    config_from_args,
    open_store,
)
from telemetry.commands.correlate import time_range
from telemetry.errors import UserError


def register(sub: Any) -> list[str]:
    from telemetry.pool import DIMENSIONS

    p = add_command(sub, "pool", __doc__)
    p.add_argument("--by", choices=DIMENSIONS, help="group by (default: the whole pool)")
    add_range_args(p)
    p.add_argument(
        "--step", type=int, metavar="SECONDS", help="interval (default pool.interval_seconds)"
    )
    p.add_argument(
        "--floor",
        type=float,
        metavar="RATIO",
        help="busy when mean utilization >= RATIO (default pool.busy_utilization_floor)",
    )
    p.add_argument(
        "--preemptions",
        action="store_true",
        help="list pods preempted or evicted in the range instead: GPUs, provisioning type, "
        "and for whom",
    )
    p.add_argument("--format", choices=["table", "json"], default="table")
    add_store_args(p)
    p.set_defaults(func=run)
    return ["pool"]


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in row.items()}


def run(args: argparse.Namespace) -> int:
    from telemetry.correlate import Correlator
    from telemetry.correlate.thresholds import default_thresholds, merge_thresholds
    from telemetry.pool import accounting, gpu_hours

    cfg = config_from_args(args)
    th = merge_thresholds(default_thresholds(), cfg.correlate.thresholds)["pool"]
    step = args.step or int(th["interval_seconds"])
    floor = th["busy_utilization_floor"] if args.floor is None else args.floor
    if step <= 0:
        raise UserError(f"pool: --step {step} must be a positive number of seconds")
    if not 0 <= floor <= 1:
        raise UserError(f"pool: --floor {floor} is not a ratio between 0 and 1")
    store = open_store(cfg, reading=True)
    rng = time_range(Correlator(store), args.since, args.until)
    if rng is None:
        raise UserError("pool: the store holds no data; run the demo or a source first")
    if args.preemptions:
        from telemetry.pool import preemptions

        ev = preemptions(store, rng[0], rng[1], cluster=cfg.cluster)
        for row in ev.to_dicts():
            if args.format == "json":
                print(json.dumps(_jsonable(row)))
            else:
                print(
                    f"{row['ts']:%Y-%m-%d %H:%M:%S}  {row['reason']:<9} {row['namespace']}/{row['pod']} "
                    f"({row['gpus'] or 0} GPUs, {row['provisioning'] or '-'}) on {row['node'] or '-'} "
                    f"for {row['preempted_for'] or '-'} ({row['for_provisioning'] or '-'})"
                )
        return 0
    df = accounting(
        store, rng[0], rng[1], by=args.by, step_s=step, floor=floor, cluster=cfg.cluster
    )
    by = args.by or "pool"
    if args.format == "json":
        for row in df.rename({"key": by}).to_dicts():
            h = step / 3600.0
            row["allocated_gpu_hours"] = row["allocated_gpus"] * h
            row["busy_gpu_hours"] = row["busy_gpus"] * h
            print(json.dumps(_jsonable(row)))
        return 0
    cols = ["interval_start", "key", "total_gpus", "allocatable_gpus", "allocated_gpus",
            "busy_gpus", "idle_allocated_gpus", "free_gpus"]  # fmt: skip
    if args.by == "queue":
        cols += ["deserved_gpus", "guarantee_gpus"]
    if args.by is None:
        cols.remove("key")
    heads = [by if c == "key" else c.removesuffix("_gpus") for c in cols]
    body = [
        ["" if r[c] is None else r[c].strftime("%H:%M:%S") if c == "interval_start" else str(r[c])
         for c in cols]
        for r in df.to_dicts()
    ]  # fmt: skip
    widths = [
        max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(heads)
    ]
    print("  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True)))
    for b in body:
        print("  ".join(v.ljust(w) for v, w in zip(b, widths, strict=True)))
    hours = gpu_hours(df, step)
    print(
        f"GPU-hours {rng[0]:%Y-%m-%d %H:%M}..{rng[1]:%H:%M} UTC: "
        f"allocated {hours['allocated_gpu_hours']:.2f}, busy {hours['busy_gpu_hours']:.2f}, "
        f"idle-allocated {hours['idle_allocated_gpu_hours']:.2f} (floor {floor:g}, step {step}s)"
    )
    return 0
