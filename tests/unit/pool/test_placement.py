"""Gang placement over free GPUs (the fragmentation search behind
gang_blocked_by_fragmentation)."""

from __future__ import annotations

from telemetry.pool import Gang, place_gang

H100 = "NVIDIA-H100-80GB-HBM3"


def test_sixteen_free_over_four_nodes_blocks_an_eight_per_node_gang() -> None:
    free = {"n1": 4, "n2": 4, "n3": 4, "n4": 4}
    models = dict.fromkeys(free, H100)
    pl = place_gang(Gang(2, 8, frozenset({H100})), free, models)
    assert (pl.fits, pl.free_gpus, pl.largest) == (False, 16, 0)


def test_the_same_gang_fits_on_two_whole_nodes() -> None:
    free = {"n1": 8, "n2": 8, "n3": 0, "n4": 0}
    pl = place_gang(Gang(2, 8, frozenset({H100})), free, dict.fromkeys(free, H100))
    assert (pl.fits, pl.free_gpus, pl.largest) == (True, 16, 2)


def test_other_models_do_not_count() -> None:
    free = {"n1": 8, "a1": 8}
    models = {"n1": H100, "a1": "NVIDIA-A100-SXM4-80GB"}
    pl = place_gang(Gang(2, 8, frozenset({H100})), free, models)
    assert (pl.fits, pl.free_gpus, pl.largest) == (False, 8, 1)
    assert place_gang(Gang(2, 8), free, models).fits  # any model


def test_hard_topology_needs_one_hypernode_of_the_allowed_tier() -> None:
    free = {"n1": 8, "n2": 0, "n3": 8, "n4": 0}
    anc = {"n1": ["leaf-a", "spine"], "n2": ["leaf-a", "spine"], "n3": ["leaf-b", "spine"],
           "n4": ["leaf-b", "spine"]}  # fmt: skip
    tiers = {"leaf-a": 1, "leaf-b": 1, "spine": 2}
    models = dict.fromkeys(free, H100)
    tier1 = place_gang(Gang(2, 8, highest_tier=1), free, models, anc, tiers)
    assert (tier1.fits, tier1.largest) == (False, 1)
    tier2 = place_gang(Gang(2, 8, highest_tier=2), free, models, anc, tiers)
    assert (tier2.fits, tier2.largest, tier2.domain) == (True, 2, "spine")
