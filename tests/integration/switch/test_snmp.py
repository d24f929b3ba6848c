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
from exporters.switch.gnmi_stream import GnmiLoop
from exporters.switch.snmp import SnmpSwitch
from exporters.switch.source import SwitchSource

FIX = Path(__file__).parents[2] / "fixtures" / "sonic"
# what railscope makes of each LLDP-MIB row of the second agent (conftest.LLDP_REM_ROWS):
# (local_port, remote_device, remote_port, remote_chassis_id)
LLDP_WANT = {
    # the local port is lldpLocPortId where its subtype says it is a name, not the description
    "lldpd": ("s3vA", "spine01", "s3vB", "02:00:00:00:0b:01"),
    "sonic_snmpagent": ("etp1", "switch13", "Ethernet1", "00:11:22:33:44:55"),
    # no subtype (Dell OS10) and no description: the id, as before
    "dell_os10": ("ethernet1/1/25", "1007-lan-2", "ethernet1/1/25", "4c:d9:8f:fb:1e:fe"),
    # a MAC chassis id is a MAC by its subtype, even where its octets are printable ("PkKZ1@")
    "lldpd_printable_mac_chassis": ("s3vA", "spine01", "s3vB", "50:6b:4b:5a:31:40"),
    # a MAC port id: the description names the port, as on the Redis and gNMI paths
    "lldpd_mac_port_with_description": ("s3vA", "spine01", "s3vB", "02:00:00:00:0b:02"),
    # no system name sent: still a link
    "nic_firmware_mandatory_tlvs_only": ("s3vA", "", "0c:42:a1:11:22:33", "0c:42:a1:11:22:33"),
    "mac_port_printable_without_description": (
        "s3vA", "gpu-node-08", "50:6b:4b:5a:31:41", "50:6b:4b:5a:31:41"),
    # networkAddress: the IANA address family octet, then the address; a NUL-terminated port id
    "chassis_ipv4": ("s3vA", "oob-sw1", "swp1", "10.0.0.11"),
    # a local port whose id is a MAC: its description names it
    "chassis_ipv6_port_ipv4": ("bmc port", "bmc-gw", "192.168.0.1", "2001:db8::1"),
    "chassis_local_text": ("bmc port", "odd", "Eth 7", "chassis-7"),
    "chassis_component_binary": ("bmc port", "odd2", "9", "00:ff:10"),
    # Dell OS10's "Not Advertised" is a field the neighbour did not send
    "dell_os10_not_advertised": ("ethernet1/1/30", "", "TenGigabitEthernet 1/43", "f4:8e:38:55:de:f6"),
    "dell_os10_not_advertised_mac_port": (
        "ethernet1/1/30", "", "f4:8e:38:55:de:f7", "f4:8e:38:55:de:f7"),
}  # fmt: skip


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
        assert rows[name]["up"] == {1: 1, 2: 0, 6: 0, 7: 0}.get(oper[idx]), name
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


@pytest.fixture(scope="module")
def agents_lldp(snmpd_agents: dict[str, Any]) -> list[tuple[str, ...]]:
    src = _source(snmpd_agents["port"])
    try:
        rows = {b.kind.name: b.table.to_pylist() for b in src.collect()}["lldp_link"]
    finally:
        src.close()
    fields = ("local_port", "remote_device", "remote_port", "remote_chassis_id")
    return [tuple(r[f] for f in fields) for r in rows]


@pytest.mark.parametrize("case", sorted(LLDP_WANT))
def test_lldp_mib_rows_as_real_agents_serve_them(
    agents_lldp: list[tuple[str, ...]], case: str
) -> None:
    """Each LLDP-MIB row the second agent serves (lldpd, sonic-snmpagent, Dell OS10 and NIC
    firmware shapes: conftest.LLDP_REM_ROWS) is the link it describes."""
    assert LLDP_WANT[case] in agents_lldp, (case, agents_lldp)


def test_every_lldp_mib_row_is_one_link(agents_lldp: list[tuple[str, ...]]) -> None:
    """Every neighbour with a chassis or port id is a link, once: none is dropped for want of a
    system name (only Chassis ID, Port ID and TTL are mandatory)."""
    from tests.integration.switch.conftest import LLDP_REM_ROWS

    assert set(LLDP_WANT) == set(LLDP_REM_ROWS) and len(set(LLDP_WANT.values())) == len(LLDP_WANT)
    assert sorted(agents_lldp) == sorted(LLDP_WANT.values())


def test_oper_status_per_rfc_2863(snmpd_agents: dict[str, Any]) -> None:
    """ifOperStatus: up(1) is up; down(2), notPresent(6) and lowerLayerDown(7) are not
    operational (a LAG whose members are down reads down, not unknown); testing(3), unknown(4)
    and dormant(5) are unknown."""
    src = _source(snmpd_agents["port"])
    try:
        rows = {b.kind.name: b.table.to_pylist() for b in src.collect()}["switch_port_sample"]
    finally:
        src.close()
    up = {r["port"]: r["up"] for r in rows}
    assert {p: up.get(p, "missing") for p in (
        "oper-up", "oper-down", "oper-testing", "oper-unknown", "oper-dormant",
        "oper-notPresent", "Port-Channel2",
    )} == {"oper-up": 1, "oper-down": 0, "oper-testing": None, "oper-unknown": None,
           "oper-dormant": None, "oper-notPresent": 0, "Port-Channel2": 0}  # fmt: skip
