"""Lowest common HyperNode for 1,000,000 node pairs on a 2,048-node, 4-tier HyperNode tree:
the vectorised ancestor-path lookup (HyperNodeTree.lca_many) against a naive per-pair walk of
parent dicts, in the same run. Last line: one JSON object.

    python bench/topology.py [--pairs N] [--nodes N] [--fanout F]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from telemetry.topology.hypernodes import HyperNodeSpec, HyperNodeTree, Member, naive_lca


def build_specs(nodes: int, fanout: int, tiers: int) -> list[HyperNodeSpec]:
    """`nodes` servers, `fanout` children per HyperNode, `tiers` tiers (the top one is the root)."""
    specs = []
    level = [f"node-{i:05d}" for i in range(nodes)]
    for tier in range(1, tiers + 1):
        size = len(level) if tier == tiers else fanout
        groups = [level[i : i + size] for i in range(0, len(level), size)]
        mtype = "Node" if tier == 1 else "HyperNode"
        names = []
        for j, g in enumerate(groups):
            name = f"t{tier}-{j}"
            specs.append(
                HyperNodeSpec(
                    name, tier, f"tier{tier}", tuple(Member(mtype, "exactMatch", m) for m in g)
                )
            )
            names.append(name)
        level = names
    return specs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--pairs", type=int, default=1_000_000)
    ap.add_argument("--nodes", type=int, default=2048)
    ap.add_argument("--fanout", type=int, default=8)
    ap.add_argument("--tiers", type=int, default=4)
    args = ap.parse_args()

    specs = build_specs(args.nodes, args.fanout, args.tiers)
    t = time.perf_counter()
    tree = HyperNodeTree.build(specs)
    build_s = time.perf_counter() - t
    assert not tree.problems, tree.problems

    rng = np.random.default_rng(1)
    a = rng.integers(0, args.nodes, args.pairs)
    b = rng.integers(0, args.nodes, args.pairs)

    t = time.perf_counter()
    hid, tier = tree.lca_many(a, b)
    fast_s = time.perf_counter() - t

    leaf_of = {m.value: s.name for s in specs if s.tier == 1 for m in s.members}
    names = tree.node_names
    t = time.perf_counter()
    naive = [
        naive_lca(tree, leaf_of, names[x], names[y])
        for x, y in zip(a.tolist(), b.tolist(), strict=True)
    ]
    naive_s = time.perf_counter() - t

    mismatches = sum(1 for i, n in enumerate(naive) if n != (tree.hn_names[hid[i]], int(tier[i])))
    by_tier = {int(k): int(v) for k, v in zip(*np.unique(tier, return_counts=True), strict=True)}
    print(
        f"tree: {len(specs)} HyperNodes over {args.nodes} nodes, {args.tiers} tiers, built in {build_s * 1000:.1f} ms"
    )
    print(
        f"vectorised: {args.pairs / fast_s:,.0f} pairs/s   naive: {args.pairs / naive_s:,.0f} pairs/s   LCA tiers {by_tier}"
    )
    print(
        json.dumps(
            {
                "bench": "topology_lca",
                "pairs": args.pairs,
                "nodes": args.nodes,
                "tiers": args.tiers,
                "hypernodes": len(specs),
                "build_seconds": round(build_s, 4),
                "vectorised_seconds": round(fast_s, 4),
                "vectorised_pairs_per_second": round(args.pairs / fast_s),
                "naive_seconds": round(naive_s, 4),
                "naive_pairs_per_second": round(args.pairs / naive_s),
                "speedup": round(naive_s / fast_s, 1),
                "mismatches": mismatches,
                "lca_tier_counts": by_tier,
            }
        )
    )


if __name__ == "__main__":
    main()
