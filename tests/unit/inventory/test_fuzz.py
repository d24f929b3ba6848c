"""Fuzzing the Kubernetes object parsers (exporters/inventory/objects.py, HyperNodes through
telemetry/topology/hypernodes.py) with objects seeded from the real dumps (tests/fixtures/k8s,
tests/fixtures/volcano): pods with Multus network-status annotations, Nodes, HyperNodes, Volcano
Jobs and PodGroups, each structurally mutated (wrong types, missing keys, huge numbers, unicode,
deep nesting, truncated lists) or its annotation text mutated. Through `InventoryState` (dump,
list and watch paths) nothing escapes: a bad object is skipped and reported by name (the source
counts each report as railscope_component_failed_total{reason="malformed_object"}), and every row
that comes out fits its Arrow column. >= 100,000 objects; marked slow."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from exporters.inventory.objects import NETWORK_STATUS, iter_objects, load_dump
from exporters.inventory.state import InventoryState
from telemetry.contracts import Batch
from tests.fuzz import PER_EXAMPLE, fuzz, mutate, mutate_doc

pytestmark = pytest.mark.slow
FIX = Path(__file__).parents[2] / "fixtures"
SEEDS = load_dump(FIX / "k8s" / "dump") + [
    o for f in sorted((FIX / "volcano").glob("*.yaml")) for o in load_dump(f)
]
NETWORK_STATUSES = [
    (FIX / "k8s" / f).read_text()
    for f in (
        "multus_quickstart_network_status.json",
        "canonical_k8s_epa_network_status.json",
        "kubevirt_sriov_interfaces_mapping_network_status.json",
        "sriov_operator_conformance_network_status.json",
    )
]
PODS = [o for o in SEEDS if o.get("kind") == "Pod"]


def _object(rnd: random.Random) -> Any:
    """A seed object structurally mutated, or a running pod whose Multus network-status
    annotation is a real one with its text or its parsed entries mutated."""
    if rnd.random() < 0.25:
        pod = json.loads(json.dumps(rnd.choice(PODS)))
        text = rnd.choice(NETWORK_STATUSES)
        pod["metadata"].setdefault("annotations", {})[NETWORK_STATUS] = (
            mutate(rnd, text)
            if rnd.random() < 0.5
            else json.dumps(mutate_doc(rnd, json.loads(text)))
        )
        pod["status"]["phase"] = "Running"
        return pod
    return mutate_doc(rnd, rnd.choice(SEEDS))


def test_kubernetes_objects_are_skipped_by_name_never_raised() -> None:
    seen = {"rows": 0, "reports": 0}

    def check(rnd: random.Random) -> int:
        docs = [_object(rnd) for _ in range(PER_EXAMPLE)]
        objs = [o for d in docs for o in iter_objects(d)]
        state = InventoryState(lambda: 1_700_000_000_000)
        path = rnd.random()
        if path < 0.5:
            state.apply_dump(objs)
        elif path < 0.75:  # a full list per kind, then a re-list that drops half
            for kind in ("Pod", "Node", "HyperNode", "Job", "PodGroup"):
                state.sync(kind, [o for o in objs if o.get("kind") == kind])
                state.sync(kind, [o for o in objs[::2] if o.get("kind") == kind])
        else:  # watch events
            for o in objs:
                state.event(rnd.choice(("ADDED", "MODIFIED", "DELETED")), o)
        assert all(isinstance(p, str) and p for p in state.problems)
        rows = state.drain_rows()
        for kind, rs in rows.items():
            Batch.from_rows(kind, rs)  # every value fits its column (Arrow raises otherwise)
        seen["rows"] += sum(map(len, rows.values()))
        seen["reports"] += len(state.problems)
        return len(docs)

    fuzz(check)
    assert seen["rows"] and seen["reports"]  # both paths exercised
