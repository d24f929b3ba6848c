"""Physical topology from LLDP neighbours and GPU<->NIC affinity: the graph GPU -> NIC -> leaf port ->
leaf -> spine -> ..., scalable units, generated (rail-aware, any depth) HyperNodes, and drift
between declared HyperNodes and the graph.

Reads lldp_link and gpu_nic_affinity rows (dicts, as stored or as `--output jsonl` prints them) and
lldpd's `lldpcli show neighbors -f json`. Never reads sysfs or talks to switches itself.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from telemetry.topology.hypernodes import HyperNodeSpec, HyperNodeTree, Member
from telemetry.unionfind import DisjointSets

DEFAULT_TIER_NAMES = ("leaf", "spine", "superspine")
# Host sources: a device that reports neighbours through one of these is a server.
HOST_SOURCES = ("lldpcli",)


class LldpFormatError(ValueError):
    """lldpcli JSON that does not have the expected shape; the message names the input."""


# --- lldpcli ------------------------------------------------------------------------------------
def parse_lldpcli_json(
    text: str | Mapping[str, Any], local_device: str, where: str = "lldpcli output"
) -> list[dict[str, Any]]:
    """`lldpcli show neighbors -f json` or `-f json0` -> lldp_link rows (without ts/cluster).
    json prints `interface` as an object for one port and as a list of one-key objects for
    several; json0 (lldpd's regular format) prints every element as a list of objects and the
    port as a `name` field: {"lldp": [{"interface": [{"name": "eth0", "chassis": [...], ...}]}]}."""
    try:
        doc = json.loads(text) if isinstance(text, str) else text
    except ValueError as e:
        raise LldpFormatError(f"{where}: not JSON: {e}") from None
    if not isinstance(doc, Mapping) or not isinstance(doc.get("lldp"), Mapping | list):
        raise LldpFormatError(
            f"{where}: no top-level 'lldp' object (is this `lldpcli show neighbors -f json`?)"
        )
    lldp = _first(doc["lldp"], where, "lldp")  # a list: json0, or json with no neighbours
    ifaces = lldp.get("interface") or {}
    entries: list[tuple[str, Any]] = []
    if isinstance(ifaces, Mapping):
        entries = list(ifaces.items())
    elif isinstance(ifaces, list):
        for item in ifaces:
            if isinstance(item, Mapping) and isinstance(item.get("name"), str):  # json0
                entries.append((item["name"], item))
            elif isinstance(item, Mapping):
                entries.extend(item.items())
    else:
        raise LldpFormatError(f"{where}: lldp.interface is a {type(ifaces).__name__}")
    rows = []
    for port, info in entries:
        port = _text(port, where, "interface name")
        at = f"interface {port}"
        if not isinstance(info, Mapping):
            raise LldpFormatError(f"{where}: {at}: not an object")
        chassis = _first(info.get("chassis"), where, f"{at}: chassis")
        if isinstance(info.get("chassis"), list):  # json0: the system name is a field
            remote = _value(chassis.get("name"), where, f"{at}: chassis name")
            cinfo = chassis
        elif isinstance(chassis.get("id"), Mapping):
            remote, cinfo = "", chassis  # neighbour without a system name
        elif chassis:
            remote, cinfo = next(iter(chassis.items()))
            cinfo = _obj(cinfo, where, f"{at}: chassis {remote}")
        else:
            remote, cinfo = "", {}
        cid = _first(cinfo.get("id"), where, f"{at}: chassis id")
        chassis_id = _text(cid.get("value"), where, f"{at}: chassis id value")
        p = _first(info.get("port"), where, f"{at}: port")
        pid = _first(p.get("id"), where, f"{at}: port id")
        pid_value = _text(pid.get("value"), where, f"{at}: port id")
        descr = _value(p.get("descr"), where, f"{at}: port descr")
        # the port id names the port when it is an ifname, or a locally assigned name (SONiC
        # sends its alias); a MAC, or a local id of digits only (Juniper's SNMP ifIndex), does
        # not, and the port description does
        named = pid.get("type") == "ifname" or (
            pid.get("type") == "local" and not pid_value.isdigit()
        )
        remote_port = pid_value if named else (descr or pid_value)
        rows.append(
            {
                "local_device": local_device,
                "local_port": port,
                "remote_device": _text(remote, where, f"{at}: chassis name") or chassis_id,
                "remote_port": remote_port,
                "remote_chassis_id": chassis_id,
                "source": "lldpcli",
            }
        )
    return rows


def _first(v: Any, where: str, what: str) -> Mapping[str, Any]:
    """An object field, or json0's list of objects holding it (its first): {} when absent/empty."""
    if isinstance(v, list):
        v = v[0] if v else {}
    return _obj(v, where, what)


def _value(v: Any, where: str, what: str) -> str:
    """A text field: json's "text", or json0's [{"value": "text"}] ('' when absent)."""
    if isinstance(v, list | Mapping):
        v = _first(v, where, what).get("value")
    return _text(v, where, what)


def _obj(v: Any, where: str, what: str) -> Mapping[str, Any]:
    """An object field ({} when absent or empty); LldpFormatError naming it when another type."""
    if not v:
        return {}
    if not isinstance(v, Mapping):
        raise LldpFormatError(f"{where}: {what} is a {type(v).__name__}, not an object")
    return v


def _text(v: Any, where: str, what: str) -> str:
    """A text field ('' when absent; a number as its digits); LldpFormatError naming it when it is
    another type or cannot be stored as UTF-8 (a lone surrogate escaped in the JSON)."""
    if v is None:
        return ""
    if isinstance(v, int | float) and not isinstance(v, bool):
        return str(v)
    if not isinstance(v, str):
        raise LldpFormatError(f"{where}: {what} is a {type(v).__name__}, not text")
    try:
        v.encode()
    except UnicodeEncodeError:
        raise LldpFormatError(f"{where}: {what} {v!r:.60} is not valid UTF-8") from None
    return v


def read_lldpcli(
    local_device: str,
    socket_path: str | None = None,
    lldpcli: str = "lldpcli",
    timeout: float = 10.0,
) -> list[dict[str, Any]]:
    """Run the real `lldpcli show neighbors -f json` (against lldpd's control socket) and parse it.
    Raises LldpFormatError naming what failed (missing binary, daemon not running, bad output)."""
    import subprocess

    cmd = [
        lldpcli,
        *(["-u", socket_path] if socket_path else []),
        "show",
        "neighbors",
        "-f",
        "json",
    ]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise LldpFormatError(f"{lldpcli}: not found (install lldpd)") from None
    except subprocess.TimeoutExpired:
        raise LldpFormatError(f"{' '.join(cmd)}: no answer within {timeout:.0f}s") from None
    if r.returncode != 0 or not r.stdout.strip():
        msg = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise LldpFormatError(f"{' '.join(cmd)}: {msg} (is lldpd running?)")
    return parse_lldpcli_json(r.stdout, local_device, where=" ".join(cmd))


# --- the graph ---------------------------------------------------------------------------------
@dataclass
class Group:
    """A generated HyperNode: its servers (transitively), its child groups, and the switches
    that define it (the rail leaves of a scalable unit, the spines above a set of SUs, ...)."""

    name: str
    tier: int
    switches: frozenset[str]
    nodes: set[str] = field(default_factory=set)
    children: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Difference:
    """One disagreement between declared HyperNodes and the physical graph."""

    kind: str  # missing_node | stale_member | wrong_hypernode | wrong_parent | miswired | problem
    subject: str
    tier: int
    declared: str
    observed: str
    message: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Fabric:
    """Undirected graph of devices from LLDP links, plus GPU<->NIC affinity per server."""

    def __init__(
        self,
        links: Iterable[Mapping[str, Any]],
        affinity: Iterable[Mapping[str, Any]] = (),
        servers: Iterable[str] | None = None,
    ) -> None:
        self.links = [dict(r) for r in links]
        self.affinity = [dict(r) for r in affinity]
        self.adj: dict[str, dict[str, set[tuple[str, str]]]] = {}
        # (device, its port, far device, far port) as each device's own LLDP names its port
        self.own: set[tuple[str, str, str, str]] = set()
        for r in self.links:
            a, b = str(r["local_device"]), str(r["remote_device"])
            if not a or not b or a == b:
                continue
            self.own.add((a, str(r["local_port"]), b, str(r["remote_port"])))
            self.adj.setdefault(a, {}).setdefault(b, set()).add(
                (str(r["local_port"]), str(r["remote_port"]))
            )
            self.adj.setdefault(b, {}).setdefault(a, set()).add(
                (str(r["remote_port"]), str(r["local_port"]))
            )
        if servers is None:
            found = {str(r["local_device"]) for r in self.links if r.get("source") in HOST_SOURCES}
            found |= {str(r["node"]) for r in self.affinity}
            servers = found
        self.servers = {s for s in servers if s in self.adj} | {
            str(r["node"]) for r in self.affinity if str(r["node"]) in self.adj
        }
        self.declared_servers = set(servers)
        # rail NICs per server (netdevs that carry a GPU's traffic); without affinity every NIC counts
        self.rail_of: dict[tuple[str, str], int] = {}
        self.gpus_of: dict[tuple[str, str], list[int]] = {}
        for r in self.affinity:
            if not r.get("netdev"):
                continue
            k = (str(r["node"]), str(r["netdev"]))
            if r.get("rail") is not None:
                self.rail_of[k] = int(r["rail"])
            self.gpus_of.setdefault(k, []).append(int(r["gpu"]))
        self.level = self._levels()

    def _levels(self) -> dict[str, int]:
        level = {s: 0 for s in self.servers}
        frontier = sorted(self.servers)
        while frontier:
            nxt = []
            for d in frontier:
                for nb in self.adj.get(d, {}):
                    if nb not in level:
                        level[nb] = level[d] + 1
                        nxt.append(nb)
            frontier = nxt
        return level

    def uplinks(self, server: str) -> dict[str, tuple[str, str]]:
        """Server NIC (netdev) -> (leaf, leaf port), rail NICs only when affinity is known.
        The leaf port as the leaf's own LLDP names it where it has exactly one record of that
        NIC at its far end: a SONiC leaf advertises its ports by vendor alias (lldpmgrd:
        `portidsubtype local <alias>`), so the server's view says `etp1` where the leaf's
        records and counters say `Ethernet0`. Else the server's view."""
        rails = {nd for (s, nd) in self.rail_of if s == server} | {
            nd for (s, nd) in self.gpus_of if s == server
        }
        out = {}
        for nb, ports in self.adj.get(server, {}).items():
            if self.level.get(nb) != 1:
                continue
            for lp, rp in sorted(ports):
                if rails and lp not in rails:
                    continue  # frontend/management NIC: not part of the rail fabric
                out[lp] = (nb, rp)
            for lp in {lp for lp, _ in ports} & out.keys():
                named = [rp for p, rp in ports if p == lp and (nb, rp, server, lp) in self.own]
                if len(named) == 1:
                    out[lp] = (nb, named[0])
        return out

    def gpu_paths(self, server: str) -> list[dict[str, Any]]:
        """GPU -> NIC -> leaf port -> leaf -> switches above, per GPU with a direct NIC."""
        ups = self.uplinks(server)
        out = []
        for r in sorted(self.affinity, key=lambda r: (str(r["node"]), int(r["gpu"]))):
            if str(r["node"]) != server or not r.get("netdev"):
                continue
            leaf, port = ups.get(str(r["netdev"]), ("", ""))
            above = (
                sorted(nb for nb in self.adj.get(leaf, {}) if self.level.get(nb) == 2)
                if leaf
                else []
            )
            out.append(
                {
                    "gpu": int(r["gpu"]),
                    "nic": r.get("nic", ""),
                    "netdev": r["netdev"],
                    "rail": r.get("rail"),
                    "leaf": leaf,
                    "leaf_port": port,
                    "spines": above,
                }
            )
        return out

    # -- groups -------------------------------------------------------------------------------
    def hierarchy(
        self,
        tier_names: Sequence[str] = DEFAULT_TIER_NAMES,
        prefix: str = "",
        tiers_wanted: int = 0,
    ) -> tuple[list[list[Group]], list[Difference]]:
        """Tiers of groups, lowest first.

        Tier 1 = scalable units: servers with the same set of rail leaves (rail-aware: one
        HyperNode per leaf group, not per leaf, so no server is claimed twice). A server whose rail
        leaves differ from its SU's in a minority of rails stays in that SU, reported as miswired.
        Tier k > 1: SUs that reach each other through switches no higher than the next switch
        layer (spines, then super-spines and the DCI between them, ...), i.e. where their traffic
        turns. A layer that joins nothing adds no tier; the climb ends at a single group.
        `tiers_wanted` pads the top with root tiers (one group) up to that many tiers."""
        issues: list[Difference] = []
        items = {
            s: frozenset(leaf for leaf, _ in self.uplinks(s).values()) for s in sorted(self.servers)
        }
        members = {s: u for s, u in items.items() if u}
        groups = self._group(members, 1, issues, tolerate=True)
        tiers: list[list[Group]] = []

        def name(tier: int, i: int) -> str:
            tname = tier_names[tier - 1] if tier - 1 < len(tier_names) else f"tier{tier}"
            return f"{prefix}{tname}-{i}"

        su = []
        for i, (sw, mem) in enumerate(sorted(groups.items(), key=lambda kv: sorted(kv[1])[0])):
            su.append(Group(name(1, i), 1, sw, set(mem), children=sorted(mem)))
        if su:
            tiers.append(su)
        top = max(self.level.values(), default=0)
        layer = 1
        while len(tiers[-1] if tiers else []) > 1 and layer < top:
            layer += 1
            parts = self._components(su, layer)
            below = tiers[-1]
            # nested partitions: a part is a union of groups of the tier below
            merged: dict[int, list[Group]] = {}
            for g in below:
                merged.setdefault(parts[next(iter(g.nodes))], []).append(g)
            if len(merged) == len(below):
                continue  # this layer joins nothing
            out = []
            for i, gs in enumerate(
                sorted(merged.values(), key=lambda gs: min(min(g.nodes) for g in gs))
            ):
                nodes = set().union(*(g.nodes for g in gs))
                sw = frozenset(d for d in self._reach(gs, layer) if self.level.get(d) == layer)
                out.append(
                    Group(
                        name(len(tiers) + 1, i),
                        len(tiers) + 1,
                        sw,
                        nodes,
                        children=sorted(g.name for g in gs),
                    )
                )
            tiers.append(out)
        while tiers and len(tiers) < tiers_wanted:
            below = tiers[-1]
            t = len(tiers) + 1
            tiers.append(
                [
                    Group(
                        name(t, 0),
                        t,
                        frozenset(),
                        set().union(*(g.nodes for g in below)),
                        children=sorted(g.name for g in below),
                    )
                ]
            )
        return tiers, issues

    def _components(self, su: Sequence[Group], layer: int) -> dict[str, int]:
        """Server -> component id, through switches of level <= `layer` (SUs touching one
        component of that switch subgraph are joined)."""
        comp: dict[str, int] = {}
        for start in sorted(d for d, lv in self.level.items() if 1 <= lv <= layer):
            if start in comp:
                continue
            comp[start] = len(comp)
            cid = comp[start]
            stack = [start]
            while stack:
                d = stack.pop()
                for nb in self.adj.get(d, {}):
                    if nb not in comp and 1 <= self.level.get(nb, 0) <= layer:
                        comp[nb] = cid
                        stack.append(nb)
        sets = DisjointSets(len(su))
        first: dict[int, int] = {}
        for i, g in enumerate(su):
            for leaf in g.switches:
                c = comp.get(leaf)
                if c is None:
                    continue
                if c in first:
                    sets.union(i, first[c])
                else:
                    first[c] = i
        return {n: sets.find(i) for i, g in enumerate(su) for n in g.nodes}

    def _reach(self, groups: Sequence[Group], layer: int) -> set[str]:
        """Switches of level <= `layer` reachable from these groups' switches within that level."""
        seen: set[str] = set()
        stack = [s for g in groups for s in g.switches]
        while stack:
            d = stack.pop()
            if d in seen:
                continue
            seen.add(d)
            stack += [
                nb
                for nb in self.adj.get(d, {})
                if nb not in seen and 1 <= self.level.get(nb, 0) <= layer
            ]
        return seen

    def _group(
        self,
        members: Mapping[str, frozenset[str]],
        tier: int,
        issues: list[Difference],
        tolerate: bool,
    ) -> dict[frozenset[str], set[str]]:
        exact: dict[frozenset[str], set[str]] = {}
        for m, sw in members.items():
            exact.setdefault(sw, set()).add(m)
        if not tolerate:
            return exact
        # biggest groups first; a smaller one sharing more than half its switches joins it
        accepted: dict[frozenset[str], set[str]] = {}
        for sw, mem in sorted(exact.items(), key=lambda kv: (-len(kv[1]), sorted(kv[0]))):
            host = next(
                (a for a in accepted if len(a & sw) * 2 > len(sw) and len(accepted[a]) > len(mem)),
                None,
            )
            if host is None:
                accepted[sw] = set(mem)
                continue
            accepted[host] |= mem
            for m in sorted(mem):
                wrong = sorted(sw - host)
                right = sorted(host - sw)
                issues.append(
                    Difference(
                        "miswired",
                        m,
                        tier,
                        ",".join(right),
                        ",".join(wrong),
                        f"{m} connects to {', '.join(wrong)} where the rest of its group uses {', '.join(right) or 'nothing more'}",
                    )
                )
        return accepted

    def scalable_units(self) -> list[Group]:
        tiers, _ = self.hierarchy()
        return tiers[0] if tiers else []


def generate_specs(
    tiers: Sequence[Sequence[Group]], tier_names: Sequence[str] = DEFAULT_TIER_NAMES
) -> list[HyperNodeSpec]:
    specs = []
    for groups in tiers:
        for g in groups:
            mtype = "Node" if g.tier == 1 else "HyperNode"
            tname = tier_names[g.tier - 1] if g.tier - 1 < len(tier_names) else f"tier{g.tier}"
            specs.append(
                HyperNodeSpec(
                    g.name, g.tier, tname, tuple(Member(mtype, "exactMatch", c) for c in g.children)
                )
            )
    return specs


# --- drift -------------------------------------------------------------------------------------
def diff(
    declared: HyperNodeTree, fabric: Fabric, tiers: Sequence[Sequence[Group]] | None = None
) -> list[Difference]:
    """Each way the declared HyperNodes disagree with the graph, compared tier by tier on node
    membership (names need not match). A node is reported once, at the lowest tier it is wrong;
    a whole child HyperNode under the wrong parent is reported once as that HyperNode."""
    issues: list[Difference] = []
    if tiers is None:
        tiers, issues = fabric.hierarchy()
    graph_nodes = {n for g in (tiers[0] if tiers else []) for n in g.nodes}
    out: list[Difference] = list(issues)
    for p in declared.problems:
        if p.kind == "unresolved":
            out.append(
                Difference(
                    "stale_member",
                    p.subject,
                    declared.specs[p.subject].tier if p.subject in declared.specs else 0,
                    p.subject,
                    "",
                    p.message,
                )
            )
        elif p.kind not in ("mixed_depth", "multi_claim"):
            out.append(Difference("problem", p.subject, 0, "", "", str(p)))
    declared_nodes = set(declared.node_index)
    for n in sorted(graph_nodes - declared_nodes):
        g = next(g.name for g in tiers[0] if n in g.nodes)
        out.append(
            Difference(
                "missing_node",
                n,
                1,
                "",
                g,
                f"{n} is in the fabric (with {g}) but in no declared HyperNode",
            )
        )
    for n in sorted(declared_nodes - graph_nodes):
        anc = declared.ancestors(n)
        out.append(
            Difference(
                "stale_member",
                n,
                declared.specs[anc[0]].tier if anc else 0,
                anc[0] if anc else "",
                "",
                f"{n} is declared under {anc[0] if anc else '?'} but has no rail links in the fabric",
            )
        )
    done: set[str] = set()
    common = graph_nodes & declared_nodes
    for ti, groups in enumerate(tiers):
        tier = ti + 1
        if ti >= len(declared.tiers):
            break
        dtier = declared.tiers[ti]
        dgroups = declared.node_groups(dtier)
        dof = {n: h for h, ns in dgroups.items() for n in ns}
        gof = {n: g.name for g in groups for n in g.nodes}
        match: dict[str, str] = {}
        for h, ns in dgroups.items():
            c = Counter(gof[n] for n in ns if n in common)
            if c:
                match[h] = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        back: dict[str, str] = {}
        for grp in groups:
            c = Counter(dof[n] for n in grp.nodes if n in common and n in dof)
            if c:
                back[grp.name] = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        # a node claimed by two HyperNodes of this tier: the claimant the fabric disagrees with
        if dtier == declared.tiers[0]:
            for n, others in sorted(declared.extra_claims.items()):
                if n not in common:
                    continue
                for h in [dof.get(n, ""), *others]:
                    if h and match.get(h) != gof.get(n):
                        should = back.get(gof[n], "")
                        out.append(
                            Difference(
                                "wrong_hypernode",
                                n,
                                tier,
                                h,
                                should,
                                f"{n} is declared under {h} (tier {dtier}) but the fabric puts it with the nodes of {should or gof[n]}",
                            )
                        )
                        done.add(n)
        wrong = sorted(n for n in common - done if n in dof and match.get(dof[n]) != gof.get(n))
        if tier > 1 and ti - 1 < len(declared.tiers):
            below = declared.node_groups(declared.tiers[ti - 1])
            for child, ns in sorted(below.items()):
                ns_c = ns & common
                if ns_c and ns_c <= set(wrong) and len({gof.get(n) for n in ns_c}) == 1:
                    n0 = next(iter(ns_c))
                    should = back.get(gof[n0], "")
                    out.append(
                        Difference(
                            "wrong_parent",
                            child,
                            tier,
                            dof[n0],
                            should,
                            f"HyperNode {child} is under {dof[n0]} but the fabric puts its nodes under {should or gof[n0]}",
                        )
                    )
                    done |= ns_c
        for n in wrong:
            if n in done:
                continue
            should = back.get(gof[n], "")
            out.append(
                Difference(
                    "wrong_hypernode",
                    n,
                    tier,
                    dof[n],
                    should,
                    f"{n} is declared under {dof[n]} (tier {dtier}) but the fabric puts it with the nodes of {should or gof[n]}",
                )
            )
            done.add(n)
    return out
