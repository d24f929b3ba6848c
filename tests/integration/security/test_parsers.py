"""Parsers never let one bad input empty a whole collection: a counter file >= 2^64 on the 8-NIC
sysfs fixture is malformed (named, counted) and the node's other NICs and fields are still
collected; a summed NIC field whose term was read before and is missing now is null, not smaller
(a smaller sum would read as a counter reset and a false spike downstream)."""

from __future__ import annotations

import shutil
from pathlib import Path

from exporters.node.ethtool import TextEthtool
from exporters.node.rdma import RdmaCollector
from tests.sysfs_fixture import node8


class Problems:
    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def __call__(self, reason: str, message: str) -> None:
        self.items.append((reason, message))


def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "node8"
    shutil.copytree(node8(), dst, symlinks=True)
    return dst


def test_counter_at_2_pow_64_is_malformed_not_fatal(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    bad = root / "sys/class/infiniband/mlx5_2/ports/1/counters/port_xmit_data"
    bad.write_text(f"{1 << 64}\n")
    problems = Problems()
    nic, _ = RdmaCollector(root, "n1", ethtool=TextEthtool(root / "ethtool")).collect(1, problems)
    assert len(nic) == 8  # every NIC still collected
    (row,) = [r for r in nic if r["device"] == "mlx5_2"]
    assert "tx_bytes_total" not in row and row["rx_bytes_total"] is not None  # null
    reasons = [(r, m) for r, m in problems.items if r == "malformed_sysfs"]
    assert len(reasons) == 1 and str(bad) in reasons[0][1] and "64 bits" in reasons[0][1]
    from telemetry.records import NIC_SAMPLE

    assert NIC_SAMPLE.to_arrow(nic).num_rows == 8  # and the batch builds (no C overflow)


def test_summed_field_is_null_when_a_term_goes_missing(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    eth = root / "ethtool"
    c = RdmaCollector(root, "n1", ethtool=TextEthtool(eth))
    problems = Problems()
    first, _ = c.collect(1, problems)
    (netdev,) = {r["netdev"] for r in first if r["device"] == "mlx5_2"}
    before = next(r for r in first if r["device"] == "mlx5_2")
    assert (
        before["pci_stalled_total"] is not None and before["pause_storm_events_total"] is not None
    )
    f = eth / f"{netdev}.txt"
    f.write_text("".join(line for line in f.read_text().splitlines(keepends=True)
                         if "outbound_pci_stalled_wr" not in line))  # fmt: skip
    second, _ = c.collect(2, problems)
    after = next(r for r in second if r["device"] == "mlx5_2")
    assert "pci_stalled_total" not in after  # null: one of its two terms is missing
    assert after["pause_storm_events_total"] == before["pause_storm_events_total"]
    assert after["resets_total"] == before["resets_total"]


def test_truncated_pcap_warns_and_from_exits_1(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    fixture = Path(__file__).parents[2] / "fixtures" / "sflow" / "tcpdump_sflow-print-v6.pcap"
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(fixture.read_bytes()[:-10])
    root = Path(__file__).parents[3]
    env = {**os.environ, "PYTHONPATH": str(root), "RAILSCOPE_DSN": "chdb:///nonexistent-unused"}

    def run(pcap: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "telemetry.cli", "sflow", "--from", str(pcap),
                               "--output", "jsonl"], capture_output=True, text=True, env=env,
                              timeout=60)  # fmt: skip

    whole, part = run(fixture), run(cut)
    assert whole.returncode == 0, whole.stderr
    assert part.returncode == 1
    assert f"{cut}: truncated pcap" in part.stderr and "Traceback" not in part.stderr
    # what was read before the cut is still printed
    assert 0 < len(part.stdout.splitlines()) <= len(whole.stdout.splitlines())


def test_malformed_livenodes_entry_is_one_datanodes_error() -> None:
    import json

    from exporters.hdfs import jmx

    live = {
        "dn1:9866": {"infoAddr": "dn1:9864", "infoSecureAddr": "dn1:9865", "xferaddr": "dn1:9866"},
        "dn2:9866": "garbage",
        "dn3:9866": {"infoAddr": "0.0.0.0:9864", "xferaddr": "dn3:9866"},
    }
    doc = {"beans": [{"name": "Hadoop:service=NameNode,name=NameNodeInfo",
                      "LiveNodes": json.dumps(live)}]}  # fmt: skip
    errors: list[tuple[str, str]] = []
    nodes = jmx.live_nodes(doc, lambda name, why: errors.append((name, why)))
    assert [n.info_addr for n in nodes] == ["dn1:9864", "dn3:9864"]
    assert errors == [("dn2:9866", "LiveNodes entry is not an object: 'garbage'")]


async def test_jmx_body_is_capped() -> None:
    from aiohttp import web

    from exporters.hdfs import jmx

    big = b'{"beans": [' + b'{"name": "x"},' * 2000 + b'{"name": "y"}]}'

    async def handler(_: web.Request) -> web.Response:
        return web.Response(body=big, content_type="application/json")

    app = web.Application()
    app.router.add_get("/jmx", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        url = f"http://127.0.0.1:{port}"
        (small,) = await jmx.scrape([url], timeout=5, max_body_bytes=1000)
        (whole,) = await jmx.scrape([url], timeout=5)
    finally:
        await runner.cleanup()
    assert small.doc is None and small.error == "HTTP body over 1000 bytes"
    assert whole.error == "" and whole.doc is not None and len(whole.doc["beans"]) == 2001


def test_otlp_enabled_is_wired_into_source_commands(tmp_path: Path) -> None:
    """`otlp.enabled: true` builds the OTLP sink (here it names the missing exporter package in
    one line) instead of being accepted and ignored."""
    import os
    import subprocess
    import sys

    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"store: {{dsn: 'chdb://{tmp_path / 'db'}'}}\nsink: {{spool_dir: '{tmp_path / 's'}'}}\n"
        "otlp: {enabled: true, endpoint: 'http://127.0.0.1:4317'}\n"
    )
    pcap = Path(__file__).parents[2] / "fixtures" / "sflow" / "tcpdump_sflow-print-v6.pcap"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])}
    out = subprocess.run([sys.executable, "-m", "telemetry.cli", "--config", str(cfg), "sflow",
                          "--from", str(pcap)], capture_output=True, text=True, env=env,
                         timeout=120)  # fmt: skip
    try:
        import opentelemetry.exporter.otlp  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        assert out.returncode == 2, out.stderr
        assert out.stderr.strip().splitlines()[-1].startswith("railscope: error: sink otlp:")
    else:
        assert out.returncode == 0, out.stderr
