"""The engine's causal model (causes.yaml): which finding kinds are effects of a cause found
elsewhere. Incidents group an effect under its cause (incidents.py), a job's report ranks it
below the causes (report.py), and the simulator's scorer leaves it unscored (telemetry/sim/score.py
reads it from here: the engine never reads the simulator).
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import yaml


@functools.cache
def model() -> dict[str, tuple[str, ...]]:
    """causes.yaml's effects: effect kind -> the kinds it is usually the effect of."""
    text = resources.files("telemetry.correlate").joinpath("causes.yaml").read_text()
    d: dict[str, Any] = yaml.safe_load(text) or {}
    return {k: tuple(v or ()) for k, v in (d.get("effects") or {}).items()}


@functools.cache
def prefer_usual() -> frozenset[str]:
    """causes.yaml's prefer_usual: effects that join a group holding a kind listed for them first."""
    text = resources.files("telemetry.correlate").joinpath("causes.yaml").read_text()
    d: dict[str, Any] = yaml.safe_load(text) or {}
    return frozenset(d.get("prefer_usual") or ())


def effect_kinds() -> frozenset[str]:
    """The finding kinds that describe an effect, not a cause."""
    return frozenset(model())
