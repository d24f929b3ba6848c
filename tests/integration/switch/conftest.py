"""A real redis-server on a free loopback port, loaded with the SONiC fixtures."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
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
    APPL_DB fixture, as an agent serves them: lldpLocPortDesc per local port number, lldpRem*
    indexed timeMark.localPortNum.remIndex, a MAC chassis id as 6 raw octets."""
    appl = json.loads((FIX / "appl_db.json").read_text())
    out = []
    for num, key in enumerate(sorted(k for k in appl if k.startswith("LLDP_ENTRY_TABLE:")), 1):
        h, port = appl[key], key.split(":", 1)[1]
        idx = f"0.{num}.{h['lldp_rem_index']}"
        rem = "1.0.8802.1.1.2.1.4.1.1"
        out += [
            f'override 1.0.8802.1.1.2.1.3.7.1.4.{num} octet_str "{port}"',
            f"override {rem}.5.{idx} octet_str 0x{h['lldp_rem_chassis_id'].replace(':', '')}",
            f"override {rem}.6.{idx} integer {h['lldp_rem_port_id_subtype']}",
            f'override {rem}.7.{idx} octet_str "{h["lldp_rem_port_id"]}"',
            f'override {rem}.8.{idx} octet_str "{h["lldp_rem_port_desc"]}"',
            f'override {rem}.9.{idx} octet_str "{h["lldp_rem_sys_name"]}"',
        ]
    return "\n".join(out) + "\n"


@pytest.fixture(scope="session")
def snmpd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A real net-snmp snmpd on a free loopback UDP port, serving this machine's interfaces:
    v2c community `public`, v3 authPriv user `railscope` (SHA/AES)."""
    exe = shutil.which("snmpd") or ("/usr/sbin/snmpd" if Path("/usr/sbin/snmpd").exists() else None)
    if exe is None or shutil.which("snmpbulkwalk") is None:
        pytest.skip("snmpd / snmpbulkwalk are not installed (Debian packages snmpd, snmp)")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    d = tmp_path_factory.mktemp("snmpd")
    user, auth, priv = SNMP_USER
    conf = d / "snmpd.conf"
    conf.write_text(
        f"persistentDir {d}/persist\n"
        f"agentAddress udp:127.0.0.1:{port}\n"
        "rocommunity public 127.0.0.1\n"
        f"createUser {user} SHA {auth} AES {priv}\n"
        f"rouser {user} priv\n" + lldp_mib_overrides() + if_mib_overrides() + pfc_mib_overrides()
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
    yield {"port": port, "user": SNMP_USER}
    proc.terminate()
    proc.wait(10)
