"""Both simulator output paths store the same facts: the fast path's records of one step, and
what the real exporters parse from the device files the simulator renders for that step (sysfs,
NVML spec, SONiC dumps, kubectl JSON, sFlow pcap), each written to its own database of the
embedded store and compared there with SQL. The sources are built by the through-parsers path's
own `source_from_capture`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from telemetry.config import load_config
from telemetry.contracts import Batch
from telemetry.sim import build
from telemetry.sim.render import _rows_at, render_devices
from telemetry.sim.scenario import load_scenario
from telemetry.sim.through_parsers import source_from_capture, sources_config
from telemetry.store import Store
from telemetry.transforms import StampCluster


def parsed(cfg: Any, name: str, path: Path, *flags: str) -> list[Batch]:
    """What `railscope NAME --from PATH FLAGS --output jsonl` would print, as batches."""
    src = source_from_capture(name, path, cfg, *flags)
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


def rows(s: Store, sql: str, kind: str) -> list[tuple]:
    return sorted(s.query_rows(sql.replace("$t", s.table(kind))))


def test_fast_path_and_device_path_store_the_same_facts(store: Store, rendered) -> None:  # type: ignore[no-untyped-def]
    sim, step, fast_rows, out = rendered
    fast = {
        k: [Batch.from_rows(k, v)]
        for k, v in fast_rows.items()
        if k
        in ("nic_sample", "gpu_sample", "switch_port_sample", "pod_ip_lease", "pod", "flow_sample")
    }
    device: dict[str, list[Batch]] = {}
    # what an operator configures: switch roles, sFlow agent -> switch and ifIndex -> port names
    cfg = sources_config(sim, load_config(None, env={}))
    node_dirs = sorted((out / "nodes").iterdir())
    for d in node_dirs:
        for b in parsed(cfg, "node", d, "--node-name", d.name):
            device.setdefault(b.kind.name, []).append(b)
    for b in (
        parsed(cfg, "switch", out / "switches")
        + parsed(cfg, "inventory", out / "kubernetes")
        + parsed(cfg, "sflow", out / "sflow" / "sflow.pcap")
    ):
        device.setdefault(b.kind.name, []).append(b)
    try:
        a, b = two_dbs(store, fast, {k: v for k, v in device.items() if k in fast})
        # NIC counters: the step's cumulative bytes per RDMA device (sysfs counts 4-byte words)
        q = "SELECT node, device, intDiv(rx_bytes_total, 4), intDiv(tx_bytes_total, 4), cnp_handled_total FROM $t"
        assert (
            rows(a, q, "nic_sample") == rows(b, q, "nic_sample")
            and len(rows(a, q, "nic_sample")) == len(node_dirs) * sim.fabric.nics_per_node
        )
        # GPUs through the NVML fake spec (raw NVML units scaled back), and the pod holding each;
        # a lost GPU answers nothing, so only a source that saw it earlier knows its uuid
        q = "SELECT node, gpu, uuid, round(utilization_ratio, 6), round(power_watts, 3), energy_joules_total, pod FROM $t WHERE up = 1"
        got = rows(b, q, "gpu_sample")
        assert rows(a, q, "gpu_sample") == got and any(r[-1] for r in got)
        q = "SELECT node, gpu FROM $t WHERE up = 0"
        assert rows(a, q, "gpu_sample") == rows(b, q, "gpu_sample")
        assert len(got) + len(rows(b, q, "gpu_sample")) == len(node_dirs) * 8
        # switch port counters and rates from the SONiC dumps
        q = "SELECT switch, port, role, rx_bytes_total, tx_bytes_total, pfc_rx_pause_total, pfc_tx_pause_total, round(tx_utilization_ratio, 6) FROM $t"
        t = "switch_port_sample"
        assert rows(a, q, t) == rows(b, q, t) and len(rows(a, q, t)) > 100
        # who held which IP (primary and Multus RDMA IPs) at that step
        q = (
            "SELECT ip, namespace, pod, node FROM $t FINAL "
            "WHERE valid_from <= fromUnixTimestamp64Milli({t:Int64}, 'UTC') "
            "AND (valid_to IS NULL OR valid_to > fromUnixTimestamp64Milli({t:Int64}, 'UTC'))"
        ).replace("{t:Int64}", str(sim.ts(step)))
        t = "pod_ip_lease"
        assert rows(a, q, t) == rows(b, q, t) and len(rows(a, q, t)) > 20
        # sampled RoCEv2 flows: the same QPs between the same IPs, same scaled bytes, same ports
        q = "SELECT src_ip, dst_ip, dest_qp, bytes, switch, in_port, out_port FROM $t WHERE dst_port = 4791"
        t = "flow_sample"
        assert rows(a, q, t) == rows(b, q, t) and len(rows(a, q, t)) > 0
    finally:
        store.client.command(f"DROP DATABASE IF EXISTS `{store.database}_dev`")
