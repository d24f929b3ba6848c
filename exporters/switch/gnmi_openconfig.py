"""OpenConfig over gNMI (`OpenConfigGnmi`): openconfig-interfaces/-qos/-lldp leaves SAMPLEd and
ON_CHANGE, cached per interface, queue, PFC priority and neighbour, and mapped to record
fields by `openconfig_counters.csv`; with the leaf helpers (unwrapping, flattening, speeds,
queue numbers).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from exporters.switch import counters as C
from exporters.switch.gnmi_decode import text_of
from exporters.switch.gnmi_stream import Stream

OC_CSV = Path(__file__).with_name("openconfig_counters.csv")
OC_SAMPLE = (
    "interfaces/interface[name=*]/state/counters",
    "qos/interfaces/interface[interface-id=*]/output/queues/queue[name=*]/state",
)
# PFC per 802.1p priority: not in the OpenConfig models; Enterprise SONiC's management framework
# publishes it as openconfig-qos-ext (docs/switch-gnmi.md cites the model). Opt-in per switch
# (gnmi.openconfig_pfc): a switch without the model may refuse a Subscribe that names it.
OC_PFC = "qos/interfaces/interface[interface-id=*]/pfc/pfc-priorities/pfc-priority[dot1p=*]/state"
OC_ON_CHANGE = (
    "interfaces/interface[name=*]/state/oper-status",
    "interfaces/interface[name=*]/ethernet/state/port-speed",
    "lldp/interfaces/interface[name=*]/neighbors/neighbor[id=*]/state",
)


# -- OpenConfig ------------------------------------------------------------------------------
class OpenConfigGnmi(Stream):
    """OpenConfig: interface counters and queues SAMPLEd, oper status, speed and LLDP
    neighbours ON_CHANGE; leaves mapped to record fields by `openconfig_counters.csv`."""

    sample_paths: tuple[str, ...] = OC_SAMPLE
    change_paths = OC_ON_CHANGE

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        if self.cfg.openconfig_pfc:
            self.sample_paths = (*OC_SAMPLE, OC_PFC)
        self.ports: dict[str, dict[str, str]] = {}  # interface -> leaf -> value
        self.pfc: dict[tuple[str, int], dict[str, str]] = {}  # (interface, dot1p) -> leaf -> value
        self.port_ts: dict[str, int] = {}
        self.queues: dict[tuple[str, str], dict[str, str]] = {}
        self.lldp: dict[tuple[str, str], dict[str, str]] = {}

    def _apply(self, elems: list[tuple[str, dict[str, str]]], value: Any, ts_ms: int) -> bool:
        names = [e[0] for e in elems]
        # a target may send a container (.../state -> {"counters": {...}}), one leaf per update
        # (.../state/counters/in-octets -> 42, Arista, Cumulus) or either wrapped in its own
        # name (.../state/oper-status -> {"openconfig-interfaces:oper-status": "UP"}, SONiC's
        # translib): every leaf is named by its path below the list entry it belongs to
        leaves = _flatten(_unwrapped(value, names[-1] if names else ""))
        if leaves is None:
            return False
        where = self._entry(elems)
        if where is None:
            return False
        kind, key, at = where
        tail = "/".join(names[at + 1 :])
        got = {f"{tail}/{leaf}".strip("/"): v for leaf, v in leaves.items()}
        if kind == "port":
            self.ports.setdefault(key, {}).update(got)
            if "counters" in names or any("counters/" in k for k in got):
                # each leaf may carry its own time (EOS stamps a counter when it last changed):
                # the port's counters are as of the newest
                self.port_ts[key] = max(self.port_ts.get(key, 0), ts_ms)
            return True
        # queue, PFC and LLDP leaves are flat: named by their last element
        into: dict[Any, dict[str, str]] = self._caches()[kind]
        into.setdefault(key, {}).update((k.rsplit("/", 1)[-1], v) for k, v in got.items())
        return True

    def _caches(self) -> dict[str, dict[Any, dict[str, str]]]:
        return {"port": self.ports, "pfc": self.pfc, "queue": self.queues, "lldp": self.lldp}

    def _entry(self, elems: list[tuple[str, dict[str, str]]]) -> tuple[str, Any, int] | None:
        """(cache, its key, the index of the list entry's element) of a path, or None: not a
        path this dialect reads, or a wildcard or missing key where a name should be."""
        names = [e[0] for e in elems]
        if names[:2] == ["interfaces", "interface"]:
            port = elems[1][1].get("name", "")
            return None if not port or "*" in port else ("port", port, 1)
        if names[:3] == ["qos", "interfaces", "interface"] and "pfc-priority" in names:
            at = names.index("pfc-priority")
            port = elems[2][1].get("interface-id", "")
            dot1p = elems[at][1].get("dot1p", "")
            if not port or not dot1p.isdigit() or int(dot1p) > 7:
                return None
            return "pfc", (port, int(dot1p)), at
        if names[:3] == ["qos", "interfaces", "interface"] and "queue" in names:
            at = names.index("queue")
            port, q = elems[2][1].get("interface-id", ""), elems[at][1].get("name", "")
            return None if not port or not q else ("queue", (port, q), at)
        if names[:3] == ["lldp", "interfaces", "interface"] and "neighbor" in names:
            at = names.index("neighbor")
            port = elems[2][1].get("name", "")
            return None if not port else ("lldp", (port, elems[at][1].get("id", "")), at)
        return None

    def _delete(self, elems: list[tuple[str, dict[str, str]]]) -> bool:
        """A deleted list entry (an LLDP neighbour gone, an interface or queue removed), or a
        whole interface's neighbours, PFC priorities or queues: forgotten."""
        names = [e[0] for e in elems]
        where = self._entry(elems)
        if where is not None:
            kind, key, at = where
            if at != len(names) - 1:  # a leaf or container below an entry: kept until replaced
                return False
            gone = self._caches()[kind].pop(key, None) is not None
            if kind == "port":
                self.port_ts.pop(key, None)
            return gone
        # .../interface[name=X]/neighbors (or .../output/queues, .../pfc-priorities): every one
        if len(elems) >= 3 and names[:3] in (["lldp", "interfaces", "interface"],
                                             ["qos", "interfaces", "interface"]):  # fmt: skip
            port = elems[2][1].get("name") or elems[2][1].get("interface-id", "")
            of = {"neighbors": "lldp", "queues": "queue", "pfc-priorities": "pfc"}
            into = self._caches().get(of.get(names[-1], ""))
            if into is None or not port:
                return False
            keys = [k for k in into if k[0] == port]
            for k in keys:
                del into[k]
            return bool(keys)
        return False

    def poll(self, problems: C.Problems, *, lldp: bool = True) -> tuple[list[Any], ...]:
        self.check_up()
        with self.lock:
            ports = {p: dict(h) for p, h in self.ports.items()}
            queues = {k: dict(h) for k, h in self.queues.items()}
            neigh = {k: dict(h) for k, h in self.lldp.items()} if lldp else {}
            pts = dict(self.port_ts)
            pfc = {k: dict(h) for k, h in self.pfc.items()}
        prow = []
        for port in sorted(ports, key=C._natural):
            h = ports[port]
            counters = {k.rsplit("/", 1)[-1]: v for k, v in h.items() if "counters/" in k}
            if not counters:
                continue
            key = f"interfaces/interface[name={port}]"
            row: dict[str, Any] = {
                "port": port,
                **C.fields_from("port", key, counters, problems, table=OC_CSV),
            }
            row["priorities"] = prios = []
            for p in C.PRIORITIES:
                ph = pfc.get((port, p))
                if ph is None:
                    continue
                pkey = f"qos/interfaces/interface[interface-id={port}]/pfc/pfc-priorities/pfc-priority[dot1p={p}]"
                f = C.fields_from("priority", pkey, ph, problems, p, table=OC_CSV)
                if any(v is not None for v in f.values()):
                    prios.append({"priority": p, **f})
            row.update(C.pfc_sums(prios))
            status = h.get("state/oper-status")
            row["up"] = None if status is None else int(status == "UP")
            row["speed_bps"] = _oc_speed(h.get("ethernet/state/port-speed"))
            if port in pts:
                row["ts"] = pts[port]
            prow.append(row)
        qrow = []
        # a queue is stored by number: a name gives its trailing digits, and two names of one
        # port that give the same number (BE1, AF1, NC1) cannot be told apart: named, not stored
        index = {k: _queue_index(k[1]) for k in queues}
        twice = Counter((p, i) for (p, _), i in index.items() if i is not None)
        for (port, q), h in sorted(
            queues.items(), key=lambda kv: C._natural(kv[0][0] + ":" + kv[0][1])
        ):
            idx = index[(port, q)]
            if idx is None:
                problems.add("bad_value", f"{self.name} queue {port}/{q!r}")
                continue
            if twice[(port, idx)] > 1:
                problems.add(
                    "bad_value",
                    f"{self.name} queue {port}/{q!r}",
                    f"its number {idx} is also another queue's name's on {port}",
                )
                continue
            key = f"qos/interfaces/interface[interface-id={port}]/output/queues/queue[name={q}]"
            qrow.append({"port": port, "queue": idx, "queue_type": "unicast",
                         **C.fields_from("queue", key, h, problems, table=OC_CSV)})  # fmt: skip
        lrow = [
            {
                "local_port": port,
                "remote_device": h.get("system-name", ""),
                "remote_port": (
                    h.get("port-description", "")
                    if h.get("port-id-type") == "MAC_ADDRESS" and h.get("port-description")
                    else h.get("port-id", "")
                ),
                "remote_chassis_id": h.get("chassis-id", ""),
                "source": "gnmi",
            }
            for (port, _), h in sorted(neigh.items(), key=lambda kv: C._natural(kv[0][0]))
        ]
        return prow, qrow, lrow


def _unwrapped(v: Any, name: str) -> Any:
    """A value wrapped in its own node's name ({"openconfig-interfaces:oper-status": "UP"} at
    .../oper-status, as SONiC's translib answers) -> what it wraps; anything else as it is."""
    if isinstance(v, dict) and len(v) == 1:
        ((k, inner),) = v.items()
        if str(k).split(":", 1)[-1] == name:
            return inner
    return v


def _flatten(v: Any, prefix: str = "") -> dict[str, str] | None:
    """JSON-IETF container -> {leaf path: value string}; a bare leaf -> {'': value}. Module
    prefixes (openconfig-interfaces:counters) are dropped."""
    if isinstance(v, dict):
        out: dict[str, str] = {}
        for k, x in v.items():
            name = str(k).split(":", 1)[-1]
            sub = _flatten(x, f"{prefix}/{name}" if prefix else name)
            if sub is None:
                return None
            out.update(sub)
        return out
    if isinstance(v, list):
        return None
    return {prefix: text_of(v) if not isinstance(v, str) else v}


_SPEEDS = {"10MB": 1e7, "100MB": 1e8, "1GB": 1e9, "2500MB": 2.5e9, "5GB": 5e9, "10GB": 1e10,
           "25GB": 2.5e10, "40GB": 4e10, "50GB": 5e10, "100GB": 1e11, "200GB": 2e11,
           "400GB": 4e11, "600GB": 6e11, "800GB": 8e11, "1600GB": 1.6e12}  # fmt: skip


def _oc_speed(v: str | None) -> float | None:
    """openconfig-if-ethernet ETHERNET_SPEED identities (SPEED_100GB) -> bits/s."""
    if not v:
        return None
    return _SPEEDS.get(v.split(":", 1)[-1].removeprefix("SPEED_"))


def _queue_index(name: str) -> int | None:
    """Queue names are vendor strings ('3', 'UC3', 'queue3', 'Ethernet0:3'): the trailing number."""
    m = re.search(r"(\d+)$", name)
    return int(m.group(1)) if m and int(m.group(1)) <= 255 else None
