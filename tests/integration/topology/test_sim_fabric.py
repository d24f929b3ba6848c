"""Acceptance on the cluster simulator's fabric (telemetry/sim, built by another engineer): the
generated HyperNodes reproduce the declared ones tier by tier, and `diff` finds exactly the
injected hypernode_drift. Skipped while the simulator is not importable."""

from __future__ import annotations

import json

import pytest

from telemetry.topology.hypernodes import HyperNodeSpec, HyperNodeTree, Member
from telemetry.topology.physical import Fabric, diff, generate_specs

sim_engine = pytest.importorskip("telemetry.sim.engine")
sim_scenario = pytest.importorskip("telemetry.sim.scenario")


def declared(rows: dict[str, list[dict]], at_ms: int | None) -> HyperNodeTree:
    by: dict[str, tuple[int, list[Member]]] = {}
    for r in rows["hypernode"]:
        if r["valid_to"] is None and (at_ms is None or r["valid_from"].timestamp() * 1000 <= at_ms):
            by.setdefault(r["hypernode"], (r["tier"], []))[1].append(
                Member(r["member_type"], r["selector"], r["member"])
            )
    nodes = {r["node"]: json.loads(r["labels"]) for r in rows["node"]}
    return HyperNodeTree.build(
        [HyperNodeSpec(k, t, "", tuple(m)) for k, (t, m) in by.items()], nodes
    )


@pytest.mark.parametrize("scenario", ["small", "multi-idc"])
def test_generated_hypernodes_match_the_simulator_and_diff_finds_its_drift(scenario: str) -> None:
    sim = sim_engine.build(sim_scenario.load_scenario(scenario))
    rows = {b.kind.name: b.table.to_pylist() for b in sim.inventory_batches()}
    fabric = Fabric(rows["lldp_link"], rows["gpu_nic_affinity"])
    before = declared(rows, sim.start_ms)
    tiers, issues = fabric.hierarchy(tiers_wanted=len(before.tiers))
    assert issues == []
    gen = HyperNodeTree.build(generate_specs(tiers))
    assert gen.tiers == before.tiers
    for t in before.tiers:
        assert {frozenset(v) for v in gen.node_groups(t).values()} == {
            frozenset(v) for v in before.node_groups(t).values()
        }
    assert diff(before, fabric, tiers) == []
    drift = [f for f in sim.faults if f.kind == "hypernode_drift"]
    got = {(d.kind, d.subject, d.declared) for d in diff(declared(rows, None), fabric, tiers)}
    assert got == {
        ("wrong_hypernode", sim.fabric.nodes[f.target["node"]].name, f.subject) for f in drift
    }
