"""Correlation engine: SQL over stored facts -> findings (see engine.py, registry.py,
thresholds.yaml). Names are imported lazily so that `telemetry.correlate.thresholds` and
`telemetry.correlate.registry` stay light for config validation and the CLI."""

from __future__ import annotations

from typing import Any

__all__ = ["DETECTORS", "Correlator", "Finding", "default_thresholds"]


def __getattr__(name: str) -> Any:
    if name == "DETECTORS":
        from telemetry.correlate.registry import detectors

        return detectors()
    if name == "Correlator":
        from telemetry.correlate.engine import Correlator

        return Correlator
    if name == "Finding":
        from telemetry.correlate.findings import Finding

        return Finding
    if name == "default_thresholds":
        from telemetry.correlate.thresholds import default_thresholds

        return default_thresholds
    raise AttributeError(name)
