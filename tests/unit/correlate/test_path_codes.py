"""PathCodes: every node's HyperNode chain packed into one UInt64, decoded here as the SQL of
attribute_sql does (the fields two codes agree on from the top, the source's code cut to them)."""

from __future__ import annotations

from telemetry.correlate.attribution import CODE_BITS, Ancestry, PathCodes


def _lca(codes: PathCodes, a: str, b: str) -> str:
    """attribute_sql's arithmetic, in Python: 0 = no node / no HyperNodes."""
    ca, cb = codes.node.get(a, 0), codes.node.get(b, 0)
    agree = sum((ca ^ cb) < (1 << (CODE_BITS - e)) for e in codes.ends)
    mask = (1 << CODE_BITS) - (1 << (CODE_BITS - codes.ends[agree - 1])) if agree else 0
    return codes.hypernode.get(ca & mask, "")


def test_fields_are_as_wide_as_the_most_children_at_their_level() -> None:
    """Level 1 holds 3 roots (2 bits), level 2 at most 5 children of one root (3 bits), level 3
    one child (1 bit): fields end 2, 5 and 6 bits from the top; a HyperNode's code is its own
    chain's fields."""
    chains = {
        "n1": ["a1", "a", "r1"],
        "n2": ["b", "r1"],
        "n3": ["r2"],
        "n4": ["c", "r3"],
        **{f"m{i}": [f"x{i}", "r3"] for i in range(4)},
    }
    codes = PathCodes.of(Ancestry(chains, {}))
    assert codes is not None
    assert codes.ends == (2, 5, 6)
    top = CODE_BITS
    assert codes.node["n3"] == 2 << (top - 2)  # r2: the second root
    assert codes.node["n1"] == (1 << (top - 2)) | (1 << (top - 5)) | (1 << (top - 6))
    assert codes.hypernode[1 << (top - 2)] == "r1"
    assert sorted(codes.hypernode.values()) == sorted({h for c in chains.values() for h in c})
    assert _lca(codes, "n1", "n2") == "r1"
    assert _lca(codes, "n1", "n1") == "a1"
    assert _lca(codes, "n1", "n3") == ""
    assert _lca(codes, "m0", "n4") == "r3"
    assert _lca(codes, "n1", "nobody") == ""


def test_chains_that_need_more_than_64_bits_get_no_codes() -> None:
    """64 levels of one child each fit (1 bit per level); a 65th does not, nor do 16 levels of
    31 children (5 bits each, 80 bits): attribute_sql then compares the chains tier by tier."""

    def line(depth: int, fanout: int) -> dict[str, list[str]]:
        chain = [f"h{d}.0" for d in range(depth, 0, -1)]  # lowest tier first
        siblings = {
            f"s{d}.{k}": [f"h{d}.{k}", *chain[depth - d + 1 :]]
            for d in range(1, depth + 1)
            for k in range(1, fanout)
        }
        return {"n": chain, **siblings}

    assert PathCodes.of(Ancestry(line(64, 1), {})) is not None
    assert PathCodes.of(Ancestry(line(65, 1), {})) is None
    assert PathCodes.of(Ancestry(line(16, 31), {})) is None
    codes = PathCodes.of(Ancestry(line(12, 31), {}))  # 60 bits
    assert codes is not None and codes.ends[-1] == 60
    assert _lca(codes, "n", "s12.5") == "h11.0"
    assert _lca(codes, "n", "s1.30") == ""


def test_no_hypernodes_no_fields() -> None:
    codes = PathCodes.of(Ancestry({}, {}))
    assert codes is not None and codes.ends == () and codes.node == {}


def test_a_hypernode_with_two_parents_gets_no_codes() -> None:
    """Chains that are not one tree's paths (HyperNodeTree never gives them) are left to the
    comparison chain by chain rather than coded inconsistently."""
    assert PathCodes.of(Ancestry({"n1": ["a", "r1"], "n2": ["a", "r2"]}, {})) is None
    assert PathCodes.of(Ancestry({"n1": ["a", "r1"], "n2": ["a"]}, {})) is None
    assert PathCodes.of(Ancestry({"n1": ["a", "r1"], "n2": ["b", "r1"]}, {})) is not None
