"""LLDP parsing, the physical graph, scalable units, HyperNode generation and drift."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from telemetry.topology.hypernodes import (
    HyperNodeTree,
    load_manifests,
    parse_hypernode,
    to_manifest,
)
from telemetry.topology.physical import (
    Fabric,
    LldpFormatError,
    diff,
    generate_specs,
    parse_lldpcli_json,
)
from tests.unit.topology.synth import SynthFabric

FIX = Path(__file__).parents[2] / "fixtures" / "lldp"


def test_lldpcli_one_port_capture() -> None:
    rows = parse_lldpcli_json((FIX / "lldpcli_neighbors_one_port.json").read_text(), "hostA")
    assert rows == [
        {
            "local_device": "hostA",
            "local_port": "rsvA",
            "remote_device": "leaf1",
            "remote_port": "rsvB",
            "remote_chassis_id": "16:5f:cf:de:45:fd",
            "source": "lldpcli",
        }
    ]


def test_lldpcli_two_ports_capture_is_a_list() -> None:
    rows = parse_lldpcli_json((FIX / "lldpcli_neighbors_two_ports.json").read_text(), "hostA")
    assert [(r["local_port"], r["remote_device"], r["remote_port"]) for r in rows] == [
        ("rsvA", "leaf1", "rsvB"),
        ("rsvA2", "leaf1", "rsvB2"),
    ]


def _links(name: str) -> list[tuple[str, str, str, str]]:
    rows = parse_lldpcli_json((FIX / name).read_text(), "gpu-host-1", where=name)
    return [
        (r["local_port"], r["remote_device"], r["remote_port"], r["remote_chassis_id"])
        for r in rows
    ]


# lldpd 1.0.16 facing a leaf configured as SONiC's lldpmgrd does (port id subtype local): one
# port with SONiC's alias, one with what a Juniper EX sends (its SNMP ifIndex 539)
LOCAL_PORTIDS = [
    ("vA", "leaf-sonic-1", "hundredGigE1/2", "2e:cf:da:56:72:15"),
    ("vA2", "leaf-sonic-1", "ge-0/0/12.0", "2e:cf:da:56:72:15"),
]


def test_local_port_id_of_digits_is_an_ifindex_and_the_description_names_the_port() -> None:
    assert _links("lldpcli_neighbors_local_portids.json") == LOCAL_PORTIDS


def test_lldpcli_json0_captures_read_as_json() -> None:
    """`-f json0` of the same neighbours: every value a list of objects, the port a `name`."""
    assert _links("lldpcli_neighbors_local_portids_json0.json") == LOCAL_PORTIDS
    assert _links("lldpcli_neighbors_one_port_json0.json") == LOCAL_PORTIDS[:1]
    assert _links("lldpcli_neighbors_none_json0.json") == []


def test_lldpd_own_json_and_json0_expectations_agree() -> None:
    """lldpd's tests/integration/test_lldpcli.py: one neighbour in both formats (port id mac)."""
    want = [("eth0", "ns-2.example.com", "eth1", "00:00:00:00:00:02")]
    assert _links("lldpd_test_lldpcli_json_neighbors_eth0.json") == want
    assert _links("lldpd_test_lldpcli_json0_neighbors_eth0.json") == want


def test_lldpcli_bad_input_names_it() -> None:
    with pytest.raises(LldpFormatError, match=r"h1\.json: not JSON"):
        parse_lldpcli_json("{oops", "h1", where="h1.json")
    with pytest.raises(LldpFormatError, match="no top-level 'lldp'"):
        parse_lldpcli_json("{}", "h1")
    assert parse_lldpcli_json('{"lldp": {}}', "h1") == []


@pytest.mark.parametrize(
    ("edit", "message"),
    [  # shapes tests/unit/topology/test_fuzz_lldp.py found escaping as AttributeError/TypeError
        (lambda d: d.update(lldp=[["interface"]]), "h1.json: lldp is a list, not an object"),
        (lambda d: d["lldp"].update(interface=7), "h1.json: lldp.interface is a int"),
        (lambda d: _iface(d).update(chassis="leaf1"), "interface rsvA: chassis is a str"),
        (
            lambda d: _iface(d)["chassis"].update(leaf1=[1]),
            "interface rsvA: chassis leaf1 is a list",
        ),
        (lambda d: _iface(d)["chassis"]["leaf1"].update(id="x"), "rsvA: chassis id is a str"),
        (lambda d: _iface(d).update(port=True), "interface rsvA: port is a bool, not an object"),
        (lambda d: _iface(d)["port"].update(id=["a"]), "interface rsvA: port id is a str"),
        (lambda d: _iface(d)["port"]["id"].update(value={}), "rsvA: port id is a dict, not text"),
        (lambda d: _iface(d)["port"]["id"].update(value="\ud800"), "is not valid UTF-8"),
    ],
)
def test_lldpcli_wrong_shapes_name_the_field(edit, message: str) -> None:
    doc = json.loads((FIX / "lldpcli_neighbors_one_port.json").read_text())
    edit(doc)
    with pytest.raises(LldpFormatError) as e:
        parse_lldpcli_json(json.dumps(doc), "h1", where="h1.json")
    assert message in str(e.value)


def _iface(doc: dict) -> dict:
    return doc["lldp"]["interface"]["rsvA"]


def sets_per_tier(specs) -> dict[int, set[frozenset[str]]]:
    tree = HyperNodeTree.build(specs)
    return {t: {frozenset(v) for v in tree.node_groups(t).values()} for t in tree.tiers}


def test_hierarchy_scalable_units_and_mgmt_nic_ignored() -> None:
    f = SynthFabric()
    fab = Fabric(f.links, f.affinity)
    tiers, issues = fab.hierarchy()
    assert issues == []
    assert [len(t) for t in tiers] == [4, 2, 1]
    su0 = tiers[0][0]
    assert su0.switches == frozenset(f.leaf(0, 0, r) for r in range(4))
    assert su0.nodes == {f.server(0, 0, i) for i in range(4)}
    assert "mgmt-p0" not in {s for g in tiers[0] for s in g.switches}


def test_generated_hypernodes_reproduce_declared_membership() -> None:
    f = SynthFabric()
    gen = generate_specs(Fabric(f.links, f.affinity).hierarchy()[0])
    declared, _ = load_manifests(f.declared_manifests())
    assert sets_per_tier(gen) == sets_per_tier(declared)
    # and the manifests parse back to the same specs (what kubectl apply would get)
    assert [parse_hypernode(to_manifest(s)) for s in gen] == gen


def test_two_tier_fabric_without_superspines() -> None:
    f = SynthFabric(pods=1, sus_per_pod=3, superspines=0)
    tiers, _ = Fabric(f.links, f.affinity).hierarchy()
    assert [len(t) for t in tiers] == [3, 1]


def test_without_affinity_every_leaf_link_counts() -> None:
    f = SynthFabric(pods=1, sus_per_pod=2)
    tiers, _ = Fabric([r for r in f.links if r["local_port"] != "eth0"]).hierarchy()
    assert len(tiers[0]) == 2


def test_gpu_paths() -> None:
    f = SynthFabric()
    paths = Fabric(f.links, f.affinity).gpu_paths(f.server(1, 0, 2))
    assert paths[5]["rail"] == 1 and paths[5]["leaf"] == f.leaf(1, 0, 1)
    assert paths[5]["spines"] == ["spine-p1-0", "spine-p1-1"]


def test_uplink_port_named_as_the_leaf_names_it() -> None:
    """A SONiC leaf advertises its ports by vendor alias (lldpmgrd: portidsubtype local
    <alias>): the server's lldpcli sees etp3 where the leaf's own LLDP and counters say
    Ethernet8. The leaf's record names the port; without it, the server's view."""
    host = {"local_device": "n1", "local_port": "eth3", "remote_device": "leaf1",
            "remote_port": "etp3", "source": "lldpcli"}  # fmt: skip
    leaf = {"local_device": "leaf1", "local_port": "Ethernet8", "remote_device": "n1",
            "remote_port": "eth3", "source": "sonic"}  # fmt: skip
    aff = [{"node": "n1", "gpu": 0, "netdev": "eth3", "rail": 0}]
    assert Fabric([host, leaf], aff).uplinks("n1") == {"eth3": ("leaf1", "Ethernet8")}
    assert Fabric([host], aff).uplinks("n1") == {"eth3": ("leaf1", "etp3")}
    [path] = Fabric([leaf, host], aff).gpu_paths("n1")
    assert (path["leaf"], path["leaf_port"]) == ("leaf1", "Ethernet8")


def test_no_drift_no_differences() -> None:
    f = SynthFabric()
    specs, _ = load_manifests(f.declared_manifests())
    assert diff(HyperNodeTree.build(specs), Fabric(f.links, f.affinity)) == []


def test_diff_lists_exactly_the_injected_drift() -> None:
    f = SynthFabric()
    docs = copy.deepcopy(f.declared_manifests())
    by = {d["metadata"]["name"]: d for d in docs}
    moved, dropped = f.server(0, 0, 1), f.server(0, 1, 3)
    # 1. a node under the wrong leaf HyperNode
    by["su-0-0"]["spec"]["members"] = [
        m for m in by["su-0-0"]["spec"]["members"] if m["selector"]["exactMatch"]["name"] != moved
    ]
    by["su-1-0"]["spec"]["members"].append(
        {"type": "Node", "selector": {"exactMatch": {"name": moved}}}
    )
    # 2. a node missing from every HyperNode
    by["su-0-1"]["spec"]["members"] = [
        m for m in by["su-0-1"]["spec"]["members"] if m["selector"]["exactMatch"]["name"] != dropped
    ]
    # 3. a stale member: a server that is gone from the fabric
    by["su-1-1"]["spec"]["members"].append(
        {"type": "Node", "selector": {"exactMatch": {"name": "gpu-retired-7"}}}
    )
    # 4. a miswired cable: rail 2 of one server plugged into another SU's leaf
    links = copy.deepcopy(f.links)
    miswired = f.server(1, 0, 0)
    for r in links:
        if r["local_device"] == miswired and r["local_port"] == "eth3":
            r["remote_device"] = f.leaf(1, 1, 2)
    specs, _ = load_manifests(docs)
    got = {(d.kind, d.subject) for d in diff(HyperNodeTree.build(specs), Fabric(links, f.affinity))}
    assert got == {
        ("wrong_hypernode", moved),
        ("missing_node", dropped),
        ("stale_member", "gpu-retired-7"),
        ("miswired", miswired),
    }


def test_diff_reports_a_leaf_hypernode_under_the_wrong_parent_once() -> None:
    f = SynthFabric()
    docs = copy.deepcopy(f.declared_manifests())
    by = {d["metadata"]["name"]: d for d in docs}
    by["pod-0"]["spec"]["members"] = [
        m for m in by["pod-0"]["spec"]["members"] if m["selector"]["exactMatch"]["name"] != "su-0-1"
    ]
    by["pod-1"]["spec"]["members"].append(
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "su-0-1"}}}
    )
    specs, _ = load_manifests(docs)
    got = diff(HyperNodeTree.build(specs), Fabric(f.links, f.affinity))
    assert [(d.kind, d.subject, d.declared, d.observed) for d in got] == [
        ("wrong_parent", "su-0-1", "pod-1", "pod-0")
    ]


def test_jsonl_records_roundtrip_through_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from telemetry.cli import main

    f = SynthFabric(pods=1, sus_per_pod=2, superspines=0)
    recs = tmp_path / "fabric.jsonl"
    recs.write_text(
        "".join(json.dumps({"_kind": "lldp_link", **r}) + "\n" for r in f.links)
        + "".join(json.dumps({"_kind": "gpu_nic_affinity", **r}) + "\n" for r in f.affinity)
    )
    assert main(["topology", "hypernodes", "--from", str(recs)]) == 0
    out = capsys.readouterr().out
    gen = tmp_path / "gen.yaml"
    gen.write_text(out)
    assert "kind: HyperNode" in out and "tierName: leaf" in out
    assert main(["topology", "diff", "--from", str(recs), "--declared", str(gen)]) == 0
    assert main(["topology", "lca", f.server(0, 0, 0), f.server(0, 1, 0), "--from", str(gen)]) == 0
    assert capsys.readouterr().out.strip() == "spine-0\ttier 2 (spine)"
    assert main(["topology", "paths", f.server(0, 1, 2), "--from", str(recs)]) == 0
    paths = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(paths) == 8 and paths[3]["leaf"] == f.leaf(0, 1, 3) and paths[3]["netdev"] == "eth4"
    assert main(["topology", "paths", "mgmt-p0", "--from", str(recs)]) == 2
    assert main(["topology", "units", "--from", str(recs)]) == 0
    units = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [len(u["nodes"]) for u in units] == [4, 4]
