"""`sim score` of what a test ingested: the correlation engine over the simulation's window,
then its findings scored against the ground truth."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from telemetry.correlate.engine import Correlator
from telemetry.sim.score import read_findings, score
from telemetry.store import Store


def correlate_and_score(store: Store, sim: Any, cluster: str) -> dict[str, Any]:
    """Run the engine on `store` for `cluster` over `sim`'s window; the score as JSON."""
    truth = sim.ground_truth()
    Correlator(store, cluster=cluster).run(
        datetime.fromtimestamp(sim.start_ms / 1000, UTC),
        datetime.fromtimestamp(sim.end_ms / 1000, UTC),
    )
    return score(truth, read_findings(store, cluster, truth.start_ms, truth.end_ms)).to_json()
