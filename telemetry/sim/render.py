"""Device path: render what real devices would show at a simulated step, from the same records
the fast path produces, each in the format its railscope source reads with `--from`:
sysfs RDMA/netdev trees, `ethtool -S` text, an NVML fake spec (nvml.json) and a pod-resources List
per GPU server; SONiC COUNTERS_DB/APPL_DB dumps (sonic-db-dump layout) per switch; sFlow v5
datagrams (built by exporters/sflow/encode.py) in a pcap; `kubectl get -o json` lists; DataNode
clienttrace logs, `hdfs fsck -files -blocks -racks` output and the rack table.

Writes only under the output directory it is given; never touches a real /sys or cluster.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from telemetry.sim.engine import Simulation
from telemetry.sim.fabric import GPU_BUS, netdev, rdma_device
from telemetry.sim.hdfs import DN_PORT
from telemetry.times import from_ms

MAX_RENDER_NODES = 64
Rows = dict[str, list[dict[str, Any]]]


def iter_steps(sim: Simulation) -> Iterator[tuple[int, Rows, Rows]]:
    """(step, inventory records, that step's sample records) for every step in order, from one
    pass over `sim.batches()` on the step grid (undisturbed: the through-parsers path applies the
    scenario's collection timing to what its parsers read). Samples carry their step's time;
    sFlow samples and HDFS events fall anywhere inside the step [ts, ts + dt)."""
    it = sim.batches(disturbed=False)
    inventory: Rows = {}
    for b in next(it):
        inventory.setdefault(b.kind.name, []).extend(b.table.to_pylist())
    step_ms = sim.dt * 1000
    for batches in it:
        by_step: dict[int, Rows] = {}
        for b in batches:
            if not b.num_rows:
                continue
            ts = b.table.column("ts").cast(pa.int64()).to_numpy()
            steps = (ts - sim.start_ms) // step_ms
            for s in np.unique(steps):
                rows = b.table.filter(pa.array(steps == s)).to_pylist()
                by_step.setdefault(int(s), {}).setdefault(b.kind.name, []).extend(rows)
        for s in sorted(by_step):
            yield s, inventory, by_step[s]


def _rows_at(sim: Simulation, step: int) -> Rows:
    """Records of the chosen step (samples) plus every inventory record."""
    for s, inventory, rows in iter_steps(sim):
        if s == step:
            return {**inventory, **rows}
    return dict(next(iter_steps(sim))[1]) if sim.steps else {}


def render_devices(sim: Simulation, out: Path, step: int | None = None) -> dict[str, int]:
    """Everything real devices would show at one step (`railscope sim render`); the HDFS logs hold
    every transfer up to the step, as a DataNode's log would."""
    step = sim.steps - 1 if step is None else step
    if not 0 <= step < sim.steps:
        from telemetry.errors import UserError

        raise UserError(f"--step {step}: the run has steps 0..{sim.steps - 1}")
    rows = _rows_at(sim, step)
    end = from_ms(sim.ts(step) + sim.dt * 1000)
    hdfs = {
        "hdfs_transfer": [r for r in rows.get("hdfs_transfer", []) if r["ts"] < end],
        "hdfs_block_placement": [r for r in rows.get("hdfs_block_placement", []) if r["ts"] < end],
    }
    written = render_step(sim, out, step, rows, {**rows, **hdfs})
    from telemetry.sim.logs import render_logs

    written["logs"] = render_logs(sim, sim.broken_flows, out, sim.ts(step) + sim.dt * 1000)
    (out / "README.txt").write_text(
        f"railscope sim render: scenario {sim.scenario.name}, seed {sim.scenario.seed}, step {step} "
        f"({_iso(sim.ts(step))}).\nnodes/NODE: `railscope node --from nodes/NODE --node-name NODE` "
        "(sys/, ethtool/, nvml.json, podresources.json); switches: `railscope switch --from switches`; "
        "kubernetes: `railscope inventory --from kubernetes`; sflow/sflow.pcap: `railscope sflow --from "
        "sflow/sflow.pcap` (sFlow v5 datagrams to UDP 6343); logs: CRI pod logs and kernel log text "
        "up to the step (logs/pods, logs/nodes/NODE/kernel.log); hdfs: `railscope hdfs --from hdfs "
        "--topology topology.table` (clienttrace logs, fsck.txt).\n"
    )
    return written


def render_step(
    sim: Simulation, out: Path, step: int, rows: Rows, events: Rows, files: Files | None = None
) -> dict[str, int]:
    """Write one step's device files under `out`, overwriting the previous step's (`files`: the
    same object for every step of one tree). `rows` holds the step's samples and the inventory;
    `events` the HDFS transfers and block placements to log."""
    files = files or Files()
    at = sim.ts(step)
    written = {"sysfs": 0, "ethtool": 0, "nvml": 0, "sonic": 0, "kubectl": 0, "sflow": 0, "hdfs": 0}
    for node in {r["node"] for r in rows.get("nic_sample", [])}:
        if not (out / "nodes" / node / "sys" / "bus").exists():
            _pcie(out / "nodes" / node / "sys", sim.fabric.model)
    for r in rows.get("nic_sample", []):
        written["sysfs"] += _sysfs(files, out / "nodes" / r["node"], r)
        written["ethtool"] += _ethtool(files, out / "nodes" / r["node"] / "ethtool", r)
    gpus: dict[str, list[dict[str, Any]]] = {}
    for r in rows.get("gpu_sample", []):
        gpus.setdefault(r["node"], []).append(r)
    xids: dict[tuple[str, int], list[int]] = {}
    for r in rows.get("gpu_event", []):
        if r["event"] == "xid" and at <= _ms(r["ts"]) < at + sim.dt * 1000:
            xids.setdefault((r["node"], r["gpu"]), []).append(int(r["xid"]))
    for node, rs in gpus.items():
        written["nvml"] += _nvml(out / "nodes" / node, rs, xids)
    by_switch: dict[str, dict[str, Any]] = {}
    for r in rows.get("switch_port_sample", []):
        by_switch.setdefault(r["switch"], {"ports": [], "queues": []})["ports"].append(r)
    for r in rows.get("switch_queue_sample", []):
        by_switch.setdefault(r["switch"], {"ports": [], "queues": []})["queues"].append(r)
    lldp: dict[str, list[dict[str, Any]]] = {}
    for r in rows.get("lldp_link", []):
        lldp.setdefault(r["local_device"], []).append(r)
    for sw, d in by_switch.items():
        _write(out / "switches" / sw / "counters_db.json", _counters_db(d["ports"], d["queues"]))
        _write(out / "switches" / sw / "appl_db.json", _appl_db(d["ports"], lldp.get(sw, [])))
        written["sonic"] += 1
    written["kubectl"] += _kubectl(out / "kubernetes", at, rows)
    written["sflow"] += sflow_pcap(out / "sflow" / "sflow.pcap", rows.get("flow_sample", []))
    written["hdfs"] += _hdfs(
        out / "hdfs", events.get("hdfs_transfer", []), events.get("hdfs_block_placement", [])
    )
    end = from_ms(at + sim.dt * 1000)
    written["hdfs"] += _jmx(
        out / "hdfs",
        [r for r in rows.get("hdfs_transfer", []) if r["ts"] < end],
        sum(1 for r in rows.get("hdfs_block_placement", []) if r["ts"] < end),
    )
    _topology(out / "topology.table", rows.get("hdfs_transfer", []))
    return written


def _ms(v: Any) -> int:
    return int(v.timestamp() * 1000) if isinstance(v, datetime) else int(v)


def _write(p: Path, obj: Any) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    # compact: with an indent the json module encodes in Python, several times slower
    p.write_text(json.dumps(obj, sort_keys=True, separators=(",", ":")) + "\n")


class Files:
    """Writes device files, skipping those whose content is what this object last wrote there:
    between two steps most sysfs files (state, rate, ...) do not change. One per output tree."""

    def __init__(self) -> None:
        self.last: dict[str, str] = {}
        self.dirs: set[Path] = set()

    def put(self, p: Path, value: Any) -> None:
        text = f"{value}\n"
        key = str(p)
        if self.last.get(key) == text:
            return
        if p.parent not in self.dirs:
            p.parent.mkdir(parents=True, exist_ok=True)
            self.dirs.add(p.parent)
        p.write_text(text)
        self.last[key] = text


def _n(v: Any) -> int:
    return int(v or 0)


# Device counters rendered from a record: {device's counter name: record column}, None where
# the simulator has no such counter (the device shows 0).
Counters = dict[str, str | None]


def _rx_tx(name: str, column: str | None, directions: tuple[str, str] = ("rx", "tx")) -> Counters:
    """One counter in both directions: `name` takes the device's word for the direction (rx/tx,
    IN/OUT), `column` the record's (rx/tx)."""
    return {
        name.format(dev): column and column.format(rec)
        for dev, rec in zip(directions, ("rx", "tx"), strict=True)
    }


def _counters(r: dict[str, Any], table: Counters) -> dict[str, int]:
    return {name: _n(r[col]) if col else 0 for name, col in table.items()}


IB_PORT: Counters = {
    **_rx_tx("port_{}_data", "{}_bytes_total", ("rcv", "xmit")),
    **_rx_tx("port_{}_packets", "{}_packets_total", ("rcv", "xmit")),
    "port_rcv_errors": "rx_errors_total",
    "port_xmit_discards": "tx_discards_total",
    "link_downed": None,
    "symbol_error": None,
}
IB_HW: Counters = {
    "np_ecn_marked_roce_packets": "ecn_marked_packets_total",
    "np_cnp_sent": "cnp_sent_total",
    "rp_cnp_handled": "cnp_handled_total",
    "rp_cnp_ignored": "cnp_ignored_total",
    "out_of_sequence": None,
    "packet_seq_err": None,
    "local_ack_timeout_err": None,
    "out_of_buffer": None,
}


def _sysfs(files: Files, root: Path, r: dict[str, Any]) -> int:
    rail = int(r["device"].removeprefix("mlx5_"))
    dev = root / "sys" / "class" / "infiniband" / rdma_device(rail)
    port = dev / "ports" / "1"
    files.put(port / "state", "4: ACTIVE" if r["up"] else "1: DOWN")
    files.put(port / "rate", f"{int((r['rate_bytes_per_second'] or 0) * 8 / 1e9)} Gb/sec (4X NDR)")
    files.put(port / "link_layer", "Ethernet")
    counters = _counters(r, IB_PORT)
    for words in ("port_rcv_data", "port_xmit_data"):  # IB PMA data counters count 4-byte words
        counters[words] //= 4
    hw = _counters(r, IB_HW)
    for k, v in counters.items():
        files.put(port / "counters" / k, v)
    for k, v in hw.items():
        files.put(port / "hw_counters" / k, v)
    nd = r["netdev"] or netdev(rail)
    files.put(dev / "device" / "net" / nd / "dev_port", 0)
    stats = root / "sys" / "class" / "net" / nd / "statistics"
    for k, v in {
        "rx_bytes": r["rx_bytes_total"],
        "tx_bytes": r["tx_bytes_total"],
        "rx_packets": r["rx_packets_total"],
        "tx_packets": r["tx_packets_total"],
        "rx_errors": r["rx_errors_total"],
        "rx_dropped": 0,
    }.items():
        files.put(stats / k, _n(v))
    return 1


def _pcie(sys: Path, model: Any) -> None:
    """The server's PCIe tree as the kernel lays it out (devices/pci0000:HB/ROOT/SWITCH/DOWN/EP,
    with bus/pci/devices/* and class/infiniband/*/device links into it): each PCIe switch holds
    its GPUs and, where the server model has one there, a NIC. Written once per server."""
    import os

    gsw, nsw, numa = list(model["gpu_switch"]), list(model["nic_switch"]), list(model["numa"])
    bus = sys / "bus" / "pci" / "devices"
    bus.mkdir(parents=True, exist_ok=True)

    def device(switch: int, k: int, addr: str, vendor: str, cls: str, node: int) -> Path:
        up = 0x10 + 0x10 * switch  # the switch's upstream port: pcie_switch in gpu_nic_affinity
        hb = 0xF0 + switch
        d = (
            sys / "devices" / f"pci0000:{hb:02x}" / f"0000:{hb:02x}:01.0" / f"0000:{up:02x}:00.0"
            / f"0000:{up + 1:02x}:{k:02x}.0" / addr
        )  # fmt: skip
        d.mkdir(parents=True, exist_ok=True)
        for name, value in (("vendor", vendor), ("class", cls), ("numa_node", node)):
            (d / name).write_text(f"{value}\n")
        os.symlink(os.path.relpath(d, bus), bus / addr)
        return d

    for g, s in enumerate(gsw):
        device(s, g, f"0000:{GPU_BUS[g]:02x}:00.0", "0x10de", "0x030200", numa[g])
    for r, s in enumerate(nsw):
        node = numa[gsw.index(s)] if s in gsw else 0
        d = device(s, 0x10 + r, f"0000:{0xE0 + r:02x}:00.0", "0x15b3", "0x020000", node)
        ib = sys / "class" / "infiniband" / rdma_device(r)
        ib.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(d, ib), ib / "device")


ETHTOOL: Counters = {
    **_rx_tx("{}_prio3_bytes", "{}_bytes_total"),
    **_rx_tx("{}_prio3_packets", "{}_packets_total"),
    **_rx_tx("{}_prio3_pause", "pfc_{}_pause_total"),
    "rx_prio3_pause_duration": "pfc_pause_duration_us_total",
    "rx_discards_phy": None,
    "tx_pause_storm_warning_events": "pause_storm_events_total",
    "tx_pause_storm_error_events": None,
    "outbound_pci_stalled_rd": "pci_stalled_total",
    "outbound_pci_stalled_wr": None,
}
_IN_OUT = ("IN", "OUT")
SAI_PORT: Counters = {
    **_rx_tx("SAI_PORT_STAT_IF_{}_OCTETS", "{}_bytes_total", _IN_OUT),
    **_rx_tx("SAI_PORT_STAT_IF_{}_UCAST_PKTS", "{}_packets_total", _IN_OUT),
    **_rx_tx("SAI_PORT_STAT_IF_{}_NON_UCAST_PKTS", None, _IN_OUT),
    **_rx_tx("SAI_PORT_STAT_IF_{}_DISCARDS", "{}_discards_total", _IN_OUT),
    **_rx_tx("SAI_PORT_STAT_IF_{}_ERRORS", "{}_errors_total", _IN_OUT),
}
SAI_QUEUE: Counters = {
    "SAI_QUEUE_STAT_PACKETS": "tx_packets_total",
    "SAI_QUEUE_STAT_BYTES": "tx_bytes_total",
    "SAI_QUEUE_STAT_DROPPED_PACKETS": "dropped_packets_total",
    "SAI_QUEUE_STAT_DROPPED_BYTES": None,
    "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS": "ecn_marked_packets_total",
    "SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES": "watermark_bytes",
}


def _ethtool(files: Files, d: Path, r: dict[str, Any]) -> int:
    lines = ["NIC statistics:"]
    lines += [f"     {k}: {v}" for k, v in _counters(r, ETHTOOL).items()]
    files.put(d / f"{r['netdev']}.txt", "\n".join(lines))
    return 1


def _oid(kind: int, i: int) -> str:
    return f"oid:0x{kind:x}{i:012x}"


def _counters_db(ports: list[dict[str, Any]], queues: list[dict[str, Any]]) -> dict[str, Any]:
    """sonic-db-dump layout: {key: {"type": "hash", "value": {field: value}}}."""
    db: dict[str, Any] = {}
    names: dict[str, str] = {}
    for i, p in enumerate(sorted(ports, key=lambda r: int(r["port"].removeprefix("Ethernet")))):
        oid = _oid(0x1000, i + 1)
        names[p["port"]] = oid
        v = _counters(p, SAI_PORT)
        for prio in range(8):
            on3 = prio == 3
            v[f"SAI_PORT_STAT_PFC_{prio}_RX_PKTS"] = _n(p["pfc_rx_pause_total"]) if on3 else 0
            v[f"SAI_PORT_STAT_PFC_{prio}_TX_PKTS"] = _n(p["pfc_tx_pause_total"]) if on3 else 0
            v[f"SAI_PORT_STAT_PFC_{prio}_RX_PAUSE_DURATION_US"] = (
                _n(p["pfc_rx_pause_duration_us_total"]) if on3 else 0
            )
        db[f"COUNTERS:{oid}"] = {"type": "hash", "value": {k: str(x) for k, x in v.items()}}
        # what SONiC's port_rates.lua keeps (bytes/s over the poll interval)
        rates = {"RX_BPS": p["rx_bytes_per_second"], "TX_BPS": p["tx_bytes_per_second"]}
        db[f"RATES:{oid}"] = {
            "type": "hash",
            "value": {k: repr(float(x)) for k, x in rates.items() if x is not None},
        }
    db["COUNTERS_PORT_NAME_MAP"] = {"type": "hash", "value": names}
    qnames: dict[str, str] = {}
    qtypes: dict[str, str] = {}
    for i, q in enumerate(
        sorted(queues, key=lambda r: (int(r["port"].removeprefix("Ethernet")), r["queue"]))
    ):
        oid = _oid(0x15000, i + 1)
        qnames[f"{q['port']}:{q['queue']}"] = oid
        qtypes[oid] = "SAI_QUEUE_TYPE_UNICAST"
        v = _counters(q, SAI_QUEUE)
        db[f"COUNTERS:{oid}"] = {"type": "hash", "value": {k: str(x) for k, x in v.items()}}
    db["COUNTERS_QUEUE_NAME_MAP"] = {"type": "hash", "value": qnames}
    db["COUNTERS_QUEUE_TYPE_MAP"] = {"type": "hash", "value": qtypes}
    return db


def _appl_db(ports: list[dict[str, Any]], lldp: list[dict[str, Any]]) -> dict[str, Any]:
    """APPL_DB: PORT_TABLE (oper status, speed in Mb/s) and LLDP_ENTRY_TABLE (neighbours)."""
    db: dict[str, Any] = {}
    for p in ports:
        v = {
            "oper_status": "up" if p["up"] else "down",
            "admin_status": "up",
            "speed": str(int((p["speed_bps"] or 0) / 1e6)),
            "mtu": "9100",
        }
        db[f"PORT_TABLE:{p['port']}"] = {"type": "hash", "value": v}
    for r in lldp:
        db[f"LLDP_ENTRY_TABLE:{r['local_port']}"] = {
            "type": "hash",
            "value": {
                "lldp_rem_sys_name": r["remote_device"],
                "lldp_rem_port_id": r["remote_port"],
                "lldp_rem_port_id_subtype": "5",
                "lldp_rem_chassis_id": r["remote_chassis_id"],
            },
        }
    return db


def _hdfs(d: Path, transfers: list[dict[str, Any]], placements: list[dict[str, Any]]) -> int:
    """One clienttrace log per DataNode (Hadoop 3 line format, UTC) and the fsck report of the
    blocks written (`hdfs fsck PATH -files -blocks -racks`). Files of a previous step are
    replaced: each holds what the DataNodes logged / fsck listed since then."""
    if d.exists():
        import shutil

        shutil.rmtree(d)
    d.mkdir(parents=True)
    logs: dict[str, list[str]] = {}
    for r in sorted(transfers, key=lambda r: r["ts"]):
        t = r["ts"].astimezone(UTC)
        stamp = t.strftime("%Y-%m-%d %H:%M:%S") + f",{t.microsecond // 1000:03d}"
        logs.setdefault(r["datanode"], []).append(
            f"{stamp} INFO org.apache.hadoop.hdfs.server.datanode.DataNode.clienttrace: src: /{r['src']}, "
            f"dest: /{r['dest']}, bytes: {r['bytes']}, op: {r['op']}, cliID: {r['client_id']}, offset: 0, "
            f"srvID: {r['datanode']}, blockid: {r['block_id']}, duration(ns): {int((r['duration_seconds'] or 0) * 1e9)}"
        )
    for dn, lines in logs.items():
        (d / dn).mkdir(parents=True, exist_ok=True)
        (d / dn / "clienttrace.log").write_text("\n".join(lines) + "\n")
    if placements:
        (d / "fsck.txt").write_text(_fsck(placements))
    return len(logs) + bool(placements)


def _fsck(placements: list[dict[str, Any]]) -> str:
    lines = []
    for r in sorted(placements, key=lambda r: r["path"]):
        locs = ", ".join(json.loads(r["locations"]))
        lines += [
            f"{r['path']} 268435456 bytes, replicated: replication={r['expected_replicas']}, 1 block(s):  OK",
            f"0. {r['block_id']} len=268435456 Live_repl={r['replicas']} [{locs}]",
            "",
        ]
    lines += ["Status: HEALTHY", f" Total files:\t{len(placements)}", ""]
    return "\n".join(lines) + "\n"


def _jmx(d: Path, transfers: list[dict[str, Any]], blocks: int) -> int:
    """Each DataNode's /jmx (DataNodeActivity counters since it started: the transfers it logged
    so far) and the NameNode's (blocks and files written so far, HA state). Only what the
    simulator models: a bean attribute it does not model is absent, as on a DataNode without it."""
    activity: dict[str, dict[str, int]] = {}
    for r in transfers:
        a = activity.setdefault(
            r["datanode"], {"BytesRead": 0, "BlocksRead": 0, "BytesWritten": 0, "BlocksWritten": 0}
        )
        kind = "Read" if r["op"] == "HDFS_READ" else "Written"
        a[f"Bytes{kind}"] += int(r["bytes"])
        a[f"Blocks{kind}"] += 1
    for dn, a in sorted(activity.items()):
        bean = {
            "name": f"Hadoop:service=DataNode,name=DataNodeActivity-{dn}-{DN_PORT}",
            "modelerType": f"DataNodeActivity-{dn}-{DN_PORT}",
            "tag.Context": "dfs",
            "tag.Hostname": dn,
            **a,
        }
        _write(d / dn / "jmx.json", {"beans": [bean]})
    fs = {
        "name": "Hadoop:service=NameNode,name=FSNamesystem",
        "modelerType": "FSNamesystem",
        "tag.Context": "dfs",
        "tag.HAState": "active",
        "BlocksTotal": blocks,
        "FilesTotal": blocks,  # one block per checkpoint shard
    }
    status = {
        "name": "Hadoop:service=NameNode,name=NameNodeStatus",
        "modelerType": "org.apache.hadoop.hdfs.server.namenode.NameNode",
        "State": "active",
        "HostAndPort": "namenode:8020",
    }
    _write(d / "namenode" / "jmx.json", {"beans": [fs, status]})
    return len(activity) + 1


def _topology(p: Path, transfers: list[dict[str, Any]]) -> None:
    """The rack table (`HOST /IDC/RACK`, what net.topology.table.file.name points at): DataNodes
    by address and by name (JMX names them by host name), clients by address."""
    table = {}
    for r in transfers:
        table[r["src"].rsplit(":", 1)[0]] = r["src_rack"]
        table[r["dest"].rsplit(":", 1)[0]] = r["dest_rack"]
        table[r["datanode"]] = r["src_rack"] if r["op"] == "HDFS_READ" else r["dest_rack"]
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("".join(f"{h} {rack}\n" for h, rack in sorted(table.items())))


def _nvml(root: Path, gpus: list[dict[str, Any]], xids: dict[tuple[str, int], list[int]]) -> int:
    """The node's GPUs as NVML would answer (the node source's fake spec, raw NVML units), and a
    kubelet pod-resources List naming the pod that holds each GPU."""
    from exporters.node.gpu import load_fields

    fields = load_fields()
    spec = []
    pods: dict[tuple[str, str], list[str]] = {}
    for r in sorted(gpus, key=lambda r: r["gpu"]):
        g: dict[str, Any] = {"uuid": r["uuid"], "model": r["model"], "pci_bus_id": r["pci_bus_id"]}
        xid = xids.get((r["node"], r["gpu"]))
        if not r["up"]:
            # with an XID this step it fell off the bus during this scrape (NVML delivers the XID
            # to the events registered while it answered); after that it is simply lost
            g["lost_after_reads" if xid else "lost"] = 0 if xid else True
        g["fields"] = {f.name: r[f.name] / f.scale for f in fields if r.get(f.name) is not None}
        g["unsupported"] = [f.name for f in fields if r.get(f.name) is None]
        if xid:
            g["xid"] = xid
        spec.append(g)
        if r["pod"]:
            pods.setdefault((r["namespace"], r["pod"]), []).append(r["uuid"])
    _write(root / "nvml.json", {"gpus": spec})
    _write(
        root / "podresources.json",
        {
            "podResources": [
                {
                    "name": pod,
                    "namespace": ns,
                    "containers": [
                        {
                            "name": "worker",
                            "devices": [{"resourceName": "nvidia.com/gpu", "deviceIds": ids}],
                        }
                    ],
                }
                for (ns, pod), ids in sorted(pods.items())
            ]
        },
    )
    return 1


# --- sFlow v5 --------------------------------------------------------------------------------
SAMPLES_PER_DATAGRAM = 6  # what fits a 1500-byte datagram with 128-byte headers
COLLECTOR_IP = "10.254.255.1"


def ifindex(port: str) -> int:
    return int(port.removeprefix("Ethernet")) // 8 + 1 if port.startswith("Ethernet") else 0


def sflow_pcap(path: Path, samples: list[dict[str, Any]]) -> int:
    """sFlow v5 datagrams (flow samples: the first 128 bytes of the sampled RoCEv2 frame +
    extended switch), a few samples each, from each agent to UDP 6343, as a classic pcap
    (`tcpdump -r` reads it). Built by the same encoder the sFlow tests use."""
    from exporters.sflow import encode
    from exporters.sflow.pcap import write_pcap

    path.parent.mkdir(parents=True, exist_ok=True)
    by_agent: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(samples, key=lambda r: (r["agent"], r["ts"])):
        by_agent.setdefault(r["agent"], []).append(r)
    frames: list[tuple[float, bytes]] = []
    for agent, rs in by_agent.items():
        for k in range(0, len(rs), SAMPLES_PER_DATAGRAM):
            chunk = rs[k : k + SAMPLES_PER_DATAGRAM]
            encoded = []
            for i, r in enumerate(chunk, start=k + 1):
                frame = encode.rocev2_frame(
                    r["src_ip"], r["dst_ip"], r["dest_qp"], psn=r["psn"], opcode=r["bth_opcode"],
                    payload=r["frame_bytes"] - 14 - 20 - 8 - 12 - 4, sport=r["src_port"],
                    dscp=r["dscp"], ecn=r["ecn"],
                )  # fmt: skip
                inp, outp = ifindex(r["in_port"]), ifindex(r["out_port"])
                encoded.append(
                    encode.flow_sample(
                        frame[:128],
                        seq=i,
                        source_index=inp,
                        rate=r["sampling_rate"],
                        pool=i * r["sampling_rate"],
                        input=inp,
                        output=outp,
                        frame_length=r["frame_bytes"],
                        vlan=r["vlan"],
                    )
                )
            t = chunk[-1]["ts"].timestamp()
            dgram = encode.datagram(
                encoded,
                agent=agent,
                seq=k // SAMPLES_PER_DATAGRAM + 1,
                uptime_ms=int(t * 1000) & 0xFFFFFFFF,
            )
            frames.append((t, encode.udp_frame(dgram, src=agent, dst=COLLECTOR_IP)))
    write_pcap(path, sorted(frames, key=lambda x: x[0]))
    return 1


def _iso(v: Any) -> str:
    if isinstance(v, datetime):
        return v.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return datetime.fromtimestamp(int(v) / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _kubectl(d: Path, at_ms: int, rows: dict[str, list[dict[str, Any]]]) -> int:
    """Objects as `kubectl get ... -o json` lists, as they stand at the rendered step."""
    at = datetime.fromtimestamp(at_ms / 1000, UTC)

    def live(r: dict[str, Any]) -> bool:
        return r["valid_from"] <= at and (r["valid_to"] is None or r["valid_to"] > at)

    def lst(items: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "List",
            "metadata": {"resourceVersion": ""},
            "items": items,
        }

    nodes = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": r["node"],
                "labels": json.loads(r["labels"]),
                "creationTimestamp": _iso(r["valid_from"]),
            },
            "status": {
                "allocatable": {"nvidia.com/gpu": str(r["gpus"])},
                "capacity": {"nvidia.com/gpu": str(r["gpus"])},
            },
        }
        for r in rows.get("node", [])
        if live(r)
    ]
    ips: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows.get("pod_ip_lease", []):
        if live(r):
            ips.setdefault((r["namespace"], r["pod"]), []).append(r)
    env: dict[tuple[str, str], list[dict[str, str]]] = {}
    for r in rows.get("nccl_setting", []):  # the pod spec's env: what the inventory reads back
        env.setdefault((r["namespace"], r["pod"]), []).append(
            {"name": r["name"], "value": r["value"]}
        )
    pods = []
    for r in rows.get("pod", []):
        # a finished pod stays listed (phase Succeeded, no IPs) until it is garbage-collected
        if r["valid_from"] > at:
            continue
        ended = not live(r)
        leases = sorted(ips.get((r["namespace"], r["pod"]), []), key=lambda x: x["interface"])
        status = [
            {
                "name": "cbr0" if x["primary"] else f"{r['namespace']}/{x['network']}",
                "interface": x["interface"],
                "ips": [x["ip"]],
                "mac": x["mac"],
                "default": bool(x["primary"]),
                **(
                    {
                        "device-info": {
                            "type": "pci",
                            "version": "1.1.0",
                            "pci": {"pci-address": x["pci_address"]},
                        }
                    }
                    if x["pci_address"]
                    else {}
                ),
            }
            for x in leases
        ]
        primary = next((x["ip"] for x in leases if x["primary"]), "")
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": r["pod"],
                    "namespace": r["namespace"],
                    "uid": r["uid"],
                    "creationTimestamp": _iso(r["valid_from"]),
                    "labels": {"volcano.sh/job-name": r["job"]} if r["job"] else {},
                    "annotations": {"k8s.v1.cni.cncf.io/network-status": json.dumps(status)},
                },
                "spec": {
                    "nodeName": r["node"],
                    "containers": [
                        {
                            "name": "worker",
                            "resources": {"limits": {"nvidia.com/gpu": "8"}},
                            "env": env.get((r["namespace"], r["pod"]), []),
                        }
                    ],
                },
                "status": {
                    "phase": "Succeeded" if ended else "Running",
                    "podIP": primary,
                    "podIPs": [{"ip": primary}] if primary else [],
                },
            }
        )
    hns: dict[str, dict[str, Any]] = {}
    for r in rows.get("hypernode", []):
        if not live(r):
            continue
        h = hns.setdefault(
            r["hypernode"],
            {
                "apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode",
                "metadata": {"name": r["hypernode"]},
                "spec": {"tier": r["tier"], "tierName": r["tier_name"], "members": []},
            },
        )
        key = "exactMatch" if r["selector"] == "exactMatch" else "regexMatch"
        field = "name" if key == "exactMatch" else "pattern"
        h["spec"]["members"].append(
            {"type": r["member_type"], "selector": {key: {field: r["member"]}}}
        )
    jobs = []
    for r in rows.get("job", []):
        if not live(r):
            continue
        spec: dict[str, Any] = {
            "queue": r["queue"],
            "minAvailable": r["replicas"],
            "tasks": [{"name": "worker", "replicas": r["replicas"]}],
        }
        if r["topology_mode"]:
            spec["networkTopology"] = {
                "mode": r["topology_mode"],
                "highestTierAllowed": r["highest_tier_allowed"],
            }
        jobs.append(
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {
                    "name": r["job"],
                    "namespace": r["namespace"],
                    "creationTimestamp": _iso(r["valid_from"]),
                    "annotations": {"volcano.sh/job-allocated-hypernode": r["allocated_hypernode"]},
                },
                "spec": spec,
                "status": {"state": {"phase": "Running"}},
            }
        )
    for name, items in (
        ("nodes", nodes),
        ("pods", pods),
        ("hypernodes", list(hns.values())),
        ("vcjobs", jobs),
    ):
        _write(d / f"{name}.json", lst(items))
    return 4


__all__ = [
    "MAX_RENDER_NODES",
    "Files",
    "ifindex",
    "iter_steps",
    "render_devices",
    "render_step",
    "sflow_pcap",
]
