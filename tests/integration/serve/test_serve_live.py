"""`railscope serve` live, end to end, as separate processes: the sFlow source on a loopback UDP
port, the inventory from a capture directory (pods with Multus IPs in two namespaces) and
correlate --follow on 5 s ticks. RoCEv2 sFlow from one tenant's pod to another's arrives from the
test's encoder and from a real sFlow agent (pmacct's sfprobe); a second process sees the
cross-tenant finding through `--dsn http://...` while serve keeps running; SIGTERM flushes
everything (row counts equal what was sent) and exits 0."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from exporters.sflow import encode as E
from telemetry.records import FLOW_SAMPLE, POD_IP_LEASE
from tests.integration.serve.conftest import (
    ENV,
    free_port,
    railscope,
    wait_ping,
    write_serve_config,
)
from tests.integration.sflow.sfprobe import replay, roce_pcap

DUMP = Path(__file__).parents[2] / "fixtures" / "k8s" / "dump"
SRC, DST = "2.2.2.49", "192.168.1.205"  # Multus IPs: sriov-conformance-testing -> default


def _send(port: int, n: int, seq0: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for i in range(n):
            frame = E.rocev2_frame(SRC, DST, 4000 + i % 3, psn=seq0 + i)
            sample = E.flow_sample(frame[:128], rate=100, frame_length=4200)
            s.sendto(E.datagram([sample], agent="127.0.0.1", seq=seq0 + i), ("127.0.0.1", port))
            if i % 50 == 49:
                time.sleep(0.01)  # stay well inside the socket buffer


def _count(store: Path, table: str, where: str = "1") -> int:
    code = (
        "import chdb, sys; c = chdb.connect(sys.argv[1]); "
        "print(c.query(f'SELECT count() FROM railscope.{sys.argv[2]} WHERE {sys.argv[3]}', 'TSV'))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(store), table, where],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return int(r.stdout.strip())


@pytest.mark.slow
def test_serve_sources_correlate_and_query_endpoint(tmp_path: Path) -> None:
    qport, uport, mport = free_port(), free_port(socket.SOCK_DGRAM), free_port()
    store = tmp_path / "store"
    sources = {
        "sflow": {
            "enabled": True,
            "bind": f"127.0.0.1:{uport}",
            "agents": {"127.0.0.1": "leaf01"},
        },
        "inventory": {"enabled": True, "from": str(DUMP)},
        # a source that fails every cycle (nothing listens there) must not stall the others
        "switch": {
            "enabled": True,
            "switches": [
                {"name": "leaf09", "address": f"127.0.0.1:{free_port(socket.SOCK_STREAM)}"}
            ],
        },
        "hdfs": {"enabled": False},
    }
    write_serve_config(tmp_path, 3, qport, mport, sources)
    url = f"http://127.0.0.1:{qport}"
    log = (tmp_path / "serve.log").open("w")
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "telemetry.cli",
            "--config",
            str(tmp_path / "railscope.yaml"),
            "serve",
            "--lag",
            "8",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={k: v for k, v in ENV.items() if k != "RAILSCOPE__PROMETHEUS__ENABLED"},
    )
    try:
        wait_ping(url, serve, lambda: (tmp_path / "serve.log").read_text())
        # another command on the embedded store while serve holds it: one line pointing here
        r = railscope("findings", "--dsn", f"chdb://{store}")
        assert r.returncode == 2 and f"--dsn {url} instead" in r.stderr, r.stderr
        sent = 300
        _send(uport, sent, 1)
        # a second process sees the finding through the endpoint while serve keeps running (the
        # 8 s lag covers the 3 s cycle and the sink's batches: a window is judged once)
        deadline = time.monotonic() + 90
        found: list[dict[str, object]] = []
        while not found:
            r = railscope(
                "findings", "--dsn", url, "--kind", "cross_tenant_rdma", "--format", "json"
            )
            assert r.returncode == 0, r.stderr
            found = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
            if not found:
                assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
                time.sleep(1)
        assert found[0]["subject"] == "sriov-conformance-testing/test-pod-sriov->default/samplepod"
        # one /metrics for every component and the current findings
        with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=10) as resp:
            metrics = resp.read().decode()
        for component in ("source:sflow", "source:switch", "serve:query", "sink:clickhouse:sflow"):
            assert f'component="{component}"' in metrics, component
        assert "railscope_finding_active{" in metrics and "cross_tenant_rdma" in metrics
        # the last datagrams arrive just before SIGTERM, most likely after the last 3 s cycle:
        # the final collection and flush store them too
        _send(uport, 100, sent + 1)
        sent += 100
        # and a real sFlow agent: pmacct's sfprobe replays RoCEv2 packets between the same pods
        pcap = tmp_path / "roce.pcap"
        probe = roce_pcap(pcap, srcs=[SRC], dst=DST, n=40, qp_base=0x5100)
        replay(pcap, uport, tmp_path)
        time.sleep(0.2)
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(60) == 0, (tmp_path / "serve.log").read_text()
    finally:
        if serve.poll() is None:
            serve.kill()
        log.close()
    text = (tmp_path / "serve.log").read_text()
    assert "Traceback" not in text, text
    assert "switch" in text and "leaf09" in text  # the failing source reported itself
    assert not (store / "railscope-serve.url").exists()
    # every datagram of the test's encoder is stored, once; the agent's samples too (pmacctd may
    # lose its last few itself when it exits at the end of the pcap: tests/integration/sflow)
    assert _count(store, FLOW_SAMPLE.table, "dest_qp != 0x5100") == sent
    assert 0 < _count(store, FLOW_SAMPLE.table, "dest_qp = 0x5100") <= probe.total
    assert _count(store, POD_IP_LEASE.table) > 0
    assert not list((tmp_path / "spool").rglob("*.arrow"))  # everything reached the store


def test_an_open_endpoint_needs_users(tmp_path: Path) -> None:
    r = railscope("serve", "--dsn", f"chdb://{tmp_path / 's'}", "--query-listen", "0.0.0.0:8123")
    assert r.returncode == 2 and "without serve.users" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "s").exists()  # refused before the store was opened
