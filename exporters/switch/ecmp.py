"""ECMP uplink groups: membership (from config or from LLDP neighbours) and per-interval spread.

Pure functions over port rates and LLDP rows; reads and writes nothing. Spread is computed only
from members that have a measured rate this interval: a member without a rate is left out (and
counted in `member_count`), never taken as zero, so a missing reading cannot fake an imbalance.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

Groups = dict[str, dict[str, list[str]]]  # switch -> group -> member ports


def groups_from_lldp(
    links: Iterable[Mapping[str, Any]], uplink_neighbor: str, group: str = "uplinks"
) -> Groups:
    """One group per switch: its ports whose LLDP neighbour's name matches `uplink_neighbor`
    (a regex, e.g. '^spine'). Needs at least two members to be an ECMP group."""
    rx = re.compile(uplink_neighbor)
    out: Groups = {}
    for link in links:
        if rx.search(str(link.get("remote_device") or "")):
            members = out.setdefault(str(link["local_device"]), {}).setdefault(group, [])
            if link["local_port"] not in members:
                members.append(str(link["local_port"]))
    return {
        sw: {g: sorted(m, key=_port_key) for g, m in gs.items() if len(m) >= 2}
        for sw, gs in out.items()
        if any(len(m) >= 2 for m in gs.values())
    }


def merge_groups(configured: Groups, learned: Groups) -> Groups:
    """Configured groups win; learned ones fill switches/groups the config does not name."""
    out: Groups = {sw: dict(gs) for sw, gs in learned.items()}
    for sw, gs in configured.items():
        out.setdefault(sw, {}).update(gs)
    return out


def member_index(groups: Groups) -> dict[tuple[str, str], str]:
    """(switch, port) -> group name, for tagging flows by their egress member."""
    return {(sw, p): g for sw, gs in groups.items() for g, ms in gs.items() for p in ms}


def spread(
    tx_rates: Mapping[str, float | None], speeds_bps: Mapping[str, float | None], members: list[str]
) -> dict[str, Any] | None:
    """Spread of member tx rates (bytes/s). None when fewer than two members have a rate."""
    rates = {m: tx_rates.get(m) for m in members}
    have = {m: float(r) for m, r in rates.items() if r is not None and r >= 0}
    if len(have) < 2:
        return None
    vals = list(have.values())
    mean = sum(vals) / len(vals)
    hottest = max(have, key=lambda m: have[m])
    utils = []
    for m, r in have.items():
        sp = speeds_bps.get(m)
        if sp:
            utils.append(r * 8 / sp)
    out: dict[str, Any] = {
        "members": ",".join(members),
        "member_count": len(have),
        "tx_bytes_per_second": sum(vals),
        "hottest_member": hottest,
        "mean_utilization_ratio": sum(utils) / len(utils) if len(utils) == len(have) else None,
        "max_utilization_ratio": max(utils) if len(utils) == len(have) else None,
    }
    if mean > 0:
        var = sum((v - mean) ** 2 for v in vals) / len(vals)
        out["max_mean_ratio"] = have[hottest] / mean
        out["cv_ratio"] = math.sqrt(var) / mean
    else:  # an idle group is even, not undefined
        out["max_mean_ratio"] = 1.0
        out["cv_ratio"] = 0.0
    return out


def _port_key(p: str) -> tuple[str, int]:
    m = re.match(r"(\D*)(\d+)", p)
    return (m.group(1), int(m.group(2))) if m else (p, 0)


__all__ = ["Groups", "groups_from_lldp", "member_index", "merge_groups", "spread"]
