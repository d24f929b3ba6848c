"""Namespaces are tenants: stored as history with their labels."""

from __future__ import annotations

import pytest

from exporters.inventory.objects import Malformed, namespace_facts
from exporters.inventory.state import InventoryState


def ns(name: str, labels: dict[str, str] | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "labels": labels or {},
            "creationTimestamp": "2026-11-21T10:00:00Z",
        },
    }


def test_namespace_facts_tenant_label_or_name() -> None:
    (f,) = namespace_facts(ns("team-a", {"railscope.io/tenant": "acme"}))
    assert f.kind == "namespace" and f.key == ("team-a",)
    assert dict(f.values)["tenant"] == "acme"
    (g,) = namespace_facts(ns("team-b"))
    assert dict(g.values)["tenant"] == "team-b"
    with pytest.raises(Malformed, match=r"Namespace without metadata\.name"):
        namespace_facts({"kind": "Namespace", "metadata": {}})


def test_relabel_closes_the_old_row_and_delete_closes_the_last() -> None:
    now = [1_000]
    st = InventoryState(clock=lambda: now[0])
    st.event("ADDED", ns("team-a", {"railscope.io/tenant": "acme"}))
    now[0] = 2_000
    st.event("MODIFIED", ns("team-a", {"railscope.io/tenant": "globex"}))
    now[0] = 3_000
    st.event("DELETED", ns("team-a", {"railscope.io/tenant": "globex"}))
    rows = sorted(st.ledger.rows["namespace"], key=lambda r: (r["valid_from"], r["valid_to"] or 0))
    closed = [(r["tenant"], r["valid_to"]) for r in rows if r["valid_to"] is not None]
    assert ("acme", 2_000) in closed and ("globex", 3_000) in closed
