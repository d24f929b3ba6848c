"""The per-job report and the HTML report on the real embedded store."""

from __future__ import annotations

import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from telemetry import analysis
from telemetry.correlate import Correlator
from telemetry.correlate import findings as fstore
from telemetry.correlate import incident_store as istore
from telemetry.correlate.html import render_html
from telemetry.correlate.report import job_report, render_text
from telemetry.records import FLOW_SAMPLE, GPU_SAMPLE, LLDP_LINK, NIC_SAMPLE, SWITCH_PORT_SAMPLE
from telemetry.store import Store
from tests.integration.correlate.test_attribution import ROCE_SAMPLE, inventory
from tests.integration.correlate.test_detectors import ms, t0


def scene(store: Store) -> None:
    """Job a/train1 on n1 and n3; its traffic leaves leaf1 through Ethernet256, which is 97% busy."""
    s = t0()
    inventory(store, ms(s))
    nic, ports, gpus, flows = [], [], [], []
    for i in range(31):
        ts = ms(s) + i * 10_000
        for node in ("n1", "n3"):
            nic.append(
                {
                    "ts": ts,
                    "cluster": "c",
                    "node": node,
                    "device": "mlx5_0",
                    "netdev": "eth2",
                    "port": 1,
                    "up": 1,
                    "rate_bytes_per_second": 50e9,
                    "tx_bytes_total": int(i * 10 * 20e9),
                }
            )
            for g in range(2):
                gpus.append(
                    {
                        "ts": ts,
                        "cluster": "c",
                        "node": node,
                        "gpu": g,
                        "up": 1,
                        "utilization_ratio": 0.35,
                    }
                )
        for port, u in [("Ethernet0", 0.4), ("Ethernet256", 0.97), ("Ethernet264", 0.2)]:
            ports.append(
                {
                    "ts": ts,
                    "cluster": "c",
                    "switch": "leaf1",
                    "role": "leaf",
                    "port": port,
                    "up": 1,
                    "tx_utilization_ratio": u,
                    "tx_bytes_total": int(i * 10 * u * 50e9),
                }
            )
        flows.append(
            {
                **ROCE_SAMPLE,
                "ts": ts,
                "out_port": "Ethernet256",
                "src_ip": "10.9.0.1",
                "dst_ip": "10.9.0.3",
                "sampling_rate": 1000,
                "bytes": 4_096_000,
                "packets": 1000,
                "dest_qp": 9,
            }
        )
    store.insert(NIC_SAMPLE, NIC_SAMPLE.to_arrow(nic))
    store.insert(SWITCH_PORT_SAMPLE, SWITCH_PORT_SAMPLE.to_arrow(ports))
    store.insert(GPU_SAMPLE, GPU_SAMPLE.to_arrow(gpus))
    store.insert(FLOW_SAMPLE, FLOW_SAMPLE.to_arrow(flows))
    store.insert(
        LLDP_LINK,
        LLDP_LINK.to_arrow(
            [
                {
                    "ts": ms(s),
                    "cluster": "c",
                    "local_device": "n1",
                    "local_port": "eth2",
                    "remote_device": "leaf1",
                    "remote_port": "Ethernet0",
                    "source": "t",
                }
            ]
        ),
    )
    Correlator(store, cluster="c").run(s, s + timedelta(minutes=5))


def test_job_report_ranks_the_hot_uplink_first(store: Store) -> None:
    scene(store)
    s = t0()
    rep = job_report(store, "a/train1", s, s + timedelta(minutes=5), cluster="c")
    assert [p["pod"] for p in rep.pods] == ["train1-0", "train1-1"]
    top = rep.hops[0]
    assert (top.layer, top.name) == ("fabric_port", "leaf1:Ethernet256") and top.score >= 0.9
    layers = {h.layer for h in rep.hops}
    assert {"gpu", "nic", "leaf_port", "fabric_port", "placement"} <= layers
    # the NIC's LLDP neighbour is a leaf port; the port its flows left by a fabric port, with
    # the job's bytes through it (both read in one statement)
    by_name = {h.name: h for h in rep.hops}
    leaf = by_name["leaf1:Ethernet0"]
    assert leaf.layer == "leaf_port" and "job_bytes" not in leaf.metrics
    assert top.metrics["job_bytes"] == rep.bytes_sent
    gpu = next(h for h in rep.hops if h.layer == "gpu")
    assert any("wait for something else" in e for e in gpu.evidence_against)
    text = render_text(rep)
    assert "most likely bottleneck: fabric_port leaf1:Ethernet256" in text
    assert rep.to_dict()["hops"][0]["name"] == "leaf1:Ethernet256"
    assert rep.bytes_sent == 30 * 4_096_000  # 30 flows at/after s fall in the window [s, s+5m)


def test_polars_api(store: Store) -> None:
    scene(store)
    s = t0()
    flows = analysis.attributed_flows(
        store, since=s, until=s + timedelta(minutes=5), job="a/train1"
    )
    assert isinstance(flows, pl.DataFrame) and flows.height == 30
    assert flows["src_pod"].unique().to_list() == ["train1-0"]
    f = analysis.findings(store)
    assert "placement_violation" in f["kind"].to_list()
    path = analysis.job_path(
        store, "a/train1", since=s, until=s + timedelta(minutes=5), cluster="c"
    )
    assert path.row(0, named=True)["hop"] == "leaf1:Ethernet256"


def test_html_report_draws_charts(store: Store, tmp_path: Path) -> None:
    scene(store)
    s = t0()
    rep = job_report(store, "a/train1", s, s + timedelta(minutes=5), cluster="c")
    page = render_html(store, s, s + timedelta(minutes=5), cluster="c", jobs=[rep])
    assert (
        page.count("<svg") == 3
        and 'class="bottleneck"' in page
        and "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    )
    # one <details> block per incident, each finding folded under exactly one of them
    incs = istore.read(store, cluster="c")
    assert incs and page.count('<details class="incident">') == len(incs)
    assert "Incidents timeline" in page and "Findings timeline" not in page
    found = fstore.read(store, cluster="c")
    for f in found:
        assert sum(f["finding_id"] in i["finding_ids"] for i in incs) == 1
    out = tmp_path / "report.html"
    out.write_text(page)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("chromium (Debian package chromium) not installed: page not rendered")
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run(
        [chromium, *flags, "--dump-dom", out.as_uri()], capture_output=True, text=True, timeout=120
    ).stdout
    assert (
        dom.count("<svg") == 3 and dom.count("<rect") > 30
    )  # the browser parsed and kept every chart
    png = tmp_path / "report.png"
    subprocess.run(
        [chromium, *flags, f"--screenshot={png}", "--window-size=1200,1600", out.as_uri()],
        capture_output=True,
        timeout=120,
    )
    assert png.exists() and png.stat().st_size > 10_000  # something was drawn, not a blank page


def test_network_bound_job(store: Store) -> None:
    from telemetry.correlate import findings as fstore

    scene(store)  # a/train1: GPUs 35% busy, its uplink 97% busy
    got = {(f["kind"], f["subject"]) for f in fstore.read(store, kinds=["network_bound"])}
    assert got == {("network_bound", "a/train1")}


def test_gpu_without_direct_nic_sending_rdma(store: Store) -> None:
    from telemetry.correlate import findings as fstore
    from telemetry.records import GPU_NIC_AFFINITY

    s = t0()
    store.insert(
        GPU_NIC_AFFINITY,
        GPU_NIC_AFFINITY.to_arrow(
            [
                {
                    "ts": ms(s),
                    "cluster": "c",
                    "node": "n1",
                    "gpu": 0,
                    "nic": "mlx5_0",
                    "direct_nic": 1,
                },
                {"ts": ms(s), "cluster": "c", "node": "n1", "gpu": 1, "nic": "", "direct_nic": 0},
                {
                    "ts": ms(s),
                    "cluster": "c",
                    "node": "n3",
                    "gpu": 0,
                    "nic": "mlx5_0",
                    "direct_nic": 1,
                },
            ]
        ),
    )
    scene(store)  # n1 sends RDMA (train1-0); n3 only receives
    (f,) = fstore.read(store, kinds=["gpu_without_direct_nic"])
    assert f["subject"] == "n1" and f["evidence"]["gpus"] == [1] and f["severity"] == "info"


def test_follow_serves_findings_on_metrics(store: Store, free_port: int) -> None:
    """`correlate --follow`: one cycle, scraped over HTTP while it serves."""
    import argparse
    import urllib.request

    from telemetry.commands.correlate import follow
    from telemetry.config import load_config

    scene(store)
    body: list[str] = []

    def scrape(host: str, port: int) -> None:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as r:
            body.append(r.read().decode())

    args = argparse.Namespace(lag=0.0, cycles=1, listen=f"127.0.0.1:{free_port}")
    assert (
        follow(Correlator(store, cluster="c"), load_config(None, env={}), args, on_cycle=scrape)
        == 0
    )
    assert len(body) == 1
    assert 'railscope_collector_success{component="detector:pfc_storm"} 1.0' in body[0]
    # the inventory still places a/train1 across SUs now, so the latest window finds it again
    assert (
        'railscope_finding_active{category="placement",cluster="c",kind="placement_violation",severity="critical",'
        'subject="a/train1",subject_type="job"} 1.0'
    ) in body[0]
    assert 'railscope_findings{cluster="c",kind="job_spans_su",severity="warning"} 1.0' in body[0]
