"""Device path: the rendered sysfs tree, ethtool text, SONiC dumps and kubectl JSON carry the same
numbers as the fast-path records of that step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from telemetry.cli import main
from telemetry.sim import build
from telemetry.sim.render import render_devices
from telemetry.sim.scenario import load_scenario
from tests.unit.sim.conftest import START, run_tables


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object, dict]:
    out = tmp_path_factory.mktemp("render")
    sim = build(load_scenario("small").with_overrides(start=START, minutes=4))
    written = render_devices(sim, out, step=20)
    assert written["sysfs"] == 32 * 8 and written["sonic"] == len(sim.fabric.switches)
    _, tables = run_tables("small", minutes=4)
    return out, sim, tables


def _at_step(table: pl.DataFrame, step: int, **key: str) -> dict[str, Any]:
    """The record of `key` at the simulated step `step` (what render_devices wrote there)."""
    ts = table["ts"].unique().sort()[step]
    return table.filter(pl.col("ts") == ts, **key).row(0, named=True)


def test_sysfs_and_ethtool_match_the_records(rendered):
    out, _, t = rendered
    rec = _at_step(t["nic_sample"], 20, node="gpu-idc-a-s000-05", device="mlx5_3")
    port = out / "nodes/gpu-idc-a-s000-05/sys/class/infiniband/mlx5_3/ports/1"
    assert (port / "state").read_text().strip() == "4: ACTIVE"
    assert (port / "link_layer").read_text().strip() == "Ethernet"
    words = int((port / "counters/port_xmit_data").read_text())
    assert words == rec["tx_bytes_total"] // 4
    assert int((port / "hw_counters/np_cnp_sent").read_text()) == rec["cnp_sent_total"]
    assert (
        out / "nodes/gpu-idc-a-s000-05/sys/class/infiniband/mlx5_3/device/net/eth5/dev_port"
    ).exists()
    eth = (out / "nodes/gpu-idc-a-s000-05/ethtool/eth5.txt").read_text().splitlines()
    assert eth[0] == "NIC statistics:"
    stats = dict(line.strip().split(": ") for line in eth[1:])
    assert int(stats["tx_prio3_pause"]) == rec["pfc_tx_pause_total"]


def test_sonic_dump_matches_the_records(rendered):
    out, _, t = rendered
    db = json.loads((out / "switches/leaf-idc-a-s000-r0/counters_db.json").read_text())
    names = db["COUNTERS_PORT_NAME_MAP"]["value"]
    assert len(names) == 16 + 4 and "Ethernet0" in names and "Ethernet152" in names
    rec = _at_step(t["switch_port_sample"], 20, switch="leaf-idc-a-s000-r0", port="Ethernet136")
    v = db[f"COUNTERS:{names['Ethernet136']}"]["value"]
    assert int(v["SAI_PORT_STAT_IF_OUT_OCTETS"]) == rec["tx_bytes_total"]
    assert int(v["SAI_PORT_STAT_PFC_3_TX_PKTS"]) == rec["pfc_tx_pause_total"]
    q = db["COUNTERS_QUEUE_NAME_MAP"]["value"]["Ethernet136:3"]
    assert db["COUNTERS_QUEUE_TYPE_MAP"]["value"][q] == "SAI_QUEUE_TYPE_UNICAST"
    appl = json.loads((out / "switches/leaf-idc-a-s000-r0/appl_db.json").read_text())
    assert appl["PORT_TABLE:Ethernet0"]["value"]["speed"] == "400000"
    assert appl["LLDP_ENTRY_TABLE:Ethernet0"]["value"]["lldp_rem_sys_name"] == "gpu-idc-a-s000-00"


def test_kubectl_lists_show_the_pods_of_that_step(rendered):
    out, sim, _ = rendered
    pods = json.loads((out / "kubernetes/pods.json").read_text())
    assert pods["kind"] == "List"
    names = {p["metadata"]["name"] for p in pods["items"]}
    running = {p.name for j in sim.workload.running(20) for p in j.pods}
    assert names == running  # step 20 = 200 s: ft-b still runs, eval-b has not started
    assert "ft-b-worker-0" in names and "eval-b-worker-0" not in names
    p = next(x for x in pods["items"] if x["metadata"]["name"] == "llm-a-worker-0")
    status = json.loads(p["metadata"]["annotations"]["k8s.v1.cni.cncf.io/network-status"])
    assert [s["interface"] for s in status] == ["eth0", *[f"net{i}" for i in range(1, 9)]]
    assert status[1]["device-info"]["pci"]["pci-address"].startswith("0000:")
    hn = json.loads((out / "kubernetes/hypernodes.json").read_text())["items"]
    tiers = {h["metadata"]["name"]: h["spec"]["tier"] for h in hn}
    assert tiers["hn-idc-a-su000"] == 1 and tiers["hn-idc-a"] == 2 and tiers["hn-root"] == 3
    jobs = json.loads((out / "kubernetes/vcjobs.json").read_text())["items"]
    rl = next(j for j in jobs if j["metadata"]["name"] == "rl-c")
    assert rl["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}


def test_render_refuses_large_scenarios(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert (
        main(
            [
                "sim",
                "render",
                "--scenario",
                "small",
                "--nodes",
                "256",
                "--minutes",
                "1",
                "--out",
                str(tmp_path),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "device path is for small scenarios" in err[0]


def test_sflow_pcap_carries_the_steps_samples(rendered):
    """Read back with the sFlow source's own pcap reader and decoder: every sample of the step,
    with its QP, addresses, marking and the sampling rate that scales it."""
    from exporters.sflow.decode import decode
    from exporters.sflow.pcap import PcapStats, read_udp

    out, sim, t = rendered
    step_ts = t["nic_sample"]["ts"].unique().sort()[20]
    fs = t["flow_sample"].filter(
        pl.col("ts").is_between(
            step_ts, step_ts + (sim.dt * 1000 - 1) * pl.duration(milliseconds=1)
        )
    )
    st = PcapStats()
    got = []
    for u in read_udp(out / "sflow/sflow.pcap", port=6343, stats=st):
        d = decode(u.payload)
        assert d["agent"] == u.src and d["agent"].startswith("10.254.")
        got += [(d["agent"], f) for f in d["flows"]]
    assert st.udp == st.packets > 0 and not st.skipped
    key = ["agent", "src_ip", "dst_ip", "src_port", "dest_qp", "ecn", "frame_bytes", "bytes"]
    want = sorted(tuple(r[k] for k in key) for r in fs.select(key).iter_rows(named=True))
    assert len(want) > 0
    assert sorted((a, *(f[k] for k in key[1:])) for a, f in got) == want
    assert {f["dst_port"] for _, f in got} == {4791}
    assert {f["sampling_rate"] for _, f in got} == {sim.scenario.sflow.sampling_rate}


def test_clienttrace_logs_fsck_and_rack_table(rendered):
    """What a DataNode logged and fsck lists up to the end of the step, parsed by the HDFS
    source's own parsers."""
    from exporters.hdfs import clienttrace, fsck

    out, sim, t = rendered
    end = t["nic_sample"]["ts"].unique().sort()[20] + sim.dt * 1000 * pl.duration(milliseconds=1)
    tr = t["hdfs_transfer"].filter(pl.col("ts") < end)
    parsed = clienttrace.Transfers()
    for p in sorted((out / "hdfs").glob("*/clienttrace.log")):
        st = clienttrace.ParseStats()
        clienttrace.parse_lines(
            p.read_text().splitlines(), datanode=p.parent.name, stats=st, out=parsed
        )
        assert st.failed == 0 and st.skipped == 0
    assert len(parsed) == tr.height > 0
    assert sorted(zip(parsed.block_id, parsed.bytes, parsed.src, strict=True)) == sorted(
        tr.select("block_id", "bytes", "src").iter_rows()
    )
    placed = t["hdfs_block_placement"].filter(pl.col("ts") < end)
    rep = fsck.parse_fsck((out / "hdfs/fsck.txt").read_text().splitlines())
    assert not rep.errors and len(rep.blocks) == placed.height > 0
    locations = {r["block_id"]: json.loads(r["locations"]) for r in placed.iter_rows(named=True)}
    assert {b.block_id: [f"{rack}/{host}" for host, rack in b.replicas] for b in rep.blocks} == (
        locations
    )
    table = dict(ln.split(" ") for ln in (out / "topology.table").read_text().splitlines())
    assert table["10.251.1.10"].startswith("/idc-b/rack") and table["10.251.0.10"].startswith(
        "/idc-a/rack"
    )


def test_jmx_counts_what_each_datanode_logged(rendered):
    """DataNode /jmx counters are the bytes of the transfers its log holds so far, read by the
    HDFS source's JMX parser; the NameNode's blocks are the blocks written so far."""
    from exporters.hdfs import jmx

    out, sim, t = rendered
    end = t["nic_sample"]["ts"].unique().sort()[20] + sim.dt * 1000 * pl.duration(milliseconds=1)
    tr = t["hdfs_transfer"].filter(pl.col("ts") < end)
    docs = {p.parent.name: json.loads(p.read_text()) for p in (out / "hdfs").glob("*/jmx.json")}
    nn = docs.pop("namenode")
    assert jmx.role_of(nn) == "namenode"
    placed = t["hdfs_block_placement"].filter(pl.col("ts") < end).height
    assert jmx.sample(nn, "namenode")["blocks"] == placed > 0
    assert set(docs) == set(tr["datanode"])
    for dn, doc in docs.items():
        got = jmx.sample(doc, "datanode")
        mine = tr.filter(pl.col("datanode") == dn)
        reads = mine.filter(pl.col("op") == "HDFS_READ")
        assert got["read_bytes_total"] == reads["bytes"].sum()
        assert got["blocks_read_total"] == reads.height
        assert got["written_bytes_total"] == mine["bytes"].sum() - reads["bytes"].sum()
