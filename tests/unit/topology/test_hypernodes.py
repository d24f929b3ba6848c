"""HyperNode parsing, member resolution, validation and lowest common HyperNode."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from telemetry.topology.hypernodes import (
    HyperNodeSpec,
    HyperNodeTree,
    Problem,
    go_regex,
    load_manifests,
    naive_lca,
    parse_hypernode,
    to_manifest,
)

FIX = Path(__file__).parents[2] / "fixtures" / "volcano"


def hn(name: str, tier: int, members: list[dict], tier_name: str = "") -> dict:
    spec: dict = {"tier": tier, "members": members}
    if tier_name:
        spec["tierName"] = tier_name
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": spec,
    }


def _manifests(name: str) -> tuple[list[HyperNodeSpec], list[Problem]]:
    """The HyperNodes (and what could not be read) of fixture file `name`."""
    return load_manifests(yaml.safe_load_all((FIX / name).read_text()))


def exact(name: str, t: str = "Node") -> dict:
    return {"type": t, "selector": {"exactMatch": {"name": name}}}


def test_real_labelmatch_hypernode_resolves_against_node_labels() -> None:
    specs, problems = _manifests("benchmark_readme_hypernode_rack_labelmatch.yaml")
    assert problems == []
    assert specs[0].tier_name == "rack"
    tree = HyperNodeTree.build(
        specs,
        {
            "n1": {"topology-rack": "rack-0"},
            "n2": {"topology-rack": "rack-1"},
            "n3": {"topology-rack": "rack-0"},
        },
    )
    assert tree.nodes["rack-0"] == {"n1", "n3"}
    assert tree.lca("n1", "n3") == ("rack-0", 1)
    assert tree.lca("n1", "n2") is None


def test_design_doc_sketch_reports_the_misnamed_members() -> None:
    # The Volcano design doc names its tier-1 HyperNodes nvlink_network-N but refers to them as
    # nvlink-networkN: every tier-2 member is unresolved and the tree has two depths.
    specs, _ = _manifests("design_example2_roce_nvlink_hypernodes.yaml")
    tree = HyperNodeTree.build(specs)
    unresolved = sorted(p.message for p in tree.problems if p.kind == "unresolved")
    assert len(unresolved) == 4 and "nvlink-network0" in unresolved[0]
    assert tree.lca("node1", "node2") == ("nvlink_network-0", 1)
    assert tree.lca("node1", "node3") is None


def test_design_example1_three_tier_tree() -> None:
    specs, _ = _manifests("design_example1_spine_leaf_hypernodes.yaml")
    tree = HyperNodeTree.build(specs)
    assert tree.tiers == [1, 2, 3]
    assert tree.lca("node0", "node1") == ("s0", 1)
    assert tree.lca("node0", "node2") == ("s4", 2)
    assert tree.lca("node0", "node7") == ("s6", 3)
    assert [p for p in tree.problems] == []


def test_regex_member_and_bad_regex() -> None:
    tree = HyperNodeTree.build(
        [
            parse_hypernode(
                hn(
                    "r0",
                    1,
                    [{"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-[0-3]$"}}}],
                )
            )
        ],
        {f"gpu-{i}": {} for i in range(6)},
    )
    assert tree.nodes["r0"] == {"gpu-0", "gpu-1", "gpu-2", "gpu-3"}
    # a pattern re cannot compile: that member matches nothing, named; the others still count
    bad = parse_hypernode(
        hn(
            "bad",
            1,
            [
                {"type": "Node", "selector": {"regexMatch": {"pattern": "gpu-[0-"}}},
                {"type": "Node", "selector": {"exactMatch": {"name": "gpu-5"}}},
            ],
        )
    )
    tree = HyperNodeTree.build([bad], {f"gpu-{i}": {} for i in range(6)})
    assert tree.nodes["bad"] == {"gpu-5"}
    assert [(p.kind, p.subject) for p in tree.problems] == [("bad_regex", "bad")]
    assert "Node member regexMatch 'gpu-[0-' is not a valid regex" in tree.problems[0].message


def test_label_expressions() -> None:
    spec = parse_hypernode(
        hn(
            "x",
            1,
            [
                {
                    "type": "Node",
                    "selector": {
                        "labelMatch": {
                            "matchLabels": {"zone": "a"},
                            "matchExpressions": [
                                {"key": "role", "operator": "In", "values": ["gpu"]},
                                {"key": "cordon", "operator": "DoesNotExist"},
                            ],
                        }
                    },
                }
            ],
        )
    )
    tree = HyperNodeTree.build(
        [spec],
        {
            "a": {"zone": "a", "role": "gpu"},
            "b": {"zone": "a", "role": "cpu"},
            "c": {"zone": "a", "role": "gpu", "cordon": "1"},
            "d": {"zone": "b", "role": "gpu"},
        },
    )
    assert tree.nodes["x"] == {"a"}
    assert spec.members[0].render() == "zone=a,role In (gpu),cordon DoesNotExist"


def test_cycle_double_claim_and_tier_order_are_reported() -> None:
    specs = [
        parse_hypernode(o)
        for o in [
            hn("a", 2, [exact("b", "HyperNode")]),
            hn("b", 3, [exact("a", "HyperNode")]),
            hn("l1", 1, [exact("n1"), exact("n2")]),
            hn("l2", 1, [exact("n2"), exact("n3")]),
        ]
    ]
    tree = HyperNodeTree.build(specs)
    kinds = {(p.kind, p.subject) for p in tree.problems}
    assert ("cycle", "a") in kinds and ("cycle", "b") in kinds
    assert ("multi_claim", "n2") in kinds
    assert ("tier_order", "b") in kinds  # b (tier 3) is a member of a (tier 2)
    assert tree.lca("n2", "n1") == ("l1", 1)  # the first claimant wins, consistently


def test_mixed_depth_is_reported_and_lca_still_right() -> None:
    specs = [
        parse_hypernode(o)
        for o in [
            hn("top", 3, [exact("leaf-a", "HyperNode"), exact("mid", "HyperNode")]),
            hn("mid", 2, [exact("leaf-b", "HyperNode")]),
            hn("leaf-a", 1, [exact("n1")]),
            hn("leaf-b", 1, [exact("n2"), exact("n3")]),
        ]
    ]
    tree = HyperNodeTree.build(specs)
    assert any(p.kind == "mixed_depth" for p in tree.problems)
    assert tree.lca("n1", "n2") == ("top", 3)
    assert tree.lca("n2", "n3") == ("leaf-b", 1)
    assert tree.ancestors("n1") == ["leaf-a", "top"]


def test_vectorised_lca_matches_naive_on_random_pairs() -> None:
    rng = np.random.default_rng(7)
    docs = []
    n = 0
    for a in range(3):
        for b in range(3):
            docs.append(hn(f"l{a}{b}", 1, [exact(f"n{n + i}") for i in range(4)]))
            n += 4
        docs.append(hn(f"s{a}", 2, [exact(f"l{a}{b}", "HyperNode") for b in range(3)]))
    docs.append(
        hn("root", 3, [exact(f"s{a}", "HyperNode") for a in range(2)])
    )  # s2 left out on purpose
    specs = [parse_hypernode(d) for d in docs]
    tree = HyperNodeTree.build(specs)
    leaf_of = {m.value: s.name for s in specs if s.tier == 1 for m in s.members}
    pa, pb = rng.integers(0, n, 500), rng.integers(0, n, 500)
    hid, tier = tree.lca_many(pa, pb)
    for i in range(500):
        want = naive_lca(tree, leaf_of, tree.node_names[pa[i]], tree.node_names[pb[i]])
        got = (tree.hn_names[hid[i]], int(tier[i])) if hid[i] >= 0 else None
        assert got == want


def test_manifest_roundtrip() -> None:
    o = hn(
        "rack-0",
        1,
        [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "0"}}}}],
        "rack",
    )
    assert parse_hypernode(to_manifest(parse_hypernode(o))) == parse_hypernode(o)


def test_lca_by_names_with_unknown_nodes() -> None:
    specs, _ = _manifests("design_example1_spine_leaf_hypernodes.yaml")
    tree = HyperNodeTree.build(specs)
    names, tiers = tree.lca_names(
        ["node0", "node0", "ghost", "node7"], ["node3", "ghost", "node1", "node6"]
    )
    assert names == ["s4", None, None, "s3"]
    assert tiers.tolist() == [2, 0, 0, 1]


MEMBERS = FIX / "hypernode_members"  # Volcano's published HyperNodes and variants of them


def _members_tree(*names: str) -> HyperNodeTree:
    """The HyperNodes of fixture files `names` resolved against hypernode_members/nodes.yaml."""
    specs, problems = [], []
    for name in names:
        got = load_manifests(yaml.safe_load_all((MEMBERS / name).read_text()))
        specs += got[0]
        problems += got[1]
    assert problems == []
    (nodes,) = yaml.safe_load_all((MEMBERS / "nodes.yaml").read_text())
    return HyperNodeTree.build(
        specs, {n["metadata"]["name"]: n["metadata"]["labels"] for n in nodes["items"]}
    )


def test_hypernode_member_by_regex_is_ignored_as_volcano_does() -> None:
    """Volcano resolves HyperNode members by exactMatch only (hyper_node_info.go): s4's
    regexMatch "^s[01]$" gives it no children, and says so, naming s4."""
    tree = _members_tree("website_nta_leaf_hypernodes.yaml", "s4_regex_hypernode_members.yaml")
    assert tree.children["s4"] == set()
    assert tree.lca("node-0", "node-2") is None and tree.lca("node-0", "node-1") == ("s0", 1)
    (p,) = [p for p in tree.problems if p.subject == "s4"]
    assert (p.kind, p.message) == (
        "ignored_member",
        "HyperNode member regexMatch '^s[01]$' is ignored: "
        "Volcano takes HyperNode members by exactMatch only",
    )


def test_empty_label_match_matches_nothing_and_the_other_members_count() -> None:
    tree = _members_tree("empty_labelmatch.yaml")
    assert tree.nodes["s0"] == {"node-0"}
    assert [(p.kind, p.subject) for p in tree.problems] == [("ignored_member", "s0")]
    assert "labelMatch {} has no criteria: it matches nothing" in tree.problems[0].message


def test_re2_posix_class_pattern_resolves() -> None:
    """`^node-[[:digit:]]+$` is a valid Go regexp; Python's re alone reads it as matching nothing."""
    tree = _members_tree("posix_class.yaml")
    assert tree.nodes["s0"] == {f"node-{i}" for i in (*range(8), 10)}
    assert tree.problems == []
    # Go's MatchString is unanchored: the blog's `node-[01]` also takes node-10
    tree = _members_tree("blog_v111_s0_exact_plus_regex.yaml")
    assert tree.nodes["s0"] == {"node-0", "node-1", "node-10"}


@pytest.mark.parametrize(
    ("pattern", "hits", "misses"),
    [  # RE2's classes (re2/re2/testing and Go regexp/syntax doc: "[[:alpha:]] alphabetic ...")
        ("^[[:alnum:]]$", "a Z 7", "_ - é"),
        ("^[[:alpha:]]$", "a Z", "7 _"),
        ("^[[:ascii:]]$", "\x00 ~ \x7f", "é"),
        ("^[[:blank:]]$", "\t \x20", "\n"),
        ("^[[:cntrl:]]$", "\x00 \x1f \x7f", "\x20"),
        ("^[[:digit:]]$", "0 9", "a ٣"),
        ("^[[:graph:]]$", "! ~ a", "\x20 \x7f"),
        ("^[[:lower:]]$", "a z", "A"),
        ("^[[:print:]]$", "\x20 ~", "\t"),
        ("^[[:punct:]]$", "! / : @ [ ` { ~", "a 0 \x20"),
        ("^[[:space:]]$", "\t \n \x0b \x0c \r \x20", "a"),
        ("^[[:upper:]]$", "A Z", "a"),
        ("^[[:word:]]$", "a Z 0 _", "-"),
        ("^[[:xdigit:]]$", "0 a F", "g G"),
        ("^[[:^digit:]x]$", "a x é", "5"),
        ("^[^[:digit:][:space:]]$", "a", "5 \x20"),
        ("^[]a[:digit:]]$", "] a 3", "b"),
        ("^\\[[:digit:]]$", "[d]", "[5]"),  # escaped `[`: `[:digit:]` is a set of `:digt`
    ],
)
def test_go_regex_posix_classes(pattern: str, hits: str, misses: str) -> None:
    rx = go_regex(pattern)

    def chars(s: str) -> list[str]:
        return [c.encode().decode("unicode_escape") if c.startswith("\\") else c for c in s.split()]

    assert [c for c in chars(hits) if not rx.search(c)] == []
    assert [c for c in chars(misses) if rx.search(c)] == []


def test_go_regex_unknown_class_is_an_error_as_in_go() -> None:
    with pytest.raises(re.error, match=r"invalid character class range \[:digits:\]"):
        go_regex("^node-[[:digits:]]+$")


@pytest.mark.parametrize(
    "pattern", [r"^a(?=b)", r"(?!x)y", r"(?<=a)b", r"(a)\1", r"(?P<n>a)(?P=n)", "a++", "(?>ab)"]
)
def test_go_regex_refuses_what_re2_refuses(pattern: str) -> None:
    """Python's re compiles these; Go (and ClickHouse's match) do not, so Volcano's member
    matches nothing and the pattern must not pass as valid."""
    re.compile(pattern)
    with pytest.raises(re.error):
        go_regex(pattern)


@pytest.mark.parametrize("pattern", [r"a\++", r"[(?=]x", r"^gpu-\d{2}$", r"(?i)node-(?P<n>\d)"])
def test_go_regex_keeps_what_re2_accepts(pattern: str) -> None:
    assert go_regex(pattern) is not None
