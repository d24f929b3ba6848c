"""collective_algorithm_underperforms, low_flow_entropy and the receive side of
gpu_without_direct_nic on the real embedded store: each fires on its condition naming the setting
behind it, and stays quiet where the condition does not hold (a job slowed by a fault elsewhere,
a job whose pairs spread over as many flows as the ECMP group is wide)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from telemetry.correlate.detectors.nccl import collective_algorithm_underperforms, low_flow_entropy
from telemetry.correlate.detectors.placement import gpu_without_direct_nic
from telemetry.correlate.registry import Context, Window
from telemetry.correlate.thresholds import default_thresholds
from telemetry.records import (
    ATTRIBUTED_FLOW,
    COLLECTIVE_SAMPLE,
    FINDING,
    FLOW_SAMPLE,
    GPU_NIC_AFFINITY,
    INCIDENT,
    LLDP_LINK,
    NCCL_SETTING,
    POD,
    SWITCH_PORT_SAMPLE,
)
from telemetry.store import Store

END = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
START = END - timedelta(seconds=60)


def ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def ctx(store: Store, seconds: int = 60) -> Context:
    return Context(store, Window(END - timedelta(seconds=seconds), END), default_thresholds(), "c")


def collectives(
    job: str, algorithm: str, protocol: str, gbs: float, *, ranks: int = 16, slow: float = 1.0
) -> list[dict[str, Any]]:
    """One AllReduce of 1 GiB every 5 s for 11 minutes on `ranks` ranks over 2 nodes at `gbs`
    bus bandwidth, times `slow` within the judged window."""
    out = []
    t, sn = END - timedelta(seconds=660), 0
    while t < END:
        bw = gbs * (slow if t >= START else 1.0)
        out += [
            {"ts": ms(t), "cluster": "c", "node": f"{job}-n{r * 2 // ranks}", "namespace": "team",
             "pod": f"{job}-{r * 2 // ranks}", "job": job, "comm_id": f"0x{job}",
             "collective": "AllReduce", "msg_size_bucket": "1GiB", "rank": r, "gpu": str(r % 8),
             "pid": 100 + r, "n_ranks": ranks, "n_nodes": 2, "coll_sn": sn,
             "msg_size_bytes": 1 << 30, "exec_time_seconds": (1 << 30) / (bw * 1e9 / 1.875),
             "algo_bandwidth_gbs": bw / 1.875, "bus_bandwidth_gbs": bw,
             "algorithm": algorithm, "protocol": protocol, "format_version": "v4.2"}
            for r in range(ranks)
        ]  # fmt: skip
        sn, t = sn + 1, t + timedelta(seconds=5)
    return out


def setting(job: str, name: str, value: str, pod: int = 0) -> dict[str, Any]:
    t = ms(END - timedelta(hours=1))
    return {"cluster": "c", "namespace": "team", "pod": f"{job}-{pod}", "container": "worker",
            "name": name, "value": value, "source": "value", "ref": "", "job": job,
            "valid_from": t, "updated_at": t}  # fmt: skip


def test_forced_algorithm_underperforms_and_a_slowed_pick_does_not(store: Store) -> None:
    """ring (NCCL_ALGO=Ring) reaches half of what pick (NVLSTree) reaches at the same shape: a
    finding naming both and the setting. pick runs at a third of its usual bandwidth in the
    window (a fault elsewhere) but reached 300 GB/s before: not its algorithm. tree (TREE/LL,
    nothing forces it) is slow too: NCCL chose it. big (32 ranks) has no other algorithm at its
    shape to compare with."""
    store.insert(
        COLLECTIVE_SAMPLE,
        COLLECTIVE_SAMPLE.to_arrow(
            collectives("ring", "RING", "SIMPLE", 160.0)
            + collectives("pick", "NVLS_TREE", "SIMPLE", 300.0, slow=1 / 3)
            + collectives("tree", "TREE", "LL", 40.0)
            + collectives("big", "RING", "SIMPLE", 50.0, ranks=32)
        ),
    )
    store.insert(
        NCCL_SETTING,
        NCCL_SETTING.to_arrow(
            [setting("ring", "NCCL_ALGO", "Ring", p) for p in (0, 1)]
            + [setting("ring", "NCCL_PROTO", "^LL128")]  # allows SIMPLE: forces it too
            + [setting("pick", "NCCL_ALGO", "NVLSTree,Ring")]  # allows what it runs, not forced
        ),
    )
    found = {f.subject: f for f in collective_algorithm_underperforms(ctx(store))}
    assert sorted(found) == ["team/ring/0xring", "team/tree/0xtree"]
    ring = found["team/ring/0xring"]
    ev = ring.evidence
    assert (ev["algorithm"], ev["protocol"], ev["best_algorithm"], ev["best_protocol"]) == (
        "RING",
        "SIMPLE",
        "NVLS_TREE",
        "SIMPLE",
    )
    assert (ev["reached_gbs"], ev["best_reached_gbs"], ev["gap_ratio"]) == (160.0, 300.0, 0.467)
    assert ev["forced_by"] == {"NCCL_ALGO": "Ring", "NCCL_PROTO": "^LL128"}
    assert ev["setting"] == "NCCL_ALGO=Ring, NCCL_PROTO=^LL128"
    assert ev["best_jobs"] == ["team/pick"] and ev["try_setting"] == "NCCL_ALGO=NVLSTree"
    assert "forced by NCCL_ALGO=Ring, NCCL_PROTO=^LL128" in ring.summary
    tree = found["team/tree/0xtree"].evidence
    assert tree["forced_by"] == {} and tree["setting"] == ""
    assert tree["try_setting"] == "NCCL_ALGO=NVLSTree NCCL_PROTO=Simple"
    assert "NCCL chose it" in found["team/tree/0xtree"].summary


def leaf_fabric(store: Store) -> None:
    """leaf-1 with 4 uplinks to spines s0..s3 (LLDP), roles from the ports' samples."""
    t = ms(START)
    links = [
        {"ts": t, "cluster": "c", "local_device": "leaf-1", "local_port": f"Ethernet{128 + 8 * u}",
         "remote_device": f"s{u}", "remote_port": "Ethernet0", "remote_chassis_id": f"c{u}",
         "source": "switch"}
        for u in range(4)
    ]  # fmt: skip
    ports = [
        {"ts": t + 10_000 * i, "cluster": "c", "switch": sw, "asic": "", "port": p, "role": role}
        for i in range(6)
        for sw, p, role in [("leaf-1", f"Ethernet{128 + 8 * u}", "leaf") for u in range(4)]
        + [(f"s{u}", "Ethernet0", "spine") for u in range(4)]
    ]  # fmt: skip
    store.insert(LLDP_LINK, LLDP_LINK.to_arrow(links))
    store.insert(SWITCH_PORT_SAMPLE, SWITCH_PORT_SAMPLE.to_arrow(ports))


def flows(job: str, pairs: int, qps: int, samples: int) -> tuple[list[dict], list[dict]]:
    """`samples` sampled frames per rank pair, over `qps` QPs (each its own UDP source port),
    leaving leaf-1 through its uplinks; the attributed and the raw rows."""
    att, raw = [], []
    for p in range(pairs):
        src, dst = f"10.0.{p}.1", f"10.1.{p}.1"
        for i in range(samples):
            q = i % qps
            ts = ms(START) + 1000 * i
            port = f"Ethernet{128 + 8 * ((p + q) % 4)}"
            common = {"ts": ts, "cluster": "c", "switch": "leaf-1", "out_port": port,
                      "src_ip": src, "dst_ip": dst, "dest_qp": 0x100 + q}  # fmt: skip
            att.append(
                {**common, "dst_port": 4791, "rdma": True, "bytes": 1 << 30,
                 "src_namespace": "team", "src_pod": f"{job}-0", "src_node": "n1",
                 "src_job": job, "dst_namespace": "team", "dst_pod": f"{job}-1",
                 "dst_node": "n2", "dst_job": job, "src_rail": 0, "src_nic": "mlx5_0",
                 "src_leaf_port": "leaf-1:Ethernet0", "dst_rail": 0, "dst_nic": "mlx5_0",
                 "dst_leaf_port": "leaf-2:Ethernet0", "src_su": "su0", "dst_su": "su1",
                 "src_idc": "a", "dst_idc": "a", "lca_hypernode": "hn-a", "lca_tier": 2}
            )  # fmt: skip
            raw.append(
                {**common, "agent": "10.254.0.1", "in_port": "Ethernet0", "vlan": 0,
                 "src_port": 49152 + 7 * q, "dst_port": 4791, "frame_bytes": 4154,
                 "sampling_rate": 16384, "bytes": 4154 * 16384, "packets": 16384}
            )  # fmt: skip
    return att, raw


def test_low_flow_entropy_names_the_qps_and_links_the_ecmp_collisions(store: Store) -> None:
    """few sends 1 flow per rank pair through leaf-1's 4 uplinks: a finding with the collision
    probability, the job's NCCL_IB_QPS_PER_CONNECTION and the QPs that would do, linked to the
    ECMP collision finding on one of its uplinks. many spreads 4 flows per pair: nothing. thin
    has too few samples per pair to count its flows: not judged."""
    leaf_fabric(store)
    att, raw = [], []
    for job, pairs, qps, n in (("few", 2, 1, 20), ("many", 2, 4, 40), ("thin", 2, 1, 5)):
        a, r = flows(job, pairs, qps, n)
        if job == "many":  # other IPs than few's
            for x in a + r:
                x["src_ip"], x["dst_ip"] = x["src_ip"] + "0", x["dst_ip"] + "0"
        if job == "thin":
            for x in a + r:
                x["src_ip"], x["dst_ip"] = x["src_ip"] + "9", x["dst_ip"] + "9"
        att += a
        raw += r
    store.insert(ATTRIBUTED_FLOW, ATTRIBUTED_FLOW.to_arrow(att))
    store.insert(FLOW_SAMPLE, FLOW_SAMPLE.to_arrow(raw))
    store.insert(
        NCCL_SETTING, NCCL_SETTING.to_arrow([setting("few", "NCCL_IB_QPS_PER_CONNECTION", "1")])
    )
    t = END - timedelta(seconds=30)
    old = END - timedelta(seconds=600)  # ended before the window
    store.insert(
        FINDING,
        FINDING.to_arrow(
            [{"finding_id": fid, "cluster": "c", "kind": kind, "category": "fabric",
              "severity": "warning", "subject_type": "port", "subject": port,
              "summary": "hot", "evidence": "{}", "window_start": ms(t), "window_end": ms(END),
              "first_seen": ms(seen), "last_seen": ms(seen + timedelta(seconds=60)),
              "updated_at": ms(END)}
             for fid, kind, port, seen in (
                 ("e1", "ecmp_imbalance", "leaf-1:Ethernet128", t),
                 ("e0", "ecmp_imbalance", "leaf-1:Ethernet136", old),  # before the window
                 ("e2", "ecmp_imbalance", "leaf-1:Ethernet999", t),  # not its uplink
                 ("e4", "ecn_hotspot", "leaf-1:Ethernet136", t))]
        ),
    )  # fmt: skip
    store.insert(
        INCIDENT,
        INCIDENT.to_arrow(
            [{"incident_id": iid, "cluster": "c", "state": "open", "severity": "warning",
              "root_finding_id": "e1", "root_kind": kind, "root_subject_type": "port",
              "root_subject": port, "summary": "hot", "runbook": "", "findings": 1,
              "kinds": "[]", "jobs": "[]", "tenants": "[]", "gpus": 0, "gpu_hours": 0.0,
              "first_seen": ms(t), "last_seen": ms(END), "merged_into": merged,
              "updated_at": ms(END)}
             for iid, kind, port, merged in (
                 ("i2", "ecmp_imbalance", "leaf-1:Ethernet128", ""),
                 ("i1", "ecmp_imbalance", "leaf-1:Ethernet136", ""),
                 ("i3", "ecmp_imbalance", "leaf-1:Ethernet128", "i2"),  # folded into i2
                 ("i4", "ecmp_imbalance", "leaf-1:Ethernet999", ""),
                 ("i5", "ecn_hotspot", "leaf-1:Ethernet128", ""))]
        ),
    )  # fmt: skip
    (f,) = low_flow_entropy(ctx(store, 120))
    assert (f.kind, f.subject_type, f.subject) == ("low_flow_entropy", "job", "team/few")
    ev = f.evidence
    assert (ev["flows_per_pair"], ev["ecmp_width"], ev["pairs_crossing"]) == (1, 4, 2)
    assert (ev["busiest_leaf"], ev["connections_through_busiest_leaf"]) == ("leaf-1", 2)
    assert ev["collision_probability"] == 1.0  # 2 flows over 4 uplinks: one carries 2x its share
    assert (ev["qps_per_connection"], ev["qps_setting"], ev["qps_needed"]) == (1, "1", 24)
    # the ECMP collisions on its uplinks (128, 136) seen in the window, their open incidents
    assert ev["ecmp_findings"] == ["leaf-1:Ethernet128"]
    assert ev["ecmp_incidents"] == ["i1", "i2"]
    assert "; 1 ECMP collision finding(s) on its uplinks" in f.summary
    assert "NCCL_IB_QPS_PER_CONNECTION=24 brings it under 10%" in f.summary


def test_without_direct_nic_the_receive_side_and_pxn_disabled_are_evidence(store: Store) -> None:
    t = ms(START)
    store.insert(
        GPU_NIC_AFFINITY,
        GPU_NIC_AFFINITY.to_arrow(
            [{"ts": t, "cluster": "c", "node": "n2", "gpu": g, "nic": "" if g else "mlx5_0",
              "direct_nic": int(g == 0), "rail": 0} for g in (0, 1)]
        ),
    )  # fmt: skip
    att, _ = flows("job", 1, 1, 4)
    for a in att:  # n2 sends 2 GiB and receives 4 GiB
        a["src_node"], a["dst_node"], a["src_pod"], a["dst_pod"] = "n2", "n3", "job-1", "job-2"
    back, _ = flows("job", 1, 1, 4)
    for a in back[:4]:
        a["src_node"], a["dst_node"], a["src_pod"], a["dst_pod"] = "n3", "n2", "job-2", "job-1"
    store.insert(ATTRIBUTED_FLOW, ATTRIBUTED_FLOW.to_arrow(att[:2] + back))
    store.insert(
        POD,
        POD.to_arrow(
            [{"cluster": "c", "namespace": "team", "pod": "job-1", "uid": "u1", "node": "n2",
              "job": "job", "phase": "Running", "gpus": "[]", "valid_from": t - 3_600_000,
              "updated_at": t - 3_600_000}]
        ),
    )  # fmt: skip
    store.insert(NCCL_SETTING, NCCL_SETTING.to_arrow([setting("job", "NCCL_PXN_DISABLE", "1", 1)]))
    (f,) = gpu_without_direct_nic(ctx(store))
    ev = f.evidence
    assert (f.subject, ev["gpus"], ev["rdma_bytes"]) == ("n2", [1], 2 << 30)
    assert (ev["rdma_received_bytes"], ev["receive_side_detour"]) == (4 << 30, True)
    assert ev["receiving_pods"] == ["team/job-1"] and ev["pxn_disabled_pods"] == ["team/job-1"]
    assert "it receives 4.29 GB, which lands through host memory" in f.summary
