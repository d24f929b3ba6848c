"""The engine's causal model, as the kinds declare it (kinds.yaml `effect_of`): which finding
kinds are effects of a cause found elsewhere. Incidents group an effect under its cause
(incidents.py), a job's report ranks it below the causes (report.py), and the simulator's scorer
leaves it unscored (telemetry/sim/score.py reads it from here: the engine never reads the
simulator).
"""

from __future__ import annotations

from telemetry.correlate.kinds import kinds


def model() -> dict[str, tuple[str, ...]]:
    """Effect kind -> the kinds it is usually the effect of (possibly none)."""
    return {k.name: k.effect_of for k in kinds().values() if k.effect_of is not None}


def prefer_usual() -> frozenset[str]:
    """Effects that join a group holding a kind listed for them first."""
    return frozenset(k.name for k in kinds().values() if k.prefer_usual)


def effect_kinds() -> frozenset[str]:
    """The finding kinds that describe an effect, not a cause."""
    return frozenset(model())
