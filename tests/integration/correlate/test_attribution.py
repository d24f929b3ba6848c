"""Attribution and placement on the real embedded store: flows charged to the pod that held the
IP at that moment, tiers from the declared HyperNodes, placement findings with the bytes."""

from __future__ import annotations

import json
from datetime import timedelta

import polars as pl
import pytest

from telemetry.correlate import Correlator
from telemetry.correlate import findings as fstore
from telemetry.records import FLOW_SAMPLE, HYPERNODE, JOB, NODE, POD, POD_IP_LEASE
from telemetry.store import Store
from tests.integration.correlate.test_detectors import ms, t0
from tests.inventory_rows import rail_affinities

# One sampled RoCEv2 frame on leaf1 (cluster "c"); tests add ts, IPs, port and scaling.
ROCE_SAMPLE = {
    "cluster": "c",
    "switch": "leaf1",
    "agent": "a",
    "dst_port": 4791,
    "src_port": 50000,
    "protocol": 17,
    "vlan": 0,
    "dscp": 26,
    "ecn": 0,
    "frame_bytes": 4096,
}


def inventory(store: Store, s: int) -> None:
    inv = {"cluster": "c", "valid_from": s - 3_600_000, "valid_to": None, "updated_at": s}
    store.insert(
        NODE,
        NODE.to_arrow(
            [
                {
                    **inv,
                    "node": n,
                    "su": su,
                    "idc": "idc-a",
                    "gpus": 8,
                    "labels": json.dumps({"su": su}),
                }
                for n, su in [("n1", "su1"), ("n2", "su1"), ("n3", "su2"), ("n4", "su2")]
            ]
        ),
    )
    store.insert(
        HYPERNODE,
        HYPERNODE.to_arrow(
            [
                {
                    **inv,
                    "hypernode": "hn-su1",
                    "tier": 1,
                    "tier_name": "leaf",
                    "member": "n1",
                    "member_type": "Node",
                    "selector": "exactMatch",
                },
                {
                    **inv,
                    "hypernode": "hn-su1",
                    "tier": 1,
                    "tier_name": "leaf",
                    "member": "n2",
                    "member_type": "Node",
                    "selector": "exactMatch",
                },
                {
                    **inv,
                    "hypernode": "hn-su2",
                    "tier": 1,
                    "tier_name": "leaf",
                    "member": "^n[34]$",
                    "member_type": "Node",
                    "selector": "regexMatch",
                },
                {
                    **inv,
                    "hypernode": "hn-spine",
                    "tier": 2,
                    "tier_name": "spine",
                    "member": "hn-su1",
                    "member_type": "HyperNode",
                    "selector": "exactMatch",
                },
                {
                    **inv,
                    "hypernode": "hn-spine",
                    "tier": 2,
                    "tier_name": "spine",
                    "member": "hn-su2",
                    "member_type": "HyperNode",
                    "selector": "exactMatch",
                },
            ]
        ),
    )
    store.insert(
        JOB,
        JOB.to_arrow(
            [
                {
                    **inv,
                    "namespace": "a",
                    "job": "train1",
                    "topology_mode": "hard",
                    "highest_tier_allowed": 1,
                    "replicas": 2,
                },
                {
                    **inv,
                    "namespace": "b",
                    "job": "train2",
                    "topology_mode": "soft",
                    "highest_tier_name": "leaf",
                    "replicas": 2,
                },
                {**inv, "namespace": "b", "job": "infer", "topology_mode": "", "replicas": 2},
            ]
        ),
    )
    store.insert(
        POD,
        POD.to_arrow(
            [
                {**inv, "namespace": "a", "pod": "train1-0", "node": "n1", "job": "train1"},
                {
                    **inv,
                    "namespace": "a",
                    "pod": "train1-1",
                    "node": "n3",
                    "job": "train1",
                },  # across SUs: hard violation
                {**inv, "namespace": "b", "pod": "train2-0", "node": "n2", "job": "train2"},
                {**inv, "namespace": "b", "pod": "train2-1", "node": "n2", "job": "train2"},  # fine
                {**inv, "namespace": "b", "pod": "infer-0", "node": "n2", "job": "infer"},
                {
                    **inv,
                    "namespace": "b",
                    "pod": "infer-1",
                    "node": "n4",
                    "job": "infer",
                },  # spans SUs, no constraint
            ]
        ),
    )
    lease = {"cluster": "c", "primary": False, "interface": "net1"}
    store.insert(
        POD_IP_LEASE,
        POD_IP_LEASE.to_arrow(
            [
                # 10.9.0.1 is reused: train1-0 until s+5min, then (after a gap) infer-0 of tenant b
                {
                    **lease,
                    "ip": "10.9.0.1",
                    "namespace": "a",
                    "pod": "train1-0",
                    "node": "n1",
                    "valid_from": s - 3_600_000,
                    "valid_to": s + 300_000,
                    "updated_at": s + 300_000,
                },
                {
                    **lease,
                    "ip": "10.9.0.1",
                    "namespace": "b",
                    "pod": "infer-0",
                    "node": "n2",
                    "valid_from": s + 360_000,
                    "valid_to": None,
                    "updated_at": s + 360_000,
                },
                {
                    **lease,
                    "ip": "10.9.0.3",
                    "namespace": "a",
                    "pod": "train1-1",
                    "node": "n3",
                    "valid_from": s - 3_600_000,
                    "valid_to": None,
                    "updated_at": s,
                },
            ]
        ),
    )


def flows(store: Store, s: int) -> None:
    base = {
        "cluster": "c",
        "switch": "leaf1",
        "agent": "10.255.0.1",
        "dst_port": 4791,
        "sampling_rate": 1000,
        "src_port": 49152,
        "protocol": 17,
        "vlan": 0,
        "dscp": 26,
        "ecn": 2,
        "frame_bytes": 4096,
        "bytes": 4_096_000,
        "packets": 1000,
        "dest_qp": 77,
    }
    rows = [
        {
            **base,
            "ts": s + 60_000,
            "src_ip": "10.9.0.1",
            "dst_ip": "10.9.0.3",
        },  # first lease: a/train1-0 -> a/train1-1
        {
            **base,
            "ts": s + 330_000,
            "src_ip": "10.9.0.1",
            "dst_ip": "10.9.0.3",
        },  # in the gap: nobody
        {
            **base,
            "ts": s + 420_000,
            "src_ip": "10.9.0.1",
            "dst_ip": "10.9.0.3",
        },  # second lease: b/infer-0 -> a/train1-1
        {
            **base,
            "ts": s + 430_000,
            "src_ip": "10.8.8.8",
            "dst_ip": "10.9.0.3",
            "dst_port": 443,
        },  # unknown source
    ]
    store.insert(FLOW_SAMPLE, FLOW_SAMPLE.to_arrow(rows))


def test_flows_attributed_as_of_their_time_and_placement(store: Store) -> None:
    s = t0()
    inventory(store, ms(s))
    flows(store, ms(s))
    res = Correlator(store, cluster="c").run(s, s + timedelta(seconds=100))
    v = fstore.read(store, kinds=["placement_violation"])[0]
    # train1's one flow (at 60 s) is outside the last evaluation's 10 s placement window
    # (90 s .. 100 s) but inside the trailing flow window the bytes are counted over (40 .. 100 s)
    assert v["evidence"]["bytes_above_allowed_tier"] == 4_096_000
    assert v["evidence"]["flow_window_seconds"] == 60
    # in human units: 4,096,000 bytes is 4.1 MB, never "0.00 GB"
    assert v["summary"].endswith("4.1 MB crossed above tier 1 in the last 60s"), v["summary"]
    res = Correlator(store, cluster="c").run(s + timedelta(minutes=5), s + timedelta(minutes=10))
    assert res.failed == {}
    got = store.query_rows(
        f"SELECT toUnixTimestamp64Milli(ts) - {ms(s)}, src_pod, src_job, dst_pod, lca_hypernode, lca_tier, src_su, dst_su "
        f"FROM {store.table('attributed_flow')} ORDER BY ts"
    )
    assert got == [
        (60_000, "train1-0", "train1", "train1-1", "hn-spine", 2, "su1", "su2"),
        (330_000, "", "", "train1-1", "", 0, "", "su2"),
        (420_000, "infer-0", "infer", "train1-1", "hn-spine", 2, "su1", "su2"),
        (430_000, "", "", "train1-1", "", 0, "", "su2"),
    ]
    f: dict[tuple[str, str], dict] = {}
    for x in fstore.read(store):  # newest first: the finding the second run left open
        f.setdefault((x["kind"], x["subject"]), x)
    v = f[("placement_violation", "a/train1")]
    assert v["severity"] == "critical" and v["evidence"]["spanned_tier"] == 2
    assert (
        v["evidence"]["bytes_above_allowed_tier"] == 0
    )  # evidence is the latest evaluation's: no flow of train1 there
    assert v["first_seen"] < v["last_seen"]
    assert ("placement_violation", "b/train2") not in f and (
        "placement_warning",
        "b/train2",
    ) not in f
    assert f[("job_spans_su", "b/infer")]["severity"] == "info"  # no constraint: informational
    assert f[("job_spans_su", "a/train1")]["evidence"]["sus"] == ["su1", "su2"]
    assert ("cross_tenant_rdma", "b/infer-0->a/train1-1") in f
    assert not [k for k in f if k[0] == "cross_tenant_rdma" and k[1].startswith("a/")]


def test_rerunning_a_window_rewrites_attribution_once(store: Store) -> None:
    s = t0()
    inventory(store, ms(s))
    flows(store, ms(s))
    for _ in range(2):
        Correlator(store, cluster="c").run(s, s + timedelta(minutes=10))
    assert store.count("attributed_flow") == 4
    assert len(fstore.read(store, kinds=["cross_tenant_rdma"])) == 1


def test_flows_carry_rail_nic_and_leaf_port_of_both_ends(store: Store) -> None:
    from telemetry.records import GPU_NIC_AFFINITY, LLDP_LINK

    s = t0()
    t = ms(s)
    lease = {
        "cluster": "c",
        "primary": False,
        "interface": "net2",
        "network": "rdma-rail1",
        "valid_from": t - 3_600_000,
        "valid_to": None,
        "updated_at": t,
    }
    store.insert(
        POD_IP_LEASE,
        POD_IP_LEASE.to_arrow(
            [
                {**lease, "ip": "10.128.0.1", "namespace": "a", "pod": "p0", "node": "n1"},
                {**lease, "ip": "10.128.0.3", "namespace": "a", "pod": "p1", "node": "n3"},
                {
                    **lease,
                    "ip": "10.0.0.3",
                    "namespace": "a",
                    "pod": "p1",
                    "node": "n3",
                    "interface": "eth0",
                    "network": "",
                    "primary": True,
                },
            ]
        ),
    )
    store.insert(
        GPU_NIC_AFFINITY,
        GPU_NIC_AFFINITY.to_arrow(
            [
                {
                    "ts": t - 60_000,
                    "cluster": "c",
                    "node": n,
                    "gpu": g,
                    "nic": f"mlx5_{g}",
                    "netdev": f"eth{g + 2}",
                    "rail": g,
                    "direct_nic": 1,
                }
                for n in ("n1", "n3")
                for g in range(2)
            ]
        ),
    )
    store.insert(
        LLDP_LINK,
        LLDP_LINK.to_arrow(
            [
                {
                    "ts": t - 60_000,
                    "cluster": "c",
                    "local_device": n,
                    "local_port": "eth3",
                    "remote_device": f"leaf-{n}-r1",
                    "remote_port": "Ethernet8",
                    "source": "t",
                }
                for n in ("n1", "n3")
            ]
        ),
    )
    base = {**ROCE_SAMPLE, "sampling_rate": 1, "bytes": 4096, "packets": 1}
    store.insert(
        FLOW_SAMPLE,
        FLOW_SAMPLE.to_arrow(
            [
                {
                    **base,
                    "ts": t + 1_000,
                    "src_ip": "10.128.0.1",
                    "dst_ip": "10.128.0.3",
                },  # rail 1 to rail 1
                {
                    **base,
                    "ts": t + 2_000,
                    "src_ip": "10.128.0.1",
                    "dst_ip": "10.0.0.3",
                },  # to a primary IP: no rail
            ]
        ),
    )
    Correlator(store, cluster="c").run(s, s + timedelta(minutes=5))
    got = store.query_rows(
        f"SELECT src_rail, src_nic, src_leaf_port, dst_rail, dst_nic, dst_leaf_port FROM {store.table('attributed_flow')} ORDER BY ts"
    )
    assert got == [
        (1, "mlx5_1", "leaf-n1-r1:Ethernet8", 1, "mlx5_1", "leaf-n3-r1:Ethernet8"),
        (1, "mlx5_1", "leaf-n1-r1:Ethernet8", -1, "", ""),
    ]
    # A SONiC leaf advertises its ports by vendor alias (lldpmgrd: portidsubtype local <alias>):
    # the hosts see etp3 where the leaf's counters say Ethernet8. The leaf's own LLDP (its
    # port, the host and netdev at the far end) names the port as the switch does, and wins.
    # Without a host-side record it still gives the port; two records of one far end do not.
    store.client.command(f"TRUNCATE TABLE {store.table('lldp_link')}")
    host = [("n1", "eth3", "leaf-n1-r1", "etp3"), ("n3", "eth3", "leaf-n3-r1", "etp3")]
    switch = [("leaf-n1-r1", "Ethernet8", "n1", "eth3"), ("leaf-n3-r1", "Ethernet8", "n3", "eth3"),
              ("leaf-n3-r1", "Ethernet12", "n3", "eth3")]  # fmt: skip
    for leaves_only, rows in ((False, host + switch), (True, switch[:2])):
        store.client.command(f"TRUNCATE TABLE {store.table('lldp_link')}")
        store.insert(LLDP_LINK, LLDP_LINK.to_arrow([
            {"ts": t - 60_000, "cluster": "c", "local_device": a, "local_port": b,
             "remote_device": c, "remote_port": d, "source": "t"} for a, b, c, d in rows
        ]))  # fmt: skip
        Correlator(store, cluster="c").run(s, s + timedelta(minutes=5))
        got = store.query_rows(
            f"SELECT src_leaf_port, dst_leaf_port FROM {store.table('attributed_flow')} ORDER BY ts LIMIT 1"
        )
        if leaves_only:
            assert got == [("leaf-n1-r1:Ethernet8", "leaf-n3-r1:Ethernet8")]
        else:  # n3's far end is on two leaf ports: its host's own view
            assert got == [("leaf-n1-r1:Ethernet8", "leaf-n3-r1:etp3")]


def test_polars_baseline_equals_clickhouse_row_for_row() -> None:
    """bench/correlate.py's polars baseline computes every attributed column ClickHouse does
    (pod, node, job, rail, NIC, leaf port, SU, IDC, LCA and tier on both ends): on a small case
    the bench compares a sample of flows row for row and fails on any difference."""
    import subprocess
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[3] / "bench" / "correlate.py"
    out = subprocess.run(
        [sys.executable, str(bench), "--sizes", "20000", "--leases", "2000"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    (size,) = json.loads(out.stdout.strip().splitlines()[-1])["sizes"]
    assert size["flows"] == 20000 and size["rows_compared"] > 1000, size


def test_lease_and_pod_histories_attributed_as_the_asof_chain_would(store: Store) -> None:
    """The segments the attribution joins flows to (a lease cut where its pod's job changes,
    gaps where a lease ended) give, row for row and column for column, what the polars ASOF
    chain of bench/correlate.py gives (lease as of the flow's time, lease end honoured, the
    pod's job as of then): an unclosed lease superseded by a later one, a zero-length lease,
    a lease ending with no successor, a pod whose job changes mid-lease (contiguously and with
    a gap), a flow exactly at a lease start, an IP nobody held, leases that ended before the
    window (left out of the segments: a later lease of the IP, or nobody, holds it then)."""
    from bench.correlate import COMPARED, polars_attribution
    from telemetry.correlate.attribution import Ancestry, attribute_window
    from telemetry.correlate.registry import Context, Window
    from telemetry.correlate.thresholds import default_thresholds
    from telemetry.records import ATTRIBUTED_FLOW, GPU_NIC_AFFINITY

    s = ms(t0())
    m = 60_000
    inv = {"cluster": "c", "updated_at": s}
    lease = {**inv, "primary": False, "interface": "net1"}

    def span(start: int, end: int | None) -> dict[str, int | None]:
        return {"valid_from": s + start * m, "valid_to": None if end is None else s + end * m}

    # (ip, namespace, pod, node, network, from, to) in minutes from s
    leases = [
        # 10.0.0.1: never closed, superseded at +20 by b/p2 until +30, then nobody's
        ("10.0.0.1", "a", "p1", "n1", "rdma-rail1", -10, None),
        ("10.0.0.1", "b", "p2", "n2", "", 20, 30),
        # 10.0.0.2: unclosed from -5, then a zero-length lease at +10 (nobody's from then)
        ("10.0.0.2", "a", "p3", "n2", "rail_0", -5, None),
        ("10.0.0.2", "a", "p4", "n1", "", 10, 10),
        # 10.0.0.3: one lease; its pod's job changes at +15 and the pod ends at +40
        ("10.0.0.3", "a", "p5", "n2", "rdma-rail0", -60, None),
        # 10.0.0.4: a lease ended before the window, then (after a gap) p7 from +10
        ("10.0.0.4", "a", "p6", "n1", "", -50, -20),
        ("10.0.0.4", "b", "p7", "n2", "rail_1", 10, None),
        # 10.0.0.5: its only lease ended before the window
        ("10.0.0.5", "a", "p8", "n1", "", -50, -20),
    ]
    ls = POD_IP_LEASE.to_arrow(
        [
            {**lease, "ip": ip, "namespace": ns, "pod": pod, "node": node, "network": net}
            | span(f, t)
            for ip, ns, pod, node, net, f, t in leases
        ]
    )
    # (namespace, pod, node, job, from, to)
    versions = [
        # p1: job ja until +2, jb from +2 on (contiguous versions)
        ("a", "p1", "n1", "ja", -60, 2),
        ("a", "p1", "n1", "jb", 2, None),
        ("b", "p2", "n2", "jc", 19, None),
        ("a", "p3", "n2", "jd", -60, None),
        # p5: j1 never closed, superseded by j2 at +15 until +40, then no version
        ("a", "p5", "n2", "j1", -60, None),
        ("a", "p5", "n2", "j2", 15, 40),
        ("a", "p6", "n1", "je", -50, None),
        ("b", "p7", "n2", "jf", 10, None),
    ]
    pods = POD.to_arrow(
        [
            {**inv, "namespace": ns, "pod": pod, "node": node, "job": job} | span(f, t)
            for ns, pod, node, job, f, t in versions
        ]
    )
    store.insert(POD_IP_LEASE, ls)
    store.insert(POD, pods)
    store.insert(
        GPU_NIC_AFFINITY,
        GPU_NIC_AFFINITY.to_arrow(rail_affinities("c", ("n1", "n2"), (0, 1), s - 60 * m)),
    )
    pairs = [
        ("10.0.0.1", "10.0.0.3", [1, 3, 5, 20, 25, 30, 35]),
        ("10.0.0.2", "10.0.0.1", [1, 9, 10, 12]),
        ("10.0.0.3", "10.0.0.2", [5, 15, 20, 39, 40, 45]),
        ("10.0.0.9", "10.0.0.3", [5]),
        ("10.0.0.4", "10.0.0.5", [0, 5, 10, 15]),
    ]
    fl = FLOW_SAMPLE.to_arrow(
        [
            {
                **ROCE_SAMPLE,
                "ts": s + k * m,
                "src_ip": a,
                "dst_ip": b,
                "sampling_rate": 1,
                "bytes": 4096,
                "packets": 1,
                "dest_qp": 7,
                "out_port": "Ethernet1",
            }
            for a, b, ks in pairs
            for k in ks
        ]
    )
    store.insert(FLOW_SAMPLE, fl)
    anc = Ancestry(
        {"n1": ["su1", "spine"], "n2": ["su2", "spine"]}, {"su1": 1, "su2": 1, "spine": 2}
    )
    facts = ({"n1": "su1", "n2": "su2"}, {"n1": "idc-a", "n2": "idc-a"})
    start = t0()
    ctx = Context(store, Window(start, start + timedelta(hours=1)), default_thresholds(), "c")
    counts = attribute_window(ctx, anc, facts)
    assert counts["flows"] == fl.num_rows

    want = polars_attribution(
        fl,
        ls,
        pods,
        {n: (facts[0][n], facts[1][n]) for n in facts[0]},
        anc,
        [(n, g, f"mlx5_{g}", "") for n in ("n1", "n2") for g in (0, 1)],
    ).select(COMPARED)
    got = store.query_df(
        f"SELECT {', '.join(COMPARED)} FROM {store.table(ATTRIBUTED_FLOW)}"
    ).with_columns(pl.col(c).cast(want.schema[c]) for c in COMPARED)
    got, want = got.sort(COMPARED), want.sort(COMPARED)
    assert got.to_dicts() == want.to_dicts()
    # the cases are there: mid-lease job change, lease end gap, zero-length lease
    by = {(r["src_ip"], r["ts"]): r for r in got.to_dicts()}
    jobs = [by[("10.0.0.3", start + timedelta(minutes=k))]["src_job"] for k in (5, 15, 39, 40)]
    assert jobs == ["j1", "j2", "j2", ""]
    assert by[("10.0.0.1", start + timedelta(minutes=35))]["src_pod"] == ""
    assert by[("10.0.0.2", start + timedelta(minutes=12))]["src_pod"] == ""
    assert by[("10.0.0.1", start + timedelta(minutes=3))]["src_job"] == "jb"
    pods4 = [by[("10.0.0.4", start + timedelta(minutes=k))]["src_pod"] for k in (0, 5, 10, 15)]
    assert pods4 == ["", "", "p7", "p7"]
    assert {by[("10.0.0.4", start + timedelta(minutes=k))]["dst_pod"] for k in (0, 15)} == {""}


def test_flows_before_any_inventory_attributed_to_nobody(store: Store) -> None:
    """With flows stored and no lease, pod or node yet (the segment arrays empty), every flow
    is still written once, owned by nobody: empty names, rail -1, no common HyperNode."""
    from telemetry.correlate.attribution import Ancestry, attribute_window
    from telemetry.correlate.registry import Context, Window
    from telemetry.correlate.thresholds import default_thresholds
    from telemetry.records import ATTRIBUTED_FLOW

    s = ms(t0())
    rows = [
        {**ROCE_SAMPLE, "ts": s + k * 1000, "src_ip": "10.0.0.1", "dst_ip": "10.0.0.2"}
        | {"sampling_rate": 1, "bytes": 4096, "packets": 1}
        for k in range(3)
    ]
    store.insert(FLOW_SAMPLE, FLOW_SAMPLE.to_arrow(rows))
    start = t0()
    ctx = Context(store, Window(start, start + timedelta(minutes=1)), default_thresholds(), "c")
    counts = attribute_window(ctx, Ancestry({}, {}), ({}, {}))
    assert (counts["flows"], counts["src_unowned"], counts["dst_unowned"]) == (3, 3, 3)
    got = store.query_rows(
        f"SELECT DISTINCT src_pod, dst_job, src_node, src_rail, dst_rail, lca_hypernode, lca_tier FROM {store.table(ATTRIBUTED_FLOW)}"
    )
    assert got == [("", "", "", -1, -1, "", 0)]


def _lca_of_pairs(
    store: Store, chains: dict[str, list[str]], tiers: dict[str, int], pairs: list[tuple[str, str]]
) -> list[tuple[str, str, str, int]]:
    """Attribute one flow per (source node, destination node) pair, each node owning one IP, the
    HyperNodes `chains` (lowest tier first) declared: (src_node, dst_node, lca_hypernode,
    lca_tier) per flow, in the pairs' order."""
    from telemetry.correlate.attribution import Ancestry, attribute_window
    from telemetry.correlate.registry import Context, Window
    from telemetry.correlate.thresholds import default_thresholds

    s = t0()
    t = ms(s)
    ip = {n: f"10.{7 + i // 250}.0.{1 + i % 250}" for i, n in enumerate(sorted(chains))}
    store.insert(
        POD_IP_LEASE,
        POD_IP_LEASE.to_arrow(
            [
                {
                    "cluster": "c",
                    "ip": ip[n],
                    "namespace": "a",
                    "pod": f"p-{n}",
                    "node": n,
                    "primary": True,
                    "valid_from": t - 3_600_000,
                    "valid_to": None,
                    "updated_at": t,
                }
                for n in chains
            ]
        ),
    )
    store.insert(
        FLOW_SAMPLE,
        FLOW_SAMPLE.to_arrow(
            [
                {
                    **ROCE_SAMPLE,
                    "ts": t + 10 * k,
                    "src_ip": ip[a],
                    "dst_ip": ip[b],
                    "sampling_rate": 1,
                    "bytes": 4096,
                    "packets": 1,
                }
                for k, (a, b) in enumerate(pairs)
            ]
        ),
    )
    anc = Ancestry({n: c for n, c in chains.items() if c}, tiers)
    ctx = Context(store, Window(s, s + timedelta(minutes=1)), default_thresholds(), "c")
    attribute_window(ctx, anc, ({}, {}))
    return store.query_rows(  # type: ignore[return-value]
        f"SELECT src_node, dst_node, lca_hypernode, lca_tier FROM {store.table('attributed_flow')} ORDER BY ts"
    )


def _chain_lca(
    chains: dict[str, list[str]], tiers: dict[str, int], a: str, b: str
) -> tuple[str, int]:
    """HyperNodeTree.lca's definition: the first of the source's ancestors (lowest tier first)
    the destination also has."""
    h = next((h for h in chains[a] if h in chains[b]), "")
    return h, tiers.get(h, 0)


# the LCA by path codes (the default), and by comparing chains tier by tier (codes too wide)
LCA_WAYS = pytest.mark.parametrize("code_bits", [64, 3], ids=["path-codes", "chains"])


@LCA_WAYS
def test_lowest_common_hypernode_over_chains_of_different_depths(
    store: Store, monkeypatch: pytest.MonkeyPatch, code_bits: int
) -> None:
    """The LCA of two nodes whose HyperNode chains differ in depth (a node directly under a
    tier-2 HyperNode beside nodes under tier-1 ones), sit in two separate trees, or have none:
    the first of the source's ancestors (lowest tier first) the destination also has, as
    HyperNodeTree.lca defines it."""
    from telemetry.correlate import attribution

    monkeypatch.setattr(attribution, "CODE_BITS", code_bits)
    chains = {
        "n1": ["su1", "pod1", "root1"],
        "n2": ["su2", "pod1", "root1"],
        "n3": ["pod2", "root1"],
        "n4": ["root2"],
        "n5": [],
    }
    tiers = {"su1": 1, "su2": 1, "pod1": 2, "pod2": 2, "root1": 3, "root2": 3}
    pairs = [(1, 2), (1, 3), (3, 1), (1, 1), (3, 3), (1, 4), (4, 4), (5, 1), (2, 5)]
    named = [(f"n{a}", f"n{b}") for a, b in pairs]
    got = _lca_of_pairs(store, chains, tiers, named)
    assert got == [(a, b, *_chain_lca(chains, tiers, a, b)) for a, b in named]
    assert [g[2] for g in got] == [
        "pod1", "root1", "root1", "su1", "pod2", "", "root2", "", "",
    ]  # fmt: skip
    assert (attribution.PathCodes.of(attribution.Ancestry(chains, tiers)) is None) == (
        code_bits == 3
    )


@LCA_WAYS
@pytest.mark.parametrize("seed", [1, 2])
def test_lowest_common_hypernode_of_random_forests(
    store: Store, monkeypatch: pytest.MonkeyPatch, code_bits: int, seed: int
) -> None:
    """Random HyperNode forests (three roots; one HyperNode with 300 children, so a level's
    field is 9 bits wide and the first field's top bit is set; nodes hung at every depth, some
    under none): every flow's LCA is the chains' own, by either way."""
    import random

    from telemetry.correlate import attribution

    monkeypatch.setattr(attribution, "CODE_BITS", code_bits)
    rng = random.Random(seed)
    parent: dict[str, str | None] = {f"r{i}": None for i in range(3)}
    level = list(parent)
    for depth in range(1, 5):
        nxt = []
        for p in level:
            for _ in range(300 if p == "r2" else rng.randint(0, 4)):
                h = f"h{depth}.{len(parent)}"
                parent[h] = p
                nxt.append(h)
        level = nxt

    def chain(h: str | None) -> list[str]:
        out = []
        while h is not None:
            out.append(h)
            h = parent[h]
        return out

    hns = sorted(parent)
    chains = {f"n{i}": chain(rng.choice(hns)) if i % 10 else [] for i in range(120)}
    tiers = {h: 6 - len(chain(h)) for h in hns}
    nodes = sorted(chains)
    pairs = [(rng.choice(nodes), rng.choice(nodes)) for _ in range(400)]
    pairs += [(a, a) for a in nodes[:20]]
    got = _lca_of_pairs(store, chains, tiers, pairs)
    want = [(a, b, *_chain_lca(chains, tiers, a, b)) for a, b in pairs]
    assert got == want
    assert len({g[2] for g in got}) > 10  # many different LCAs, at several tiers
    assert len({g[3] for g in got}) >= 4
    codes = attribution.PathCodes.of(attribution.Ancestry(chains, tiers))
    assert (codes is None) == (code_bits == 3)
    if codes is not None:
        assert max(codes.node.values()) >= 1 << 63
