"""An incident's blast radius (telemetry/correlate/impact.py) on the real embedded store: the jobs
on its nodes while it lasted, both ends of the flows through its ports, their GPUs and tenants;
every incident of a tick read in two statements, each as it would be alone."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from telemetry.correlate.impact import Impact, Span, impacts
from telemetry.records import ATTRIBUTED_FLOW, NAMESPACE, POD
from telemetry.store import Store

# recent: attributed flows older than their TTL (14 days) are dropped as they are written
T0 = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=6)
HOUR = timedelta(hours=1)


def _ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


@dataclass
class Member:
    subject_type: str
    subject: str
    evidence: Mapping[str, Any] = field(default_factory=dict)


def _inventory(store: Store) -> None:
    def pod(ns: str, name: str, node: str, job: str, gpus: str, until: datetime | None) -> dict:
        return {
            "cluster": "c", "valid_from": _ms(T0 - HOUR), "updated_at": _ms(T0 - HOUR),
            "valid_to": _ms(until) if until else None, "namespace": ns, "pod": name,
            "uid": name, "node": node, "job": job, "phase": "Running", "gpus": gpus,
        }  # fmt: skip

    store.insert(
        POD,
        POD.to_arrow(
            [
                pod("team-a", "w0", "n1", "ja", "[0, 1]", None),
                pod("team-a", "w1", "n2", "ja", "[0]", None),
                pod("team-b", "p0", "n3", "jb", "[0, 1, 2, 3]", T0 + HOUR),  # gone after an hour
                pod("team-c", "q0", "n4", "", "[0]", None),  # no job
            ]
        ),
    )
    store.insert(
        NAMESPACE,
        NAMESPACE.to_arrow(
            [
                {"cluster": "c", "valid_from": _ms(T0 - HOUR), "valid_to": None,
                 "updated_at": _ms(T0 - HOUR), "namespace": ns, "tenant": tenant, "labels": "{}"}
                for ns, tenant in [("team-a", "acme"), ("team-b", "")]
            ]
        ),
    )  # fmt: skip
    flow = {c.name: None for c in ATTRIBUTED_FLOW.fields if c.nullable}
    store.insert(
        ATTRIBUTED_FLOW,
        ATTRIBUTED_FLOW.to_arrow(
            [
                {**flow, "ts": _ms(T0 + timedelta(minutes=5)), "cluster": "c", "switch": "leaf1",
                 "out_port": "Ethernet8", "src_ip": "10.0.0.3", "dst_ip": "10.0.0.1",
                 "dst_port": 4791, "rdma": True, "bytes": 4096, "src_namespace": "team-b",
                 "src_pod": "p0", "src_node": "n3", "src_job": "jb", "dst_namespace": "team-a",
                 "dst_pod": "w0", "dst_node": "n1", "dst_job": "ja", "src_rail": 0,
                 "dst_rail": 0, "lca_tier": 2}
            ]
        ),
    )  # fmt: skip


def test_each_incidents_blast_radius_read_together_is_what_it_is_alone(store: Store) -> None:
    _inventory(store)
    spans = [
        Span([Member("gpu", "n1/0")], T0, T0 + timedelta(minutes=10)),
        Span([Member("port", "leaf1:Ethernet8")], T0, T0 + timedelta(minutes=10)),
        # the node of a pod that ended before the incident began: no job
        Span([Member("node", "n3")], T0 + 2 * HOUR, T0 + 3 * HOUR),
        Span([Member("job", "team-c/x"), Member("flow", "team-b/p0->team-a/w1")], T0, T0 + HOUR),
        Span([Member("node", "n9", {"nodes": ["n2"]})], T0, T0 + HOUR),
    ]
    together = impacts(store, "c", spans)
    assert together == [
        Impact(["team-a/ja"], ["acme"], 3),
        Impact(["team-a/ja", "team-b/jb"], ["acme", "team-b"], 7),  # team-b has no tenant label
        Impact(),
        Impact(["team-a/ja", "team-b/jb", "team-c/x"], ["acme", "team-b", "team-c"], 7),
        Impact(["team-a/ja"], ["acme"], 3),
    ]
    assert together == [impacts(store, "c", [s])[0] for s in spans]
    assert impacts(store, "c", []) == []
    assert impacts(store, "other", spans[:2]) == [Impact(), Impact()]
