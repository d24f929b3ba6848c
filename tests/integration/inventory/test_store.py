"""Inventory history in the real embedded ClickHouse: IP reuse, who-owned lookups, restarts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from exporters.inventory.source import InventorySource
from exporters.inventory.state import InventoryState
from exporters.inventory.who import who_owned, who_owned_many
from telemetry.contracts import Batch
from telemetry.transforms import StampCluster
from tests.conftest import now_ms
from tests.k8s import pod, podgroup_of, volcano_job

DUMP = Path(__file__).parents[2] / "fixtures" / "k8s" / "dump"


def store_batches(store: Any, batches: list[Batch]) -> None:
    for b in batches:
        store.insert(b.kind, StampCluster("default").process(b).table)


def test_ip_reuse_resolves_inside_each_lease_and_to_nothing_in_the_gap(store: Any) -> None:
    t0 = now_ms() - 3_600_000
    s = InventoryState(lambda: now_ms())
    s.event("ADDED", pod("trainer-0", "10.1.0.7"), t0)
    s.event("DELETED", pod("trainer-0", "10.1.0.7"), t0 + 600_000)
    s.event("ADDED", pod("trainer-9", "10.1.0.7"), t0 + 900_000)
    s.event("ADDED", pod("other", "10.1.0.8"), t0)
    from telemetry.contracts import Batch

    store_batches(store, [Batch.from_rows(k, r) for k, r in s.drain_rows().items()])

    def owner(at: int) -> str | None:
        got = who_owned(store, "10.1.0.7", at, cluster="default")
        return None if got is None else got["pod"]

    assert owner(t0 - 1) is None
    assert owner(t0) == "trainer-0"
    assert owner(t0 + 300_000) == "trainer-0"
    assert owner(t0 + 600_000 - 1) == "trainer-0"
    assert owner(t0 + 600_000) is None  # the lease ends exclusive
    assert owner(t0 + 700_000) is None  # the gap
    assert owner(t0 + 900_000) == "trainer-9"
    assert owner(now_ms()) == "trainer-9"
    many = who_owned_many(
        store,
        [
            ("10.1.0.7", t0 + 1),
            ("10.1.0.8", t0 + 700_000),
            ("10.1.0.7", t0 + 700_000),
            ("10.9.9.9", t0 + 1),
        ],
        cluster="default",
    )
    assert [m["pod"] if m else None for m in many] == ["trainer-0", "other", None, None]
    assert who_owned(store, "10.1.0.7", t0 + 1, cluster="elsewhere") is None


def test_dump_into_store_then_who(store: Any) -> None:
    src = InventorySource(from_path=str(DUMP), store=store, cluster="default")
    store_batches(store, src.collect())
    # a bad regex member, two HyperNodes on a cycle, one broken network-status
    assert src.stats.dropped == 4
    got = who_owned(store, "2.2.2.49", now_ms(), cluster="default")
    assert got is not None and (got["pod"], got["interface"], got["pci_address"]) == (
        "test-pod-sriov",
        "net1",
        "0000:19:00.4",
    )
    # rack-0, spine-0 and bad-regex (as declared; its one member matches nothing)
    assert store.query_rows(f"SELECT count() FROM {store.table('hypernode')} FINAL")[0][0] == 3
    # a second run over the same dump, seeded from the store, adds no history
    again = InventorySource(from_path=str(DUMP), store=store, cluster="default")
    assert sum(b.num_rows for b in again.collect()) == 0


def test_restart_continues_history_from_the_store(store: Any) -> None:
    t0 = now_ms() - 60_000
    a = InventoryState(lambda: now_ms())
    a.sync("Pod", [pod("p", "10.2.0.1")], t0)
    store_batches(store, [Batch.from_rows(k, r) for k, r in a.drain_rows().items()])
    b = InventoryState(lambda: now_ms())
    b.load_open_from_store(store, "default")
    b.sync("Pod", [pod("p", "10.2.0.1", phase="Succeeded")], t0 + 30_000)
    store_batches(store, [Batch.from_rows(k, r) for k, r in b.drain_rows().items()])
    hist = store.query_rows(
        f"SELECT ip, pod, toUnixTimestamp64Milli(valid_from), toUnixTimestamp64Milli(valid_to) FROM {store.table('pod_ip_lease')} FINAL ORDER BY valid_from"
    )
    assert hist == [("10.2.0.1", "p", t0, t0 + 30_000)]
    phases = store.query_rows(
        f"SELECT phase, valid_to IS NULL FROM {store.table('pod')} FINAL ORDER BY valid_from"
    )
    assert phases == [("Running", False), ("Succeeded", True)]


def test_restart_keeps_job_rows_of_jobs_and_standalone_podgroups(store: Any) -> None:
    t0 = now_ms() - 60_000
    job = volcano_job("train", "t", mode="hard", tier=1, replicas=2)
    pg_of_job = podgroup_of("train", "t", "leaf-1")
    standalone = {
        "kind": "PodGroup",
        "metadata": {"name": "pg-solo", "namespace": "t"},
        "spec": {"minMember": 3},
    }
    gone = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "old", "namespace": "t"},
        "spec": {},
    }
    a = InventoryState(lambda: now_ms())
    a.sync("Job", [job, gone], t0)
    a.sync("PodGroup", [pg_of_job, standalone], t0)
    store_batches(store, [Batch.from_rows(k, r) for k, r in a.drain_rows().items()])
    # restart: the Job list comes first, the PodGroup list second (as concurrent watches may)
    b = InventoryState(lambda: now_ms())
    b.load_open_from_store(store, "default")
    b.sync("Job", [job], t0 + 10_000)
    b.sync("PodGroup", [pg_of_job, standalone], t0 + 20_000)
    rows = b.drain_rows().get("job", [])
    # a stored job row neither list claims is closed once both lists are in
    assert [(r["job"], r["valid_to"]) for r in rows] == [("old", t0 + 20_000)]


def test_a_pattern_re2_cannot_compile_never_reaches_a_store_query(store: Any) -> None:
    """A HyperNode member whose regex RE2 refuses (unclosed class, lookahead) is stored under
    invalidRegex, so the leaf HyperNode query (ClickHouse match()) still answers for the others
    and reading the tree back names the member again."""
    from telemetry.pool import leaf_hypernodes
    from telemetry.topology.store_io import declared_from_store

    t0 = now_ms() - 60_000
    s = InventoryState(lambda: now_ms())
    for n in ("gpu-node-1", "gpu-node-2", "cpu-1"):
        s.event("ADDED", {"kind": "Node", "metadata": {"name": n}, "status": {}}, t0)
    members = [
        {"type": "Node", "selector": {"regexMatch": {"pattern": p}}}
        for p in ("gpu-node-[0-9", "^cpu-(?=1)", "^gpu-node-[12]$")
    ]
    s.event(
        "ADDED",
        {
            "kind": "HyperNode",
            "metadata": {"name": "leaf"},
            "spec": {"tier": 1, "members": members},
        },
        t0,
    )
    assert sum("is not a valid regex" in p for p in s.problems) == 2
    store_batches(store, [Batch.from_rows(k, r) for k, r in s.drain_rows().items()])
    assert leaf_hypernodes(store, "default") == {"gpu-node-1": "leaf", "gpu-node-2": "leaf"}
    specs, _ = declared_from_store(store, "default")
    assert [m.selector for m in specs[0].members] == ["regexMatch"] * 3
