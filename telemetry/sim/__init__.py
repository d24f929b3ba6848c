"""Cluster simulator: a rail-optimized GPU fabric, Kubernetes/Volcano workload and HDFS across
IDCs, with injected faults and their ground truth. Feeds the same pipeline real exporters feed.

Scenarios live in telemetry.sim.scenario, faults and ground truth in telemetry.sim.model. Heavy
modules (numpy) load on first use of `build`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from telemetry.sim.engine import Simulation
    from telemetry.sim.scenario import Scenario


def build(scenario: Scenario, **kw: Any) -> Simulation:
    """Fabric, workload, faults and HDFS events of a scenario; `.batches()` yields the records."""
    from telemetry.sim.engine import build as _build

    return _build(scenario, **kw)


__all__ = ["build"]
