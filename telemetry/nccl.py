"""NCCL's own words for how a collective ran: algorithm and protocol names as NCCL spells them in
its profiler strings (`RING`, `NVLS_TREE`, `LL128`), and the NCCL_ALGO / NCCL_PROTO settings that
force them. One canonical spelling for every place that reads or compares them (the Inspector
parser, the inventory's NCCL settings, the detectors, the simulator).

Pure functions over strings; never reads the environment of this process.
"""

from __future__ import annotations

import re

# ncclAlgoToString() / ncclProtoToString() (NCCL >= 2.19), the strings the profiler plugin API
# passes and Inspector v4.2 writes as coll_algo / coll_proto
ALGORITHMS = ("TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT")
PROTOCOLS = ("LL", "LL128", "SIMPLE")
# other spellings of the same names: ncclAlgoStr[] of older NCCL ("NVLSTree", "CollNetDirect"),
# the Inspector's Prometheus labels ("Ring_ll"), NCCL_ALGO values as people write them
_SQUASHED = {re.sub(r"[^A-Z0-9]", "", n): n for n in (*ALGORITHMS, *PROTOCOLS)}


def canonical(name: str) -> str:
    """An algorithm or protocol name in NCCL's profiler spelling (`NVLSTree` -> `NVLS_TREE`,
    `simple` -> `SIMPLE`); a name NCCL does not have is upper-cased, '' stays ''."""
    s = name.strip().upper()
    return _SQUASHED.get(re.sub(r"[^A-Z0-9]", "", s), s)


# how NCCL_ALGO / NCCL_PROTO spell each name (NCCL's env parser matches these, case-insensitive)
ENV_SPELLING = {
    "TREE": "Tree",
    "RING": "Ring",
    "COLLNET_DIRECT": "CollnetDirect",
    "COLLNET_CHAIN": "CollnetChain",
    "NVLS": "NVLS",
    "NVLS_TREE": "NVLSTree",
    "PAT": "PAT",
    "LL": "LL",
    "LL128": "LL128",
    "SIMPLE": "Simple",
}


def env_value(name: str) -> str:
    """A canonical algorithm or protocol as an NCCL_ALGO / NCCL_PROTO value (`NVLS_TREE` ->
    `NVLSTree`)."""
    return ENV_SPELLING.get(canonical(name), name)


def split_algo_proto(label: str) -> tuple[str, str]:
    """The Inspector's Prometheus `algo_proto` label (`Ring_ll`, `NVLS_TREE_SIMPLE`,
    `unknown_unknown`) as (algorithm, protocol), both canonical; '' for an unknown part."""
    head, _, tail = label.rpartition("_")
    if head and canonical(tail) in (*PROTOCOLS, "UNKNOWN"):
        return (_known(canonical(head)), _known(canonical(tail)))
    return (_known(canonical(label)), "")


def _known(name: str) -> str:
    return "" if name in ("", "UNKNOWN") else name


def setting_names(value: str) -> tuple[set[str], bool]:
    """The algorithms (or protocols) an NCCL_ALGO / NCCL_PROTO value allows, canonical, and
    whether it excludes instead (a leading `^`: `^LL128` = anything but LL128). Per-collective
    forms (`allreduce:tree,ring;allgather:ring`) give the union of their lists."""
    v = value.strip()
    exclude = v.startswith("^")
    names: set[str] = set()
    for part in v.lstrip("^").split(";"):
        _, _, names_part = part.rpartition(":")
        names |= {canonical(n) for n in names_part.split(",") if n.strip()}
    return names, exclude


def forced_by(value: str, name: str) -> bool:
    """Whether an NCCL_ALGO / NCCL_PROTO value restricts NCCL so that `name` is what it may use:
    the value names `name` (or excludes others but not it) and is not NCCL's free choice."""
    names, exclude = setting_names(value)
    if not names:
        return False
    return (canonical(name) not in names) if exclude else (canonical(name) in names)


__all__ = [
    "ALGORITHMS",
    "ENV_SPELLING",
    "PROTOCOLS",
    "canonical",
    "env_value",
    "forced_by",
    "setting_names",
    "split_algo_proto",
]
