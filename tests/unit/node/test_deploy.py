"""The DaemonSet manifest: read-only host mounts, no capabilities, limits, GPU tolerations,
liveness on /metrics, and a config the exporter accepts."""

from __future__ import annotations

from pathlib import Path

import yaml

from exporters.node.source import NodeSource
from telemetry.config import load_config

MANIFEST = Path(__file__).resolve().parents[3] / "deploy" / "node-exporter" / "daemonset.yaml"


def docs() -> dict[str, dict]:
    return {d["kind"]: d for d in yaml.safe_load_all(MANIFEST.read_text())}


def test_daemonset_security_and_resources() -> None:
    pod = docs()["DaemonSet"]["spec"]["template"]["spec"]
    # the node exporter, and the logs source in a container of its own (docs/logs.md)
    assert [x["name"] for x in pod["containers"]] == ["node-exporter", "logs"]
    c, logs = pod["containers"]
    lsc = logs["securityContext"]
    assert lsc["capabilities"] == {"drop": ["ALL"], "add": ["SYSLOG"]}  # /dev/kmsg, nothing more
    assert lsc["allowPrivilegeEscalation"] is False and lsc["privileged"] is False
    assert lsc["readOnlyRootFilesystem"] is True
    lmounts = {m["name"]: m for m in logs["volumeMounts"]}
    assert all(lmounts[n].get("readOnly") is True for n in ("pod-logs", "kmsg", "proc"))
    sc = c["securityContext"]
    assert sc["capabilities"] == {"drop": ["ALL"]} and "add" not in sc["capabilities"]
    assert sc["allowPrivilegeEscalation"] is False and sc["privileged"] is False
    assert sc["readOnlyRootFilesystem"] is True
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    host = {v["name"] for v in pod["volumes"] if "hostPath" in v}
    # the spool survives a pod restart; /proc: the pod of each GPU process (its cgroup file)
    assert host == {"sys", "pod-resources", "proc", "spool", "pod-logs", "kmsg"}
    assert mounts["proc"]["mountPath"] == "/host/proc"
    assert all(mounts[n].get("readOnly") is True for n in host - {"spool", "pod-logs", "kmsg"})
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(c["resources"][kind])
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]
    assert c["livenessProbe"]["httpGet"] == {"path": "/metrics", "port": "metrics"}
    assert pod["automountServiceAccountToken"] is False
    assert {"name": "metrics", "containerPort": 9580, "protocol": "TCP"} in c["ports"]


def test_configmap_is_a_valid_node_config(tmp_path: Path) -> None:
    cm = docs()["ConfigMap"]
    f = tmp_path / "railscope.yaml"
    f.write_text(cm["data"]["railscope.yaml"])
    cfg = load_config(str(f))
    node = cfg.source("node")
    assert isinstance(node, NodeSource.Config)
    assert node.sysfs_root == "/host/sys"
    mounts = docs()["DaemonSet"]["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    assert any(m["mountPath"] == node.sysfs_root for m in mounts)
    assert any(node.podresources_socket.startswith(m["mountPath"]) for m in mounts)
    assert 1 <= cfg.interval_seconds <= 60
