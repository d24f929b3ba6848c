"""Inventory rows the attribution tests and bench/correlate.py both build: GPU g of each node on
rail g through NIC mlx5_g (eth g), every GPU with a direct NIC."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def rail_affinities(
    cluster: str, nodes: Iterable[str], gpus: Iterable[int], ts_ms: int
) -> list[dict[str, Any]]:
    """gpu_nic_affinity rows: one per (node, GPU)."""
    gs = list(gpus)
    return [
        {
            "ts": ts_ms,
            "cluster": cluster,
            "node": n,
            "gpu": g,
            "nic": f"mlx5_{g}",
            "netdev": f"eth{g}",
            "direct_nic": 1,
            "rail": g,
        }
        for n in nodes
        for g in gs
    ]
