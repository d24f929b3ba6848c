"""The SNMP fallback against a real net-snmp snmpd on loopback serving this machine's
interfaces: railscope's readings equal snmpbulkwalk's (net-snmp tools) for IF-MIB HC octets and
oper status, over v2c and v3 authPriv; LLDP-MIB neighbours equal to the Redis path's on the
same neighbours; 32-bit wrap; an agent that does not answer."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from exporters.switch.config import SnmpConfig, SwitchConfig, SwitchSourceConfig
from exporters.switch.gnmi import GnmiLoop
from exporters.switch.snmp import SnmpSwitch
from exporters.switch.source import SwitchSource

FIX = Path(__file__).parents[2] / "fixtures" / "sonic"


def _walk(port: int, oid: str, *auth: str) -> dict[str, int]:
    out = subprocess.run(
        ["snmpbulkwalk", *auth, "-On", "-Oq", "-Oe", f"127.0.0.1:{port}", oid],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    got = {}
    for line in out.splitlines():
        k, _, v = line.partition(" ")
        got[k.rsplit(".", 1)[1]] = int(v)
    return got


def _names(port: int) -> dict[str, str]:
    out = subprocess.run(
        ["snmpbulkwalk", "-v2c", "-c", "public", "-On", "-Oq", "-Ov", f"127.0.0.1:{port}",
         "1.3.6.1.2.1.31.1.1.1.1"], capture_output=True, text=True, check=True,
    ).stdout.split("\n")  # fmt: skip
    idx = subprocess.run(
        ["snmpbulkwalk", "-v2c", "-c", "public", "-On", "-Oq", f"127.0.0.1:{port}",
         "1.3.6.1.2.1.31.1.1.1.1"], capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    return {
        line.split(" ", 1)[0].rsplit(".", 1)[1]: v.strip('"')
        for line, v in zip(idx, out, strict=False)
    }


def _source(port: int, **snmp: Any) -> SwitchSource:
    sw = SwitchConfig(name="leaf01", snmp={"address": f"127.0.0.1:{port}", **snmp})
    return SwitchSource([], SwitchSourceConfig(switches=[sw], timeout_seconds=1), snmp=[sw])


@pytest.mark.parametrize("version", ["2c", "3"])
def test_readings_equal_snmpbulkwalk(snmpd: dict[str, Any], version: str) -> None:
    port = snmpd["port"]
    user, auth, priv = snmpd["user"]
    if version == "2c":
        kw: dict[str, Any] = {}
        cli = ["-v2c", "-c", "public"]
    else:
        kw = {"version": "3", "user": user, "auth_key": auth, "priv_key": priv}
        cli = [
            "-v3",
            "-l",
            "authPriv",
            "-u",
            user,
            "-a",
            "SHA",
            "-A",
            auth,
            "-x",
            "AES",
            "-X",
            priv,
        ]
    names = _names(port)
    before = _walk(port, "1.3.6.1.2.1.31.1.1.1.6", *cli)
    oper = _walk(port, "1.3.6.1.2.1.2.2.1.8", *cli)
    src = _source(port, **kw)
    try:
        rows = {
            r["port"]: r
            for r in {b.kind.name: b.table.to_pylist() for b in src.collect()}["switch_port_sample"]
        }
    finally:
        src.close()
    after = _walk(port, "1.3.6.1.2.1.31.1.1.1.6", *cli)
    # this machine's interfaces (+ the SONiC ports the fixture adds as 32-bit-only rows)
    assert set(names.values()) <= set(rows) and names
    for idx, name in names.items():
        # counters move while we read: ours lies between the two walks around it
        assert before[idx] <= rows[name]["rx_bytes_total"] <= after[idx], name
        assert rows[name]["up"] == {1: 1, 2: 0}.get(oper[idx]), name
    lo = next(r for n, r in rows.items() if n == "lo")
    assert lo["rx_packets_total"] is not None and lo["rx_errors_total"] is not None


def test_32_bit_counters_are_extended_across_a_wrap() -> None:
    loop = GnmiLoop()
    try:
        sw = SnmpSwitch("s", SnmpConfig(address="127.0.0.1:1"), 0.2, loop.loop)
        top = (1 << 32) - 100
        assert sw._extend("1", "ifInOctets", top, False) == top
        assert sw._extend("1", "ifInOctets", 50, False) == top + 150  # wrapped once
        assert sw.wraps == 1
        assert sw._extend("1", "ifInOctets", 10, True) == 10  # sysUpTime went back: a reset
    finally:
        loop.close()


def test_agent_that_does_not_answer_is_down(snmpd: dict[str, Any]) -> None:
    src = _source(snmpd["port"], community="wrong")  # snmpd ignores a wrong community
    try:
        rows = {b.kind.name: b.table.to_pylist() for b in src.collect()}
    finally:
        src.close()
    [st] = rows["switch_status"]
    assert st["up"] == 0 and "snmp" in st["error"] and "switch_port_sample" not in rows
    assert src.stats.errors["switch_down"] == 1


def test_lldp_mib_neighbours_equal_the_redis_paths(
    snmpd: dict[str, Any], sonic_redis: dict[str, Any]
) -> None:
    """The same neighbours (the SONiC APPL_DB fixture, served by snmpd as LLDP-MIB rows) read
    over SNMP and over Redis give the same lldp_link rows, field by field."""
    from exporters.switch.sonic import targets_from_config

    src = _source(snmpd["port"])
    try:
        snmp_rows = {b.kind.name: b.table.to_pylist() for b in src.collect()}["lldp_link"]
    finally:
        src.close()
    rcfg = SwitchSourceConfig(
        switches=[{"name": "leaf01", "address": f"127.0.0.1:{sonic_redis['port']}"}]
    )
    redis_rows = {b.kind.name: b.table.to_pylist() for b in SwitchSource(targets_from_config(rcfg), rcfg).collect()}["lldp_link"]  # fmt: skip
    fields = ("local_device", "local_port", "remote_device", "remote_port", "remote_chassis_id")
    got = sorted(tuple(r[f] for f in fields) for r in snmp_rows)
    want = sorted(tuple(r[f] for f in fields) for r in redis_rows)
    assert got == want and len(got) == 3
    assert {r["source"] for r in snmp_rows} == {"snmp"}


def test_snmp_port_records_equal_the_redis_paths(
    snmpd: dict[str, Any], sonic_redis: dict[str, Any]
) -> None:
    """The third transport on the same switch state: the dump's ports served as IF-MIB rows
    (32-bit columns) give the port records the Redis path gives, value by value, for every
    field IF-MIB has."""
    from exporters.switch.sonic import targets_from_config

    src = _source(snmpd["port"])
    try:
        rows = {b.kind.name: b.table.to_pylist() for b in src.collect()}["switch_port_sample"]
    finally:
        src.close()
    snmp = {r["port"]: r for r in rows if r["port"].startswith("Ethernet")}
    rcfg = SwitchSourceConfig(
        switches=[{"name": "leaf01", "address": f"127.0.0.1:{sonic_redis['port']}"}]
    )
    redis = {
        r["port"]: r
        for b in SwitchSource(targets_from_config(rcfg), rcfg).collect()
        if b.kind.name == "switch_port_sample"
        for r in b.table.to_pylist()
    }
    assert set(snmp) == set(redis) == {"Ethernet0", "Ethernet4", "Ethernet8"}
    fields = ["rx_bytes_total", "tx_bytes_total", "rx_packets_total", "tx_packets_total",
              "rx_discards_total", "tx_discards_total", "rx_errors_total", "tx_errors_total", "up"]  # fmt: skip
    for port in redis:
        for f in fields:
            assert snmp[port][f] == redis[port][f], (port, f, snmp[port][f], redis[port][f])


def test_sonic_pfc_per_priority_equals_the_dump(snmpd: dict[str, Any]) -> None:
    """snmp.sonic_pfc: SONiC's CISCO-PFC-EXT-MIB rows give every priority's PFC frames, equal to
    the dump's SAI_PORT_STAT_PFC_n counters (what Redis and gNMI read), and the sums; without
    it, no priority rows."""
    from tests.unit.switch.expected import expected_ports, expected_priorities

    counters = json.loads((FIX / "counters_db.json").read_text())
    src = _source(snmpd["port"], sonic_pfc=True)
    try:
        rows = {b.kind.name: b.table.to_pylist() for b in src.collect()}
    finally:
        src.close()
    prios = {(r["port"], r["priority"]): r for r in rows["switch_priority_sample"]}
    exp = expected_priorities(counters)
    assert set(prios) == set(exp) and len(exp) == 24
    for key, e in exp.items():
        assert prios[key]["rx_pause_total"] == e["rx_pause_total"], key
        assert prios[key]["tx_pause_total"] == e["tx_pause_total"], key
    ports = {r["port"]: r for r in rows["switch_port_sample"]}
    for name, e in expected_ports(counters).items():
        assert ports[name]["pfc_rx_pause_total"] == e["pfc_rx_pause_total"], name
        assert ports[name]["pfc_tx_pause_total"] == e["pfc_tx_pause_total"], name
    src = _source(snmpd["port"])
    try:
        assert "switch_priority_sample" not in {b.kind.name for b in src.collect()}
    finally:
        src.close()
