"""Detectors, grouped by category. Each registers itself with `@detector` in engine.py and turns
one window of stored facts into findings. Thresholds come from thresholds.yaml, never literals."""
