"""Topology mapping, the placement audit and the DCI budget (pure functions, synthetic input)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from exporters.hdfs import dci, fsck, placement
from exporters.hdfs.fsck import BlockInfo
from exporters.hdfs.topology import Location, Topology, host_of
from telemetry.errors import UserError

FIX = Path(__file__).parents[2] / "fixtures" / "hdfs"


def test_table_topology() -> None:
    t = Topology.from_table(FIX / "topology_two_idcs.txt")
    assert t.idcs() == ["idcA", "idcB"]
    assert t.lookup("/10.2.0.3:9866") == Location("idcB", "/idcB/rack2")
    assert t.lookup("10.1.9.9") == Location("idcA", "/idcA/gpu1")
    assert t.lookup("10.9.9.9:1234") is None
    assert t.lookup("10.9.9.9:999") is None
    assert t.unknown == {"10.9.9.9": 2}
    assert host_of("[fe80::1]:9866") == "fe80::1" and host_of("fe80::1") == "fe80::1"


def test_default_rack_stays_unknown_and_errors_name_the_line(tmp_path: Path) -> None:
    t = Topology.parse_table("dn1 /default-rack\ndn2 /idcA/r1\n")
    assert t.lookup("dn1") is None and t.lookup("dn2") == Location("idcA", "/idcA/r1")
    with pytest.raises(UserError, match=r"topology line 2: expected 'HOST /IDC/RACK'"):
        Topology.parse_table("dn1 /a/b\ndn2\n")
    with pytest.raises(UserError, match=r"line 1: rack '/rack1' for 'dn1' has no /IDC/rack levels"):
        Topology.parse_table("dn1 /rack1\n")
    with pytest.raises(UserError, match="cannot read"):
        Topology.from_table(tmp_path / "nope.txt")


def test_topology_script(tmp_path: Path) -> None:
    # A net.topology.script in the usual style: args = hosts, one rack per host on stdout.
    script = tmp_path / "topo.sh"
    script.write_text(
        '#!/bin/sh\nfor h in "$@"; do case $h in 10.1.*) echo /idcA/r1;; 10.2.*) echo /idcB/r9;; '
        "*) echo /default-rack;; esac; done\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    t = Topology.from_script(str(script), ["10.1.0.1", "10.2.0.7", "192.168.1.1"], max_args=2)
    assert t.hosts == {
        "10.1.0.1": Location("idcA", "/idcA/r1"),
        "10.2.0.7": Location("idcB", "/idcB/r9"),
    }
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/bin/sh\necho /a/b\n")
    bad.chmod(0o755)
    with pytest.raises(UserError, match=r"2 host\(s\) in, 1 rack\(s\) out"):
        Topology.from_script(str(bad), ["h1", "h2"])


def blk(*hosts: str, path: str = "/d/e/f", rack: str = "") -> BlockInfo:
    return BlockInfo(
        path, f"blk_{hash(hosts) & 0xFFFF}", 10, len(hosts), None, tuple((h, rack) for h in hosts)
    )


TWO_TWO = placement.Policy(mode="per_idc", replicas=4, per_idc=2)


def test_two_replicas_per_idc_policy() -> None:
    topo = Topology.from_table(FIX / "topology_two_idcs.txt")
    judge = lambda b: placement.judge(b, TWO_TWO, topo, ("/default-rack",), ["idcA", "idcB"])  # noqa: E731
    ok = judge(blk("10.1.0.1:9866", "10.1.0.3:9866", "10.2.0.1:9866", "10.2.0.3:9866"))
    assert (ok.violation, ok.reason, ok.by_idc) == (False, "", {"idcA": 2, "idcB": 2})
    v = judge(blk("10.1.0.1:9866", "10.1.0.2:9866", "10.1.0.3:9866", "10.2.0.3:9866"))
    assert (
        v.violation
        and v.reason
        == "idcA has 3 replica(s), policy wants 2; idcB has 1 replica(s), policy wants 2"
    )
    v = judge(blk("10.1.0.1:9866", "10.1.0.2:9866", "10.2.0.3:9866"))
    assert v.reason == "under-replicated: 3 of 4; idcB has 1 replica(s), policy wants 2"
    v = judge(blk("10.1.0.1:9866", "10.1.0.2:9866", "10.2.0.3:9866", "10.7.7.7:9866"))
    assert v.violation and v.unknown_hosts == ["10.7.7.7:9866"]
    assert v.reason == "1 replica(s) on host(s) not in the topology: 10.7.7.7:9866"
    assert v.by_idc == {"idcA": 2, "idcB": 1}  # the unknown one is not put in any IDC
    racks = placement.Policy(mode="per_idc", replicas=4, per_idc=2, distinct_racks=True)
    v = placement.judge(
        blk("10.1.0.1:1", "10.1.0.2:1", "10.2.0.1:1", "10.2.0.3:1"),
        racks,
        topo,
        (),
        ["idcA", "idcB"],
    )
    assert v.reason == "idcA: 2 replicas on 1 rack(s)"


def test_rack_policy_and_fsck_rack_paths_win() -> None:
    pol = placement.Policy(mode="rack", replicas=3)
    v = placement.judge(
        blk("a:1", "b:1", "c:1", rack="/idcA/r1"), pol, Topology(), ("/default-rack",), []
    )
    assert v.reason == "all 3 replicas on one rack (/idcA/r1)"
    b = BlockInfo(
        "/f", "b", 1, 3, None, (("a:1", "/idcA/r1"), ("b:1", "/idcA/r2"), ("c:1", "/idcA/r2"))
    )
    assert not placement.judge(b, pol, None, (), []).violation


def test_audit_real_fsck_with_topology_and_totals() -> None:
    # The real capture has /default-rack everywhere: the topology table places its two DataNodes.
    rep = fsck.parse_fsck((FIX / "fsck_files_blocks_racks_dataproc.txt").open())
    topo = Topology.from_table(FIX / "topology_two_idcs.txt")
    pol = placement.Policy(mode="per_idc", replicas=2, per_idc=1)
    rows, totals = placement.audit(rep.blocks, pol, topo, ts=1, unknown_racks=("/default-rack",))
    assert [r["violation"] for r in rows] == [False, False]
    assert json.loads(rows[0]["replicas_by_idc"]) == {"idcA": 1, "idcB": 1}
    assert json.loads(rows[0]["locations"])[0] == {
        "host": "10.154.0.33:9866",
        "rack": "/idcA/rack1",
        "idc": "idcA",
    }
    rows, totals = placement.audit(
        rep.blocks, TWO_TWO, topo, ts=1, unknown_racks=("/default-rack",)
    )
    assert (
        rows[0]["reason"]
        == "under-replicated: 2 of 4; idcA has 1 replica(s), policy wants 2; idcB has 1 replica(s), policy wants 2"
    )
    assert totals == [
        {
            "ts": 1,
            "prefix": "/",
            "blocks": 2,
            "violations": 2,
            "under_replicated": 2,
            "unknown_hosts": 0,
        },
        {
            "ts": 1,
            "prefix": "/dblp",
            "blocks": 2,
            "violations": 2,
            "under_replicated": 2,
            "unknown_hosts": 0,
        },
    ]
    assert placement.prefixes("/a/b/c/file", 2) == ["/", "/a", "/a/b"]


def ec(*hosts_racks: tuple[str, str], length: int = 1 << 30) -> BlockInfo:
    pol = fsck.ec_policy("RS-3-2-1024k")
    assert pol is not None
    n = pol.internal_blocks(length)
    return BlockInfo(
        "/ec/f", "blk_-1_1", length, len(hosts_racks), n, hosts_racks, False, "fsck", pol.name, 2
    )


def test_erasure_coded_groups_judged_by_fault_domain() -> None:
    topo = Topology.from_table(FIX / "topology_two_idcs.txt")
    five = [("10.1.0.1:9866", ""), ("10.1.0.2:9866", ""), ("10.2.0.1:9866", "")]
    five += [("10.2.0.2:9866", ""), ("10.2.0.3:9866", "")]
    judge = lambda b, pol: placement.judge(b, pol, topo, ("/default-rack",), ["idcA", "idcB"])  # noqa: E731
    # 2 + 3 internal blocks over two IDCs: losing idcB loses 3 > 2 parity units
    v = judge(ec(*five), TWO_TWO)
    assert v.violation and v.reason == (
        "losing idcB loses 3 internal blocks, more than the 2 parity units"
    )
    # copies-per-IDC does not apply to a block group: 2 + 2 (of 5) is fine by IDC, short by one
    v = judge(ec(*five[:4]), TWO_TWO)
    assert v.reason == "under-erasure-coded: 4 of 5 internal blocks (RS-3-2-1024k)"
    # rack mode: the printed rack paths, one rack holding 3 internal blocks
    racked = [("h1:1", "/idcA/r1"), ("h2:1", "/idcA/r1"), ("h3:1", "/idcA/r1")]
    racked += [("h4:1", "/idcA/r2"), ("h5:1", "/idcA/r3")]
    v = judge(ec(*racked), placement.Policy())
    assert v.reason == "losing rack /idcA/r1 loses 3 internal blocks, more than the 2 parity units"
    rows, totals = placement.audit(
        [ec(*five[:4])], TWO_TWO, topo, ts=0, unknown_racks=("/default-rack",)
    )
    assert rows[0]["expected_replicas"] == 5 and totals[0]["under_replicated"] == 1


def test_rates_and_pairs() -> None:
    assert dci.parse_rate("100Gbit") == 12.5e9
    assert dci.parse_rate("12.5GB/s") == 12.5e9
    assert dci.parse_rate("10Gbps") == 1.25e9
    assert dci.parse_rate(1000) == 1000.0
    # the last four: found by tests/unit/core/test_fuzz_config.py (OverflowError escaped from
    # 10**400; NaN, inf and 400 digits were accepted as capacities)
    for bad in ("fast", "-5", 0, "0G", 10**400, float("nan"), float("inf"), "9" * 400):
        with pytest.raises(ValueError):
            dci.parse_rate(bad)
    assert dci.capacities({"a-b": "8Gbit", "c->d": 5}) == {
        ("a", "b"): 1e9,
        ("b", "a"): 1e9,
        ("c", "d"): 5.0,
    }
    with pytest.raises(ValueError, match="not an IDC pair"):
        dci.parse_pair("a")


def test_budget_rows_exact() -> None:
    b = dci.Budget(10.0, dci.capacities({"A-B": 1000}))
    b.add(
        ts=[1_000, 2_000, 9_999, 10_000, 3_000, 4_000, 5_000],
        src_idc=["A", "A", "B", "A", "A", "", "A"],
        dest_idc=["B", "B", "A", "B", "A", "B", "C"],
        op=[
            "HDFS_READ",
            "HDFS_WRITE",
            "replication",
            "HDFS_READ",
            "HDFS_READ",
            "HDFS_READ",
            "HDFS_WRITE",
        ],
        write_mode=["", "sync", "async", "", "", "", "sync"],
        nbytes=[3000, 2000, 500, 100, 999999, 777, 40],
    )
    assert b.unplaced_bytes == 777
    early = b.flush(before_ms=15_000)  # the 10-20 s interval is still open
    assert [(r["ts"], r["src_idc"], r["dest_idc"]) for r in early] == [
        (0, "A", "B"),
        (0, "A", "C"),
        (0, "B", "A"),
    ]
    ab, ac, ba = early
    assert ab["read_bytes_per_second"] == 300.0 and ab["sync_write_bytes_per_second"] == 200.0
    assert ab["total_bytes_per_second"] == 500.0 and ab["headroom_bytes_per_second"] == 500.0
    assert ab["utilization_ratio"] == 0.5
    assert ac["capacity_bytes_per_second"] is None and ac["sync_write_bytes_per_second"] == 4.0
    assert (
        ba["async_replication_bytes_per_second"] == 50.0
        and ba["headroom_bytes_per_second"] == 950.0
    )
    late = b.flush()
    assert [(r["ts"], r["src_idc"], r["read_bytes_per_second"]) for r in late] == [
        (10_000, "A", 10.0),
        (10_000, "B", 0.0),
    ]
    assert b.flush() == []


def test_example_config_validates() -> None:
    import yaml

    from exporters.hdfs.config import HdfsConfig

    raw = yaml.safe_load((Path(placement.__file__).with_name("hdfs.example.yaml")).read_text())
    c = HdfsConfig.model_validate(raw["sources"]["hdfs"])
    assert (c.policy.mode, c.policy.replicas, c.policy.per_idc) == ("per_idc", 4, 2)
    assert dci.capacities(c.dci.capacity) == {("idcA", "idcB"): 12.5e9, ("idcB", "idcA"): 12.5e9}
