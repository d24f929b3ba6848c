"""The simulator at live pace: each interval's records go through the pipeline into the store
when that interval ends, and an injected clock is moved to that instant, so the correlation
engine (`telemetry.correlate.engine.follow`) runs unchanged against data arriving as it would
from exporters. Uses only the simulator's public API (`Simulation.batches`); writes only through
the pipeline and the sinks it is given.

Also here: onset-to-finding latency per fault, from the ground truth and stored findings.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from telemetry.contracts import Batch, Sink, Transform
from telemetry.correlate.clock import ManualClock
from telemetry.pipeline import BaseSource, Pipeline
from telemetry.sim.engine import Simulation
from telemetry.times import from_ms


class _Due(BaseSource):
    """The records due at the current interval end (filled by LiveFeed before each cycle)."""

    name = "sim-live"

    def __init__(self) -> None:
        super().__init__()
        self.due: list[Batch] = []

    def _collect(self) -> list[Batch]:
        out, self.due = self.due, []
        return out


def _split(b: Batch, before: pa.Scalar, delay_ms: Any = None) -> tuple[Batch | None, Batch | None]:
    """(rows that have arrived by `before`, the rest) of one batch: a row arrives at its time
    (the kind's time column) plus its delay in ms (`delay_ms`, per row; None: none)."""
    col = b.table.column(b.kind.time_field)
    if delay_ms is not None:
        arrival = pc.add(col.cast(pa.int64()), pa.array(delay_ms, pa.int64()))
        col = arrival.cast(col.type)
    mask = pc.fill_null(pc.less(col, before), True)
    now, later = b.table.filter(mask), b.table.filter(pc.invert(mask))
    return (Batch(b.kind, now) if now.num_rows else None), (
        Batch(b.kind, later) if later.num_rows else None
    )


class LiveFeed:
    """Drive `sim` interval by interval: at the end of interval k (sim.ts(k + 1)) every record
    that has arrived by then (its time, plus the delay of a late poll in the scenario's timing)
    is published, then the clock moves there. With `lockstep`, each
    step waits until the clock's waiter (a follower) has caught up before the next interval."""

    def __init__(
        self,
        sim: Simulation,
        sinks: Sequence[Sink],
        transforms: Sequence[Transform] = (),
        *,
        clock: ManualClock | None = None,
        lockstep: bool = False,
    ) -> None:
        sim.chunk_steps = 1  # one chunk per step: records arrive per interval
        self.sim = sim
        self.clock = clock or ManualClock(from_ms(sim.start_ms))
        self.lockstep = lockstep
        self._src = _Due()
        self.sinks = list(sinks)
        self.pipeline = Pipeline([self._src], sinks, transforms)
        self.rows = 0

    def intervals(self) -> Iterator[datetime]:
        """Publish each interval at its end and move the clock there; yields that end."""
        held: list[Batch] = []
        ts_type = pa.timestamp("ms", tz="UTC")
        dist = self.sim.disturber()  # which polls arrive late (timing.py), and by how much
        for step, batches in self._chunks():
            held += batches
            if step == 0:
                continue  # inventory and static facts: published as their times come due
            if step > self.sim.steps and not held:
                break  # the late rows after the end have all arrived
            end_ms = self.sim.ts(step)  # chunk step-1 ends here
            before = pa.scalar(end_ms, type=ts_type)
            due, keep = [], []
            for b in held:
                delay = dist.arrival_delay_ms(b.kind.name, b.table) if dist else None
                now, later = _split(b, before, delay)
                if now is not None:
                    due.append(now)
                if later is not None:
                    keep.append(later)
            held = keep
            self._src.due = due
            self.rows += self.pipeline.run_once()
            for sink in self.sinks:  # in the store when the interval ends, not when a batch fills
                sink.flush(force=True)
            end = from_ms(end_ms)
            if end > self.clock.now():
                self.clock.set(end)
            if self.lockstep:
                self.clock.wait_idle()
            yield end

    def _chunks(self) -> Iterator[tuple[int, list[Batch]]]:
        """(step, its batches) for every chunk, then empty steps while late rows may still be
        on their way (the scenario's late_seconds past the end)."""
        step = 0
        for step, batches in enumerate(self.sim.batches()):
            yield step, batches
        late = (
            self.sim.scenario.telemetry.late_seconds
            if self.sim.scenario.telemetry.late_share
            else 0
        )
        for extra in range(1, int(late // self.sim.dt) + 2):
            yield step + extra, []

    def run(self) -> int:
        for _ in self.intervals():
            pass
        self.pipeline.close()
        return self.rows


@dataclass
class Latency:
    fault_id: str
    kind: str
    onset: datetime
    seconds: float | None  # None: never found


def latencies(truth: Any, findings: Sequence[Any]) -> list[Latency]:
    """Per ground-truth fault: first_seen of the earliest finding that detects it minus the
    onset (0 when one was already open then). A finding detects it when its kind maps onto the
    fault's kind by finding_map.yaml, its span overlaps the fault's (one interval of slack) and
    it names one of the fault's subjects (any overlapping finding of the kind when none does).
    `findings` are score.Finding rows (first_seen/last_seen as start_ms/end_ms)."""
    from telemetry.sim.score import load_finding_map

    mapping, _ = load_finding_map()
    out = []
    tol = truth.resolution_seconds * 1000
    for g in truth.faults:
        if not g.scored:  # too close to a threshold, or nothing could show it (Fault.scored)
            continue
        cand = [
            f
            for f in findings
            if mapping.get(f.kind) == g.kind
            and f.start_ms <= g.end_ms + tol
            and f.end_ms >= g.start_ms - tol
        ]
        names = {s.replace(":", "/") for s in g.subjects}
        named = [f for f in cand if f.subject.replace(":", "/") in names] or cand
        first = min((f.start_ms for f in named), default=None)
        out.append(
            Latency(
                g.id,
                g.kind,
                from_ms(g.start_ms),
                None if first is None else max(0.0, (first - g.start_ms) / 1000),
            )
        )
    return out


__all__ = ["Latency", "LiveFeed", "latencies"]
