"""The time-versioned ledger: history rows for changes, no rows for unchanged facts."""

from __future__ import annotations

from typing import Any

from exporters.inventory.state import InventoryState
from tests import k8s


class Clock:
    def __init__(self, t: int = 1_000_000) -> None:
        self.t = t

    def __call__(self) -> int:
        return self.t


def pod(name: str, ip: str | None, node: str = "n1", phase: str = "Running") -> dict[str, Any]:
    return k8s.pod(name, ip, phase=phase, node=node)


def leases(rows: dict[str, list[dict]]) -> list[tuple]:
    return [
        (r["ip"], r["pod"], r["valid_from"], r["valid_to"]) for r in rows.get("pod_ip_lease", [])
    ]


def test_ip_reuse_closes_the_old_lease_and_opens_the_new() -> None:
    clk = Clock()
    s = InventoryState(clk)
    s.event("ADDED", pod("a", "10.0.0.5"), 1000)
    s.event("DELETED", pod("a", "10.0.0.5"), 2000)
    s.event("ADDED", pod("b", "10.0.0.5"), 3000)
    assert leases(s.drain_rows()) == [
        ("10.0.0.5", "a", 1000, None),
        ("10.0.0.5", "a", 1000, 2000),
        ("10.0.0.5", "b", 3000, None),
    ]


def test_unchanged_object_emits_nothing_and_versions_rise() -> None:
    s = InventoryState(Clock())
    s.event("ADDED", pod("a", "10.0.0.5"), 1000)
    first = s.drain_rows()
    s.event("MODIFIED", pod("a", "10.0.0.5"), 2000)
    s.sync("Pod", [pod("a", "10.0.0.5")], 3000)
    assert s.drain_rows() == {}
    s.event("MODIFIED", pod("a", "10.0.0.5", node="n2"), 4000)  # rescheduled (same name, new node)
    rows = s.drain_rows()
    assert [(r["node"], r["valid_from"], r["valid_to"]) for r in rows["pod"]] == [
        ("n1", 1000, 4000),
        ("n2", 4000, None),
    ]
    assert rows["pod"][0]["updated_at"] > first["pod"][0]["updated_at"]


def test_change_within_the_opening_instant_reversions_the_same_row() -> None:
    s = InventoryState(Clock())
    s.event("ADDED", pod("a", None, phase="Pending"), 1000)
    s.event("MODIFIED", pod("a", "10.0.0.9", phase="Running"), 1000)
    rows = s.drain_rows()
    assert [(r["phase"], r["valid_from"], r["valid_to"]) for r in rows["pod"]] == [
        ("Pending", 1000, None),
        ("Running", 1000, None),
    ]
    assert rows["pod"][1]["updated_at"] > rows["pod"][0]["updated_at"]


def test_relist_closes_what_vanished_during_the_gap() -> None:
    s = InventoryState(Clock())
    s.sync("Pod", [pod("a", "10.0.0.1"), pod("b", "10.0.0.2")], 1000)
    s.drain_rows()
    s.sync("Pod", [pod("b", "10.0.0.2")], 5000)
    rows = s.drain_rows()
    assert leases(rows) == [("10.0.0.1", "a", 1000, 5000)]
    assert [(r["pod"], r["valid_to"]) for r in rows["pod"]] == [("a", 5000)]


def test_job_takes_the_allocated_hypernode_from_its_podgroup() -> None:
    s = InventoryState(Clock())
    job = k8s.volcano_job("train", "t", mode="soft", tier=2, replicas=4, queue="q")
    pg = k8s.podgroup_of("train", "t", "leaf-3")
    s.event("ADDED", job, 1000)
    s.event("ADDED", pg, 2000)
    rows = s.drain_rows()["job"]
    assert [(r["allocated_hypernode"], r["valid_from"], r["valid_to"]) for r in rows] == [
        ("", 1000, None),
        ("", 1000, 2000),
        ("leaf-3", 2000, None),
    ]
    assert rows[-1]["topology_mode"] == "soft" and rows[-1]["highest_tier_allowed"] == 2


def test_hypernode_cycle_is_skipped_and_a_bad_regex_member_named() -> None:
    s = InventoryState(Clock())

    def hn(name: str, tier: int, child: str) -> dict:
        return {
            "kind": "HyperNode",
            "metadata": {"name": name},
            "spec": {
                "tier": tier,
                "members": [{"type": "HyperNode", "selector": {"exactMatch": {"name": child}}}],
            },
        }

    s.sync(
        "HyperNode",
        [
            hn("a", 2, "b"),
            hn("b", 3, "a"),
            hn("ok", 2, "leaf"),
            {
                "kind": "HyperNode",
                "metadata": {"name": "rx"},
                "spec": {
                    "tier": 1,
                    "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "("}}}],
                },
            },
        ],
        1000,
    )
    rows = s.drain_rows()
    assert [r["hypernode"] for r in rows["hypernode"]] == ["ok", "rx"]  # rx: as declared
    assert any(p.startswith("HyperNode a: HyperNode cycle") for p in s.problems)
    assert "HyperNode rx: Node member regexMatch '(' is not a valid regex" in "\n".join(s.problems)
    # a later edit that closes a loop is refused too, and the old declaration stays open
    s.event(
        "MODIFIED",
        hn("leaf", 1, "ok")
        | {
            "spec": {
                "tier": 1,
                "members": [{"type": "HyperNode", "selector": {"exactMatch": {"name": "ok"}}}],
            }
        },
        2000,
    )
    assert s.drain_rows() == {}


def test_backdate_uses_object_start_only_for_new_facts() -> None:
    s = InventoryState(Clock())
    p = pod("a", "10.0.0.1") | {
        "metadata": {
            "name": "a",
            "namespace": "team-a",
            "creationTimestamp": "1970-01-01T00:00:01Z",
        }
    }
    s.sync("Pod", [p], 5000, backdate=True)
    assert [r["valid_from"] for r in s.drain_rows()["pod"]] == [1000]


def test_hypernode_members_volcano_ignores_are_stored_and_named() -> None:
    """An empty labelMatch and a HyperNode member by regexMatch (tests/fixtures/volcano/
    hypernode_members): the HyperNode is stored as declared, each such member is reported."""
    from exporters.inventory.objects import load_dump
    from tests.unit.inventory.test_objects import FIX

    s = InventoryState(Clock())
    s.apply_dump(
        load_dump(FIX / "volcano" / "hypernode_members" / "empty_labelmatch.yaml")
        + load_dump(FIX / "volcano" / "hypernode_members" / "s4_regex_hypernode_members.yaml"),
        1000,
    )
    rows = s.drain_rows()["hypernode"]
    assert [(r["hypernode"], r["selector"], r["member"]) for r in rows] == [
        ("s0", "exactMatch", "node-0"),
        ("s0", "labelMatch", ""),
        ("s4", "regexMatch", "^s[01]$"),
    ]
    assert s.problems == [
        "HyperNode s0: Node member labelMatch {} has no criteria: it matches nothing",
        "HyperNode s4: HyperNode member regexMatch '^s[01]$' is ignored: "
        "Volcano takes HyperNode members by exactMatch only",
    ]
