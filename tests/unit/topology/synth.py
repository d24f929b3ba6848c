"""A synthetic rail-optimized fabric for topology tests: pods of scalable units, one leaf per rail
per SU, spines per pod, super-spines on top, a management NIC on every server (not a rail)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SynthFabric:
    pods: int = 2
    sus_per_pod: int = 2
    servers_per_su: int = 4
    rails: int = 4
    spines_per_pod: int = 2
    superspines: int = 2
    gpus: int = 8
    links: list[dict[str, Any]] = field(default_factory=list)
    affinity: list[dict[str, Any]] = field(default_factory=list)
    su_of: dict[str, tuple[int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        port: dict[str, int] = {}

        def link(a: str, ap: str, b: str, source: str) -> None:
            bp = f"Ethernet{port.get(b, 0) * 4}"
            port[b] = port.get(b, 0) + 1
            self.links.append(
                {
                    "local_device": a,
                    "local_port": ap,
                    "remote_device": b,
                    "remote_port": bp,
                    "remote_chassis_id": "",
                    "source": source,
                }
            )

        for p in range(self.pods):
            for s in range(self.sus_per_pod):
                for i in range(self.servers_per_su):
                    host = self.server(p, s, i)
                    self.su_of[host] = (p, s)
                    for r in range(self.rails):
                        link(host, f"eth{r + 1}", self.leaf(p, s, r), "lldpcli")
                    link(host, "eth0", f"mgmt-p{p}", "lldpcli")
                    for g in range(self.gpus):
                        r = g % self.rails
                        self.affinity.append(
                            {
                                "node": host,
                                "gpu": g,
                                "nic": f"mlx5_{r}",
                                "netdev": f"eth{r + 1}",
                                "rail": r,
                                "direct_nic": 1,
                            }
                        )
                for r in range(self.rails):
                    for k in range(self.spines_per_pod):
                        link(
                            self.leaf(p, s, r), f"Ethernet{100 + k * 4}", f"spine-p{p}-{k}", "sonic"
                        )
            for k in range(self.spines_per_pod):
                for j in range(self.superspines):
                    link(f"spine-p{p}-{k}", f"Ethernet{200 + j * 4}", f"superspine-{j}", "sonic")

    @staticmethod
    def server(p: int, s: int, i: int) -> str:
        return f"gpu-p{p}-su{s}-{i:02d}"

    @staticmethod
    def leaf(p: int, s: int, r: int) -> str:
        return f"leaf-p{p}-su{s}-r{r}"

    def declared_manifests(self) -> list[dict[str, Any]]:
        """HyperNodes as an operator would declare them (own names, exactMatch)."""
        docs: list[dict[str, Any]] = []

        def hn(name: str, tier: int, mtype: str, members: list[str]) -> dict[str, Any]:
            return {
                "apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode",
                "metadata": {"name": name},
                "spec": {
                    "tier": tier,
                    "members": [
                        {"type": mtype, "selector": {"exactMatch": {"name": m}}} for m in members
                    ],
                },
            }

        for p in range(self.pods):
            for s in range(self.sus_per_pod):
                docs.append(
                    hn(
                        f"su-{p}-{s}",
                        1,
                        "Node",
                        [self.server(p, s, i) for i in range(self.servers_per_su)],
                    )
                )
            docs.append(
                hn(f"pod-{p}", 2, "HyperNode", [f"su-{p}-{s}" for s in range(self.sus_per_pod)])
            )
        docs.append(hn("cluster", 3, "HyperNode", [f"pod-{p}" for p in range(self.pods)]))
        return docs
