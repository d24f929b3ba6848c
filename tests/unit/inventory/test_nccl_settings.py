"""A pod's NCCL settings from its spec (exporters/inventory/nccl_env.py) through the ledger:
literal values, ConfigMap values resolved when the ConfigMap is at hand (else named), secrets never
stored, history when a pod is replaced with other settings."""

from __future__ import annotations

from typing import Any

from exporters.inventory.state import InventoryState
from tests import k8s


def trainer(name: str, env: list[dict[str, Any]], env_from: list[dict[str, Any]] | None = None):
    p = k8s.pod(name, "10.0.0.9", ns="team-a")
    p["metadata"]["labels"] = {"volcano.sh/job-name": "llm"}
    p["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    p["spec"]["initContainers"] = [
        {"name": "init", "env": [{"name": "NCCL_DEBUG", "value": "WARN"}]}
    ]
    p["spec"]["containers"] = [
        {"name": "sidecar", "env": [{"name": "PATH", "value": "/bin"}]},
        {"name": "trainer", "env": env, **({"envFrom": env_from} if env_from else {})},
    ]
    return p


def configmap(name: str, data: dict[str, str], ns: str = "team-a") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
            "data": data}  # fmt: skip


ENV = [
    {"name": "NCCL_ALGO", "value": "Ring"},
    {"name": "NCCL_IB_QPS_PER_CONNECTION", "value": "1"},
    {"name": "NCCL_IB_HCA", "valueFrom": {"configMapKeyRef": {"name": "fabric", "key": "hca"}}},
    {"name": "NCCL_NET_GDR_LEVEL", "valueFrom": {"configMapKeyRef": {"name": "gone", "key": "x"}}},
    {"name": "NCCL_SOCKET_IFNAME", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    # never stored: a secret's value, and a name that looks like a secret
    {"name": "NCCL_PLUGIN_KEY_FILE", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
    {"name": "NCCL_COLLNET_TOKEN", "value": "hunter2"},
    {"name": "OMP_NUM_THREADS", "value": "8"},
]


def settings(rows: dict[str, list[dict[str, Any]]]) -> dict[tuple[str, str], tuple[Any, ...]]:
    return {
        (r["container"], r["name"]): (r["value"], r["source"], r["ref"], r["valid_to"])
        for r in rows.get("nccl_setting", [])
    }


def test_settings_from_the_spec_configmaps_resolved_secrets_never_stored() -> None:
    later = 1_800_000_000_000  # a dump read after the pod was created: rows from its creation
    s = InventoryState(lambda: later)
    s.apply_dump(
        [
            trainer(
                "w-0",
                ENV,
                [{"configMapRef": {"name": "nccl-env"}}, {"secretRef": {"name": "creds"}}],
            ),
            configmap("fabric", {"hca": "mlx5_0,mlx5_1"}),
            configmap("nccl-env", {"NCCL_CROSS_NIC": "0", "NCCL_ALGO": "Tree", "OTHER": "x"}),
        ],
        later,
    )
    rows = s.drain_rows()
    got = settings(rows)
    assert got == {
        ("init", "NCCL_DEBUG"): ("WARN", "value", "", None),
        # env wins over envFrom for the same name, as in Kubernetes
        ("trainer", "NCCL_ALGO"): ("Ring", "value", "", None),
        ("trainer", "NCCL_CROSS_NIC"): ("0", "configmap", "configmap nccl-env (envFrom)", None),
        ("trainer", "NCCL_IB_QPS_PER_CONNECTION"): ("1", "value", "", None),
        ("trainer", "NCCL_IB_HCA"): ("mlx5_0,mlx5_1", "configmap", "configmap fabric key hca", None),
        ("trainer", "NCCL_NET_GDR_LEVEL"): ("", "configmap_unresolved", "configmap gone key x", None),
        ("trainer", "NCCL_SOCKET_IFNAME"): ("", "field", "fieldRef status.podIP", None),
    }  # fmt: skip
    assert {r["job"] for r in rows["nccl_setting"]} == {"llm"}
    assert "hunter2" not in repr(rows) and "PLUGIN_KEY" not in repr(rows)
    assert rows["nccl_setting"][0]["valid_from"] == 1_767_225_600_000  # the pod's creation


def test_a_configmap_that_arrives_later_resolves_the_waiting_pod() -> None:
    """A watch lists ConfigMaps and Pods concurrently: a pod read before its ConfigMap is
    resolved when the ConfigMap arrives (its row versioned from then); a later change of the
    ConfigMap changes nothing (a running container keeps the env it started with)."""
    s = InventoryState(lambda: 0)
    s.settings.expected = True
    s.event("ADDED", trainer("w-0", ENV[2:3]), 1_000)
    first = settings(s.drain_rows())
    assert first[("trainer", "NCCL_IB_HCA")][:2] == ("", "configmap_unresolved")
    s.event("ADDED", configmap("fabric", {"hca": "mlx5_0"}), 2_000)
    rows = s.drain_rows()["nccl_setting"]
    hca = [r for r in rows if r["name"] == "NCCL_IB_HCA"]
    assert [(r["value"], r["source"], r["valid_from"], r["valid_to"]) for r in hca] == [
        ("", "configmap_unresolved", 1_000, 2_000),
        ("mlx5_0", "configmap", 2_000, None),
    ]
    s.event("MODIFIED", configmap("fabric", {"hca": "mlx5_9"}), 3_000)
    assert s.drain_rows() == {}


def test_pod_replaced_with_other_settings_is_history() -> None:
    s = InventoryState(lambda: 0)
    s.event("ADDED", trainer("w-0", [{"name": "NCCL_ALGO", "value": "Ring"}]), 1_000)
    s.event("DELETED", trainer("w-0", []), 2_000)
    s.event("ADDED", trainer("w-0", []), 3_000)
    algo = [r for r in s.drain_rows()["nccl_setting"] if r["name"] == "NCCL_ALGO"]
    assert [(r["value"], r["valid_to"]) for r in algo] == [("Ring", None), ("Ring", 2_000)]


def test_no_waiting_when_configmaps_never_come() -> None:
    """Without ConfigMaps watched (the default), a pod naming one is not kept in memory."""
    s = InventoryState(lambda: 0)
    s.event("ADDED", trainer("w-0", ENV[2:3]), 1_000)
    assert s.settings.waiting == {}
