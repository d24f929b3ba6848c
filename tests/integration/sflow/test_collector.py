"""The sflow collector on real UDP sockets, fed by pmacct's sfprobe (a real sFlow agent)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from exporters.sflow import encode as E
from exporters.sflow.source import SflowSource
from tests.integration.sflow.sfprobe import replay, roce_pcap

FIX = Path(__file__).parents[2] / "fixtures" / "sflow"


def _wait_rows(
    src: SflowSource, want: int, timeout: float = 10.0
) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for b in src.collect():
            out.setdefault(b.kind.name, []).extend(b.table.to_pylist())
        if sum(len(v) for v in out.values()) >= want:
            break
        time.sleep(0.05)
    return out


def test_udp_listener_decodes_and_counts_bad_datagrams() -> None:
    cfg = SflowSource.Config(bind="127.0.0.1:0", agents={"127.0.0.1": "leaf01"})  # type: ignore[call-arg]
    src = SflowSource(cfg, clock=lambda: 1_800_000_000.5)  # stamps what arrives
    host, port = src.start()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for i in range(20):
                frame = E.rocev2_frame("10.0.0.1", "10.0.0.2", 1000 + i % 2, psn=i)
                s.sendto(E.datagram([E.flow_sample(frame[:128], rate=1000, frame_length=4200)], agent="127.0.0.1",
                                    seq=i + 1), (host, port))  # fmt: skip
            s.sendto(E.datagram([], version=2), (host, port))
            s.sendto(b"\x00\x01", (host, port))
        rows = _wait_rows(src, 20)
    finally:
        src.stop()
    flows = rows["flow_sample"]
    assert len(flows) == 20
    per_qp: Counter[int] = Counter()
    for r in flows:
        per_qp[r["dest_qp"]] += r["bytes"]
    assert per_qp == {1000: 10 * 4200 * 1000, 1001: 10 * 4200 * 1000}
    assert all(r["switch"] == "leaf01" for r in flows)
    assert {r["ts"].timestamp() for r in flows} == {1_800_000_000.5}
    deadline = time.monotonic() + 5
    while src.stats.failed < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert src.stats.errors == {"bad_version": 1, "truncated_header": 1}
    assert src.ingest.lost == 0


def test_pmacct_sfprobe_agent_replaying_rocev2(tmp_path: Path) -> None:
    """pmacctd (sfprobe plugin, sampling 1) replays a scapy-made pcap of RoCEv2 packets to the
    collector over loopback UDP: per dest QP, packets and bytes match what was sent."""
    pcap = tmp_path / "roce.pcap"
    sent = roce_pcap(
        pcap, srcs=[f"10.0.{k}.1" for k in range(4)], dst="10.1.0.9", n=60, qp_base=0x1200,
        vary_size=True,
    )  # fmt: skip
    src = SflowSource(SflowSource.Config(bind="127.0.0.1:0"))  # type: ignore[call-arg]
    _, port = src.start()
    try:
        stderr = replay(pcap, port, tmp_path)
        rows = _wait_rows(src, 60, timeout=10)
    finally:
        src.stop()
    flows = rows.get("flow_sample", [])
    # every sample is exactly one sent packet (sampling 1), none twice; pmacctd may lose its last
    # few itself when it exits at the end of the pcap (its shutdown race), so not all need arrive
    assert flows and len({r["psn"] for r in flows}) == len(flows), stderr
    for r in flows:
        assert r["agent"] == "127.0.0.1" and r["dst_port"] == 4791 and r["bth_opcode"] == 10
        assert r["packets"] == 1 and r["bytes"] == r["frame_bytes"]
        # sfprobe reports frame length with the 4-byte FCS it counts as stripped
        assert (r["dest_qp"], r["frame_bytes"] - 4) == sent.frames[r["psn"]]
    assert {r["dest_qp"] for r in flows} == set(sent.packets)
    assert src.ingest.lost == 0 and src.stats.failed == 0


def test_cli_from_pcap_jsonl() -> None:
    env = {**os.environ, "RAILSCOPE_DSN": "chdb:///nonexistent-unused"}
    out = subprocess.run([sys.executable, "-m", "telemetry.cli", "sflow", "--from", str(FIX / "tcpdump_sflow-print-v6.pcap"),
                          "--output", "jsonl"], capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows = [json.loads(x) for x in out.stdout.splitlines()]
    kinds = Counter(r["_kind"] for r in rows)
    assert kinds == {"flow_sample": 13, "switch_port_sample": 48}
    f = next(r for r in rows if r["_kind"] == "flow_sample")
    assert (f["agent"], f["src_ip"], f["dst_ip"], f["vlan"], f["in_port"]) == (
        "30::1:1:1",
        "10.10.10.2",
        "50.1.1.2",
        10,
        "7001",
    )
    bad = subprocess.run([sys.executable, "-m", "telemetry.cli", "sflow", "--from", str(FIX / "PROVENANCE.md"),
                          "--output", "jsonl"], capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and "not a pcap file" in bad.stderr and "Traceback" not in bad.stderr


def test_flows_land_in_the_store(store: Any) -> None:
    src = SflowSource(SflowSource.Config(bind="127.0.0.1:0"))  # type: ignore[call-arg]
    host, port = src.start()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            frame = E.rocev2_frame("10.0.0.1", "10.0.0.2", 0xBEEF)
            s.sendto(
                E.datagram([E.flow_sample(frame[:128], rate=2048, frame_length=1500)]), (host, port)
            )
        rows = _wait_rows(src, 1)
    finally:
        src.stop()
    assert rows
    from telemetry.contracts import Batch

    store.insert("flow_sample", Batch.from_rows("flow_sample", rows["flow_sample"]).table)
    assert store.query_rows(f"SELECT dest_qp, bytes, packets FROM {store.table('flow_sample')}") == [
        (0xBEEF, 1500 * 2048, 2048)]  # fmt: skip
