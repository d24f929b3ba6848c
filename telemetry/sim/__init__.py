"""Cluster simulator: a rail-optimized GPU fabric, Kubernetes/Volcano workload and HDFS across
IDCs, with injected faults and their ground truth. Feeds the same pipeline real exporters feed.

Heavy modules (numpy) load on first use of `build`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from telemetry.sim.faults import Fault, GroundTruth
from telemetry.sim.scenario import (
    FAULT_KINDS,
    Scenario,
    builtin_names,
    load_scenario,
    parse_scenario,
)

if TYPE_CHECKING:
    from telemetry.sim.engine import Simulation


def build(scenario: Scenario, **kw: Any) -> Simulation:
    """Fabric, workload, faults and HDFS events of a scenario; `.batches()` yields the records."""
    from telemetry.sim.engine import build as _build

    return _build(scenario, **kw)


__all__ = [
    "FAULT_KINDS",
    "Fault",
    "GroundTruth",
    "Scenario",
    "build",
    "builtin_names",
    "load_scenario",
    "parse_scenario",
]
