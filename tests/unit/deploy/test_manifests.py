"""Kubernetes manifests: every document validates against the Kubernetes schemas bundled by
kubernetes-validate (strict: unknown fields are errors); the kustomization renders with the real
kustomize (kubectl kustomize) where kubectl exists; security and RBAC are least privilege; the
railscope config validates with railscope's own models; generated copies are current."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

import alerts
import dashboards

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"
K8S = "1.30"
TOKEN_READERS = {"railscope-inventory"}


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def manifest_files() -> list[Path]:
    return sorted(p for p in DEPLOY.rglob("*.yaml") if p.name != "kustomization.yaml"
                  and "provisioning" not in p.parts and p.parent.name != "prometheus")  # fmt: skip


@pytest.fixture(scope="module")
def all_docs() -> list[dict[str, Any]]:
    return [d for p in manifest_files() for d in _docs(p)]


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl (with its built-in kustomize) is not installed: render not checked")
    res = subprocess.run(
        [kubectl, "kustomize", str(DEPLOY)], capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stderr
    return [d for d in yaml.safe_load_all(res.stdout) if d]


def _pod_specs(docs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for d in docs:
        if d["kind"] in ("Deployment", "DaemonSet", "StatefulSet", "Job"):
            out.append((f"{d['kind']}/{d['metadata']['name']}", d["spec"]["template"]["spec"]))
    return out


def test_every_manifest_validates_strictly(all_docs: list[dict[str, Any]]) -> None:
    assert len(all_docs) >= 25
    for d in all_docs:
        kubernetes_validate.validate(d, K8S, strict=True)
    bad = copy.deepcopy(next(d for d in all_docs if d["kind"] == "Deployment"))
    bad["spec"]["template"]["spec"]["containers"][0]["volumeMount"] = []  # a typo
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S, strict=True)


def test_kustomization_renders_and_validates(rendered: list[dict[str, Any]]) -> None:
    for d in rendered:
        kubernetes_validate.validate(d, K8S, strict=True)
        if d["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
            node = d["metadata"]["name"] == "railscope-node"  # its DaemonSet, ConfigMap, Service
            ns = "railscope-node" if node else "monitoring"
            assert d["metadata"]["namespace"] == ns, (d["kind"], d["metadata"]["name"])
    names = {(d["kind"], d["metadata"]["name"]) for d in rendered}
    for n in ("switch", "sflow", "hdfs", "inventory", "correlate", "grafana"):
        assert ("Deployment", f"railscope-{n}") in names
    assert ("DaemonSet", "railscope-node") in names
    assert ("StatefulSet", "clickhouse-keeper") in names
    assert ("Job", "railscope-db-migrate") in names
    # generated ConfigMaps get a content hash and the Deployment follows the new name
    grafana = next(d for d in rendered if d["metadata"]["name"] == "railscope-grafana"
                   and d["kind"] == "Deployment")  # fmt: skip
    cms = {v["configMap"]["name"] for v in grafana["spec"]["template"]["spec"]["volumes"]
           if "configMap" in v}  # fmt: skip
    assert all(n.startswith("grafana-") and len(n.rsplit("-", 1)[1]) == 10 for n in cms)
    assert cms <= {d["metadata"]["name"] for d in rendered if d["kind"] == "ConfigMap"}
    dash = next(d for d in rendered if d["kind"] == "ConfigMap"
                and d["metadata"]["name"].startswith("grafana-dashboards"))  # fmt: skip
    assert len(dash["data"]) == 7
    # client-side `kubectl apply` stores the object in an annotation limited to 256 KiB
    assert len(json.dumps(dash)) < 200_000


def test_daemonset_mounts_host_paths_read_only_and_drops_capabilities(
    all_docs: list[dict[str, Any]],
) -> None:
    (ds,) = [d for d in all_docs if d["kind"] == "DaemonSet"]
    spec = ds["spec"]["template"]["spec"]
    host = {v["name"] for v in spec["volumes"] if "hostPath" in v}
    assert host >= {"sys"}
    for c in spec["containers"] + spec.get("initContainers", []):
        sc = c["securityContext"]
        # the logs container reads /dev/kmsg: SYSLOG where kernel.dmesg_restrict is 1
        allowed = ["SYSLOG"] if c["name"] == "logs" else []
        assert (
            sc["capabilities"]["drop"] == ["ALL"]
            and (sc["capabilities"].get("add") or []) == allowed
        )
        assert sc.get("privileged") is False and sc["allowPrivilegeEscalation"] is False
        for m in c["volumeMounts"]:
            if m["name"] in host - {"spool"}:  # the spool is the one host path it writes
                assert m.get("readOnly") is True, m
    (spool,) = [v for v in spec["volumes"] if v["name"] == "spool"]
    assert spool["hostPath"]["path"] == "/var/spool/railscope-node"  # survives a pod restart
    assert spec["automountServiceAccountToken"] is False


def test_deployment_spools_are_persistent(all_docs: list[dict[str, Any]]) -> None:
    claims = {d["metadata"]["name"] for d in all_docs if d["kind"] == "PersistentVolumeClaim"}
    for d in all_docs:
        if d["kind"] != "Deployment" or not d["metadata"]["name"].startswith("railscope-"):
            continue
        spec = d["spec"]["template"]["spec"]
        spool = [v for v in spec.get("volumes", []) if v["name"] == "spool"]
        if not spool:
            continue
        # one owner of the spool at a time: the volume is RWO and rollouts are Recreate
        assert spool[0]["persistentVolumeClaim"]["claimName"] in claims, d["metadata"]["name"]
        assert d["spec"]["strategy"]["type"] == "Recreate"


def test_pods_run_without_privileges_or_tokens(all_docs: list[dict[str, Any]]) -> None:
    specs = _pod_specs(all_docs)
    assert len(specs) >= 10
    for name, spec in specs:
        wants_token = spec.get("serviceAccountName") in TOKEN_READERS
        assert spec.get("automountServiceAccountToken") is wants_token, name
        assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
        if name != "DaemonSet/railscope-node":  # root only for the kubelet socket (its file says)
            assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert not spec.get("hostNetwork") or name == "DaemonSet/railscope-node", name
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["capabilities"]["drop"] == ["ALL"], (name, c["name"])
            assert sc["allowPrivilegeEscalation"] is False, (name, c["name"])
            assert "limits" in c["resources"] and "requests" in c["resources"], name
        for v in spec.get("volumes", []):
            assert "hostPath" not in v or name == "DaemonSet/railscope-node", name


def test_rbac_is_read_only_and_limited_to_what_inventory_records(
    all_docs: list[dict[str, Any]],
) -> None:
    roles = [d for d in all_docs if d["kind"] in ("ClusterRole", "Role")]
    assert [r["metadata"]["name"] for r in roles] == ["railscope-inventory"]
    granted = set()
    for rule in roles[0]["rules"]:
        assert set(rule["verbs"]) == {"get", "list", "watch"}
        assert "*" not in rule["resources"] and "*" not in rule["apiGroups"]
        granted |= {(g, r) for g in rule["apiGroups"] for r in rule["resources"]}
    assert granted == {
        ("", "pods"),
        ("", "nodes"),
        ("", "namespaces"),
        ("topology.volcano.sh", "hypernodes"),
        ("batch.volcano.sh", "jobs"),
        ("scheduling.volcano.sh", "podgroups"),
        # GPU pool (docs/pool.md)
        ("scheduling.volcano.sh", "queues"),
        ("scheduling.k8s.io", "priorityclasses"),
        ("", "resourcequotas"),
        ("", "events"),
    }
    (binding,) = [d for d in all_docs if d["kind"] == "ClusterRoleBinding"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "railscope-inventory", "namespace": "monitoring"}
    ]
    users = [n for n, s in _pod_specs(all_docs) if s.get("serviceAccountName")]
    assert users == ["Deployment/railscope-inventory"]


def test_services_select_pods_and_config_maps_exist(all_docs: list[dict[str, Any]]) -> None:
    pods = [(d["spec"]["template"]["metadata"]["labels"], d) for d in all_docs
            if d["kind"] in ("Deployment", "DaemonSet", "StatefulSet")]  # fmt: skip
    for svc in (d for d in all_docs if d["kind"] == "Service"):
        sel = svc["spec"]["selector"]
        targets = [d for labels, d in pods if sel.items() <= labels.items()]
        assert targets, f"Service {svc['metadata']['name']} selects no pods"
        for port in svc["spec"]["ports"]:
            tp = port.get("targetPort", port["port"])
            cports = {(p.get("name"), p["containerPort"]) for d in targets
                      for c in d["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}  # fmt: skip
            assert any(tp in (n, num) for n, num in cports), (svc["metadata"]["name"], tp)
    made = {d["metadata"]["name"] for d in all_docs if d["kind"] == "ConfigMap"}
    made |= {g["name"] for k in DEPLOY.rglob("kustomization.yaml")
             for g in (yaml.safe_load(k.read_text()).get("configMapGenerator") or [])}  # fmt: skip
    for name, spec in _pod_specs(all_docs):
        for v in spec.get("volumes", []):
            if "configMap" in v:
                assert v["configMap"]["name"] in made, (name, v)


def pod_env(name: str) -> dict[str, str]:
    """The plain `value:` environment of a pod's first container, as load_config sees it."""
    spec = next(s for n, s in _pod_specs(_all()) if n == name)
    env = {e["name"]: e["value"] for e in spec["containers"][0].get("env", []) if "value" in e}
    return {"RAILSCOPE_DSN": "http://railscope:pw@clickhouse-client:8123/railscope", **env}


def _all() -> list[dict[str, Any]]:
    return [d for p in manifest_files() for d in _docs(p)]


def test_only_the_switch_pod_gets_the_switch_list_and_its_redis_secret() -> None:
    mounts = {}
    for name, spec in _pod_specs(_all()):
        secrets = {v["secret"]["secretName"] for v in spec.get("volumes", []) if "secret" in v}
        mounts[name] = "railscope-switch" in secrets
        env = pod_env(name)
        if name == "Deployment/railscope-switch":
            assert "RAILSCOPE__SOURCES__SWITCH__SWITCHES" not in env
        elif any(v.get("configMap", {}).get("name") == "railscope-config" for v in spec["volumes"]):
            assert env["RAILSCOPE__SOURCES__SWITCH__SWITCHES"] == "[]", name
    assert [n for n, m in mounts.items() if m] == ["Deployment/railscope-switch"]
    assert "railscope-switch" in (ROOT / "docs" / "deploying.md").read_text()


def test_railscope_config_validates_with_railscope_models(tmp_path: Path) -> None:
    from telemetry.cli import build_parser
    from telemetry.config import load_config

    build_parser()  # registers the sources (exporters/ are imported at every CLI start)
    (cm,) = _docs(DEPLOY / "railscope" / "config.yaml")
    f = tmp_path / "railscope.yaml"
    secret = tmp_path / "redis-password"
    secret.write_text("redis-pw\n")
    # the switch pod reads the Redis password from its Secret mount (here a temporary file)
    text = cm["data"]["railscope.yaml"]
    assert text.count("/etc/railscope-secrets/redis-password") == 2
    f.write_text(text.replace("/etc/railscope-secrets/redis-password", str(secret)))
    cfg = load_config(
        f, env={"RAILSCOPE_DSN": "http://railscope:pw@clickhouse-client:8123/railscope"}
    )
    assert {s["password"] for s in cfg.sources["switch"]["switches"]} == {"redis-pw"}
    # every other pod loads the same file with the switch list emptied by its environment, so
    # it needs neither the Secret nor the switch list
    f.write_text(text)
    others = load_config(f, env=pod_env("Deployment/railscope-sflow"))
    assert others.sources["switch"]["switches"] == []
    assert cfg.store.cluster == "railscope" and cfg.store.database == "railscope"
    for source in ("switch", "sflow", "hdfs", "inventory"):
        assert source in cfg.sources
        cfg.source(source)  # the source's own pydantic model
    # the store's ClickHouse cluster is the one the servers define
    (chcfg, *_) = _docs(DEPLOY / "clickhouse" / "config.yaml")
    remote = ET.fromstring(chcfg["data"]["railscope-cluster.xml"]).find("remote_servers")
    assert remote is not None and [c.tag for c in remote] == [cfg.store.cluster]


def test_clickhouse_is_two_shards_of_two_replicas_with_a_keeper_quorum() -> None:
    docs = _docs(DEPLOY / "clickhouse" / "shards.yaml") + _docs(
        DEPLOY / "clickhouse" / "keeper.yaml"
    )
    sts = {d["metadata"]["name"]: d for d in docs if d["kind"] == "StatefulSet"}
    assert sts["clickhouse-keeper"]["spec"]["replicas"] == 3
    (chcfg, *_) = _docs(DEPLOY / "clickhouse" / "config.yaml")
    root = ET.fromstring(chcfg["data"]["railscope-cluster.xml"])
    shards = root.findall("remote_servers/railscope/shard")
    assert len(shards) == 2
    for i, shard in enumerate(shards):
        s = sts[f"clickhouse-shard{i}"]
        assert s["spec"]["replicas"] == 2 and s["spec"]["serviceName"] == "clickhouse"
        env = {
            e["name"]: e.get("value") for e in s["spec"]["template"]["spec"]["containers"][0]["env"]
        }
        assert env["SHARD"] == str(i)
        hosts = [r.findtext("host") for r in shard.findall("replica")]
        assert hosts == [
            f"clickhouse-shard{i}-{r}.clickhouse.monitoring.svc.cluster.local" for r in (0, 1)
        ]
        assert shard.findtext("internal_replication") == "true"
    macros = root.find("macros")
    assert macros is not None and {m.tag: m.get("from_env") for m in macros} == {
        "shard": "SHARD",
        "replica": "HOSTNAME",
    }
    keepers = [n.findtext("host") for n in root.findall("zookeeper/node")]
    (kcfg, *_) = [d for d in docs if d["kind"] == "ConfigMap"]
    raft = ET.fromstring(kcfg["data"]["keeper_config.xml"]).findall(
        "keeper_server/raft_configuration/server"
    )
    assert [s.findtext("hostname") for s in raft] == keepers and len(keepers) == 3
    users = ET.fromstring(chcfg["data"]["railscope-users.xml"])
    # the passwordless default user is local-only; grafana reads with readonly=1 (only
    # max_execution_time, capped, changeable: the plugin sets it) under a quota
    assert [ip.text for ip in users.findall("users/default/networks/ip")] == ["::1", "127.0.0.1"]
    assert users.findtext("profiles/grafana/readonly") == "1"
    (limit,) = users.findall("profiles/grafana/constraints/*")
    assert limit.tag == "max_execution_time" and limit.findtext("max") == "60"
    assert limit.find("changeable_in_readonly") is not None
    assert users.findtext("users/grafana/profile") == "grafana"
    assert users.findtext("users/grafana/quota") == "grafana"
    assert users.find("quotas/grafana/interval/queries") is not None


def test_generated_copies_are_current() -> None:
    built = dashboards.build_all()
    for name, d in built.items():
        f = DEPLOY / "grafana" / "dashboards" / f"railscope-{name}.json"
        assert json.loads(f.read_text()) == d, (
            f"{f} is stale: railscope dashboards build --out deploy/grafana"
        )
    prov = dashboards.provisioning()
    for kind, doc in prov.items():
        f = DEPLOY / "grafana" / "provisioning" / kind / "railscope.yaml"
        assert yaml.safe_load(f.read_text()) == doc
    assert (DEPLOY / "prometheus" / "railscope.rules.yaml").read_text() == alerts.RULES.read_text()


def test_docs_name_every_secret_the_manifests_need(all_docs: list[dict[str, Any]]) -> None:
    secrets = set()
    for _, spec in _pod_specs(all_docs):
        for c in spec["containers"]:
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    secrets.add((ref["name"], ref["key"]))
    assert {s for s, _ in secrets} == {"railscope-store", "clickhouse-users", "railscope-grafana"}
    text = (ROOT / "docs" / "deploying.md").read_text()
    for name, key in secrets:
        assert name in text and key in text, (name, key)


def test_termination_grace_exceeds_the_shutdown_grace(all_docs: list[dict[str, Any]]) -> None:
    """SIGTERM flushes within sink.shutdown_grace_seconds; the kubelet must wait longer before
    SIGKILL, or the last batch is cut off mid-flush."""
    from telemetry.config import Config

    graces = {}
    for d in all_docs:
        if d["kind"] == "ConfigMap" and "railscope.yaml" in d.get("data", {}):
            raw = yaml.safe_load(d["data"]["railscope.yaml"]).get("sink", {})
            graces[d["metadata"]["name"]] = Config.model_validate(
                {"sink": raw}
            ).sink.shutdown_grace_seconds
    assert graces and all(g < 30 for g in graces.values())
    railscope_pods = [
        (name, spec)
        for name, spec in _pod_specs(all_docs)
        if any("railscope" in (c.get("image") or "") for c in spec["containers"])
        and not name.startswith("Job/")
    ]
    assert railscope_pods
    for name, spec in railscope_pods:
        assert spec.get("terminationGracePeriodSeconds", 30) >= max(graces.values()) + 5, name


def test_sflow_load_balancer_admits_only_the_agents_networks(
    all_docs: list[dict[str, Any]],
) -> None:
    import ipaddress

    (svc,) = [
        d for d in all_docs if d["kind"] == "Service" and d["spec"].get("type") == "LoadBalancer"
    ]
    ranges = [ipaddress.ip_network(r) for r in svc["spec"]["loadBalancerSourceRanges"]]
    assert ranges and all(not n.is_global or n.prefixlen >= 16 for n in ranges)
    (cm,) = _docs(DEPLOY / "railscope" / "config.yaml")
    agents = yaml.safe_load(cm["data"]["railscope.yaml"])["sources"]["sflow"]["agents"]
    # every configured agent can reach the collector through the load balancer
    assert all(any(ipaddress.ip_address(a) in n for n in ranges) for a in agents)


def test_metrics_listen_on_the_pod_address_not_everywhere(all_docs: list[dict[str, Any]]) -> None:
    from telemetry.config import load_config

    pods = [(n, s) for n, s in _pod_specs(all_docs) if not n.startswith("Job/")
            and any("railscope/railscope" in (c.get("image") or "") for c in s["containers"])]  # fmt: skip
    assert pods
    for name, spec in pods:
        env = {e["name"]: e for e in spec["containers"][0].get("env", [])}
        assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP", name
        listen = env["RAILSCOPE__PROMETHEUS__LISTEN"]["value"]
        assert listen == "$(POD_IP):9580", name
        # what the kubelet expands it to is a valid prometheus.listen
        cfg = load_config(None, env={"RAILSCOPE__PROMETHEUS__LISTEN": "10.1.2.3:9580"})
        assert cfg.prometheus.listen == "10.1.2.3:9580"


def test_network_policies_deny_by_default_and_admit_every_component(
    all_docs: list[dict[str, Any]],
) -> None:
    pols = [d for d in all_docs if d["kind"] == "NetworkPolicy"]
    deny = [p for p in pols if p["spec"]["podSelector"] == {} and not p["spec"].get("ingress")]
    assert deny, "no default-deny ingress policy"

    def selected(policy: dict[str, Any], labels: dict[str, str]) -> bool:
        sel = policy["spec"]["podSelector"]
        if any(labels.get(k) != v for k, v in sel.get("matchLabels", {}).items()):
            return False
        return all(labels.get(e["key"]) in e["values"] for e in sel.get("matchExpressions", []))

    for d in all_docs:
        if d["kind"] not in ("Deployment", "StatefulSet"):
            continue
        spec = d["spec"]["template"]
        if spec["spec"].get("hostNetwork"):
            continue
        labels = spec["metadata"]["labels"]
        ports = {p["containerPort"] for c in spec["spec"]["containers"] for p in c.get("ports", [])}
        allowed = {
            port["port"]
            for p in pols
            if p["spec"].get("ingress") and selected(p, labels)
            for rule in p["spec"]["ingress"]
            for port in rule.get("ports", [])
        }
        assert ports <= allowed, (d["metadata"]["name"], ports - allowed)


# Pod Security Standards, restricted profile (kubernetes.io/docs/concepts/security/pod-security-standards)
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
}  # fmt: skip


def _namespace_of(path: Path) -> str:
    """The namespace a manifest file lands in: its directory's kustomization sets it."""
    k = yaml.safe_load((path.parent / "kustomization.yaml").read_text())
    return str(k["namespace"])


def restricted_violations(spec: dict[str, Any]) -> list[str]:
    """What in a pod spec the `restricted` level (plus a read-only root filesystem) forbids."""
    out = []
    psc = spec.get("securityContext", {})
    if (psc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
        out.append("seccompProfile is not RuntimeDefault")
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            out.append(key)
    for v in spec.get("volumes", []):
        kind = next(k for k in v if k != "name")
        if kind not in RESTRICTED_VOLUMES:
            out.append(f"volume {v['name']}: {kind}")
    for c in spec["containers"] + spec.get("initContainers", []):
        sc, n = c.get("securityContext", {}), c["name"]
        if sc.get("runAsNonRoot", psc.get("runAsNonRoot")) is not True:
            out.append(f"{n}: runAsNonRoot")
        if sc.get("runAsUser", psc.get("runAsUser")) == 0:
            out.append(f"{n}: runAsUser 0")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{n}: allowPrivilegeEscalation")
        if sc.get("privileged"):
            out.append(f"{n}: privileged")
        caps = sc.get("capabilities") or {}
        if caps.get("drop") != ["ALL"] or set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            out.append(f"{n}: capabilities")
        if sc.get("readOnlyRootFilesystem") is not True:
            out.append(f"{n}: readOnlyRootFilesystem")
        if any(p.get("hostPort") for p in c.get("ports", [])):
            out.append(f"{n}: hostPort")
    return out


def test_pod_security_restricted_everywhere_but_the_node_exporter() -> None:
    namespaces = {}
    pods = []
    for path in manifest_files():
        for d in _docs(path):
            if d["kind"] == "Namespace":
                namespaces[d["metadata"]["name"]] = d["metadata"]["labels"]
            elif d["kind"] in ("Deployment", "DaemonSet", "StatefulSet", "Job"):
                ns = _namespace_of(path)
                assert d["metadata"].get("namespace", ns) == ns, path
                pods.append(
                    (ns, f"{d['kind']}/{d['metadata']['name']}", d["spec"]["template"]["spec"])
                )
    enforce = {n: labels["pod-security.kubernetes.io/enforce"] for n, labels in namespaces.items()}
    assert enforce == {"monitoring": "restricted", "railscope-node": "privileged"}
    assert namespaces["monitoring"]["pod-security.kubernetes.io/warn"] == "restricted"
    assert len(pods) >= 10
    privileged = []
    for ns, name, spec in pods:
        if ns == "monitoring":
            assert restricted_violations(spec) == [], name
        else:
            privileged.append((ns, name))
            # what it needs the privileged level for, and nothing more (namespace.yaml says why)
            got = restricted_violations(spec)
            assert sorted(got) == sorted(
                ["hostNetwork", "volume sys: hostPath", "volume pod-resources: hostPath",
                 "volume proc: hostPath", "volume spool: hostPath", "node-exporter: runAsNonRoot",
                 "node-exporter: runAsUser 0", "volume pod-logs: hostPath", "volume kmsg: hostPath",
                 "logs: runAsNonRoot", "logs: runAsUser 0", "logs: capabilities"]
            ), got  # fmt: skip
    assert privileged == [("railscope-node", "DaemonSet/railscope-node")]
    why = (DEPLOY / "node-exporter" / "namespace.yaml").read_text()
    for reason in (
        "hostNetwork",
        "hostPath",
        "runAsUser 0",
        "/var/log/pods",
        "/dev/kmsg",
        "SYSLOG",
    ):
        assert reason in why


def test_restricted_check_catches_each_violation(all_docs: list[dict[str, Any]]) -> None:
    spec = next(s for n, s in _pod_specs(all_docs) if n == "Deployment/railscope-sflow")
    assert restricted_violations(spec) == []
    for mutate, expect in [
        (lambda s: s["securityContext"].pop("runAsNonRoot"), "sflow: runAsNonRoot"),
        (lambda s: s["securityContext"].update(seccompProfile={"type": "Unconfined"}), "seccomp"),
        (lambda s: s["containers"][0]["securityContext"].update(capabilities={"drop": ["NET_RAW"]}),
         "sflow: capabilities"),
        (lambda s: s["containers"][0]["securityContext"].pop("readOnlyRootFilesystem"),
         "sflow: readOnlyRootFilesystem"),
        (lambda s: s.update(hostNetwork=True), "hostNetwork"),
        (lambda s: s["volumes"].append({"name": "h", "hostPath": {"path": "/"}}), "volume h"),
    ]:  # fmt: skip
        bad = copy.deepcopy(spec)
        mutate(bad)
        assert any(expect in v for v in restricted_violations(bad)), expect


def test_clickhouse_traffic_is_encrypted_and_authenticated(all_docs: list[dict[str, Any]]) -> None:
    """Clients reach ClickHouse only over TLS with the mounted CA; replicas use native TLS and
    interserver credentials; Keeper znodes are guarded by a digest identity."""
    (chcfg, *_) = _docs(DEPLOY / "clickhouse" / "config.yaml")
    root = ET.fromstring(chcfg["data"]["railscope-cluster.xml"])
    assert root.findtext("https_port") == "8443" and root.findtext("tcp_port_secure") == "9440"
    # the image's cleartext listeners are removed, not merely unadvertised
    assert all(root.find(p).get("remove") == "1" for p in ("http_port", "tcp_port"))  # type: ignore[union-attr]
    server = root.find("openSSL/server")
    assert server is not None and "tlsv1_1" in (server.findtext("disableProtocols") or "")
    tls_files = {server.findtext(k) for k in ("certificateFile", "privateKeyFile", "caConfig")}
    assert root.find("interserver_http_credentials/password").get("from_env")  # type: ignore[union-attr]
    assert root.find("zookeeper/identity").get("from_env")  # type: ignore[union-attr]
    for replica in root.findall("remote_servers/railscope/shard/replica"):
        assert (replica.findtext("port"), replica.findtext("secure")) == ("9440", "1")
    for name, spec in _pod_specs(all_docs):
        mounts = {
            m["name"]: m["mountPath"] for c in spec["containers"] for m in c.get("volumeMounts", [])
        }
        secrets = {
            v["name"]: v["secret"]["secretName"] for v in spec.get("volumes", []) if "secret" in v
        }
        if name.startswith("StatefulSet/clickhouse-shard"):
            assert secrets["tls"] == "clickhouse-tls"
            assert {f.rsplit("/", 1)[0] for f in tls_files} == {mounts["tls"]}, name
            env = {e["name"] for e in spec["containers"][0]["env"]}
            assert {"CLICKHOUSE_INTERSERVER_PASSWORD", "CLICKHOUSE_KEEPER_IDENTITY"} <= env
        elif name == "Deployment/railscope-grafana":
            assert secrets.get("clickhouse-ca") == "clickhouse-tls", name
            assert mounts["clickhouse-ca"] == str(Path(dashboards.GRAFANA_CA_FILE).parent)
        elif name.startswith(("Deployment/railscope", "DaemonSet/railscope", "Job/railscope")):
            # every pod that holds a DSN can verify the server: the CA the DSN names is mounted
            assert secrets.get("clickhouse-ca") == "clickhouse-tls", name
            assert mounts["clickhouse-ca"] == "/etc/railscope-tls", name
    ds = dashboards.provisioning()["datasources"]["datasources"][0]
    assert ds["jsonData"]["port"] == 8443 and ds["jsonData"]["secure"] is True
    # no NetworkPolicy admits the plain ports to other pods
    for d in all_docs:
        if d["kind"] == "NetworkPolicy" and d["metadata"]["name"] == "railscope-clickhouse":
            ports = {p["port"] for rule in d["spec"]["ingress"] for p in rule["ports"]}
            assert ports == {8443, 9440, 9009}
    text = (ROOT / "docs" / "deploying.md").read_text()
    assert "clickhouse-tls" in text and "keeper-identity" in text and "interserver" in text


def test_node_exporters_write_through_the_ingest_gateway(tmp_path: Path) -> None:
    """The gateway's config validates with railscope's models (its TLS files and the writer's
    password in their mounts, here temporary files), listens with users over HTTPS, and the node
    exporters seal every cycle's batches (the gateway merges them)."""
    from telemetry.config import load_config
    from tests.tls import self_signed

    (cm, sts, *_) = _docs(DEPLOY / "railscope" / "ingest.yaml")
    cert, key = self_signed(tmp_path)
    pw = tmp_path / "writer"
    pw.write_text("w-pw\n")
    text = (
        cm["data"]["railscope.yaml"]
        .replace("/etc/railscope-ingest-tls/tls.crt", str(cert))
        .replace("/etc/railscope-ingest-tls/tls.key", str(key))
        .replace("/etc/railscope-ingest-users/writer", str(pw))
    )
    f = tmp_path / "railscope.yaml"
    f.write_text(text)
    env = {"RAILSCOPE_DSN": "https://w:pw@clickhouse-client:8443/railscope"}
    cfg = load_config(f, env={**env, "RAILSCOPE__INGEST__LISTEN": "10.1.2.3:8124"})
    assert cfg.ingest.listen == "10.1.2.3:8124" and cfg.ingest.ssl_context() is not None
    assert [(u.name, u.password) for u in cfg.ingest.users] == [("railscope_writer", "w-pw")]
    spec = sts["spec"]["template"]["spec"]
    mounts = {m["mountPath"] for m in spec["containers"][0]["volumeMounts"]}
    assert {"/etc/railscope-ingest-tls", "/etc/railscope-ingest-users"} <= mounts
    assert cfg.ingest.spool_dir in mounts  # the log on the StatefulSet's own volume
    assert sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "log"
    (ds_cm, *_) = _docs(DEPLOY / "node-exporter" / "daemonset.yaml")
    node = load_config(None, env={"RAILSCOPE__SINK__BATCH_SECONDS": "0"})
    assert yaml.safe_load(ds_cm["data"]["railscope.yaml"])["sink"]["batch_seconds"] == 0
    assert node.sink.batch_seconds == 0
    text = (ROOT / "docs" / "deploying.md").read_text()
    assert "railscope-ingest-tls" in text and "railscope-ingest.monitoring:8124" in text
