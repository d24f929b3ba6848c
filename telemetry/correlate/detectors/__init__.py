"""Detectors, grouped by category. Each registers itself with `@detector` (registry.py), declares
the trailing window it judges, and turns that window of stored facts into findings. Thresholds
come from thresholds.yaml, never literals."""
