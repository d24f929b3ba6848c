"""The engine's causal model (telemetry/correlate/causes.yaml) names real finding kinds, and
incidents group by it."""

from __future__ import annotations

from telemetry.correlate.causes import effect_kinds, model
from telemetry.correlate.incidents import consequence_kinds
from telemetry.correlate.registry import finding_kinds


def test_every_effect_and_cause_is_a_kind_the_engine_emits() -> None:
    kinds = set(finding_kinds())
    assert model(), "causes.yaml lists no effects"
    for effect, causes in model().items():
        assert effect in kinds, f"causes.yaml: {effect} is no detector's finding kind"
        unknown = set(causes) - kinds
        assert not unknown, f"causes.yaml: {effect} names unknown cause kinds {sorted(unknown)}"
        assert effect not in causes


def test_incidents_take_their_effects_from_the_model() -> None:
    assert consequence_kinds() == set(effect_kinds())
    assert {"network_bound", "collective_slowdown", "collective_straggler"} <= effect_kinds()
    assert "ecmp_imbalance" not in effect_kinds()  # a cause
