"""Parsing real Kubernetes/Volcano objects into inventory facts, and dump loading."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from exporters.inventory.objects import Malformed, hypernode_facts, job_facts, load_dump, pod_facts
from telemetry.errors import UserError

FIX = Path(__file__).parents[2] / "fixtures"
DUMP = FIX / "k8s" / "dump"


def pods() -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in load_dump(DUMP / "pods.json")}


def leases(name: str) -> list[dict]:
    warnings: list[str] = []
    out = [
        dict(zip(("ip",), f.key, strict=True)) | dict(f.values)
        for f in pod_facts(pods()[name], warnings)
        if f.kind == "pod_ip_lease"
    ]
    return out


def test_sriov_conformance_pod_primary_and_vf() -> None:
    got = leases("test-pod-sriov")
    assert [(r["ip"], r["interface"], r["primary"], r["pci_address"]) for r in got] == [
        ("10.132.2.200", "eth0", True, ""),
        ("2.2.2.49", "net1", False, "0000:19:00.4"),
    ]
    assert got[1]["network"] == "sriov-conformance-testing/test-multi-networkpolicy-sriov-network"
    assert got[1]["mac"] == "96:a2:09:fb:4d:c3"


def test_vfs_without_ips_give_no_lease() -> None:
    # KubeVirt's SR-IOV interfaces carry device-info but no IPs: only the primary IP is a lease
    assert [r["ip"] for r in leases("virt-launcher-vmi-sriov")] == ["10.244.2.131"]


def test_multus_quickstart_secondary_ip() -> None:
    assert [(r["ip"], r["network"]) for r in leases("samplepod")] == [
        ("10.244.1.73", ""),
        ("192.168.1.205", "macvlan-conf"),
    ]


def test_host_network_and_finished_pods_hold_no_ip() -> None:
    assert leases("node-exporter-x") == []
    assert leases("finished-job-pod") == []


def test_network_status_not_json_is_reported_by_name() -> None:
    warnings: list[str] = []
    facts = pod_facts(pods()["my-pod"], warnings)
    assert [f.kind for f in facts] == ["pod", "pod_ip_lease"]  # the pod and its primary IP stay
    assert warnings and warnings[0].startswith(
        "Pod my-namespace/my-pod: annotation k8s.v1.cni.cncf.io/network-status"
    )


def test_cidr_ips_are_stripped() -> None:
    status = json.dumps([{"name": "a", "interface": "net1", "ips": ["192.0.2.9/24"]}])
    pod = {
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "n",
            "annotations": {"k8s.v1.cni.cncf.io/network-status": status},
        },
        "spec": {"nodeName": "x"},
        "status": {"phase": "Running", "podIP": "10.0.0.1"},
    }
    assert [f.key for f in pod_facts(pod, []) if f.kind == "pod_ip_lease"] == [
        ("10.0.0.1",),
        ("192.0.2.9",),
    ]


def test_volcano_job_network_topology() -> None:
    job = next(
        o for o in load_dump(FIX / "volcano" / "userguide_job_network_topology_hard_tier1.yaml")
    )
    (f,) = job_facts(job, "rack-0")
    v = dict(f.values)
    assert f.key == ("default", "network-topology-job")
    assert (
        v["topology_mode"],
        v["highest_tier_allowed"],
        v["replicas"],
        v["allocated_hypernode"],
    ) == ("hard", 1, 8, "rack-0")
    (g,) = job_facts(
        next(o for o in load_dump(FIX / "volcano" / "userguide_job_no_network_topology.yaml"))
    )
    assert dict(g.values)["topology_mode"] == "" and dict(g.values)["highest_tier_allowed"] is None


def test_bad_topology_mode_is_malformed() -> None:
    job = {
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "n"},
        "spec": {"networkTopology": {"mode": "strict"}},
    }
    with pytest.raises(Malformed, match=r"Job n/j: spec\.networkTopology\.mode 'strict'"):
        job_facts(job)


def test_hypernode_rows_per_member() -> None:
    hn = next(
        o for o in load_dump(FIX / "volcano" / "benchmark_readme_hypernode_rack_labelmatch.yaml")
    )
    (f,) = hypernode_facts(hn, [])
    assert f.key == ("rack-0", "topology-rack=rack-0")
    assert dict(f.values) == {
        "tier": 1,
        "tier_name": "rack",
        "member_type": "Node",
        "selector": "labelMatch",
    }


def test_dump_formats(tmp_path: Path) -> None:
    single = tmp_path / "one.json"
    single.write_text(json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}))
    nested = tmp_path / "list.json"
    nested.write_text(json.dumps({"kind": "NodeList", "items": [{"metadata": {"name": "n2"}}]}))
    multi = tmp_path / "multi.yaml"
    multi.write_text("kind: Node\nmetadata: {name: n3}\n---\nkind: Node\nmetadata: {name: n4}\n")
    names = [(o["kind"], o["metadata"]["name"]) for o in load_dump(tmp_path)]
    assert names == [("Node", "n2"), ("Node", "n3"), ("Node", "n4"), ("Node", "n1")]
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: [unclosed\n")
    with pytest.raises(UserError, match=r"bad\.yaml: not valid JSON/YAML"):
        load_dump(bad)
    with pytest.raises(UserError, match="no such file"):
        load_dump(tmp_path / "missing")


def test_standalone_podgroup_from_the_design_doc_is_a_job_row() -> None:
    from exporters.inventory.objects import podgroup_facts, podgroup_job

    pg = next(
        o for o in load_dump(FIX / "volcano" / "design_podgroup_network_topology_subgroups.yaml")
    )
    assert podgroup_job(pg) == ""
    (f,) = podgroup_facts(pg)
    v = dict(f.values)
    assert f.key == ("default", "network-topology-job-<jobUID>")
    assert (v["topology_mode"], v["highest_tier_allowed"], v["replicas"]) == ("hard", 2, 3)


# --- shapes the fuzzer (tests/unit/inventory/test_fuzz.py) found escaping as AttributeError,
# TypeError, OverflowError or an Arrow error; each is now Malformed naming object and field
def _pod(**edits: object) -> dict:
    pod = json.loads(json.dumps(pods()["test-pod-sriov"]))
    for path, value in edits.items():
        node = pod
        *parents, last = path.split("__")
        for p in parents:
            node = node[p]
        node[last] = value
    return pod


@pytest.mark.parametrize(
    ("edits", "message"),
    [
        ({"metadata": "x"}, "Pod metadata is a str 'x', not an object"),
        ({"spec": ["a"]}, "Pod sriov-conformance-testing/'test-pod-sriov': spec is a list"),
        ({"status__podIPs": "10.0.0.1"}, "status.podIPs is a str '10.0.0.1', not a list"),
        ({"status__podIPs": [{"ip": ["10.0.0.1"]}]}, "pod IP list ['10.0.0.1'] is not text"),
        ({"metadata__labels": {"volcano.sh/job-name": {"a": 1}}}, "metadata.labels["),
        ({"status__phase": {"a": 1}}, "phase dict {'a': 1} does not fit a string column"),
        ({"metadata__uid": "\ud800"}, "uid str '\\ud800' does not fit a string column"),
        ({"spec__containers": 7}, "spec.containers is a int 7, not a list"),
        ({"spec__affinity": "zone-a"}, "spec.affinity is a str 'zone-a', not an object"),
    ],
)
def test_malformed_pod_fields_are_named(edits: dict, message: str) -> None:
    with pytest.raises(Malformed, match=None) as e:
        pod_facts(_pod(**edits), [])
    assert message in str(e.value)


def test_malformed_job_and_hypernode_numbers_are_named() -> None:
    job = load_dump(FIX / "volcano" / "userguide_job_network_topology_hard_tier1.yaml")[0]
    for tasks, message in (
        ([{"replicas": 2**70}], "replicas int 1180591620717411303424 does not fit a uint32"),
        ([{"replicas": float("inf")}], "tasks[].replicas float inf is not an integer"),
        ("abc", "spec.tasks is a str 'abc', not a list"),
    ):
        with pytest.raises(Malformed) as e:
            job_facts({**job, "spec": {**job["spec"], "tasks": tasks}})
        assert message in str(e.value)
    hn = {"kind": "HyperNode", "metadata": {"name": "s0"}, "spec": {"tier": 1, "members": []}}
    for spec, message in (
        ({"tier": float("inf")}, "spec.tier inf is not an integer"),
        ({"tier": 1, "members": "n1"}, "spec.members is not a list"),
        ({"tier": 1, "members": [{"selector": {"exactMatch": "n1"}}]}, "exactMatch has no name"),
        (
            {"tier": 1, "members": [{"selector": {"labelMatch": {"matchExpressions": ["x"]}}}]},
            "labelMatch operator None is not supported",
        ),
    ):
        with pytest.raises(Malformed) as e:
            hypernode_facts({**hn, "spec": spec}, [])
        assert message in str(e.value)


def test_state_reports_a_malformed_podgroup_in_a_list_instead_of_raising() -> None:
    from exporters.inventory.state import InventoryState

    state = InventoryState(lambda: 1_700_000_000_000)
    state.sync("PodGroup", [{"kind": "PodGroup", "metadata": [("name", "pg")]}])
    assert state.problems == [
        "PodGroup metadata is a list [('name', 'pg')], not an object; skipped"
    ]


def test_batch_v1_job_is_not_a_volcano_job_and_its_podgroup_is_a_job_row() -> None:
    """Kubernetes' own Job (kubernetes/website's `pi`) and the PodGroup Volcano's PodGroup
    controller makes for its pod, owned by that batch/v1 Job (tests/fixtures/volcano)."""
    from exporters.inventory.state import InventoryState

    state = InventoryState(lambda: 1_800_000_000_000)
    state.apply_dump(
        load_dump(FIX / "volcano" / "k8s_website_controllers_job.yaml")
        + load_dump(FIX / "volcano" / "volcano_pgcontroller_podgroup_for_batchv1_job.yaml")
    )
    rows = state.drain_rows()
    assert state.problems == []
    pg_name = "podgroup-9f0c2d6e-3b1a-4c55-8e0e-2f6f7c1d2a10"
    (pg,) = rows["podgroup"]
    assert (pg["podgroup"], pg["job"], pg["min_member"], pg["min_gpus"]) == (pg_name, "", 1, 8)
    # no row for `pi`; the PodGroup's own spec is the job, as for any PodGroup without a Volcano Job
    (job,) = rows["job"]
    assert (job["namespace"], job["job"], job["queue"], job["replicas"]) == (
        "default",
        pg_name,
        "default",
        1,
    )
    assert (job["topology_mode"], job["highest_tier_allowed"]) == ("hard", 1)
    # a Volcano Job of the same name keeps its row when the batch/v1 Job is deleted
    (vc_job,) = load_dump(FIX / "volcano" / "userguide_job_no_network_topology.yaml")
    state.event("ADDED", vc_job | {"metadata": {"name": "pi", "namespace": "default"}})
    assert [r["job"] for r in state.drain_rows()["job"]] == ["pi"]
    (batch_job,) = load_dump(FIX / "volcano" / "k8s_website_controllers_job.yaml")
    state.event("DELETED", batch_job, 1_800_000_001_000)
    assert state.drain_rows() == {}


def test_watch_gives_list_items_their_api_version() -> None:
    """kube-apiserver lists built-in kinds' items without apiVersion; a Job is read by its group."""
    from exporters.inventory.watch import RESOURCES

    by_kind = {r.kind: r.api_version for r in RESOURCES}
    assert by_kind["Job"] == "batch.volcano.sh/v1alpha1"
    assert (by_kind["Pod"], by_kind["PriorityClass"]) == ("v1", "scheduling.k8s.io/v1")


def test_multus_before_3_4_1_networks_status_annotation() -> None:
    """Multus v3.4 writes only `k8s.v1.cni.cncf.io/networks-status` (k8sclient/k8sclient.go);
    the value is the multus quickstart's (tests/fixtures/k8s/PROVENANCE.md)."""
    status = (FIX / "k8s" / "multus_quickstart_network_status.json").read_text()
    pod = copy.deepcopy(pods()["samplepod"])
    annotations = pod["metadata"]["annotations"]
    annotations["k8s.v1.cni.cncf.io/networks-status"] = annotations.pop(
        "k8s.v1.cni.cncf.io/network-status"
    )
    got = [
        (f.key[0], dict(f.values)["interface"], dict(f.values)["mac"])
        for f in pod_facts(pod, [])
        if f.kind == "pod_ip_lease"
    ]
    assert got == [("10.244.1.73", "eth0", ""), ("192.168.1.205", "net1", "86:1d:96:ff:55:0d")]
    assert annotations["k8s.v1.cni.cncf.io/networks-status"] == status
    # v3.4.1 onwards writes both: the new name is read
    annotations["k8s.v1.cni.cncf.io/network-status"] = status.replace("192.168.1.205", "192.0.2.7")
    assert [f.key[0] for f in pod_facts(pod, []) if f.kind == "pod_ip_lease"] == [
        "10.244.1.73",
        "192.0.2.7",
    ]
    # a broken old annotation is named as such
    del annotations["k8s.v1.cni.cncf.io/network-status"]
    annotations["k8s.v1.cni.cncf.io/networks-status"] = "[{"
    warnings: list[str] = []
    pod_facts(pod, warnings)
    assert warnings[0].startswith(
        "Pod default/samplepod: annotation k8s.v1.cni.cncf.io/networks-status is not valid"
    )
