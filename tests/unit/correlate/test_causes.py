"""The engine's causal model (`effect_of` in telemetry/correlate/kinds.yaml) names real finding
kinds, and incidents group by it."""

from __future__ import annotations

from telemetry.correlate.causes import effect_kinds, model
from telemetry.correlate.incidents import consequence_kinds
from telemetry.correlate.registry import finding_kinds


def test_every_effect_and_cause_is_a_kind_the_engine_emits() -> None:
    kinds = set(finding_kinds())
    assert model(), "kinds.yaml declares no effects"
    for effect, causes in model().items():
        assert effect in kinds, f"kinds.yaml: {effect} is no detector's finding kind"
        unknown = set(causes) - kinds
        assert not unknown, f"kinds.yaml: {effect} names unknown cause kinds {sorted(unknown)}"
        assert effect not in causes


def test_incidents_take_their_effects_from_the_model() -> None:
    assert consequence_kinds() == set(effect_kinds())
    assert {"network_bound", "collective_slowdown", "collective_straggler"} <= effect_kinds()
    assert "ecmp_imbalance" not in effect_kinds()  # a cause


def test_prefer_usual_names_effects_with_usual_causes() -> None:
    from telemetry.correlate.causes import prefer_usual

    assert prefer_usual() == {"nccl_network_error", "collective_timeout"}
    assert all(model().get(k) for k in prefer_usual())
