"""A real redis-server on a free loopback port, loaded with the SONiC fixtures."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.redis_server import redis_server

FIX = Path(__file__).parents[2] / "fixtures" / "sonic"


def load(client: Any, dump: dict[str, Any]) -> None:
    pipe = client.pipeline(transaction=False)
    for key, h in dump.items():
        if h:  # Redis has no empty hashes: an empty one in a dump is an absent key
            pipe.hset(key, mapping=h)
    pipe.execute()


@pytest.fixture(scope="session")
def redis_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed (Debian package redis-server)")
    try:
        with redis_server(exe, 32, tmp_path_factory.mktemp("redis")) as port:
            yield port
    except RuntimeError as e:
        pytest.fail(str(e))


@pytest.fixture
def sonic_redis(redis_port: int) -> Iterator[dict[str, Any]]:
    """db 2 = COUNTERS_DB dump, db 0 = APPL_DB fixture; flushed afterwards."""
    import redis

    counters = json.loads((FIX / "counters_db.json").read_text())
    appl = json.loads((FIX / "appl_db.json").read_text())
    c2, c0 = redis.Redis(port=redis_port, db=2), redis.Redis(port=redis_port, db=0)
    load(c2, counters)
    load(c0, appl)
    yield {"port": redis_port, "counters": counters, "appl": appl}
    redis.Redis(port=redis_port).flushall()


SNMP_USER = ("railscope", "authpass123", "privpass123")


IF_MIB_32 = {  # IF-MIB column -> SAI counter of the SONiC dump
    "2": None,  # ifDescr: the port name
    "8": None,  # ifOperStatus: from APPL_DB PORT_TABLE
    "10": "SAI_PORT_STAT_IF_IN_OCTETS",
    "11": "SAI_PORT_STAT_IF_IN_UCAST_PKTS",
    "12": "SAI_PORT_STAT_IF_IN_NON_UCAST_PKTS",
    "13": "SAI_PORT_STAT_IF_IN_DISCARDS",
    "14": "SAI_PORT_STAT_IF_IN_ERRORS",
    "16": "SAI_PORT_STAT_IF_OUT_OCTETS",
    "17": "SAI_PORT_STAT_IF_OUT_UCAST_PKTS",
    "18": "SAI_PORT_STAT_IF_OUT_NON_UCAST_PKTS",
    "19": "SAI_PORT_STAT_IF_OUT_DISCARDS",
    "20": "SAI_PORT_STAT_IF_OUT_ERRORS",
}


def if_mib_overrides() -> str:
    """The SONiC dump's ports as extra IF-MIB rows (ifIndex 1001...), 32-bit columns only (an
    agent without IF-X-MIB for them: net-snmp's `override` has no Counter64), so SNMP reads
    the same switch state as the Redis and gNMI tests."""
    counters = json.loads((FIX / "counters_db.json").read_text())
    appl = json.loads((FIX / "appl_db.json").read_text())
    out = []
    for i, (port, oid) in enumerate(sorted(counters["COUNTERS_PORT_NAME_MAP"].items())):
        h, idx = counters[f"COUNTERS:{oid}"], 1001 + i
        for col, sai in IF_MIB_32.items():
            o = f"1.3.6.1.2.1.2.2.1.{col}.{idx}"
            if col == "2":
                out.append(f'override {o} octet_str "{port}"')
            elif col == "8":
                st = appl.get(f"PORT_TABLE:{port}", {}).get("oper_status")
                out.append(f"override {o} integer {1 if st == 'up' else 2}")
            elif sai in h:
                out.append(f"override {o} counter {int(h[sai]) % (1 << 32)}")
    return "\n".join(out) + "\n"


def pfc_mib_overrides() -> str:
    """CISCO-PFC-EXT-MIB cpfcIfPriorityTable rows for the dump's ports (ifIndex 1001...), as
    SONiC's snmp agent fills them: Requests (.2) = SAI_PORT_STAT_PFC_<p>_RX_PKTS, Indications
    (.3) = ..._TX_PKTS (Counter32 here: net-snmp's `override` has no Counter64)."""
    counters = json.loads((FIX / "counters_db.json").read_text())
    out = []
    for i, (_, oid) in enumerate(sorted(counters["COUNTERS_PORT_NAME_MAP"].items())):
        h, idx = counters[f"COUNTERS:{oid}"], 1001 + i
        for p in range(8):
            for col, d in (("2", "RX"), ("3", "TX")):
                sai = f"SAI_PORT_STAT_PFC_{p}_{d}_PKTS"
                if sai in h:
                    out.append(
                        f"override 1.3.6.1.4.1.9.9.813.1.2.1.{col}.{idx}.{p} counter {h[sai]}"
                    )
    return "\n".join(out) + "\n"


def lldp_mib_overrides() -> str:
    """LLDP-MIB rows (net-snmp has no LLDP-MIB of its own) holding the neighbours of the SONiC
    APPL_DB fixture, as an agent serves them: per local port number lldpLocPortId = the port's
    name with its subtype (interfaceName(5) as lldpd; local(7) as sonic-snmpagent) and
    lldpLocPortDesc = the operator's description (not the name), lldpRem* indexed
    timeMark.localPortNum.remIndex, a MAC chassis id as 6 raw octets with its subtype."""
    appl = json.loads((FIX / "appl_db.json").read_text())
    out = []
    for num, key in enumerate(sorted(k for k in appl if k.startswith("LLDP_ENTRY_TABLE:")), 1):
        h, port = appl[key], key.split(":", 1)[1]
        idx = f"0.{num}.{h['lldp_rem_index']}"
        loc, rem = "1.0.8802.1.1.2.1.3.7.1", "1.0.8802.1.1.2.1.4.1.1"
        out += [
            f"override {loc}.2.{num} integer {5 if num % 2 else 7}",
            f'override {loc}.3.{num} octet_str "{port}"',
            f'override {loc}.4.{num} octet_str "to {h["lldp_rem_sys_name"]} (ticket NET-{num})"',
            f"override {rem}.4.{idx} integer {h['lldp_rem_chassis_id_subtype']}",
            f"override {rem}.5.{idx} octet_str 0x{h['lldp_rem_chassis_id'].replace(':', '')}",
            f"override {rem}.6.{idx} integer {h['lldp_rem_port_id_subtype']}",
            f'override {rem}.7.{idx} octet_str "{h["lldp_rem_port_id"]}"',
            f'override {rem}.8.{idx} octet_str "{h["lldp_rem_port_desc"]}"',
            f'override {rem}.9.{idx} octet_str "{h["lldp_rem_sys_name"]}"',
        ]
    return "\n".join(out) + "\n"


# LLDP-MIB as real agents serve it (the second test agent, `snmpd_agents`): values are text
# (str) or raw octets (bytes); a column left out is one the agent does not serve.
# lldpd: Debian lldpd -x (AgentX) under net-snmp 5.9.3, interface described with `ip link set
# ... alias`; sonic-snmpagent: what src/sonic_ax_impl/mibs/ieee802_1ab.py serves for an APPL_DB
# PORT_TABLE port (id = alias, local(7); desc = PORT description; the chassis MAC as its text);
# Dell OS10: LibreNMS tests/snmpsim/dell-os10.snmprec (S4128F-ON), which has no
# lldpLocPortIdSubtype, no lldpLocPortDesc, and "Not Advertised" for fields not sent.
LLDP_LOC_PORTS: dict[int, dict[int, int | str | bytes]] = {  # lldpLocPortNum -> {column: value}
    62: {2: 5, 3: "s3vA", 4: "uplink to spine01"},  # lldpd: interfaceName(5)
    1: {2: 7, 3: "etp1", 4: "snowflake"},  # sonic-snmpagent: local(7), the alias
    612: {3: "ethernet1/1/25"},  # Dell OS10
    632: {3: "ethernet1/1/30"},  # Dell OS10
    70: {2: 3, 3: bytes.fromhex("02000000aa01"), 4: "bmc port"},  # macAddress(3)
}
# case -> (timeMark.localPortNum.remIndex, {lldpRemEntry column: value}); columns 4 chassis id
# subtype, 5 chassis id, 6 port id subtype, 7 port id, 8 port description, 9 system name
LLDP_REM_ROWS: dict[str, tuple[str, dict[int, int | str | bytes]]] = {
    "lldpd": ("300.62.1", {4: 4, 5: bytes.fromhex("020000000b01"), 6: 5, 7: "s3vB",
                           8: "to leaf01 port s3vA", 9: "spine01"}),
    "lldpd_printable_mac_chassis": ("3800.62.3", {4: 4, 5: bytes.fromhex("506b4b5a3140"), 6: 5,
                                                  7: "s3vB", 8: "to leaf01 port s3vA",
                                                  9: "spine01"}),
    "lldpd_mac_port_with_description": ("2500.62.2", {4: 4, 5: bytes.fromhex("020000000b02"),
                                                      6: 3, 7: bytes.fromhex("506b4b5a3140"),
                                                      8: "s3vB", 9: "spine01"}),
    # NIC firmware LLDP: Chassis ID, Port ID (both the MAC) and TTL only
    "nic_firmware_mandatory_tlvs_only": ("5700.62.4", {4: 4, 5: bytes.fromhex("0c42a1112233"),
                                                       6: 3, 7: bytes.fromhex("0c42a1112233")}),
    "mac_port_printable_without_description": ("5800.62.5", {4: 4,
                                                              5: bytes.fromhex("506b4b5a3141"),
                                                              6: 3,
                                                              7: bytes.fromhex("506b4b5a3141"),
                                                              9: "gpu-node-08"}),
    "chassis_ipv4": ("5900.62.6", {4: 5, 5: bytes.fromhex("010a00000b"), 6: 5, 7: b"swp1\x00",
                                   9: "oob-sw1"}),
    "chassis_ipv6_port_ipv4": ("6000.70.1", {4: 5, 6: 4, 9: "bmc-gw",
                                             5: bytes.fromhex("0220010db8" + "00" * 11 + "01"),
                                             7: bytes.fromhex("01c0a80001")}),
    "chassis_local_text": ("6100.70.2", {4: 7, 5: "chassis-7", 6: 1, 7: "Eth 7",
                                                    9: "odd"}),
    "chassis_component_binary": ("6200.70.3", {4: 1, 5: bytes.fromhex("00ff10"), 6: 7, 7: "9",
                                               9: "odd2"}),
    "sonic_snmpagent": ("18545.1.1", {4: 4, 5: "00:11:22:33:44:55", 6: 5, 7: "Ethernet1",
                                      9: "switch13"}),
    "dell_os10": ("5700.612.2", {4: 4, 5: bytes.fromhex("4cd98ffb1efe"), 6: 5,
                                 7: "ethernet1/1/25", 8: "VLT", 9: "1007-lan-2"}),
    "dell_os10_not_advertised": ("15500.632.5", {4: 4, 5: bytes.fromhex("f48e3855def6"), 6: 5,
                                                 7: "TenGigabitEthernet 1/43",
                                                 8: "Not Advertised", 9: "Not Advertised"}),
    "dell_os10_not_advertised_mac_port": ("15600.632.6", {4: 4, 6: 3,
                                                          5: bytes.fromhex("f48e3855def7"),
                                                          7: bytes.fromhex("f48e3855def7"),
                                                          8: "Not Advertised",
                                                          9: "Not Advertised"}),
}  # fmt: skip
# ifIndex -> (ifDescr, ifOperStatus): every RFC 2863 state (Arista EOS serves a down LAG as
# lowerLayerDown(7): LibreNMS tests/snmpsim/arista_eos_vrf.snmprec, Port-Channel2)
IF_OPER_ROWS = {2001: ("oper-up", 1), 2002: ("oper-down", 2), 2003: ("oper-testing", 3),
                2004: ("oper-unknown", 4), 2005: ("oper-dormant", 5),
                2006: ("oper-notPresent", 6), 2007: ("Port-Channel2", 7)}  # fmt: skip


def _override(oid: str, v: int | str | bytes) -> str:
    if isinstance(v, int):
        return f"override {oid} integer {v}"
    return f"override {oid} octet_str " + (f'"{v}"' if isinstance(v, str) else "0x" + v.hex())


def agent_overrides() -> str:
    """The second test agent's rows: LLDP-MIB as lldpd, sonic-snmpagent and Dell OS10 serve it,
    and one IF-MIB row per ifOperStatus value."""
    out = [
        _override(f"1.0.8802.1.1.2.1.3.7.1.{c}.{num}", v)
        for num, cols in LLDP_LOC_PORTS.items()
        for c, v in cols.items()
    ]
    out += [
        _override(f"1.0.8802.1.1.2.1.4.1.1.{c}.{idx}", v)
        for idx, cols in LLDP_REM_ROWS.values()
        for c, v in cols.items()
    ]
    for idx, (descr, oper) in IF_OPER_ROWS.items():
        out += [_override(f"1.3.6.1.2.1.2.2.1.2.{idx}", descr),
                _override(f"1.3.6.1.2.1.2.2.1.8.{idx}", oper)]  # fmt: skip
    return "\n".join(out) + "\n"


@contextmanager
def _snmpd(d: Path, rows: str) -> Iterator[int]:
    """A real net-snmp snmpd on a free loopback UDP port serving this machine's interfaces plus
    `rows` (`override` lines): v2c community `public`, v3 authPriv user `railscope` (SHA/AES)."""
    exe = shutil.which("snmpd") or ("/usr/sbin/snmpd" if Path("/usr/sbin/snmpd").exists() else None)
    if exe is None or shutil.which("snmpbulkwalk") is None:
        pytest.skip("snmpd / snmpbulkwalk are not installed (Debian packages snmpd, snmp)")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    user, auth, priv = SNMP_USER
    conf = d / "snmpd.conf"
    conf.write_text(
        f"persistentDir {d}/persist\n"
        f"agentAddress udp:127.0.0.1:{port}\n"
        "rocommunity public 127.0.0.1\n"
        f"createUser {user} SHA {auth} AES {priv}\n"
        f"rouser {user} priv\n" + rows
    )
    proc = subprocess.Popen(
        [exe, "-f", "-Lf", str(d / "log"), "-C", "-c", str(conf), "-p", str(d / "pid"), "-M", str(d), "-m", ""],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    for _ in range(100):
        out = subprocess.run(
            ["snmpget", "-v2c", "-c", "public", "-On", "-t", "0.2", "-r", "0", f"127.0.0.1:{port}",
             "1.3.6.1.2.1.1.3.0"], capture_output=True, text=True,
        )  # fmt: skip
        if out.returncode == 0:
            break
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("snmpd did not start: " + (d / "log").read_text()[-500:])
    try:
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="session")
def snmpd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The test agent: this machine's interfaces plus the SONiC dump's ports (IF-MIB, PFC) and
    the APPL_DB fixture's LLDP neighbours."""
    rows = lldp_mib_overrides() + if_mib_overrides() + pfc_mib_overrides()
    with _snmpd(tmp_path_factory.mktemp("snmpd"), rows) as port:
        yield {"port": port, "user": SNMP_USER}


@pytest.fixture(scope="session")
def snmpd_agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A second agent serving LLDP-MIB as real agents do and every ifOperStatus value
    (`agent_overrides`), apart from the first so its rows do not change that one's answers."""
    with _snmpd(tmp_path_factory.mktemp("snmpd_agents"), agent_overrides()) as port:
        yield {"port": port, "user": SNMP_USER}
