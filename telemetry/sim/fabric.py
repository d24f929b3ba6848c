"""The simulated physical fabric: IDCs, scalable units of GPU servers, rail leaves, spines,
super-spines and DCI links, with ports named as SONiC shows them (`Ethernet0`, `Ethernet8`, ...).

Pure data built from a scenario; it reads nothing and writes nothing. Every NIC and switch port is
an *endpoint* with an integer id so traffic can be summed with numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from telemetry.sim.scenario import Scenario, server_models

PORT_STEP = 8  # SONiC names 400G ports by their first serdes lane: Ethernet0, Ethernet8, ...
NODE_PREFIX = "gpu"
# PCI bus of each of a server's 8 GPUs (00000000:BB:00.0), as the servers modelled lay them out
GPU_BUS = [0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB]


@dataclass
class Node:
    idx: int
    name: str
    idc: str
    idc_idx: int
    su: int  # SU index inside its IDC
    su_global: int
    slot: int  # position inside the SU (leaf downlink index)

    @property
    def su_name(self) -> str:
        return su_name(self.idc, self.su)


def su_name(idc: str, su: int) -> str:
    return f"{idc}-su{su:03d}"


def node_name(idc: str, su: int, slot: int) -> str:
    return f"{NODE_PREFIX}-{idc}-s{su:03d}-{slot:02d}"


@dataclass
class Fabric:
    scenario: Scenario
    model: dict[str, object]
    nics_per_node: int
    gpus_per_node: int
    link_bps: float
    nodes: list[Node] = field(default_factory=list)
    # endpoints: NICs first (id = node * nics_per_node + rail), then switch ports
    ep_device: list[str] = field(default_factory=list)  # node name or switch name
    ep_port: list[str] = field(default_factory=list)  # netdev or EthernetN
    ep_role: list[str] = field(default_factory=list)  # nic | leaf | spine | superspine | dci
    ep_peer: list[int] = field(default_factory=list)
    ep_cap_bps: list[float] = field(default_factory=list)
    switches: list[tuple[str, str, str]] = field(default_factory=list)  # (name, role, idc)
    # lookups
    leaf_of: dict[tuple[int, int, int], str] = field(
        default_factory=dict
    )  # (idc, su, rail) -> leaf
    nic_leaf_port: dict[int, int] = field(default_factory=dict)  # nic ep -> leaf port ep
    leaf_up: dict[str, list[int]] = field(default_factory=dict)  # leaf -> uplink eps (u order)
    spine_down: dict[tuple[str, int], int] = field(default_factory=dict)  # (leaf, u) -> spine ep
    spine_up: dict[tuple[int, int], list[int]] = field(
        default_factory=dict
    )  # (idc, u) -> eps to sspines
    sspine_down: dict[tuple[int, int, int], int] = field(default_factory=dict)  # (idc, u, x) -> ep
    dci: dict[tuple[int, int], list[tuple[int, int]]] = field(
        default_factory=dict
    )  # (a, b) -> [(ep_a, ep_b)]
    # (idc, x) -> (super-spine port, DCI router port) of the link from super-spine x to its router
    dci_router: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)

    # -- derived ---------------------------------------------------------------------------------
    @property
    def n_nics(self) -> int:
        return len(self.nodes) * self.nics_per_node

    @property
    def n_eps(self) -> int:
        return len(self.ep_device)

    def nic_ep(self, node: int, rail: int) -> int:
        return node * self.nics_per_node + rail

    def switch_eps(self) -> np.ndarray:
        return np.arange(self.n_nics, self.n_eps)

    def ep_name(self, ep: int) -> str:
        return f"{self.ep_device[ep]}:{self.ep_port[ep]}"

    def link_name(self, ep: int) -> str:
        peer = self.ep_peer[ep]
        return f"{self.ep_name(ep)}<->{self.ep_name(peer)}"

    def leaf_for(self, node: int, rail: int) -> str:
        n = self.nodes[node]
        return self.leaf_of[(n.idc_idx, n.su, rail)]

    def gpu_rail(self) -> list[int]:
        """Rail (NIC index) each GPU uses: its own NIC when one shares its PCIe switch, otherwise the
        nearest NIC of its NUMA node."""
        gsw = list(self.model["gpu_switch"])  # type: ignore[call-overload]
        nsw = list(self.model["nic_switch"])  # type: ignore[call-overload]
        numa = list(self.model["numa"])  # type: ignore[call-overload]
        nic_numa = [numa[gsw.index(s)] if s in gsw else 0 for s in nsw]
        out = []
        for g, s in enumerate(gsw):
            if s in nsw:
                out.append(nsw.index(s))
                continue
            same = [i for i in range(len(nsw)) if nic_numa[i] == numa[g]] or list(range(len(nsw)))
            out.append(min(same, key=lambda i: (abs(nsw[i] - s), i)))
        return out

    def gpu_direct(self) -> list[bool]:
        gsw = list(self.model["gpu_switch"])  # type: ignore[call-overload]
        nsw = set(self.model["nic_switch"])  # type: ignore[call-overload]
        return [s in nsw for s in gsw]


def netdev(rail: int) -> str:
    return f"eth{rail + 2}"  # eth0/eth1 are the host's management ports


def rdma_device(rail: int) -> str:
    return f"mlx5_{rail}"


def build_fabric(sc: Scenario) -> Fabric:
    fs = sc.fabric
    model = server_models()[fs.server_model]
    nics = len(model["nic_switch"])
    fab = Fabric(sc, model, nics, len(model["gpu_switch"]), fs.link_gbps * 1e9)
    link = fab.link_bps
    su_global = 0
    for ii, idc in enumerate(fs.idcs):
        for s in range(idc.sus):
            for n in range(fs.servers_per_su):
                fab.nodes.append(
                    Node(len(fab.nodes), node_name(idc.name, s, n), idc.name, ii, s, su_global, n)
                )
            su_global += 1
    # NIC endpoints
    for node in fab.nodes:
        for r in range(nics):
            _ep(fab, node.name, netdev(r), "nic", link)
    next_port: dict[str, int] = {}

    def port(switch: str, role: str, cap: float) -> int:
        k = next_port.get(switch, 0)
        next_port[switch] = k + 1
        return _ep(fab, switch, f"Ethernet{k * PORT_STEP}", role, cap)

    def wire(a: int, b: int) -> None:
        fab.ep_peer[a] = b
        fab.ep_peer[b] = a

    U, X = fs.uplinks_per_leaf, fs.superspines_per_idc
    for ii, idc in enumerate(fs.idcs):
        spines = [f"spine-{idc.name}-{u}" for u in range(U)]
        sspines = [f"sspine-{idc.name}-{x}" for x in range(X)]
        fab.switches += [(sw, "spine", idc.name) for sw in spines]
        fab.switches += [(sw, "superspine", idc.name) for sw in sspines]
        for s in range(idc.sus):
            for r in range(nics):
                leaf = f"leaf-{idc.name}-s{s:03d}-r{r}"
                fab.switches.append((leaf, "leaf", idc.name))
                fab.leaf_of[(ii, s, r)] = leaf
                for node in fab.nodes:
                    if node.idc_idx == ii and node.su == s:
                        p = port(leaf, "leaf", link)
                        nic = fab.nic_ep(node.idx, r)
                        wire(p, nic)
                        fab.nic_leaf_port[nic] = p
                ups = []
                for u in range(U):
                    a = port(leaf, "leaf", link)
                    b = port(spines[u], "spine", link)
                    wire(a, b)
                    ups.append(a)
                    fab.spine_down[(leaf, u)] = b
                fab.leaf_up[leaf] = ups
        for u in range(U):
            ups = []
            for x in range(X):
                a = port(spines[u], "spine", link)
                b = port(sspines[x], "superspine", link)
                wire(a, b)
                ups.append(a)
                fab.sspine_down[(ii, u, x)] = b
            fab.spine_up[(ii, u)] = ups
    # The DCI ends on a router per super-spine (a switch of role dci: what its sources and the
    # DCI detector know it by), joined to its super-spine by a link as fast as its DCI ports.
    dci_bps = fs.dci.gbps * 1e9
    if len(fs.idcs) > 1:
        per_router = -(-fs.dci.links // X) * (len(fs.idcs) - 1)
        for ii, idc in enumerate(fs.idcs):
            for x in range(X):
                router = f"dci-{idc.name}-{x}"
                fab.switches.append((router, "dci", idc.name))
                a = port(f"sspine-{idc.name}-{x}", "superspine", dci_bps * per_router)
                b = port(router, "dci", dci_bps * per_router)
                wire(a, b)
                fab.dci_router[(ii, x)] = (a, b)
    for a in range(len(fs.idcs)):
        for b in range(a + 1, len(fs.idcs)):
            pairs = []
            for lk in range(fs.dci.links):
                x = lk % X
                pa_ = port(f"dci-{fs.idcs[a].name}-{x}", "dci", dci_bps)
                pb = port(f"dci-{fs.idcs[b].name}-{x}", "dci", dci_bps)
                wire(pa_, pb)
                pairs.append((pa_, pb))
            fab.dci[(a, b)] = pairs
    return fab


def _ep(fab: Fabric, device: str, port: str, role: str, cap: float) -> int:
    fab.ep_device.append(device)
    fab.ep_port.append(port)
    fab.ep_role.append(role)
    fab.ep_peer.append(-1)
    fab.ep_cap_bps.append(cap)
    return len(fab.ep_device) - 1


# --- addressing ------------------------------------------------------------------------------
def node_ip(k: int) -> str:
    return f"10.250.{k // 256}.{k % 256}"


def pod_ip(k: int, slot: int) -> str:
    """Primary pod IP from the node's /24 pod CIDR: the lowest free slot, so IPs are reused."""
    return f"10.{k // 256}.{k % 256}.{slot + 10}"


def rdma_ip(k: int, rail: int, slot: int) -> str:
    """Multus secondary (RDMA) IP on rail `rail`: a per-rail pool, 4 addresses per node."""
    return f"10.{128 + rail}.{k // 63}.{(k % 63) * 4 + slot % 4 + 1}"


def datanode_ip(idc: int, i: int) -> str:
    return f"10.251.{idc}.{i + 10}"


def datanode_name(idc: str, i: int) -> str:
    return f"dn-{idc}-{i:02d}"


__all__ = [
    "GPU_BUS",
    "Fabric",
    "Node",
    "build_fabric",
    "datanode_ip",
    "node_ip",
    "pod_ip",
    "rdma_ip",
]
