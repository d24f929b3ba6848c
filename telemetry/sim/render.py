"""Device path: render what real devices would show at one simulated step, from the same records
the fast path produces — sysfs RDMA/netdev trees and `ethtool -S` text per GPU server, SONiC
COUNTERS_DB dumps (sonic-db-dump layout) per switch, and `kubectl get -o json` lists.

Writes only under the output directory it is given; never touches a real /sys or cluster.
"""

from __future__ import annotations

import json
import struct
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from telemetry.sim.engine import Simulation
from telemetry.sim.fabric import netdev, rdma_device

MAX_RENDER_NODES = 64


def _rows_at(sim: Simulation, step: int) -> dict[str, list[dict[str, Any]]]:
    """Records of the chosen step (samples) plus every inventory record."""
    want = sim.ts(step)
    out: dict[str, list[dict[str, Any]]] = {}
    for i, batches in enumerate(sim.batches()):
        for b in batches:
            if i == 0:
                out.setdefault(b.kind.name, []).extend(b.table.to_pylist())
                continue
            ts = b.table.column("ts").cast(pa.int64()).to_numpy()
            # samples carry the step's time; sFlow samples fall anywhere inside the step
            hit = (
                (ts >= want) & (ts < want + sim.dt * 1000)
                if b.kind.name == "flow_sample"
                else ts == want
            )
            if hit.any():
                out.setdefault(b.kind.name, []).extend(b.table.filter(pa.array(hit)).to_pylist())
        if i > 0 and sim.ts(min(sim.steps, i * sim.chunk_steps)) > want:
            break
    return out


def render_devices(sim: Simulation, out: Path, step: int | None = None) -> dict[str, int]:
    step = sim.steps - 1 if step is None else step
    if not 0 <= step < sim.steps:
        from telemetry.errors import UserError

        raise UserError(f"--step {step}: the run has steps 0..{sim.steps - 1}")
    rows = _rows_at(sim, step)
    written = {"sysfs": 0, "ethtool": 0, "sonic": 0, "kubectl": 0, "sflow": 0, "hdfs": 0}
    for r in rows.get("nic_sample", []):
        written["sysfs"] += _sysfs(out / "nodes" / r["node"], r)
        written["ethtool"] += _ethtool(out / "nodes" / r["node"] / "ethtool", r)
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
    written["kubectl"] += _kubectl(out / "kubernetes", sim.ts(step), rows)
    written["sflow"] += sflow_pcap(out / "sflow" / "sflow.pcap", rows.get("flow_sample", []))
    written["hdfs"] += _hdfs(
        out / "hdfs",
        sim,
        [r for r in rows.get("hdfs_transfer", []) if r["ts"] <= _dt(sim.ts(step))],
    )
    (out / "README.txt").write_text(
        f"railscope sim render: scenario {sim.scenario.name}, seed {sim.scenario.seed}, step {step} "
        f"({_iso(sim.ts(step))}).\nnodes/NODE/{{sys,ethtool}}: `railscope node --from nodes/NODE`; "
        "switches/SW/counters_db.json: `railscope switch --from switches`; kubernetes/*.json: kubectl -o json lists; "
        "sflow/sflow.pcap: sFlow v5 datagrams to UDP 6343; hdfs/DATANODE.log: clienttrace lines (UTC), "
        "hdfs/topology.table: HOST /IDC/RACK.\n"
    )
    return written


def _write(p: Path, obj: Any) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n")


def _put(p: Path, value: Any) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(f"{value}\n")


def _n(v: Any) -> int:
    return int(v or 0)


def _sysfs(root: Path, r: dict[str, Any]) -> int:
    rail = int(r["device"].removeprefix("mlx5_"))
    dev = root / "sys" / "class" / "infiniband" / rdma_device(rail)
    port = dev / "ports" / "1"
    _put(port / "state", "4: ACTIVE" if r["up"] else "1: DOWN")
    _put(port / "rate", f"{int((r['rate_bytes_per_second'] or 0) * 8 / 1e9)} Gb/sec (4X NDR)")
    _put(port / "link_layer", "Ethernet")
    counters = {  # IB PMA data counters count 4-byte words
        "port_rcv_data": _n(r["rx_bytes_total"]) // 4,
        "port_xmit_data": _n(r["tx_bytes_total"]) // 4,
        "port_rcv_packets": _n(r["rx_packets_total"]),
        "port_xmit_packets": _n(r["tx_packets_total"]),
        "port_rcv_errors": _n(r["rx_errors_total"]),
        "port_xmit_discards": _n(r["tx_discards_total"]),
        "link_downed": 0,
        "symbol_error": 0,
    }
    hw = {
        "np_ecn_marked_roce_packets": _n(r["ecn_marked_packets_total"]),
        "np_cnp_sent": _n(r["cnp_sent_total"]),
        "rp_cnp_handled": _n(r["cnp_handled_total"]),
        "rp_cnp_ignored": _n(r["cnp_ignored_total"]),
        "out_of_sequence": 0,
        "packet_seq_err": 0,
        "local_ack_timeout_err": 0,
        "out_of_buffer": 0,
    }
    for k, v in counters.items():
        _put(port / "counters" / k, v)
    for k, v in hw.items():
        _put(port / "hw_counters" / k, v)
    nd = r["netdev"] or netdev(rail)
    _put(dev / "device" / "net" / nd / "dev_port", 0)
    stats = root / "sys" / "class" / "net" / nd / "statistics"
    for k, v in {
        "rx_bytes": r["rx_bytes_total"],
        "tx_bytes": r["tx_bytes_total"],
        "rx_packets": r["rx_packets_total"],
        "tx_packets": r["tx_packets_total"],
        "rx_errors": r["rx_errors_total"],
        "rx_dropped": 0,
    }.items():
        _put(stats / k, _n(v))
    return 1


def _ethtool(d: Path, r: dict[str, Any]) -> int:
    lines = ["NIC statistics:"]
    vals = {
        "rx_prio3_bytes": _n(r["rx_bytes_total"]),
        "tx_prio3_bytes": _n(r["tx_bytes_total"]),
        "rx_prio3_packets": _n(r["rx_packets_total"]),
        "tx_prio3_packets": _n(r["tx_packets_total"]),
        "rx_prio3_pause": _n(r["pfc_rx_pause_total"]),
        "tx_prio3_pause": _n(r["pfc_tx_pause_total"]),
        "rx_prio3_pause_duration": _n(r["pfc_pause_duration_us_total"]),
        "rx_discards_phy": 0,
        "tx_pause_storm_warning_events": _n(r["pause_storm_events_total"]),
        "tx_pause_storm_error_events": 0,
        "outbound_pci_stalled_rd": _n(r["pci_stalled_total"]),
        "outbound_pci_stalled_wr": 0,
    }
    lines += [f"     {k}: {v}" for k, v in vals.items()]
    _put(d / f"{r['netdev']}.txt", "\n".join(lines))
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
        v = {
            "SAI_PORT_STAT_IF_IN_OCTETS": _n(p["rx_bytes_total"]),
            "SAI_PORT_STAT_IF_OUT_OCTETS": _n(p["tx_bytes_total"]),
            "SAI_PORT_STAT_IF_IN_UCAST_PKTS": _n(p["rx_packets_total"]),
            "SAI_PORT_STAT_IF_IN_NON_UCAST_PKTS": 0,
            "SAI_PORT_STAT_IF_OUT_UCAST_PKTS": _n(p["tx_packets_total"]),
            "SAI_PORT_STAT_IF_OUT_NON_UCAST_PKTS": 0,
            "SAI_PORT_STAT_IF_IN_DISCARDS": _n(p["rx_discards_total"]),
            "SAI_PORT_STAT_IF_OUT_DISCARDS": _n(p["tx_discards_total"]),
            "SAI_PORT_STAT_IF_IN_ERRORS": _n(p["rx_errors_total"]),
            "SAI_PORT_STAT_IF_OUT_ERRORS": _n(p["tx_errors_total"]),
        }
        for prio in range(8):
            on3 = prio == 3
            v[f"SAI_PORT_STAT_PFC_{prio}_RX_PKTS"] = _n(p["pfc_rx_pause_total"]) if on3 else 0
            v[f"SAI_PORT_STAT_PFC_{prio}_TX_PKTS"] = _n(p["pfc_tx_pause_total"]) if on3 else 0
            v[f"SAI_PORT_STAT_PFC_{prio}_RX_PAUSE_DURATION_US"] = (
                _n(p["pfc_rx_pause_duration_us_total"]) if on3 else 0
            )
        db[f"COUNTERS:{oid}"] = {"type": "hash", "value": {k: str(x) for k, x in v.items()}}
    db["COUNTERS_PORT_NAME_MAP"] = {"type": "hash", "value": names}
    qnames: dict[str, str] = {}
    qtypes: dict[str, str] = {}
    for i, q in enumerate(
        sorted(queues, key=lambda r: (int(r["port"].removeprefix("Ethernet")), r["queue"]))
    ):
        oid = _oid(0x15000, i + 1)
        qnames[f"{q['port']}:{q['queue']}"] = oid
        qtypes[oid] = "SAI_QUEUE_TYPE_UNICAST"
        v = {
            "SAI_QUEUE_STAT_PACKETS": _n(q["tx_packets_total"]),
            "SAI_QUEUE_STAT_BYTES": _n(q["tx_bytes_total"]),
            "SAI_QUEUE_STAT_DROPPED_PACKETS": _n(q["dropped_packets_total"]),
            "SAI_QUEUE_STAT_DROPPED_BYTES": 0,
            "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS": _n(q["ecn_marked_packets_total"]),
            "SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES": int(q["watermark_bytes"] or 0),
        }
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


def _dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def _hdfs(d: Path, sim: Simulation, transfers: list[dict[str, Any]]) -> int:
    """One clienttrace log per DataNode (Hadoop 3 line format, UTC) and the rack table."""
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
    table = {}
    for r in transfers:
        table[r["src"].rsplit(":", 1)[0]] = r["src_rack"]
        table[r["dest"].rsplit(":", 1)[0]] = r["dest_rack"]
    d.mkdir(parents=True, exist_ok=True)
    (d / "topology.table").write_text("".join(f"{h} {rack}\n" for h, rack in sorted(table.items())))
    return len(logs) + 1


# --- sFlow v5 --------------------------------------------------------------------------------
def _ip4(a: str) -> bytes:
    return bytes(int(x) for x in a.split("."))


def _csum(b: bytes) -> int:
    s = sum(struct.unpack(f">{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _ipv4_udp(src: str, dst: str, sport: int, dport: int, payload_len: int, tos: int = 0) -> bytes:
    ip = struct.pack(
        ">BBHHHBBH4s4s", 0x45, tos, 20 + 8 + payload_len, 0, 0x4000, 64, 17, 0, _ip4(src), _ip4(dst)
    )
    ip = ip[:10] + struct.pack(">H", _csum(ip)) + ip[12:]
    return ip + struct.pack(">HHHH", sport, dport, 8 + payload_len, 0)


def _roce_header(r: dict[str, Any]) -> bytes:
    """The first 128 bytes of the sampled RoCEv2 frame: Ethernet, IPv4, UDP 4791, BTH, RETH."""
    payload = r["frame_bytes"] - 14 - 20 - 8
    eth = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00"
    l3 = _ipv4_udp(
        r["src_ip"], r["dst_ip"], r["src_port"], r["dst_port"], payload, (r["dscp"] << 2) | r["ecn"]
    )
    bth = struct.pack(
        ">BBHI I", r["bth_opcode"], 0x40, 0xFFFF, r["dest_qp"] & 0xFFFFFF, r["psn"] & 0xFFFFFF
    )
    return (eth + l3 + bth + bytes(16)).ljust(128, b"\0")


def _ifindex(port: str) -> int:
    return int(port.removeprefix("Ethernet")) // 8 + 1 if port.startswith("Ethernet") else 0


def _flow_sample(seq: int, r: dict[str, Any]) -> bytes:
    hdr = _roce_header(r)
    raw = struct.pack(">IIII", 1, r["frame_bytes"], 4, len(hdr)) + hdr
    ext_switch = struct.pack(">IIII", r["vlan"], 3, r["vlan"], 3)
    recs = (
        struct.pack(">II", 1, len(raw))
        + raw
        + struct.pack(">II", 1001, len(ext_switch))
        + ext_switch
    )
    inp, outp = _ifindex(r["in_port"]), _ifindex(r["out_port"])
    body = (
        struct.pack(
            ">IIIIIIII", seq, inp, r["sampling_rate"], seq * r["sampling_rate"], 0, inp, outp, 2
        )
        + recs
    )
    return struct.pack(">II", 1, len(body)) + body


def sflow_pcap(path: Path, samples: list[dict[str, Any]], collector: str = "10.254.255.1") -> int:
    """sFlow v5 datagrams (flow samples: raw header + extended switch), a few samples each, from
    each agent to UDP 6343, as a classic pcap (Ethernet link type) `tcpdump -r` reads."""
    path.parent.mkdir(parents=True, exist_ok=True)
    by_agent: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(samples, key=lambda r: (r["agent"], r["ts"])):
        by_agent.setdefault(r["agent"], []).append(r)
    frames: list[tuple[float, bytes]] = []
    for agent, rs in by_agent.items():
        for k in range(0, len(rs), 6):
            chunk = rs[k : k + 6]
            seq = k // 6 + 1
            samples_b = b"".join(_flow_sample(k + i + 1, r) for i, r in enumerate(chunk))
            t = chunk[-1]["ts"].timestamp()
            dgram = (
                struct.pack(
                    ">II4sIIII", 5, 1, _ip4(agent), 0, seq, int(t * 1000) & 0xFFFFFFFF, len(chunk)
                )
                + samples_b
            )
            eth = b"\x02\x00\x00\x00\xff\x01" + b"\x02\x00\x00\x00\xff\x02" + b"\x08\x00"
            frames.append((t, eth + _ipv4_udp(agent, collector, 6343, 6343, len(dgram)) + dgram))
    with path.open("wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for t, fr in sorted(frames, key=lambda x: x[0]):
            f.write(struct.pack("<IIII", int(t), int((t % 1) * 1e6), len(fr), len(fr)))
            f.write(fr)
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
    pods = []
    for r in rows.get("pod", []):
        if not live(r):
            continue
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
                        {"name": "worker", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
                    ],
                },
                "status": {
                    "phase": r["phase"],
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


__all__ = ["MAX_RENDER_NODES", "render_devices"]
