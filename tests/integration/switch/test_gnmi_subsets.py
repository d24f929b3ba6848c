"""Switches whose gNMI target serves a subset of the paths railscope asks for (queue or PG
counters disabled, a restricted telemetry user, another network OS): each path is asked and judged
on its own. Against targets that serve only the counters (COUNTERS_DB), only the ports' status and
neighbours (APPL_DB, CONFIG_DB) and everything, the paths served give their records value for value,
each refused path is named once in the log and in the switch's status row, and the switch stays up.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exporters.switch.config import SwitchConfig, SwitchSourceConfig
from exporters.switch.source import SwitchSource
from tests.cli import rs
from tests.integration.switch.gnmi_target import Target, load_target, serve
from tests.unit.switch.expected import expected_ports

INTERVAL = 0.5
SUBSETS = {
    "counters": ["COUNTERS_DB"],  # port and queue counters and every name map; no APPL/CONFIG_DB
    "ports": ["APPL_DB", "CONFIG_DB"],  # oper status, speed, LLDP; no counters, no name maps
    "everything": None,
}
SONIC_REFUSED = {
    "counters": {"APPL_DB/PORT_TABLE", "APPL_DB/LLDP_ENTRY_TABLE", "CONFIG_DB/PORT"},
    "ports": {
        "COUNTERS_DB/COUNTERS/Ethernet*",
        "COUNTERS_DB/COUNTERS/Ethernet*/Queues",
        "COUNTERS_DB/COUNTERS_PORT_NAME_MAP",
        "COUNTERS_DB/COUNTERS_QUEUE_NAME_MAP",
    },
    "everything": set(),
}


@pytest.fixture
def target(request: pytest.FixtureRequest) -> Iterator[tuple[Target, int]]:
    subset, _, behaviour = request.param.partition("/")  # "counters/no_stream": POLL, then Get
    t = load_target(serve_paths=SUBSETS[subset], behaviour=behaviour or "ok")
    server, port = serve(t)
    yield t, port
    server.stop(0)


def _collect(port: int, polls: int = 2, **gnmi: Any) -> tuple[SwitchSource, list[dict[str, Any]]]:
    sw = SwitchConfig(name="asic1", role="leaf", gnmi={"address": f"127.0.0.1:{port}", **gnmi})
    src = SwitchSource([], SwitchSourceConfig(switches=[sw], timeout_seconds=3), gnmi=[sw],
                       interval=INTERVAL)  # fmt: skip
    out = []
    try:
        for _ in range(polls):
            out.append({b.kind.name: b.table.to_pylist() for b in src.collect()})
    finally:
        src.close()
    return src, out


def _said(caplog: pytest.LogCaptureFixture, path: str) -> list[str]:
    """The log lines naming `path` as not served (CONFIG_DB PORT has a line of its own)."""
    words = (f"serve {path} (", f"give {path.replace('/', ' ', 1)} (")
    return [r.getMessage() for r in caplog.records if any(w in r.getMessage() for w in words)]


@pytest.mark.parametrize(
    "target", [*SUBSETS, "counters/no_stream", "counters/no_subscribe"], indirect=True
)
def test_sonic_target_serving_a_subset(
    target: tuple[Target, int], caplog: pytest.LogCaptureFixture
) -> None:
    t, port = target
    subset = next(k for k, v in SUBSETS.items() if v == t.serve_paths)
    caplog.set_level(logging.WARNING)
    src, polls = _collect(port)
    rows = polls[-1]
    [st] = rows["switch_status"]
    assert st["up"] == 1, st
    assert src.stats.errors.get("unreachable", 0) == 0 and "switch_down" not in src.stats.errors
    refused = SONIC_REFUSED[subset]
    for path in refused:  # each named in the status row, and once in the log
        assert path in st["error"], (path, st["error"])
        assert len(_said(caplog, path)) == 1, path
    if not refused:
        assert st["error"] == ""
    ports = {r["port"]: r for r in rows.get("switch_port_sample", [])}
    if subset == "ports":  # no counters to read: no port samples; the neighbours still come
        assert ports == {} and st["ports"] == 0
        assert {r["local_port"] for r in rows["lldp_link"]} == {
            "Ethernet0",
            "Ethernet4",
            "Ethernet8",
        }
        return
    exp = expected_ports(t.counters)
    assert set(ports) == set(exp) and st["ports"] == len(exp)
    compared = 0
    for name, e in exp.items():
        for k, v in e.items():
            if k.endswith("_per_second") or k in ("up", "speed_bps"):
                continue
            assert ports[name][k] == v, (name, k)
            compared += 1
    assert compared >= 30
    if subset == "counters":  # counters never wait on oper status, LLDP or aliases
        assert all(p["up"] is None and p["speed_bps"] is None for p in ports.values())
        assert "lldp_link" not in rows
        assert rows["switch_queue_sample"]
    else:
        assert ports["Ethernet0"]["up"] == 1 and ports["Ethernet0"]["speed_bps"] == 100e9


def test_openconfig_target_serving_only_counters(caplog: pytest.LogCaptureFixture) -> None:
    t = load_target(serve_paths=[":interfaces/interface/state/counters", ":qos"])
    server, port = serve(t)
    caplog.set_level(logging.WARNING)
    try:
        _, polls = _collect(port, dialect="openconfig")
    finally:
        server.stop(0)
    rows = polls[-1]
    [st] = rows["switch_status"]
    assert st["up"] == 1
    for path in ("interfaces/interface[name=*]/state/oper-status",
                 "lldp/interfaces/interface[name=*]/neighbors/neighbor[id=*]/state"):  # fmt: skip
        assert path in st["error"] and len(_said(caplog, path)) == 1
    ports = {r["port"]: r for r in rows["switch_port_sample"]}
    exp = expected_ports(t.counters)
    for name in exp:
        assert ports[name]["rx_bytes_total"] == exp[name]["rx_bytes_total"]
        assert ports[name]["up"] is None


@pytest.mark.parametrize("target", ["counters"], indirect=True)
def test_cli_once_against_a_counters_only_target(
    target: tuple[Target, int], tmp_path: Path
) -> None:
    """`railscope switch --gnmi NAME=HOST:PORT --once`: every port counter of the dump, value for
    value, and the paths it did not get named (stderr, and the status record)."""
    t, port = target
    out = rs("switch", "--once", "--output", "jsonl", "--gnmi", f"asic1=127.0.0.1:{port}",
             env={"RAILSCOPE_DSN": f"chdb://{tmp_path}/unused"}, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    recs = [json.loads(x) for x in out.stdout.splitlines()]
    ports = {r["port"]: r for r in recs if r["_kind"] == "switch_port_sample"}
    exp = expected_ports(t.counters)
    assert set(ports) == set(exp)
    for name, e in exp.items():
        for k, v in e.items():
            if not k.endswith("_per_second") and k not in ("up", "speed_bps"):
                assert ports[name][k] == v, (name, k)
    [st] = [r for r in recs if r["_kind"] == "switch_status"]
    assert st["up"] == 1 and "APPL_DB/PORT_TABLE" in st["error"]
    assert "APPL_DB/PORT_TABLE" in out.stderr and "Traceback" not in out.stderr
