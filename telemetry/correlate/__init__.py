"""Correlation engine: SQL over stored facts -> findings (see engine.py, thresholds.yaml)."""

from telemetry.correlate.engine import DETECTORS, Correlator, default_thresholds
from telemetry.correlate.findings import Finding

__all__ = ["DETECTORS", "Correlator", "Finding", "default_thresholds"]
