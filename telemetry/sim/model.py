"""The simulator's shared vocabulary, below every other sim module: the `Fault` and
`GroundTruth` records, and `SimView`, the part of a `Simulation` (engine.py) that the helper
modules (collectives, nccl, pool) read.

It imports no module that builds or runs a simulation: helpers type against `SimView` instead of
importing the engine, which imports them. Nothing here computes anything.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from telemetry.errors import ConfigError

if TYPE_CHECKING:
    from telemetry.sim.fabric import Fabric
    from telemetry.sim.scenario import Scenario
    from telemetry.sim.workload import Workload

GROUND_TRUTH_VERSION = 1


@dataclass
class Fault:
    """One injected fault (or a condition the workload created on its own, origin='workload').

    `subject` is the primary localization; `subjects` lists every name a correct finding may
    carry as its subject (port, link, device, job ...)."""

    id: str
    kind: str
    start_ms: int
    end_ms: int
    subject_type: str
    subject: str
    subjects: list[str]
    origin: str = "injected"
    implied_kinds: list[str] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)
    # False: a condition too close to its detector's thresholds to call either way (a natural
    # ECMP collision whose uplink ran about at the threshold), or one nothing could show (a
    # replica misplacement while no block was written): a finding on it is neither true nor
    # false, missing it is no miss (telemetry/sim/score.py)
    scored: bool = True
    # for the engine only (not written): steps and resolved indices
    start_step: int = 0
    end_step: int = 0
    target: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("start_step", "end_step", "target"):
            d.pop(k)
        return d


@dataclass
class GroundTruth:
    scenario: str
    seed: int
    start_ms: int
    end_ms: int
    resolution_seconds: int
    faults: list[Fault]
    version: int = GROUND_TRUTH_VERSION

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "faults": [f.to_json() for f in self.faults]}

    def write(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n")
        return p

    @classmethod
    def read(cls, path: str | Path) -> GroundTruth:
        p = Path(path)
        try:
            d = json.loads(p.read_text())
            faults = [Fault(**f) for f in d["faults"]]
            return cls(
                d["scenario"],
                int(d["seed"]),
                int(d["start_ms"]),
                int(d["end_ms"]),
                int(d["resolution_seconds"]),
                faults,
                int(d.get("version", 1)),
            )
        except FileNotFoundError:
            raise ConfigError(
                f"ground truth {p}: no such file (run `railscope sim run` or `railscope demo` first)"
            ) from None
        except (ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"ground truth {p}: not a railscope ground-truth file: {e}") from None

    def by_kind(self) -> dict[str, list[Fault]]:
        out: dict[str, list[Fault]] = {}
        for f in self.faults:
            out.setdefault(f.kind, []).append(f)
        return out


class SimView(Protocol):
    """What collectives.py, nccl.py and pool.py read of a simulation (engine.Simulation is one):
    the scenario and what was built from it, and the step clock. The engine's own parts
    (physics.py, samples.py, inventory.py) extend it with what they read besides."""

    @property
    def scenario(self) -> Scenario: ...
    @property
    def start_ms(self) -> int: ...
    @property
    def fabric(self) -> Fabric: ...
    @property
    def workload(self) -> Workload: ...
    @property
    def faults(self) -> list[Fault]: ...
    @property
    def steps(self) -> int: ...
    @property
    def dt(self) -> int: ...

    def ts(self, step: int) -> int:
        """The time of step `step`, epoch ms."""
        ...


__all__ = ["GROUND_TRUTH_VERSION", "Fault", "GroundTruth", "SimView"]
