"""The engine's thresholds: `thresholds.yaml` (every number a detector judges with, and why) and
per-deployment overrides. Imports nothing of the engine, so config validation can use it.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml

from telemetry.errors import ConfigError


def default_thresholds() -> dict[str, Any]:
    text = resources.files("telemetry.correlate").joinpath("thresholds.yaml").read_text()
    return dict(yaml.safe_load(text))


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
    merge_thresholds(default_thresholds(), over, path)
