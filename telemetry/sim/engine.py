"""The simulation engine (fast path): turns a scenario into record batches of the real kinds
(telemetry/records.py) — GPU, NIC, switch port/queue, sFlow, LLDP, HDFS, inventory — with the
physics of a RoCE fabric, and the ground truth of what it injected.

Time is cut into epochs in which the topology state is constant (jobs, faults, link states); each
epoch is routed and solved once with numpy (physics.py), then every step adds noise and
accumulates counters (samples.py: real cumulative counters, downstream rate logic works); the
inventory and static facts come first (inventory.py). This module builds the `Simulation` and
drives a run. It writes nothing itself: callers send the batches through the pipeline. Same seed
and start -> identical records.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from telemetry.contracts import Batch
from telemetry.records import LLDP_LINK
from telemetry.sim.collectives import PaceLog
from telemetry.sim.collectives import truth as collective_truth
from telemetry.sim.fabric import GPU_BUS as GPU_BUS  # importable from here as before
from telemetry.sim.fabric import Fabric, build_fabric
from telemetry.sim.faults import placement_targets, resolve_faults
from telemetry.sim.hdfs import HdfsModel, build_hdfs
from telemetry.sim.inventory import inventory_batches
from telemetry.sim.logs import LogLines
from telemetry.sim.logs import batch as log_batch
from telemetry.sim.logs import truth as log_truth
from telemetry.sim.model import Fault, GroundTruth
from telemetry.sim.nccl import truth as nccl_truth
from telemetry.sim.physics import (
    NATURAL_ECMP_MARGIN,
    NATURAL_ECMP_RATIO,
    NATURAL_ECMP_SECONDS,
    NATURAL_ECMP_UTIL,
)
from telemetry.sim.samples import StepSamples
from telemetry.sim.scenario import Scenario, SpecField
from telemetry.sim.seeding import stream_rng as _rng
from telemetry.sim.timing import Disturber, device_lists
from telemetry.sim.visibility import apply_floors, longest_clear
from telemetry.sim.workload import Workload, expand_jobs, schedule


def default_start_ms(sc: Scenario, now_s: float | None = None) -> int:
    """The pinned start, or a start such that the run ends at the current minute (store TTLs
    drop old rows on insert, so data must be recent)."""
    if sc.start:
        from datetime import datetime

        return int(datetime.fromisoformat(sc.start.replace("Z", "+00:00")).timestamp() * 1000)
    now = int(now_s if now_s is not None else time.time())
    return (now // 60) * 60_000 - sc.steps * sc.resolution_seconds * 1000


@dataclass
class Simulation:
    scenario: Scenario
    start_ms: int
    fabric: Fabric
    workload: Workload
    faults: list[Fault]
    hdfs: HdfsModel
    chunk_steps: int = 30
    stats: dict[str, int] = field(default_factory=dict)
    # ECMP imbalance the hashing produced by itself, noted while epochs are solved:
    # (uplink endpoint, t0, t1, offered/group mean, offered/capacity)
    natural_ecmp: list[tuple[int, int, int, float, float]] = field(default_factory=list)
    # injected collisions, per epoch: (fault id, t0, t1, whether its uplink ran clear of the
    # thresholds) - a weak one may never (visibility.py)
    pinned_ecmp: list[tuple[str, int, int, bool]] = field(default_factory=list)
    # each job's network pace per epoch, noted while epochs are solved (collective ground truth)
    paces: PaceLog = field(default_factory=PaceLog)
    # job connections a link flap broke as it first went down (physics.py), for the NCCL errors
    # their ranks log (logs.py): (fault id, source IP, destination IP, job) -> step
    broken_flows: dict[tuple[str, str, str, int], int] = field(default_factory=dict)

    steps = SpecField[int]("scenario.steps")
    dt = SpecField[int]("scenario.resolution_seconds")

    @property
    def end_ms(self) -> int:
        return self.start_ms + self.steps * self.dt * 1000

    def ts(self, step: int) -> int:
        return self.start_ms + step * self.dt * 1000

    def ground_truth(self) -> GroundTruth:
        """What was injected, plus what the workload created by itself. Natural ECMP imbalance is
        only known once the steps have been generated: write the truth after `batches()`."""
        return GroundTruth(
            self.scenario.name,
            self.scenario.seed,
            self.start_ms,
            self.end_ms,
            self.dt,
            self._floored(self._with_collectives([*self.faults, *self._natural_ecmp_faults()])),
        )

    def _floored(self, faults: list[Fault]) -> list[Fault]:
        """The faults with those under their visibility floor marked (visibility.py)."""
        runs: dict[str, list[tuple[int, int, bool]]] = {}
        for fid, t0, t1, clear in self.pinned_ecmp:
            runs.setdefault(fid, []).append((t0, t1, clear))
        apply_floors(
            faults,
            dt_s=self.dt,
            sampling_rate=self.scenario.sflow.sampling_rate,
            pinned_clear_s={k: longest_clear(v, self.dt) for k, v in runs.items()},
            clear_needed_s=NATURAL_ECMP_SECONDS,
        )
        return faults

    def _with_collectives(self, faults: list[Fault]) -> list[Fault]:
        return [
            *faults,
            *collective_truth(self, self.paces, faults),
            *nccl_truth(self),
            *log_truth(self, self.broken_flows),
        ]

    def _natural_ecmp_faults(self) -> list[Fault]:
        """Merge consecutive epochs of one uplink's natural imbalance; keep those lasting at
        least NATURAL_ECMP_SECONDS, scored where NATURAL_ECMP_SECONDS of them in a row ran clear
        of the thresholds (see NATURAL_ECMP_MARGIN)."""
        fab = self.fabric
        out: list[Fault] = []
        # per uplink, runs of consecutive epochs: [t0, t1, max ratio, max util, the longest
        # clear stretch in steps, the clear stretch going on at t1]
        spans: dict[int, list[list[float]]] = {}
        clear_ratio = NATURAL_ECMP_RATIO * (1 + NATURAL_ECMP_MARGIN)
        clear_util = NATURAL_ECMP_UTIL * (1 + NATURAL_ECMP_MARGIN)
        for ep, t0, t1, ratio, util in sorted(self.natural_ecmp, key=lambda x: (x[0], x[1])):
            clear = ratio >= clear_ratio and util >= clear_util
            runs = spans.setdefault(ep, [])
            if not (runs and runs[-1][1] == t0):
                runs.append([float(t0), float(t0), 0.0, 0.0, 0.0, 0.0])
            run = runs[-1]
            run[1] = t1
            run[2], run[3] = max(run[2], ratio), max(run[3], util)
            run[5] = run[5] + (t1 - t0) if clear else 0.0
            run[4] = max(run[4], run[5])
        for ep, runs in sorted(spans.items()):
            for s0, s1, ratio, util, clear_steps, _ in runs:
                t0, t1 = int(s0), int(s1)
                if (t1 - t0) * self.dt < NATURAL_ECMP_SECONDS:
                    continue
                f = Fault(
                    f"ecmp_collision-w{len(out)}",
                    "ecmp_collision",
                    self.ts(int(t0)),
                    self.ts(int(t1)),
                    "port",
                    fab.ep_name(ep),
                    [
                        fab.ep_name(ep),
                        fab.ep_device[ep],
                        fab.link_name(ep),
                        fab.link_name(fab.ep_peer[ep]),
                    ],
                    origin="workload",
                    start_step=int(t0),
                    end_step=int(t1),
                    scored=clear_steps * self.dt >= NATURAL_ECMP_SECONDS,
                )
                f.detail = {
                    "max_over_mean": round(ratio, 3),
                    "utilization": round(util, 3),
                    "clear_seconds": int(clear_steps * self.dt),
                }
                out.append(f)
        return out

    # -- the whole run -----------------------------------------------------------------------
    def batches(self, *, disturbed: bool = True) -> Iterator[list[Batch]]:
        """Inventory and static facts first, then one list of batches per chunk of steps. With
        `disturbed` (the default) the samples carry the scenario's collection timing (timing.py:
        phases, jitter, lost and duplicated polls, restarts); without, every sample sits on the
        step grid (the device path renders those and disturbs what its parsers read)."""
        dist = self.disturber() if disturbed else None
        inv = self.inventory_batches()
        if dist is not None:
            dist.inventory({b.kind.name: b.table for b in inv})
            inv = dist.batches(inv)
        yield inv
        gen = StepSamples(self)
        logs = LogLines(self, self.broken_flows)
        for c0 in range(0, self.steps, self.chunk_steps):
            c1 = min(self.steps, c0 + self.chunk_steps)
            out = gen.chunk(c0, c1)
            lines = log_batch(logs.chunk(c0, c1))  # after the chunk: its epochs are solved
            if lines is not None:
                out.append(lines)
            if dist is not None:
                out = dist.batches(out) + [
                    Batch(LLDP_LINK, t) for t in dist.relearned_lldp(*self.sampled(c0, c1))
                ]
            yield out

    def sampled(self, c0: int, c1: int) -> tuple[int, int]:
        """[lo, hi) ms holding the samples of steps c0 .. c1 - 1 as devices take them (each step's
        within the interval before its grid point); the first and last steps hold what lies
        before and after the run."""
        lo = self.ts(c0) - self.dt * 1000 if c0 > 0 else -(2**62)
        hi = self.ts(c1) - self.dt * 1000 if c1 < self.steps else 2**62
        return lo, hi

    def disturber(self) -> Disturber | None:
        """The scenario's collection timing as a fresh Disturber (None: ideal timing)."""
        spec = self.scenario.telemetry
        gaps = [
            (f.target["class"], f.target["device"], f.start_ms, f.end_ms)
            for f in self.faults
            if f.kind == "collection_gap"
        ]
        if spec.ideal and not gaps:
            return None
        return Disturber(
            spec,
            self.scenario.seed,
            self.start_ms,
            self.dt * 1000,
            self.end_ms,
            device_lists(
                (n.name for n in self.fabric.nodes), (s for s, _, _ in self.fabric.switches)
            ),
            gaps,
        )

    @property
    def n_chunks(self) -> int:
        return 1 + (self.steps + self.chunk_steps - 1) // self.chunk_steps

    # -- inventory ---------------------------------------------------------------------------
    def inventory_batches(self) -> list[Batch]:
        """Inventory and static facts (inventory.py): the first batches of a run."""
        return inventory_batches(self)


def build(
    sc: Scenario, *, now_s: float | None = None, chunk_steps: int | None = None
) -> Simulation:
    """Build fabric, workload, faults and HDFS events for a scenario (no records yet)."""
    fab = build_fabric(sc)
    specs = expand_jobs(fab, _rng(sc.seed, "jobs"))
    placement = placement_targets(sc, specs)
    wl = schedule(fab, specs, set(placement.values()), sc.seed)
    start = default_start_ms(sc, now_s)
    faults = resolve_faults(sc, fab, wl, placement, start, _rng(sc.seed, "faults"))
    hdfs = build_hdfs(fab, faults, start, _rng(sc.seed, "hdfs"))
    if chunk_steps is None:  # about a million rows per chunk bounds memory at any size
        per_step = len(fab.nodes) * fab.gpus_per_node + fab.n_nics + 2 * (fab.n_eps - fab.n_nics)
        chunk_steps = max(1, min(30, 1_000_000 // max(per_step, 1)))
    return Simulation(sc, start, fab, wl, faults, hdfs, chunk_steps)


__all__ = ["Simulation", "build", "default_start_ms"]
