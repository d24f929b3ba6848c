"""The `sources.inventory` config section: how to reach the Kubernetes API and what to watch.
Imports pydantic only."""

from __future__ import annotations

from pydantic import Field

from telemetry.config import SourceConfig


class InventoryConfig(SourceConfig):
    kubeconfig: str | None = Field(
        default=None, description="kubeconfig path (default $KUBECONFIG or ~/.kube/config)"
    )
    context: str | None = Field(default=None, description="kubeconfig context")
    in_cluster: bool | None = Field(
        default=None,
        description="use the pod's service account (default: when $KUBERNETES_SERVICE_HOST is set and no kubeconfig is given)",
    )
    resources: list[str] = Field(
        default_factory=lambda: [
            "Namespace",
            "Node",
            "Pod",
            "HyperNode",
            "Job",
            "PodGroup",
            "Queue",
            "PriorityClass",
            "ResourceQuota",
            "Event",
        ],
        description="API kinds to list+watch (Event: pod preemptions and evictions only; add "
        "ConfigMap to resolve pods' NCCL settings taken from ConfigMaps, which needs "
        "get/list/watch on configmaps)",
    )
    setting_prefixes: list[str] = Field(
        default_factory=lambda: ["NCCL_"],
        description="environment variable prefixes of pods' containers stored as NCCL settings "
        "(nccl_settings); values from Secrets, and names that look like secrets, never are",
    )
    provisioning_keys: list[str] = Field(
        default_factory=lambda: ["railscope.io/provisioning"],
        description="PriorityClass label or annotation keys naming its provisioning type "
        "(Reserved, Spot, ...); labels first, then annotations, first present wins",
    )
    purpose_keys: list[str] = Field(
        default_factory=lambda: ["railscope.io/purpose"],
        description="PriorityClass label or annotation keys naming its purpose "
        "(Serving, Training, Interactive, ...)",
    )
    page_size: int = Field(default=500, gt=0, description="list page size (limit/continue)")
    watch_timeout_seconds: int = Field(
        default=300, gt=0, description="server-side timeout of one watch request"
    )
    service_account_dir: str = Field(
        default="/var/run/secrets/kubernetes.io/serviceaccount",
        description="in-cluster auth: directory with the service account token and ca.crt",
    )


__all__ = ["InventoryConfig"]
