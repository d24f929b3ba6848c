"""Replica placement audit: each block's replicas per IDC judged against the policy, and totals
per path prefix. Input: BlockInfo rows from fsck or WebHDFS; output: record rows.

Never places an unknown host in an IDC: a replica whose rack path has no IDC level and whose host
the topology does not know makes the block unverifiable, reported as such (violation + reason).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from exporters.hdfs.fsck import BlockInfo
from exporters.hdfs.topology import Location, Topology, split_rack


@dataclass(frozen=True)
class Policy:
    """`per_idc`: exactly `replicas` replicas, `per_idc` of them in each IDC of `idcs` (default:
    every IDC the topology knows), on distinct racks inside an IDC when `distinct_racks`.
    `rack`: HDFS's default policy: `replicas` replicas on at least two racks."""

    mode: Literal["per_idc", "rack"] = "rack"
    replicas: int = 3
    per_idc: int = 2
    idcs: tuple[str, ...] = ()
    distinct_racks: bool = False


@dataclass
class Verdict:
    violation: bool
    reason: str
    by_idc: dict[str, int]
    unknown_hosts: list[str]
    locations: list[dict[str, str]]


def locate(
    rack: str, host: str, topo: Topology | None, unknown_racks: Sequence[str]
) -> Location | None:
    """The NameNode's own rack path (fsck -racks, WebHDFS topologyPaths) wins; a flat or fallback
    rack (/default-rack) falls back to the topology map; else unknown."""
    if rack and rack not in unknown_racks:
        loc = split_rack(rack)
        if loc is not None:
            return loc
    return topo.lookup(host) if topo is not None else None


def judge(
    b: BlockInfo,
    policy: Policy,
    topo: Topology | None,
    unknown_racks: Sequence[str],
    idcs: Sequence[str],
) -> Verdict:
    by_idc: Counter[str] = Counter()
    racks_by_idc: dict[str, set[str]] = {}
    unknown: list[str] = []
    locs: list[dict[str, str]] = []
    racks: set[str] = set()
    for host, rack in b.replicas:
        loc = locate(rack, host, topo, unknown_racks)
        if loc is None:
            unknown.append(host)
            locs.append({"host": host, "rack": rack, "idc": ""})
            if rack:
                racks.add(rack)
            continue
        by_idc[loc.idc] += 1
        racks_by_idc.setdefault(loc.idc, set()).add(loc.rack)
        racks.add(loc.rack)
        locs.append({"host": host, "rack": loc.rack, "idc": loc.idc})
    if b.ec_policy:
        return _judge_ec(b, policy, by_idc, unknown, locs)
    reasons: list[str] = []
    n = len(b.replicas)
    if b.missing or n == 0:
        reasons.append("missing: no live replica")
    elif n < policy.replicas:
        reasons.append(f"under-replicated: {n} of {policy.replicas}")
    elif n > policy.replicas:
        reasons.append(f"over-replicated: {n} of {policy.replicas}")
    if unknown:
        reasons.append(
            f"{len(unknown)} replica(s) on host(s) not in the topology: {', '.join(sorted(set(unknown)))}"
        )
    if policy.mode == "per_idc" and n:
        want = list(idcs) or sorted(by_idc)
        for idc in want:
            have = by_idc.get(idc, 0)
            if have != policy.per_idc and not unknown:
                reasons.append(f"{idc} has {have} replica(s), policy wants {policy.per_idc}")
            if policy.distinct_racks and have > len(racks_by_idc.get(idc, ())):
                reasons.append(
                    f"{idc}: {have} replicas on {len(racks_by_idc.get(idc, ()))} rack(s)"
                )
        for idc in sorted(set(by_idc) - set(want)):
            reasons.append(f"{idc} is not a policy IDC but holds {by_idc[idc]} replica(s)")
    elif policy.mode == "rack" and n >= 2 and len(racks) < 2 and not unknown:
        reasons.append(f"all {n} replicas on one rack ({next(iter(racks), '?')})")
    return Verdict(bool(reasons), "; ".join(reasons), dict(sorted(by_idc.items())), unknown, locs)


def expected(b: BlockInfo, policy: Policy) -> int:
    """Replicas a block should have: the policy's, or a block group's internal blocks."""
    return b.replication if b.ec_policy and b.replication else policy.replicas


def _judge_ec(
    b: BlockInfo,
    policy: Policy,
    by_idc: Counter[str],
    unknown: list[str],
    locs: list[dict[str, str]],
) -> Verdict:
    """An erasure-coded block group: its internal blocks are not copies, so copies-per-IDC rules
    do not apply; what matters is that losing one IDC (per_idc mode) or one rack (rack mode)
    loses no more internal blocks than the policy's parity units can rebuild."""
    reasons: list[str] = []
    n, want, m = len(b.replicas), expected(b, policy), b.parity_units
    if b.missing or n == 0:
        reasons.append(f"missing: block group not readable ({b.ec_policy})")
    elif n < want:
        reasons.append(f"under-erasure-coded: {n} of {want} internal blocks ({b.ec_policy})")
    elif n > want:
        reasons.append(f"over-erasure-coded: {n} of {want} internal blocks ({b.ec_policy})")
    if unknown:
        reasons.append(
            f"{len(unknown)} internal block(s) on host(s) not in the topology: {', '.join(sorted(set(unknown)))}"
        )
    if policy.mode == "per_idc":
        for idc, have in sorted(by_idc.items()):
            if have > m:
                reasons.append(
                    f"losing {idc} loses {have} internal blocks, more than the {m} parity units"
                )
    else:
        per_rack = Counter(loc["rack"] for loc in locs if loc["rack"])
        for rack, have in sorted(per_rack.items()):
            if have > m:
                reasons.append(
                    f"losing rack {rack} loses {have} internal blocks, more than the {m} parity units"
                )
    return Verdict(bool(reasons), "; ".join(reasons), dict(sorted(by_idc.items())), unknown, locs)


def prefixes(path: str, depth: int) -> list[str]:
    parts = [p for p in path.split("/") if p][:-1]  # directories only
    return ["/"] + ["/" + "/".join(parts[: i + 1]) for i in range(min(depth, len(parts)))]


def audit(
    blocks: Iterable[BlockInfo],
    policy: Policy,
    topo: Topology | None,
    *,
    ts: int,
    unknown_racks: Sequence[str],
    prefix_depth: int = 2,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """-> (hdfs_block_placement rows, hdfs_placement_total rows)."""
    idcs = list(policy.idcs) or (topo.idcs() if topo is not None else [])
    rows: list[dict[str, Any]] = []
    totals: dict[str, Counter[str]] = {}
    blocks = list(blocks)
    if policy.mode == "per_idc" and not idcs:
        # No configured IDCs and no topology: use every IDC the rack paths show.
        seen = set()
        for b in blocks:
            for host, rack in b.replicas:
                loc = locate(rack, host, None, ())
                if loc:
                    seen.add(loc.idc)
        idcs = sorted(seen)
    for b in blocks:
        v = judge(b, policy, topo, unknown_racks, idcs)
        rows.append(
            {
                "ts": ts,
                "path": b.path,
                "block_id": b.block_id,
                "replicas": len(b.replicas),
                "expected_replicas": expected(b, policy),
                "replicas_by_idc": json.dumps(v.by_idc, separators=(",", ":")),
                "locations": json.dumps(v.locations, separators=(",", ":")),
                "violation": v.violation,
                "reason": v.reason,
            }
        )
        for p in prefixes(b.path, prefix_depth):
            c = totals.setdefault(p, Counter())
            c["blocks"] += 1
            c["violations"] += v.violation
            c["under_replicated"] += len(b.replicas) < expected(b, policy)
            c["unknown_hosts"] += len(v.unknown_hosts)
    trows = [
        {
            "ts": ts,
            "prefix": p,
            **{k: c[k] for k in ("blocks", "violations", "under_replicated", "unknown_hosts")},
        }
        for p, c in sorted(totals.items())
    ]
    return rows, trows
