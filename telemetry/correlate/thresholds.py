"""The engine's thresholds: `thresholds.yaml` (every number a detector judges with, and why) and
per-deployment overrides. Imports nothing of the engine, so config validation can use it. Each
top-level section belongs to the kinds that list it in kinds.yaml (or to the engine).
"""

from __future__ import annotations

import copy
import functools
from importlib import resources
from typing import Any

import yaml

from telemetry.correlate.kinds import check_threshold_sections
from telemetry.errors import ConfigError


def default_thresholds() -> dict[str, Any]:
    """thresholds.yaml, a fresh copy per call (callers may change theirs)."""
    return copy.deepcopy(_parsed())


@functools.cache
def _parsed() -> dict[str, Any]:
    # read once: every config validation checks the overrides against it (the pure-Python YAML
    # parse of it was ~5 ms of each `load_config`; a deep copy is ~0.04 ms)
    text = resources.files("telemetry.correlate").joinpath("thresholds.yaml").read_text()
    d = dict(yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    check_threshold_sections(d)  # a section no declared kind judges with is a stray
    return d


def merge_thresholds(
    base: dict[str, Any], over: dict[str, Any], path: str = "correlate.thresholds"
) -> dict[str, Any]:
    """`base` with `over` laid on it; an unknown key is a ConfigError naming its path."""
    out = dict(base)
    for k, v in over.items():
        if k not in base:
            raise ConfigError(f"{path}.{k}: unknown threshold (known: {', '.join(sorted(base))})")
        out[k] = (
            merge_thresholds(base[k], v, f"{path}.{k}")
            if isinstance(base[k], dict) and isinstance(v, dict)
            else v
        )
    return out


def check_thresholds(over: dict[str, Any], path: str = "thresholds") -> None:
    """Raise ConfigError when `over` names a threshold thresholds.yaml does not have."""
    merge_thresholds(_parsed(), over, path)  # reads `base` only: no copy needed
