"""what a cluster of this size needs: rows, bytes, disk, ClickHouse, collectors, engine CPU

Prints, for a cluster of --gpus GPUs collected every --interval seconds: rows/s and MB/s
(uncompressed) per table family, disk per day and at retention after compression, ClickHouse
shards, replicas and cores, ingest gateways (`railscope ingest`), sFlow workers and gNMI switch
pollers, and the correlation engine's CPU per tick.

Every coefficient is measured by a bench of this repository (telemetry/sizing.yaml names each
bench and the machine it ran on; docs/sizing.md explains the model and shows 1k / 10k / 100k
GPUs). Measure on your own hardware and data before buying it: the benches ran on a 2-core VM.

Example: railscope sizing --gpus 100000 --interval 10
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import fields
from typing import Any

from telemetry.commands.common import add_command
from telemetry.errors import UserError

# flag -> (Inputs field, kind, lowest allowed, help)
FLAGS: dict[str, tuple[str, str, float, str]] = {
    "--gpus": ("gpus", "int", 1, "GPUs in the cluster (required)"),
    "--interval": ("interval", "float", 1, "collection interval in seconds (default 10)"),
    "--gpus-per-server": ("gpus_per_server", "int", 1, "GPUs per server (default 8)"),
    "--nics-per-server": ("nics_per_server", "int", 1, "RDMA NIC ports per server (default 8)"),
    "--switches": (
        "switches",
        "int",
        1,
        "fabric switches (default: a rail-optimized Clos of --ports-per-switch switches)",
    ),
    "--ports-per-switch": ("ports_per_switch", "int", 2, "ports per switch (default 64)"),
    "--queues": ("queues", "int", 1, "egress queues collected per switch port (default 8)"),
    "--sflow-rate": (
        "sflow_rate",
        "int",
        1,
        "sFlow sampling, 1-in-N packets on host-facing ports (default 400000, SONiC's for 400G)",
    ),
    "--port-gbps": ("port_gbps", "float", 1, "host port speed in Gb/s (default 400)"),
    "--load": ("load", "fraction", 0, "host ports' mean utilisation, 0-1 (default 0.4)"),
    "--packet-bytes": ("packet_bytes", "int", 64, "mean packet size (default 4096, RoCE MTU)"),
    "--replicas": ("replicas", "int", 1, "ClickHouse replicas per shard (default 2)"),
    "--node-cores": ("node_cores", "int", 1, "cores per ClickHouse node (default 32)"),
    "--node-disk-tb": ("node_disk_tb", "float", 0.01, "disk per ClickHouse node, TB (default 10)"),
    "--flow-days": ("flow_days", "int", 1, "days raw and attributed flow samples are kept (2)"),
    "--aggregate-days": (
        "aggregate_days",
        "int",
        1,
        "days the per-job, per-port flow aggregates are kept (default 90)",
    ),
    "--flush-seconds": (
        "flush_seconds",
        "float",
        0.1,
        "the gateways' ingest.flush_seconds (default 2)",
    ),
    "--qps": ("qps", "float", 0, "dashboard and user queries per second (default 5)"),
}


def register(sub: Any) -> list[str]:
    p = add_command(sub, "sizing", __doc__)
    for flag, (_, _, _, text) in FLAGS.items():
        p.add_argument(flag, metavar="N", help=text)
    p.add_argument("--json", action="store_true", help="print the model as one JSON object")
    p.set_defaults(func=run)
    return ["sizing"]


def _value(flag: str, text: str, kind: str, low: float) -> float | int:
    what = {"int": "a whole number", "float": "a number", "fraction": "a number from 0 to 1"}[kind]
    try:
        v: float | int = int(text) if kind == "int" else float(text)
    except ValueError:
        raise UserError(f"sizing: {flag} expects {what}, not {text!r}") from None
    if not math.isfinite(v) or v < low or (kind == "fraction" and v > 1):
        bound = f" of at least {low:g}" if kind != "fraction" else ""
        raise UserError(f"sizing: {flag} expects {what}{bound}, not {text!r}")
    return v


def inputs_from_args(args: argparse.Namespace) -> Any:
    """The model's Inputs from the flags, each checked (one line naming the flag)."""
    from telemetry.sizing import Inputs

    if args.gpus is None:
        raise UserError("sizing: --gpus is required (e.g. railscope sizing --gpus 100000)")
    values: dict[str, Any] = {}
    for flag, (name, kind, low, _) in FLAGS.items():
        text = getattr(args, name)
        if text is not None:
            values[name] = _value(flag, text, kind, low)
    known = {f.name for f in fields(Inputs)}
    assert set(values) <= known
    inp = Inputs(**values)
    if inp.gpus_per_server > inp.gpus:
        raise UserError(
            f"sizing: --gpus-per-server {inp.gpus_per_server} exceeds --gpus {inp.gpus}"
        )
    return inp


def run(args: argparse.Namespace) -> int:
    from telemetry.sizing import render, size

    s = size(inputs_from_args(args))
    print(json.dumps(s.as_dict(), default=float) if args.json else render(s))
    return 0
