"""SNMP fallback for switches: IF-MIB / IF-X-MIB counters and oper status, LLDP-MIB neighbours,
by GETBULK walks of many columns at once (SNMPv2c or v3 authPriv, pysnmp 7, numeric OIDs).

64-bit ifHC* counters are used where the agent has them; 32-bit ones are extended across wraps
(sysUpTime going back is a reset, not a wrap). It only reads. A value that is not what the MIB
says is counted and named, never stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import Callable
from pathlib import Path
from typing import Any

from exporters.switch import counters as C
from exporters.switch.config import SnmpConfig
from exporters.switch.sonic import SwitchDown
from telemetry.errors import UserError

SNMP_CSV = Path(__file__).with_name("snmp_counters.csv")
SYS_UPTIME = "1.3.6.1.2.1.1.3.0"
IF_NUMBER = "1.3.6.1.2.1.2.1.0"
IF = "1.3.6.1.2.1.2.2.1."
IFX = "1.3.6.1.2.1.31.1.1.1."
# column -> (OID, bits of a counter; 0 = not a counter)
COLUMNS: dict[str, tuple[str, int]] = {
    "ifDescr": (IF + "2", 0),
    "ifOperStatus": (IF + "8", 0),
    "ifInOctets": (IF + "10", 32),
    "ifInUcastPkts": (IF + "11", 32),
    "ifInNUcastPkts": (IF + "12", 32),
    "ifInDiscards": (IF + "13", 32),
    "ifInErrors": (IF + "14", 32),
    "ifOutOctets": (IF + "16", 32),
    "ifOutUcastPkts": (IF + "17", 32),
    "ifOutNUcastPkts": (IF + "18", 32),
    "ifOutDiscards": (IF + "19", 32),
    "ifOutErrors": (IF + "20", 32),
    "ifName": (IFX + "1", 0),
    "ifHCInOctets": (IFX + "6", 64),
    "ifHCInUcastPkts": (IFX + "7", 64),
    "ifHCInMulticastPkts": (IFX + "8", 64),
    "ifHCInBroadcastPkts": (IFX + "9", 64),
    "ifHCOutOctets": (IFX + "10", 64),
    "ifHCOutUcastPkts": (IFX + "11", 64),
    "ifHCOutMulticastPkts": (IFX + "12", 64),
    "ifHCOutBroadcastPkts": (IFX + "13", 64),
    "ifHighSpeed": (IFX + "15", 0),
}
LLDP_REM = "1.0.8802.1.1.2.1.4.1.1."  # lldpRemEntry: index timeMark.localPortNum.remIndex
LLDP_LOC_PORT = "1.0.8802.1.1.2.1.3.7.1."  # lldpLocPortEntry: index localPortNum
LLDP_COLUMNS = {
    "lldpRemChassisIdSubtype": LLDP_REM + "4",
    "lldpRemChassisId": LLDP_REM + "5",
    "lldpRemPortIdSubtype": LLDP_REM + "6",
    "lldpRemPortId": LLDP_REM + "7",
    "lldpRemPortDesc": LLDP_REM + "8",
    "lldpRemSysName": LLDP_REM + "9",
    "lldpLocPortIdSubtype": LLDP_LOC_PORT + "2",
    "lldpLocPortId": LLDP_LOC_PORT + "3",
    "lldpLocPortDesc": LLDP_LOC_PORT + "4",
}
# LLDP-MIB LldpChassisIdSubtype / LldpPortIdSubtype: the subtypes whose id is an address, not
# text (a MAC's six octets can be printable: 50:6b:4b:5a:31:40 is "PkKZ1@")
CHASSIS_ID = {"mac": 4, "net": 5}  # macAddress(4), networkAddress(5)
PORT_ID = {"mac": 3, "net": 4}  # macAddress(3), networkAddress(4)
# interfaceName(5), local(7): the port id is the port's name (lldpd: the ifname; SONiC's agent:
# the alias); the description is the operator's text ("uplink to spine01")
PORT_ID_NAMES = (5, 7)
# what Dell OS10's agent serves for a field the neighbour did not send
NOT_ADVERTISED = "Not Advertised"
# CISCO-PFC-EXT-MIB cpfcIfPriorityEntry (index ifIndex.priority), as SONiC's snmp agent serves
# it (sonic-snmpagent mibs/vendor/cisco/ciscoPfcExtMIB.py): cpfcIfPriorityRequests (.2) is
# SAI_PORT_STAT_PFC_<p>_RX_PKTS and cpfcIfPriorityIndications (.3) SAI_PORT_STAT_PFC_<p>_TX_PKTS
PFC_PRIORITY = "1.3.6.1.4.1.9.9.813.1.2.1."
PFC_COLUMNS = {
    "cpfcIfPriorityRequests": PFC_PRIORITY + "2",
    "cpfcIfPriorityIndications": PFC_PRIORITY + "3",
}
_ENGINES: dict[int, Any] = {}  # id(loop) -> the SnmpEngine its switches share
# ifOperStatus (RFC 2863): down(2), notPresent(6) and lowerLayerDown(7) (a LAG whose members
# are down) are not operational; testing(3), unknown(4) and dormant(5) say nothing -> null
OPER = {1: 1, 2: 0, 6: 0, 7: 0}


def _auth(cfg: SnmpConfig) -> Any:
    from pysnmp.hlapi.v3arch.asyncio import CommunityData, UsmUserData
    from pysnmp.hlapi.v3arch.asyncio import auth as A

    if cfg.version == "2c":
        return CommunityData(cfg.community, mpModel=1)
    auth = {"sha": A.usmHMACSHAAuthProtocol, "sha256": A.usmHMAC192SHA256AuthProtocol,
            "md5": A.usmHMACMD5AuthProtocol}[cfg.auth_protocol]  # fmt: skip
    priv = {"aes": A.usmAesCfb128Protocol, "aes256": A.usmAesCfb256Protocol,
            "des": A.usmDESPrivProtocol}[cfg.priv_protocol]  # fmt: skip
    if not (cfg.user and cfg.auth_key and cfg.priv_key):
        raise UserError("snmp v3: user, auth_key and priv_key are required (authPriv)")
    return UsmUserData(cfg.user, cfg.auth_key, cfg.priv_key, authProtocol=auth, privProtocol=priv)


class SnmpSwitch:
    """One switch's SNMP agent, walked once per poll on the shared asyncio loop."""

    def __init__(
        self,
        name: str,
        cfg: SnmpConfig,
        timeout: float,
        loop: Any,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.name, self.cfg, self.timeout, self.loop = name, cfg, timeout, loop
        host, sep, port = cfg.address.rpartition(":")
        if not sep:
            host, port = cfg.address, "161"
        try:
            self.host, self.port = host.strip("[]"), int(port)
        except ValueError:
            raise UserError(f"snmp address {cfg.address!r}: expected HOST[:PORT]") from None
        self.auth = _auth(cfg)
        self._engine: Any = None
        self._target: Any = None
        # (ifIndex, column) -> (last raw 32-bit value, extended value); sysUpTime of last poll
        self._ext: dict[tuple[str, str], tuple[int, int]] = {}
        self._uptime: int | None = None
        self.wraps = 0

    # -- the walk
    async def _ensure(self) -> None:
        from pysnmp.hlapi.v3arch.asyncio import SnmpEngine, UdpTransportTarget

        if self._engine is None:
            # one engine (one UDP dispatcher) for every switch on this loop
            engine = _ENGINES.get(id(self.loop))
            self._engine = engine or _ENGINES.setdefault(id(self.loop), SnmpEngine())
        if self._target is None:
            self._target = await UdpTransportTarget.create(
                (self.host, self.port), timeout=self.timeout, retries=self.cfg.retries
            )

    async def walk(self, oids: list[str], reps: int | None = None) -> dict[str, dict[str, Any]]:
        """GETBULK over many columns at once: {column OID: {index: value}}."""
        from pysnmp.hlapi.v3arch.asyncio import (
            ContextData,
            ObjectIdentity,
            ObjectType,
            bulk_cmd,
        )

        await self._ensure()
        target = self._target
        out: dict[str, dict[str, Any]] = {o: {} for o in oids}
        cursor = {o: o for o in oids}
        while cursor:
            cols = list(cursor)
            err, status, _, binds = await bulk_cmd(
                self._engine, self.auth, target, ContextData(), 0, reps or self.cfg.max_repetitions,
                *(ObjectType(ObjectIdentity(cursor[c])) for c in cols), lookupMib=False,
            )  # fmt: skip
            if err:
                raise SwitchDown(f"snmp {self.cfg.address}: {err}")
            if status:
                raise SwitchDown(f"snmp {self.cfg.address}: {status.prettyPrint()}")
            done = set()
            for i, (oid, val) in enumerate(binds):
                col = cols[i % len(cols)]
                o = str(oid)
                if col in done or not o.startswith(col + ".") or _end(val):
                    done.add(col)
                    continue
                out[col][o[len(col) + 1 :]] = val
                cursor[col] = o
            for c in cols:
                if c in done or not binds:
                    cursor.pop(c, None)
        return out

    async def _get(self, *oids: str) -> list[Any]:
        from pysnmp.hlapi.v3arch.asyncio import (
            ContextData,
            ObjectIdentity,
            ObjectType,
            get_cmd,
        )

        await self._ensure()
        err, status, _, binds = await get_cmd(
            self._engine, self.auth, self._target, ContextData(),
            *(ObjectType(ObjectIdentity(o)) for o in oids), lookupMib=False,
        )  # fmt: skip
        if err or status:
            raise SwitchDown(f"snmp {self.cfg.address}: {err or status.prettyPrint()}")
        return [b[1] for b in binds]

    async def _read(self, lldp: bool) -> tuple[Any, dict[str, dict[str, Any]]]:
        cols = [oid for oid, _ in COLUMNS.values()]
        if lldp:
            cols += list(LLDP_COLUMNS.values())
        if self.cfg.sonic_pfc:
            cols += list(PFC_COLUMNS.values())
        uptime, ifnum = await self._get(SYS_UPTIME, IF_NUMBER)
        # as many rows per request as there are interfaces (+1 to see the column end): a small
        # switch is not sent 25 rows of the next column for each of its ~30
        n = _int(ifnum)
        reps = max(2, min(self.cfg.max_repetitions, n + 1)) if n is not None else None
        return uptime, await self.walk(cols, reps)

    # -- the poll the source calls (from a worker thread)
    def poll(self, problems: C.Problems, *, lldp: bool = True) -> tuple[list[Any], ...]:
        fut = asyncio.run_coroutine_threadsafe(self._read(lldp), self.loop)
        try:
            uptime, data = fut.result(self.timeout * (self.cfg.retries + 1) * 20 + 5)
        except TimeoutError:
            fut.cancel()
            raise SwitchDown(f"snmp {self.cfg.address}: no answer") from None
        reset = False
        up = _int(uptime)
        if up is not None and self._uptime is not None and up < self._uptime:
            reset = True  # the agent restarted: counters start again, not a wrap
        self._uptime = up
        by_col = {name: data.get(oid, {}) for name, (oid, _) in COLUMNS.items()}
        ports = []
        for idx in sorted(by_col["ifDescr"], key=lambda s: int(s) if s.isdigit() else 0):
            name = _text(by_col["ifName"].get(idx)) or _text(by_col["ifDescr"].get(idx))
            h: dict[str, str] = {}
            for col, (_, bits) in COLUMNS.items():
                if not bits or idx not in by_col[col]:
                    continue
                v = _int(by_col[col][idx])
                if v is None:
                    problems.add("bad_value", f"{self.name} {col}.{idx}={by_col[col][idx]!r}")
                    continue
                h[col] = str(self._extend(idx, col, v, reset) if bits == 32 else v)
            key = f"ifIndex {idx} ({name})"
            row: dict[str, Any] = {
                "port": name,
                **C.fields_from("port", key, h, problems, table=SNMP_CSV),
            }
            if self.cfg.sonic_pfc:
                row["priorities"] = self._priorities(idx, key, data, problems)
                row.update(C.pfc_sums(row["priorities"]))
            row["up"] = OPER.get(_int(by_col["ifOperStatus"].get(idx)) or 0)
            mbps = _int(by_col["ifHighSpeed"].get(idx))
            row["speed_bps"] = mbps * 1e6 if mbps else None
            ports.append(row)
        return ports, [], self._lldp(data) if lldp else []

    def _priorities(
        self, idx: str, key: str, data: dict[str, dict[str, Any]], problems: C.Problems
    ) -> list[dict[str, Any]]:
        """switch_priority_sample fields of one interface from cpfcIfPriorityTable."""
        rows = []
        for p in C.PRIORITIES:
            h: dict[str, str] = {}
            for col, oid in PFC_COLUMNS.items():
                raw = data.get(oid, {}).get(f"{idx}.{p}")
                if raw is None:
                    continue
                v = _int(raw)
                if v is None:
                    problems.add("bad_value", f"{self.name} {col}.{idx}.{p}={raw!r}")
                    continue
                h[col] = str(v)
            f = C.fields_from("priority", f"{key} priority {p}", h, problems, p, table=SNMP_CSV)
            if any(v is not None for v in f.values()):
                rows.append({"priority": p, **f})
        return rows

    def _extend(self, idx: str, col: str, v: int, reset: bool) -> int:
        """A 32-bit counter as a 64-bit one: each step forward is (v - last) mod 2^32."""
        prev = self._ext.get((idx, col))
        if prev is None or reset:
            ext = v
        else:
            last, ext = prev
            if v < last:
                self.wraps += 1
            ext += (v - last) % (1 << 32)
        self._ext[(idx, col)] = (v, ext)
        return ext

    def _lldp(self, data: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
        col = {n: data.get(o, {}) for n, o in LLDP_COLUMNS.items()}
        out = []
        # Chassis ID and Port ID are mandatory TLVs, the system name is not (NIC firmware sends
        # none): every entry with either id is a link
        for index in sorted(col["lldpRemChassisId"].keys() | col["lldpRemPortId"].keys()):
            parts = index.split(".")
            if len(parts) < 3:
                continue
            local = parts[1]
            # lldpLocPortNum is not an ifIndex on every agent (Dell OS10): name the local port
            # from lldpLocPortTable only. Its id names it where the subtype says it is a name;
            # else (a MAC, or no subtype served: Dell OS10) the description first, then the id
            loc_sub = _int(col["lldpLocPortIdSubtype"].get(local))
            loc_id = _lldp_id(col["lldpLocPortId"].get(local), loc_sub, PORT_ID)
            loc_desc = _text(col["lldpLocPortDesc"].get(local))
            names = (loc_id, loc_desc) if loc_sub in PORT_ID_NAMES else (loc_desc, loc_id)
            local_name = names[0] or names[1]
            sub = _int(col["lldpRemPortIdSubtype"].get(index))
            port_id = _lldp_id(col["lldpRemPortId"].get(index), sub, PORT_ID)
            desc = _advertised(col["lldpRemPortDesc"].get(index))
            # a MAC port id: the description names the port better (as the Redis and gNMI paths)
            if sub == PORT_ID["mac"] and desc:
                port_id = desc
            chassis_sub = _int(col["lldpRemChassisIdSubtype"].get(index))
            out.append({
                "local_port": local_name or local,
                "remote_device": _advertised(col["lldpRemSysName"].get(index)),
                "remote_port": port_id,
                "remote_chassis_id": _lldp_id(
                    col["lldpRemChassisId"].get(index), chassis_sub, CHASSIS_ID
                ),
                "source": "snmp",
            })  # fmt: skip
        return out

    def close(self) -> None:
        engine = _ENGINES.pop(id(self.loop), None)
        if engine is not None:
            with contextlib.suppress(Exception):  # a dispatcher that never opened
                engine.close_dispatcher()


def _end(val: Any) -> bool:
    return val.__class__.__name__ in ("EndOfMibView", "NoSuchObject", "NoSuchInstance")


def _int(v: Any) -> int | None:
    if v is None:
        return None
    try:
        n = int(v)
    except (TypeError, ValueError):
        return None
    return n if n >= 0 else None


def _text(v: Any) -> str:
    if v is None:
        return ""
    try:
        return bytes(v.asOctets()).decode("utf-8", "replace").rstrip("\x00")
    except AttributeError:
        return str(v)


def _advertised(v: Any) -> str:
    """A text field the neighbour may leave out; Dell OS10's "Not Advertised" is left out."""
    t = _text(v)
    return "" if t == NOT_ADVERTISED else t


def _lldp_id(v: Any, subtype: int | None, kinds: dict[str, int]) -> str:
    """A chassis or port id as its subtype says: a MAC (6 octets) as aa:bb:..., a network
    address as IPv4/IPv6 text (its first octet the IANA address family: 1 IPv4, 2 IPv6); other
    subtypes, and an address whose length does not fit (SONiC's agent serves a MAC as its text),
    as text where printable, else hex."""
    if v is None:
        return ""
    try:
        raw = bytes(v.asOctets())
    except AttributeError:
        return str(v)
    if subtype == kinds["mac"] and len(raw) == 6:
        return ":".join(f"{b:02x}" for b in raw)
    if subtype == kinds["net"] and (raw[:1], len(raw)) in ((b"\x01", 5), (b"\x02", 17)):
        return str(ipaddress.ip_address(raw[1:]))
    try:
        text = raw.rstrip(b"\x00").decode()
    except UnicodeDecodeError:
        text = ""
    if text and text.isprintable():
        return text
    return ":".join(f"{b:02x}" for b in raw)


__all__ = ["COLUMNS", "SnmpSwitch"]
