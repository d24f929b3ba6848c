"""Both simulator output paths store the same facts: the fast path's records of one step, and
what the real exporters parse from the device files the simulator renders for that step (sysfs,
SONiC dumps, kubectl JSON, sFlow pcap, clienttrace), each written to its own database of the
embedded store and compared there with SQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from telemetry.cli import build_parser
from telemetry.commands.sources import source_from_args
from telemetry.config import load_config
from telemetry.pipeline import Batch
from telemetry.sim import build, load_scenario
from telemetry.sim.render import _rows_at, render_devices
from telemetry.store import Store
from telemetry.transforms import StampCluster


def parsed(argv: list[str]) -> list[Batch]:
    """What `railscope <argv> --output ...` would print, as batches (same parsers, same flags)."""
    args = build_parser().parse_args([*argv, "--output", "jsonl"])
    src = source_from_args(args, load_config(None, env={}))
    try:
        return src.collect()
    finally:
        if hasattr(src, "close"):
            src.close()


@pytest.fixture(scope="module")
def rendered(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Any, int, dict[str, list[dict]], Path]:
    import time

    # recent enough for the tables' TTLs, pinned so the run is reproducible
    start = time.strftime("%Y-%m-%dT%H:00:00Z", time.gmtime(time.time() - 3 * 3600))
    sim = build(load_scenario("small").with_overrides(start=start))
    step = sim.steps - 1
    out = tmp_path_factory.mktemp("devices")
    render_devices(sim, out, step)
    return sim, step, _rows_at(build(load_scenario("small").with_overrides(start=start)), step), out


def two_dbs(
    store: Store, fast: dict[str, list[Batch]], device: dict[str, list[Batch]]
) -> tuple[Store, Store]:
    a = Store(store.dsn, database=store.database)
    b = Store(store.dsn, database=store.database + "_dev")
    b.migrate()
    stamp = StampCluster("sim")
    for s, batches in ((a, fast), (b, device)):
        for kind, bs in batches.items():
            for batch in bs:
                s.insert(kind, stamp.process(batch).table)
    return a, b


def rows(s: Store, sql: str) -> list[tuple]:
    return sorted(s.query_rows(sql.replace("$db", f"`{s.database}`")))


def test_fast_path_and_device_path_store_the_same_facts(store: Store, rendered) -> None:  # type: ignore[no-untyped-def]
    sim, step, fast_rows, out = rendered
    fast = {
        k: [Batch.from_rows(k, v)]
        for k, v in fast_rows.items()
        if k in ("nic_sample", "switch_port_sample", "pod_ip_lease", "pod", "flow_sample")
    }
    device: dict[str, list[Batch]] = {}
    node_dirs = sorted((out / "nodes").iterdir())
    for d in node_dirs:
        for b in parsed(["node", "--from", str(d), "--gpu-backend", "none", "--node-name", d.name]):
            device.setdefault(b.kind.name, []).append(b)
    for b in (
        parsed(["switch", "--from", str(out / "switches")])
        + parsed(["inventory", "--from", str(out / "kubernetes")])
        + parsed(["sflow", "--from", str(out / "sflow" / "sflow.pcap")])
    ):
        device.setdefault(b.kind.name, []).append(b)
    try:
        a, b = two_dbs(store, fast, {k: v for k, v in device.items() if k in fast})
        # NIC counters: the step's cumulative bytes per RDMA device (sysfs counts 4-byte words)
        q = "SELECT node, device, intDiv(rx_bytes_total, 4), intDiv(tx_bytes_total, 4), cnp_handled_total FROM $db.nic_samples"
        assert (
            rows(a, q) == rows(b, q)
            and len(rows(a, q)) == len(node_dirs) * sim.fabric.nics_per_node
        )
        # switch port counters from the SONiC dumps
        q = "SELECT switch, port, rx_bytes_total, tx_bytes_total, pfc_rx_pause_total, pfc_tx_pause_total FROM $db.switch_port_samples"
        assert rows(a, q) == rows(b, q) and len(rows(a, q)) > 100
        # who held which IP (primary and Multus RDMA IPs) at that step
        q = (
            "SELECT ip, namespace, pod, node FROM $db.pod_ip_leases FINAL "
            "WHERE valid_from <= fromUnixTimestamp64Milli({t:Int64}, 'UTC') "
            "AND (valid_to IS NULL OR valid_to > fromUnixTimestamp64Milli({t:Int64}, 'UTC'))"
        ).replace("{t:Int64}", str(sim.ts(step)))
        assert rows(a, q) == rows(b, q) and len(rows(a, q)) > 20
        # sampled RoCEv2 flows: the same QPs between the same IPs, same scaled bytes
        q = "SELECT src_ip, dst_ip, dest_qp, bytes FROM $db.flow_samples WHERE dst_port = 4791"
        assert rows(a, q) == rows(b, q) and len(rows(a, q)) > 0
    finally:
        store.client.command(f"DROP DATABASE IF EXISTS `{store.database}_dev`")
