"""Topology from the real embedded store: declared HyperNodes as of a time (from the versioned
inventory), LLDP links and affinity records, and the `railscope topology` verbs on top."""

from __future__ import annotations

from typing import Any

import pytest

from exporters.inventory.state import InventoryState
from telemetry.cli import main
from telemetry.contracts import Batch
from telemetry.topology.hypernodes import HyperNodeTree
from telemetry.topology.physical import Fabric, diff
from telemetry.topology.store_io import (
    declared_from_store,
    fabric_inputs_from_store,
    parse_label_selector,
)
from telemetry.transforms import StampCluster
from tests.conftest import now_ms
from tests.unit.topology.synth import SynthFabric


def put(store: Any, kind: str, rows: list[dict[str, Any]]) -> None:
    b = Batch.from_rows(kind, rows)
    store.insert(b.kind, StampCluster("default").process(b).table)


def load_inventory(
    store: Any, objs: list[dict[str, Any]], at: int, state: InventoryState | None = None
) -> InventoryState:
    s = state or InventoryState(now_ms)
    for o in objs:
        s.event("ADDED", o, at)
    for k, rows in s.drain_rows().items():
        put(store, k, rows)
    return s


@pytest.fixture
def fabric_store(store: Any) -> tuple[Any, SynthFabric, int]:
    f = SynthFabric()
    t0 = now_ms() - 3_600_000
    nodes = [
        {"kind": "Node", "metadata": {"name": n, "labels": {"su": f"{p}-{s}"}}}
        for n, (p, s) in f.su_of.items()
    ]
    state = load_inventory(store, nodes + f.declared_manifests(), t0)
    ts = now_ms() - 60_000
    put(store, "lldp_link", [{"ts": ts, **r} for r in f.links])
    put(
        store,
        "gpu_nic_affinity",
        [{"ts": ts, "gpu_pci": "", "pcie_switch": "", "numa_node": 0, **r} for r in f.affinity],
    )
    store.state = state  # type: ignore[attr-defined]
    return store, f, t0


def test_store_declared_matches_the_fabric(fabric_store: tuple[Any, SynthFabric, int]) -> None:
    store, f, _ = fabric_store
    specs, nodes = declared_from_store(store, "default")
    assert len(specs) == 7 and len(nodes) == 16
    links, aff = fabric_inputs_from_store(store, "default")
    assert len(links) == len(f.links) and len(aff) == len(f.affinity)
    assert diff(HyperNodeTree.build(specs, nodes), Fabric(links, aff)) == []


def test_lca_as_of_a_time_follows_hypernode_edits(
    fabric_store: tuple[Any, SynthFabric, int],
    monkeypatch: pytest.MonkeyPatch,
    chdb_dsn: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store, f, t0 = fabric_store
    a, b = f.server(0, 0, 0), f.server(0, 0, 1)
    # at t1 node b moves to another leaf HyperNode
    docs = {d["metadata"]["name"]: d for d in f.declared_manifests()}
    docs["su-0-0"]["spec"]["members"] = [
        m for m in docs["su-0-0"]["spec"]["members"] if m["selector"]["exactMatch"]["name"] != b
    ]
    docs["su-0-1"]["spec"]["members"].append(
        {"type": "Node", "selector": {"exactMatch": {"name": b}}}
    )
    t1 = t0 + 1_800_000
    load_inventory(store, [docs["su-0-0"], docs["su-0-1"]], t1, store.state)
    before = HyperNodeTree.build(*declared_from_store(store, "default", _dt(t1 - 1)))
    after = HyperNodeTree.build(*declared_from_store(store, "default"))
    assert before.lca(a, b) == ("su-0-0", 1)
    assert after.lca(a, b) == ("pod-0", 2)

    monkeypatch.setenv("RAILSCOPE_DSN", chdb_dsn)
    monkeypatch.setenv("RAILSCOPE__STORE__DATABASE", store.database)
    assert main(["topology", "lca", a, b]) == 0
    assert capsys.readouterr().out.strip() == "pod-0\ttier 2"
    assert main(["topology", "lca", a, b, "--at", _dt(t1 - 1).isoformat()]) == 0
    assert capsys.readouterr().out.strip() == "su-0-0\ttier 1"
    assert (
        main(["topology", "diff", "--json"]) == 1
    )  # the edit is drift: b is wired to su-0-0's leaves
    out = capsys.readouterr().out
    assert '"kind": "wrong_hypernode"' in out and b in out and out.count("\n") == 1
    assert main(["topology", "lca", a, "no-such-node"]) == 2


def test_label_selector_roundtrip() -> None:
    sel = {
        "matchLabels": {"a": "1"},
        "matchExpressions": [
            {"key": "b", "operator": "In", "values": ["x", "y"]},
            {"key": "c", "operator": "Exists"},
        ],
    }
    from telemetry.topology.hypernodes import render_label_selector

    assert parse_label_selector(render_label_selector(sel)) == sel


def _dt(ms: int) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC)
