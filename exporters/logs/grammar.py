"""The grammar of the log source: one log message (the text after any CRI / kmsg / dmesg prefix)
-> a typed event (kind + fields), or None. Pure: no I/O, no clock.

Every rule was written against real lines of several NCCL, PyTorch, NVIDIA driver, mlx5 and
kernel AER versions (tests/fixtures/logs/, docs/logs.md lists them per kind and version). Lines
are first screened by literal ANCHORS (a line with none of them cannot match any rule: that is
what keeps INFO chatter cheap, see `screen` and exporters/logs/scan.py); only a line that holds an
anchor meets the kind-specific expressions. It never guesses: a line that holds an anchor but
fits no rule is unmatched, not a half-filled event.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from exporters.logs.ibverbs import wc_status_name
from telemetry import xid as xid_catalog

Fields = dict[str, Any]

# The NCCL debug prefix "host:pid:tid [cuda_dev] NCCL ..." that every NCCL_DEBUG line carries.
_NCCL_PREFIX = re.compile(
    r"(?:^|[\s\]>:])(?P<host>[A-Za-z0-9][\w.\-]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<cuda_dev>\d+)\] "
)


def nccl_prefix(msg: str) -> Fields:
    """host, pid and cuda_dev of an NCCL line's prefix (all None when it has none)."""
    m = _NCCL_PREFIX.search(msg)
    if not m:
        return {"host": None, "pid": None, "cuda_dev": None}
    return {"host": m["host"], "pid": int(m["pid"]), "cuda_dev": int(m["cuda_dev"])}


def _int(s: str | None) -> int | None:
    return int(s) if s is not None else None


def _pci(s: str) -> str:
    """A GPU's PCI address as Xid lines print it (domain:bus:device), lower case: NVRM prints
    `PCI:0000:5D:00` in Xid lines and `0000:5d:00.0` elsewhere; both become `0000:5d:00`."""
    s = s.lower().removeprefix("pci:")
    return s[:-2] if len(s) == 12 and s[-2] == "." else s


# --- NCCL ---------------------------------------------------------------------------------------
# NCCL's wording of a failed work completion changed over versions:
#   2.0-2.1x  "Got completion with error 12, opcode 0, len 0, vendor err 129"
#   2.1x      "Got completion from peer 10.42.0.2<47534> with error 5, opcode 48, len 32764, vendor err 244"
#   2.2x      "... with status=12 opcode=129 len=65536 vendor err 129 (Recv) localGid G remoteGidsG"
#             (later 2.2x: " hca mlx5_0" at the end)
#   2.27      "... with status=IBV_WC_LOC_PROT_ERR(4) opcode=IBV_WC_SEND(0) reqSize=524288 vendor_err=81
#             req_type=Send localGid G remoteGidsG hca mlx5_11"
#   2.28+     "... with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RDMA_WRITE(1) vendor_err=129
#             localGid G remoteGidsG hca mlx5_0"
_IB_COMPLETION = re.compile(
    r"Got completion (?:from peer (?P<peer_ip>[0-9A-Fa-f.:]+)(?:<(?P<peer_port>\d+)>)? )?"
    r"with (?:error |status=)(?:[A-Z][A-Z_]*\()?(?P<status>\d+)\)?,? "
    r"opcode[ =](?:[A-Z][A-Z_]*\()?(?P<opcode>\d+)\)?,? "
    r"(?:len[ =]?(?P<len>\d+),? |reqSize=(?P<req_size>-?\d+) )?"
    r"vendor[ _]err[ =](?P<vendor_err>\d+)"
    r"(?: \((?P<direction>\w+)\)| req_type=(?P<req_type>\w+))?"
    r"(?:\s+localGid (?P<local_gid>\S+))?(?:\s+remoteGids?\s*(?P<remote_gid>[^\s]+))?"
    r"(?:\s+hca (?P<hca>\S+))?"
)


def _ib_completion(msg: str) -> Fields | None:
    m = _IB_COMPLETION.search(msg)
    if not m:
        return None
    status = int(m["status"])
    return {
        **nccl_prefix(msg),
        "peer_ip": m["peer_ip"],
        "peer_port": _int(m["peer_port"]),
        "status": status,
        "status_name": wc_status_name(status),
        "opcode": int(m["opcode"]),
        "len": _int(m["len"]),
        "req_size": _int(m["req_size"]),
        "vendor_err": int(m["vendor_err"]),
        "direction": m["direction"] or m["req_type"],
        "local_gid": m["local_gid"],
        "remote_gid": m["remote_gid"],
        "hca": m["hca"],
    }


_NET_SELECTED = re.compile(r"NCCL INFO Using network (?P<net>\S(?:.*\S)?)\s*$")


def _net_selected(msg: str) -> Fields | None:
    m = _NET_SELECTED.search(msg)
    return {**nccl_prefix(msg), "net": m["net"]} if m else None


_IB_USING = re.compile(
    r"NET/IB : Using (?P<devs>(?:\[\d+\]\S+\s*)+)(?:\[RO\])?\s*;\s*OOB (?P<oob>\S+)"
)
_IB_DEV = re.compile(r"\[\d+\](?P<dev>[^:\s/]+)(?::(?P<port>\d+))?(?:/(?P<link>\w+))?")


def _ib_devices(msg: str) -> Fields | None:
    m = _IB_USING.search(msg)
    if not m:
        return None
    devs = list(_IB_DEV.finditer(m["devs"]))
    return {
        **nccl_prefix(msg),
        "nics": [d["dev"] for d in devs],
        "ports": [_int(d["port"]) for d in devs],
        "link_layers": [d["link"] for d in devs],
        "oob": m["oob"],
    }


# 2.4-2.6 named a ring, with bare ranks: "Ring 00 : 3 -> 10 [send] via NET/IB/0/GDRDMA"
_CHANNEL = re.compile(
    r"(?:Channel|Ring) (?P<channel>\d+)(?:/\d+)? : (?P<src_rank>\d+)(?:\[[0-9a-fA-Fx]+\])? -> "
    r"(?P<dst_rank>\d+)(?:\[[0-9a-fA-Fx]+\])? (?:\[(?P<direction>send|receive)\] )?"
    r"via NET/(?P<net>[\w]+)/(?P<net_dev>\d+)(?:\((?P<pxn>\d+)\))?(?P<gdr>/GDRDMA)?"
)


def _channel_net(msg: str) -> Fields | None:
    m = _CHANNEL.search(msg)
    if not m:
        return None
    return {
        **nccl_prefix(msg),
        "channel": int(m["channel"]),
        "src_rank": int(m["src_rank"]),
        "dst_rank": int(m["dst_rank"]),
        "direction": m["direction"],
        "net": m["net"],
        "net_dev": int(m["net_dev"]),
        "gdr": m["gdr"] is not None,
        "pxn_proxy": _int(m["pxn"]),
    }


_GDR_DISABLED = re.compile(
    r"GPU Direct RDMA Disabled for (?:GPU \S+ / )?HCA (?P<hca>\d+)(?: '(?P<nic>[^']+)')?"
    r"(?: \((?P<reason>[^)]*)\))?"
)


def _gdr_disabled(msg: str) -> Fields | None:
    m = _GDR_DISABLED.search(msg)
    if not m:
        return None
    return {
        **nccl_prefix(msg),
        "nic": m["nic"] if m["nic"] is not None else f"HCA {m['hca']}",
        "hca": int(m["hca"]),
        "reason": m["reason"],
    }


_INIT_COMPLETE = re.compile(
    r"comm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) nranks (?P<nranks>\d+)"
    r"(?: cudaDev (?P<cuda>\d+))?(?: nvmlDev \d+)?(?: busId (?P<bus>[0-9a-fA-F]+))?"
    r"(?: commId (?P<comm_id>0x[0-9a-fA-F]+))?.*?\s?- Init COMPLETE"
)


def _init_complete(msg: str) -> Fields | None:
    m = _INIT_COMPLETE.search(msg)
    if not m:
        return None
    return {
        **nccl_prefix(msg),
        "rank": int(m["rank"]),
        "nranks": int(m["nranks"]),
        "comm_id": m["comm_id"],
        "bus_id": m["bus"],
    }


_NCCL_VERSION = re.compile(r"NCCL version (?P<v>\d+\.\d+\.\d+)(?:\+\S*)?\s*$")


def _nccl_version(msg: str) -> Fields | None:
    m = _NCCL_VERSION.search(msg)
    return {**nccl_prefix(msg), "nccl_version": m["v"]} if m else None


_NCCL_WARN = re.compile(r"NCCL WARN (?P<message>\S.*?)\s*$")


def _nccl_warn(msg: str) -> Fields | None:
    m = _NCCL_WARN.search(msg)
    return {**nccl_prefix(msg), "message": m["message"]} if m else None


# --- PyTorch ProcessGroupNCCL -------------------------------------------------------------------
# 1.13: "[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught ... Timeout(ms)=1800000) ran for"
# 2.1+: "[rank0]:[E321 02:07:08.4 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught ... NumelIn="
# 2.2+: "[PG 0 Rank 13] Watchdog caught ...", 2.4+: "[PG ID 0 PG GUID 0(default_pg) Rank 1] ..."
# Older WorkNCCL texts (PyTorch's source): 1.8 "WorkNCCL(OpType=X, TensorShape=[n, m],
# Timeout(ms)=T)" with no SeqNum, 1.9-1.11 "WorkNCCL(SeqNum=N, OpType=X, TensorShape=[n],
# Timeout(ms)=T)"; the shape is left out when the work has no outputs.
_WORK = re.compile(
    r"Watchdog caught collective operation timeout: WorkNCCL\((?:SeqNum=(?P<seq>\d+), )?"
    r"OpType=(?P<op>\w+)(?:, TensorShape=\[[^\]]*\])?"
    r"(?:, NumelIn=(?P<nin>-?\d+), NumelOut=(?P<nout>-?\d+))?, "
    r"Timeout\(ms\)=(?P<timeout>\d+)\) ran for (?P<ran>\d+) milliseconds"
)
_WHO = re.compile(
    r"\[(?:PG (?:ID )?(?P<pg>\d+) (?:PG GUID (?P<guid>[^\s\]]+) )?(?:\((?P<pgname>[^)]*)\) )?)?"
    r"Rank (?P<rank>\d+)\]"
)
_RANK_TAG = re.compile(r"\[rank(?P<rank>\d+)\]:")


def _who(head: str) -> Fields:
    """rank and process group named before a ProcessGroupNCCL message (the last tag wins)."""
    found = list(_WHO.finditer(head))
    if found:
        w = found[-1]
        if w["pg"] is None:  # "[PG 3 Rank 5] ... terminated with exception: [Rank 5] Watchdog ..."
            w = next(
                (e for e in reversed(found) if e["pg"] is not None and e["rank"] == w["rank"]), w
            )
        name = w["pgname"]
        if name is None and w["guid"] and "(" in w["guid"]:  # "0(default_pg)"
            name = w["guid"].partition("(")[2].rstrip(")")
        return {"rank": int(w["rank"]), "pg": _int(w["pg"]), "pg_name": name}
    t = _RANK_TAG.search(head)
    return {"rank": int(t["rank"]) if t else None, "pg": None, "pg_name": None}


def _watchdog_timeout(msg: str) -> Fields | None:
    m = _WORK.search(msg)
    if not m:
        return None
    return {
        **_who(msg[: m.start()]),
        "seq_num": _int(m["seq"]),
        "op_type": m["op"],
        "numel_in": _int(m["nin"]),
        "numel_out": _int(m["nout"]),
        "timeout_ms": int(m["timeout"]),
        "ran_ms": int(m["ran"]),
    }


_STUCK = re.compile(r"ProcessGroupNCCL's watchdog got stuck for (?P<s>\d+) seconds")


def _watchdog_stuck(msg: str) -> Fields | None:
    m = _STUCK.search(msg)
    return {**_who(msg[: m.start()]), "stuck_s": int(m["s"])} if m else None


# 2.2/2.3 also printed "[PG 1 Rank 1] Timeout at NCCL work: 158046, last enqueued NCCL work: ..."
_EXCEPTION = re.compile(
    r"(?:Exception \(either an error or timeout\) detected by watchdog at|Timeout at NCCL) "
    r"work: (?P<work>\d+), "
    r"last enqueued NCCL work: (?P<enq>-?\d+), last completed NCCL work: (?P<done>-?\d+)"
)


def _watchdog_exception(msg: str) -> Fields | None:
    m = _EXCEPTION.search(msg)
    if not m:
        return None
    return {
        **_who(msg[: m.start()]),
        "seq_num": int(m["work"]),
        "last_enqueued": int(m["enq"]),
        "last_completed": int(m["done"]),
    }


_NCCL_ERROR = re.compile(
    r"NCCL error(?: in: (?P<where>\S+?),|:) (?P<err>[^,(]*[^,(\s])"
    r"(?: \(run with NCCL_DEBUG=\w+ for details\))?(?:, NCCL version (?P<v>\d+\.\d+\.\d+))?"
)


def _torch_nccl_error(msg: str) -> Fields | None:
    m = _NCCL_ERROR.search(msg)
    if not m:
        return None
    return {
        **_who(msg[: m.start()]),
        "nccl_error": m["err"],
        "where": m["where"],
        "nccl_version": m["v"],
    }


# --- NVIDIA driver (NVRM) -----------------------------------------------------------------------
# r450-: "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus."
# r470+: "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: ..."
# r515+: "NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off ..."
# MIG: the driver attributes an Xid to a GPU instance and compute instance where it can
#   (open-gpu-kernel-modules, kernel_rc.c): "NVRM: Xid (PCI:0000:01:00 GPU-I:05 GPU-CI:01): 94, ..."
_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.\d)?)"
    r"(?: GPU-I:(?P<gi>\d+))?(?: GPU-CI:(?P<ci>\d+))?\): "
    r"(?P<xid>\d+),(?: pid=(?P<pid>'?(?:<unknown>|\d+)'?),)?(?: name=(?P<name>'[^']*'|[^,]*),)?"
    r"\s*(?P<message>.*?)\s*$"
)


def _unknown(v: str | None) -> str | None:
    if v is None:
        return None
    v = v.strip().strip("'")
    return None if v in ("<unknown>", "") else v


def _xid(msg: str) -> Fields | None:
    m = _XID.search(msg)
    if not m:
        return None
    xid = int(m["xid"])
    pid = _unknown(m["pid"])
    text = m["message"]
    cause = xid_catalog.caused_by(text)
    recovery = xid_catalog.recovery_action(text)
    return {
        "pci_bus": _pci(m["pci"]),
        "xid": xid,
        "pid": int(pid) if pid is not None else None,
        "process": _unknown(m["name"]),
        "gpu_instance": _int(m["gi"]),
        "compute_instance": _int(m["ci"]),
        "message": text,
        "caused_by_xid": cause,
        "recovery_action": recovery.text if recovery is not None else None,
        **xid_fields(xid, cause, recovery),
    }


def xid_fields(
    xid: int, cause: int | None = None, recovery: xid_catalog.Recovery | None = None
) -> Fields:
    """mnemonic, action and fatal of an Xid from NVIDIA's Xid catalog (telemetry/xid.py): the
    action is the one to take for this line (Xid 154's reported recovery; a derivative Xid's
    cause's action) and `fatal` that action's; None where the catalog does not know the code."""
    info = xid_catalog.lookup(xid)
    action = xid_catalog.effective_action(xid, cause=cause, recovery=recovery)
    bucket = xid_catalog.buckets().get(action or "")
    return {
        "mnemonic": info.mnemonic,
        "action": action,
        "fatal": bucket.fatal if bucket is not None else info.fatal,
    }


_FALLEN = re.compile(
    r"NVRM: GPU (?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d): GPU has fallen off the bus"
)
# r570+ prints, without an Xid, over three kernel records:
#   NVRM: The NVIDIA GPU 0000:b3:00.0 / NVRM: (PCI ID: 10de:26b5) installed in this system has /
#   NVRM: fallen off the bus and is not responding to commands.
# older drivers put the PCI ID on the first record and break the sentence elsewhere:
#   NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:1e07) installed in this /
#   NVRM: system has fallen off the bus and is not responding to commands.
# and a journal or a console may hold the whole sentence on one line.
_THE_GPU = re.compile(
    r"NVRM: The NVIDIA GPU (?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)"
    r"(?P<rest>(?: \(PCI ID: [0-9A-Fa-f]{4}:[0-9A-Fa-f]{4}\))?(?: installed in this\b.*)?)$"
)
_FALLEN_TAIL = re.compile(r"NVRM: (?:system has )?fallen off the bus and is not responding")
_FALLEN_WHOLE = re.compile(r"fallen off the bus and is not responding")


# --- NIC drivers --------------------------------------------------------------------------------
_DEV = r"(?P<driver>[\w\-]+) (?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d)"
# mlx5e: "mlx5_core 0000:ab:00.0 ens1f0np0: Link down"; igc/e1000e-style "eth5: NIC Link is Down";
# igb repeats itself: "igb 0000:03:00.0 eno1: igb: eno1 NIC Link is Up 1000 Mbps Full Duplex, ..."
_LINK = re.compile(
    _DEV + r"(?: (?P<netdev>[\w.\-]+))?: (?:[\w\-]+: [\w.\-]+ )?(?:NIC )?[Ll]ink (?:is )?"
    r"(?P<state>[Uu]p|[Dd]own)\b"
)
# mlx5_ib port events: "mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE"
_PORT_LINK = re.compile(
    _DEV + r"(?: (?P<netdev>[\w.\-]+))?: Port: (?P<port>\d+) Link (?P<state>[A-Z_]+)\b"
)
_PORT_STATES = {"ACTIVE": "up", "DOWN": "down"}


def _link_state(msg: str) -> Fields | None:
    m = _LINK.search(msg)
    if m:
        return {
            "state": m["state"].lower(),
            "driver": m["driver"],
            "device": m["pci"].lower(),
            "netdev": m["netdev"],
            "port": None,
            "port_state": None,
        }
    m = _PORT_LINK.search(msg)
    if m:
        return {
            "state": _PORT_STATES.get(m["state"], m["state"].lower()),
            "driver": m["driver"],
            "device": m["pci"].lower(),
            "netdev": m["netdev"],
            "port": int(m["port"]),
            "port_state": m["state"],
        }
    return None


# "mlx5_core 0004:01:00.0: Port module event: module 0, Cable plugged"
# "... Port module event[error]: module 0, Cable error, Bus stuck (I2C or data shorted)"
# "mlx5_core 0000:08:00.0: [module 0] Cable plugged" style (newer mlx5 event text)
_MODULE = re.compile(
    r"Port module event(?:\[(?P<severity>\w+)\])?: module (?P<module>\d+), (?P<event>[^,]+?)"
    r"(?:, (?P<detail>.*?))?\s*$"
)
_MODULE_BRACKET = re.compile(
    r"\[module (?P<module>\d+)\]\s*(?:\S+\s+)*?(?P<event>Cable (?:un)?plugged|Cable error)"
)
_DEVICE = re.compile(
    r"(?P<driver>[\w\-]+) (?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d)"
)


def _device(msg: str) -> Fields:
    d = _DEVICE.search(msg)
    return (
        {"driver": d["driver"], "device": d["pci"].lower()}
        if d
        else {"driver": None, "device": None}
    )


def _module_event(msg: str) -> Fields | None:
    m = _MODULE.search(msg)
    if m:
        return {
            "module": int(m["module"]),
            "event": m["event"],
            "severity": m["severity"],
            "detail": m["detail"],
            **_device(msg),
        }
    m = _MODULE_BRACKET.search(msg)
    if m:
        return {
            "module": int(m["module"]),
            "event": m["event"],
            "severity": None,
            "detail": None,
            **_device(msg),
        }
    return None


# --- PCIe AER -----------------------------------------------------------------------------------
# "pcieport 0000:00:1c.5: AER: Corrected error received: 0000:00:1c.5"      (4.19+)
# "pcieport 0000:00:1c.5: AER: Corrected error received: id=00e5"           (older)
# "pcieport 0000:00:1c.5: AER: Multiple Uncorrected (Non-Fatal) error received: 0000:03:00.0"
# 6.x, the spec's terms: "pcieport 0000:00:1c.4: AER: Correctable error message received from
# 0000:07:00.0" ("Uncorrectable (Non-Fatal)", "Uncorrectable (Fatal)")
_AER_RECEIVED = re.compile(
    _DEV + r": AER: (?P<multiple>Multiple )?(?P<severity>(?:Corrected|Correctable)|"
    r"(?:Uncorrected|Uncorrectable)(?: \((?:Non-Fatal|Fatal)\))?) "
    r"error (?:message )?received:? (?:from )?(?:id=)?(?P<source>[^\s,]+)"
)
# "pcieport 0000:00:1d.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, id=00e8(Receiver ID)"
# "pcieport 0000:00:1c.5: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)"
_AER_BUS_ERROR = re.compile(
    _DEV + r": (?:AER: )?PCIe Bus Error: severity=(?P<severity>[^,]+), type=(?P<type>[^,]+), "
    r"(?:id=(?P<source>[0-9a-fA-F]+))?\((?P<agent>[^)]*)\)"
)


def _pcie_aer(msg: str) -> Fields | None:
    m = _AER_BUS_ERROR.search(msg)
    if m:
        return {
            "severity": m["severity"].strip(),
            "port": m["pci"].lower(),
            "driver": m["driver"],
            "type": m["type"].strip(),
            "agent": m["agent"],
            "source_id": m["source"],
            "multiple": None,
        }
    m = _AER_RECEIVED.search(msg)
    if m:
        return {
            "severity": m["severity"],
            "port": m["pci"].lower(),
            "driver": m["driver"],
            "type": None,
            "agent": None,
            "source_id": m["source"],
            "multiple": m["multiple"] is not None,
        }
    return None


# --- the table ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    """One event kind: the literal anchors of which a line must hold one, and its parser."""

    kind: str
    anchors: tuple[str, ...]
    parse: Callable[[str], Fields | None]


# Order matters where two rules share a line: the first that matches names it.
RULES: tuple[Rule, ...] = (
    Rule("ib_completion_error", ("Got completion",), _ib_completion),
    Rule("torch_watchdog_timeout", ("Watchdog caught",), _watchdog_timeout),
    Rule(
        "torch_watchdog_exception",
        ("detected by watchdog", "Timeout at NCCL work"),
        _watchdog_exception,
    ),
    Rule("torch_watchdog_stuck", ("watchdog got stuck",), _watchdog_stuck),
    Rule("torch_nccl_error", ("NCCL error",), _torch_nccl_error),
    Rule("nccl_net_selected", ("Using network",), _net_selected),
    Rule("nccl_ib_devices", ("NET/IB : Using",), _ib_devices),
    Rule("nccl_channel_net", ("via NET/",), _channel_net),
    Rule("nccl_gdr_disabled", ("GPU Direct RDMA Disabled",), _gdr_disabled),
    Rule("nccl_init_complete", ("Init COMPLETE",), _init_complete),
    Rule("nccl_version", ("NCCL version",), _nccl_version),
    Rule("xid", ("NVRM: Xid",), _xid),
    Rule(
        "nic_link_state",
        (
            "Link down",
            "Link up",
            "Link is ",
            "Link ACTIVE",
            "Link DOWN",
            "Link INIT",
            "link down",
            "link up",
        ),
        _link_state,
    ),
    Rule("nic_module_event", ("module event", "[module "), _module_event),
    Rule("pcie_aer", ("PCIe Bus Error", "AER:"), _pcie_aer),
    Rule("nccl_warn", ("NCCL WARN",), _nccl_warn),
)
# Lines the session needs although no rule above names them (multi-line NVRM messages).
_CONTEXT_ANCHORS = ("NVRM:",)

ANCHORS: tuple[str, ...] = (
    tuple(dict.fromkeys(a for r in RULES for a in r.anchors).keys()) + _CONTEXT_ANCHORS
)
_SCREEN = re.compile("|".join(re.escape(a) for a in ANCHORS))
KINDS: tuple[str, ...] = (*(r.kind for r in RULES), "gpu_fallen_off_bus")

# The block screen (exporters/logs/scan.py): few, coarse literals, each a pass of bytes.find over
# a read, so their number is the cost of a chatter line. Every rule's anchor holds one of them
# (test_grammar checks it). Applications (NCCL, PyTorch) write to pod logs, the kernel and its
# drivers to the kernel log: a stream is screened for its own side (a plain text capture, whose
# origin is unknown, for both).
SCREEN_APP: tuple[bytes, ...] = (
    b"NET/",  # Got completion, NET/IB : Using, via NET/, GPU Direct RDMA Disabled
    b"atchdog",  # Watchdog caught, detected by watchdog, watchdog got stuck
    b"Timeout at NCCL",  # PyTorch 2.2/2.3's "Timeout at NCCL work: N, last enqueued ..."
    b"NCCL WARN",
    b"NCCL error",
    b"NCCL version",
    b"Using network",
    b"Init COMPLETE",
)
SCREEN_KERNEL: tuple[bytes, ...] = (
    b"NVRM:",
    b"Link ",
    b"link ",  # r8169-style "eth0: link down"
    b"module ",
    b"AER:",
    b"PCIe Bus Error",
)


def screen_anchors(fmt: str) -> tuple[bytes, ...]:
    """The block screen's literals for a stream of format `fmt` (exporters/logs/formats.py)."""
    if fmt == "cri":
        return SCREEN_APP
    if fmt in ("kmsg", "dmesg", "journal"):
        return SCREEN_KERNEL
    return SCREEN_APP + SCREEN_KERNEL


def screen(msg: str) -> bool:
    """Whether a message could match any rule (holds one rule's anchor)."""
    return _SCREEN.search(msg) is not None


@dataclass
class Event:
    kind: str
    fields: Fields
    line: int  # where the record starts (1-based), for a multi-line one its first line


@dataclass
class Session:
    """The grammar over one stream (a file, a container's log, the kernel log): rules that hold
    no state, plus what a multi-line driver message needs from the lines before it. Bounded: it
    keeps one pending line."""

    _gpu: tuple[str, int] | None = None  # "NVRM: The NVIDIA GPU <pci>" seen at line n
    matched: dict[str, int] = field(default_factory=dict)

    def match(self, msg: str, line: int) -> Event | None:
        """The event this message (at 1-based `line`) completes, or None."""
        if "NVRM:" in msg:
            ev = self._nvrm(msg, line)
            if ev is not None or "NVRM: Xid" not in msg:
                return self._count(ev)
        for rule in RULES:
            for a in rule.anchors:
                if a in msg:
                    break
            else:
                continue
            fields = rule.parse(msg)
            if fields is not None:
                return self._count(Event(rule.kind, fields, line))
        return None

    def _count(self, ev: Event | None) -> Event | None:
        if ev is not None:
            self.matched[ev.kind] = self.matched.get(ev.kind, 0) + 1
        return ev

    def _nvrm(self, msg: str, line: int) -> Event | None:
        m = _THE_GPU.search(msg.rstrip())
        if m:
            if _FALLEN_WHOLE.search(m["rest"]):  # the whole sentence on one line
                self._gpu = None
                return Event("gpu_fallen_off_bus", {"pci_bus": _pci(m["pci"]), "xid": None}, line)
            self._gpu = (_pci(m["pci"]), line)
            return None
        if self._gpu is not None and line - self._gpu[1] > 3:
            self._gpu = None  # the sentence spans three records at most: this one ended otherwise
        if _FALLEN_TAIL.search(msg) and self._gpu is not None:
            pci, first = self._gpu
            self._gpu = None
            return Event("gpu_fallen_off_bus", {"pci_bus": pci, "xid": None}, first)
        m = _FALLEN.search(msg)
        if m:
            return Event("gpu_fallen_off_bus", {"pci_bus": _pci(m["pci"]), "xid": None}, line)
        return None


__all__ = [
    "ANCHORS",
    "KINDS",
    "RULES",
    "SCREEN_APP",
    "SCREEN_KERNEL",
    "Event",
    "Session",
    "nccl_prefix",
    "screen",
    "screen_anchors",
]
