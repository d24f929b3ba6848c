"""Scenario files: the fabric, workload, faults and seed of one simulation, as validated YAML.

Reads built-in scenarios from `telemetry/sim/scenarios/NAME.yaml` or any file; never guesses a
value for a misspelt key: unknown keys are errors that name the key (`faults.1.strat_minute`).
"""

from __future__ import annotations

import math
import re
from operator import attrgetter
from pathlib import Path
from typing import Annotated, Any, Generic, Literal, TypeVar, overload

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from telemetry.config import read_yaml
from telemetry.errors import ConfigError
from telemetry.sim.timing import TelemetrySpec

SCENARIO_DIR = Path(__file__).parent / "scenarios"
SERVER_MODELS_FILE = Path(__file__).parent / "server_models.yaml"

# The fault kinds the simulator injects; ground truth and the scorer use these names.
FaultKind = Literal[
    "ecmp_collision",
    "pfc_storm",
    "link_flap",
    "nic_pcie_stall",
    "gpu_throttle",
    "gpu_xid",
    "gpu_lost",
    "placement_violation",
    "job_spans_su",
    "cross_tenant_flow",
    "hdfs_cross_idc_read",
    "hdfs_replica_misplaced",
    "dci_saturation",
    "hypernode_drift",
    "gpu_idle_allocated",
    "gang_blocked_by_fragmentation",
    "queue_over_guarantee_starving",
    "collection_gap",
    # faults only the job's logs show (telemetry/sim/logs.py)
    "collective_timeout",
    "nccl_transport_fallback",
    "nccl_gdr_disabled",
]
FAULT_KINDS: tuple[str, ...] = FaultKind.__args__  # type: ignore[attr-defined]
# kinds whose `target` names a server, NIC, GPU, switch or port (not a job, pod or queue)
DEVICE_TARGETED = frozenset(
    {"ecmp_collision", "pfc_storm", "link_flap", "nic_pcie_stall", "gpu_throttle", "gpu_xid",
     "gpu_lost", "collection_gap"}
)  # fmt: skip


# No scenario simulates more servers than this (the largest IDC: 1024 SUs x 128 servers); a job or
# a random-job count past it is a typo, and past 2**1024 it cannot even be scaled (float overflow).
MAX_NODES = 1024 * 128


def _unique(what: str, names: list[str]) -> None:
    if len(set(names)) != len(names):
        raise ValueError(f"{what} names must be unique")


_T = TypeVar("_T")


class SpecField(Generic[_T]):
    """A read-only attribute of a simulated object that is a field of the spec it was built from:
    `steps = SpecField[int]("scenario.steps")` reads `self.scenario.steps`."""

    def __init__(self, path: str) -> None:
        self._get = attrgetter(path)

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> SpecField[_T]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> _T: ...
    def __get__(self, obj: object | None, owner: type | None = None) -> Any:
        return self if obj is None else self._get(obj)


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class IdcSpec(_M):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,30}$")
    sus: int = Field(ge=0, le=1024, description="GPU scalable units in this IDC.")
    datanodes: int = Field(4, ge=0, le=1000, description="HDFS DataNodes in this IDC.")


class DciSpec(_M):
    links: int = Field(2, ge=1, le=64, description="DCI links between each pair of IDCs.")
    gbps: float = Field(400, gt=0, description="Capacity of one DCI link.")
    background_ratio: float = Field(0.2, ge=0, le=1, description="Background DCI load (ratio).")


class FabricSpec(_M):
    idcs: list[IdcSpec] = Field(min_length=1)
    servers_per_su: int = Field(16, ge=1, le=128)
    server_model: str = "hgx-h100-8nic"
    link_gbps: float = Field(400, gt=0)
    uplinks_per_leaf: int = Field(4, ge=1, le=64, description="= spines per IDC (ECMP group size).")
    superspines_per_idc: int = Field(2, ge=1, le=64)
    dci: DciSpec = Field(default_factory=DciSpec)  # type: ignore[arg-type]

    @field_validator("server_model")
    @classmethod
    def _model(cls, v: str) -> str:
        models = server_models()
        if v not in models:
            raise ValueError(f"unknown server model {v!r} (known: {', '.join(sorted(models))})")
        return v

    @model_validator(mode="after")
    def _names(self) -> FabricSpec:
        _unique("IDC", [i.name for i in self.idcs])
        if not any(i.sus for i in self.idcs):
            raise ValueError("at least one IDC needs sus >= 1")
        return self


class JobSpec(_M):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,40}$")
    tenant: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,40}$")
    nodes: int = Field(ge=1, le=MAX_NODES)
    mode: Literal["hard", "soft", ""] = "hard"
    highest_tier: int | None = Field(1, ge=1, le=3)
    start_minute: float = Field(0, ge=0)
    end_minute: float | None = Field(None, gt=0)
    pattern: Literal["ring", "tree"] = "ring"
    qps: int = Field(
        4, ge=1, le=64, description="Queue pairs per rank connection (source-port entropy)."
    )
    gbps_per_nic: float = Field(
        200, gt=0, description="Network demand per NIC while communicating."
    )
    comm_fraction: float = Field(
        0.35, ge=0, le=0.95, description="Share of a step spent in collectives."
    )
    nccl_env: dict[str, str] = Field(
        default_factory=dict,
        description="NCCL settings in the pods' env (the inventory reads them). The simulated "
        "job follows NCCL_ALGO / NCCL_PROTO (its collectives run with what they force, at that "
        "algorithm's bandwidth: nccl_algorithms.yaml) and NCCL_CROSS_NIC=1 (its ring connects "
        "NIC i to NIC i-1 of the next server: across rails, through the spines); "
        "NCCL_IB_QPS_PER_CONNECTION is `qps`.",
    )

    @field_validator("nccl_env")
    @classmethod
    def _nccl_env(cls, v: dict[str, str]) -> dict[str, str]:
        for k in v:
            if not re.fullmatch(r"NCCL_[A-Z0-9_]+", k):
                raise ValueError(f"{k!r} is not an NCCL setting (NCCL_...)")
            if k == "NCCL_IB_QPS_PER_CONNECTION":
                raise ValueError("NCCL_IB_QPS_PER_CONNECTION is the job's `qps`")
        return v


class RandomJobs(_M):
    count: int = Field(0, ge=0, le=MAX_NODES)
    nodes: list[Annotated[int, Field(ge=1, le=MAX_NODES)]] = Field(
        default_factory=lambda: [2, 4, 8], min_length=1
    )
    tenants: list[str] = Field(default_factory=lambda: ["tenant-a", "tenant-b"], min_length=1)
    soft_ratio: float = Field(0.3, ge=0, le=1)


class HdfsSpec(_M):
    reads_per_minute: float = Field(
        30, ge=0, description="Block reads per minute per IDC with GPUs."
    )
    writes_per_minute: float = Field(6, ge=0, description="Block writes (checkpoints) per minute.")
    block_mb: int = Field(256, ge=1)
    replicas: int = Field(4, ge=1, le=16)
    write_mode: Literal["sync", "async"] = "sync"


class SflowSpec(_M):
    enabled: bool = True
    sampling_rate: int = Field(8_000_000, ge=1)
    max_samples_per_flow: int = Field(
        8, ge=1, description="Cap per flow and step (keeps volume bounded)."
    )


class FaultSpec(_M):
    kind: FaultKind
    start_minute: float = Field(0, ge=0)
    duration_minutes: float | None = Field(
        None, gt=0, description="Default: until the end of the run."
    )
    target: str | None = Field(
        None,
        description="Job, node, node/nic or switch (collection_gap: a node or a switch whose "
        "telemetry stops); default: chosen by seed.",
    )
    xid: int | None = Field(None, ge=1, description="gpu_xid: the XID code (default 48).")
    severity: float = Field(1.0, gt=0, le=10, description="Scales the fault's magnitude.")


class PoolQueue(_M):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,40}$")
    deserved: int | None = Field(None, ge=0, description="deserved nvidia.com/gpu")
    guarantee: int | None = Field(None, ge=0, description="guarantee nvidia.com/gpu")
    capability: int | None = Field(None, ge=0, description="capability nvidia.com/gpu")


class PoolPriorityClass(_M):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,60}$")
    value: int = 0
    provisioning: str = Field("", description="Reserved, Spot, ...")
    purpose: str = Field("", description="Serving, Training, Interactive, ...")


class PoolSpec(_M):
    """The GPU pool around the jobs: GPU models per SU, Volcano queues with GPU quotas,
    PriorityClasses with provisioning types, and who holds what (faults add idle holders,
    fragmenting fillers and pending gangs; telemetry/sim/pool.py)."""

    gpu_models: list[str] = Field(
        default_factory=list, description="nvidia.com/gpu.product per SU (cycled); [] = server's"
    )
    queues: list[PoolQueue] = Field(default_factory=list)
    priority_classes: list[PoolPriorityClass] = Field(default_factory=list)
    job_queue: str = Field("default", description="queue of the scenario's jobs")
    job_priority_class: str = Field("", description="priority class of the scenario's jobs")
    holder_priority_class: str = Field("", description="priority class of idle holders")
    gang_queue: str = Field("default", description="queue of fragmentation-blocked gangs")
    spot_priority_class: str = Field("", description="priority class of preempted Spot pods")
    spot_preemptions: int = Field(0, ge=0, le=64, description="Spot pods preempted mid-run")


class Scenario(_M):
    name: str = "custom"
    description: str = ""
    seed: int = Field(1, ge=0, le=2**64 - 1, description="numpy seeds are unsigned")
    duration_minutes: float = Field(10, gt=0, le=24 * 60)
    resolution_seconds: int = Field(10, ge=1, le=600)
    start: str | None = Field(
        None, description="ISO start time; default: the run ends at the current minute."
    )
    fabric: FabricSpec
    jobs: list[JobSpec] = Field(default_factory=list)
    random_jobs: RandomJobs = Field(default_factory=RandomJobs)  # type: ignore[arg-type]
    hdfs: HdfsSpec = Field(default_factory=HdfsSpec)  # type: ignore[arg-type]
    sflow: SflowSpec = Field(default_factory=SflowSpec)  # type: ignore[arg-type]
    faults: list[FaultSpec] = Field(default_factory=list)
    pool: PoolSpec | None = None
    # how collection disturbs the times of what reaches the store (telemetry/sim/timing.py):
    # realistic by default; `ideal` is every device on one grid
    telemetry: TelemetrySpec = Field(default_factory=TelemetrySpec)  # type: ignore[arg-type]

    @field_validator("start")
    @classmethod
    def _start(cls, v: str | None) -> str | None:
        if v is None:
            return v
        from datetime import datetime

        try:
            dt = datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"not an ISO time: {v!r}") from None
        if dt.tzinfo is None:
            raise ValueError(f"give a time zone (e.g. {v}Z)")
        return v

    @model_validator(mode="after")
    def _check(self) -> Scenario:
        _unique("job", [j.name for j in self.jobs])
        for i, f in enumerate(self.faults):
            if f.start_minute >= self.duration_minutes:
                raise ValueError(
                    f"faults.{i}.start_minute: {f.start_minute} is not before the end ({self.duration_minutes} min)"
                )
        return self

    @property
    def steps(self) -> int:
        return max(1, int(self.duration_minutes * 60 // self.resolution_seconds))

    @property
    def total_servers(self) -> int:
        return sum(i.sus for i in self.fabric.idcs) * self.fabric.servers_per_su

    def with_overrides(
        self,
        *,
        seed: int | None = None,
        minutes: float | None = None,
        nodes: int | None = None,
        start: str | None = None,
        timing: str | None = None,
    ) -> Scenario:
        """The same scenario with CLI overrides applied (validated again). `timing` replaces the
        scenario's telemetry section with that profile (ideal, realistic, harsh)."""
        data = self.model_dump()
        if timing is not None:
            data["telemetry"] = {"profile": timing}
        if seed is not None:
            data["seed"] = seed
        if minutes is not None:
            data["duration_minutes"] = minutes
            # a shorter run drops the faults that would start after its end
            data["faults"] = [f for f in data["faults"] if f["start_minute"] < minutes]
        if start is not None:
            data["start"] = start
        if nodes is not None:
            if nodes < 1:
                raise ConfigError(f"--nodes: {nodes} (need at least 1)")
            per = self.fabric.servers_per_su
            old_sus = sum(i.sus for i in self.fabric.idcs)
            gpu_idcs = [i for i in data["fabric"]["idcs"] if i["sus"] > 0]
            min_sus = min(2, old_sus, nodes)  # keep cross-SU behaviour when the scenario had it
            if nodes < per * min_sus:  # fewer servers than SUs of the default size: smaller SUs
                per = math.ceil(nodes / min_sus)
                data["fabric"]["servers_per_su"] = per
            sus = max(min_sus, math.ceil(nodes / per))
            for i in data["fabric"]["idcs"]:
                i["sus"] = 0
            for k in range(sus):  # spread SUs over the IDCs that had GPUs
                gpu_idcs[k % len(gpu_idcs)]["sus"] += 1
            # the workload keeps its shape: job sizes scale with the cluster, a hard tier-1 job
            # still fits one SU, and a job of two or more servers keeps spanning at least two
            factor = sus * per / self.total_servers
            for j in data["jobs"]:
                n = max(min(2, j["nodes"]), round(j["nodes"] * factor))
                if j["mode"] == "hard" and (j["highest_tier"] or 3) <= 1:
                    n = min(n, per)
                j["nodes"] = n
            data["random_jobs"]["count"] = round(data["random_jobs"]["count"] * factor)
            # a server, NIC, GPU or port named as a target belongs to the fabric of the
            # scenario's own size: on the rebuilt one the seed picks again (jobs keep their names)
            for f in data["faults"]:
                if f["kind"] in DEVICE_TARGETED:
                    f["target"] = None
        try:
            return Scenario.model_validate(data)
        except ValidationError as e:
            raise ConfigError(format_error(e, f"scenario {self.name}")) from None


def format_error(e: ValidationError, source: str) -> str:
    err = e.errors()[0]
    key = ".".join(str(p) for p in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    more = f" (+{len(e.errors()) - 1} more)" if len(e.errors()) > 1 else ""
    return f"{source}: {key + ': ' if key else ''}{msg}{more}"


def builtin_names() -> list[str]:
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))


def load_scenario(name_or_path: str) -> Scenario:
    """A built-in scenario by name, or a YAML file. Errors are one line naming the key."""
    p = Path(name_or_path)
    if not p.suffix and (SCENARIO_DIR / f"{name_or_path}.yaml").exists():
        p = SCENARIO_DIR / f"{name_or_path}.yaml"
    elif not p.exists():
        raise ConfigError(
            f"scenario {name_or_path}: no such file or built-in scenario (built-ins: {', '.join(builtin_names())})"
        )
    return parse_scenario_yaml(read_yaml(p, f"scenario {p}"), f"scenario {p}", p.stem)


def parse_scenario_yaml(raw: Any, source: str, name: str) -> Scenario:
    """A scenario from its parsed YAML document (`name` when the document gives none)."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a mapping")
    raw.setdefault("name", name)
    return parse_scenario(raw, source=source)


def parse_scenario(raw: dict[str, Any], source: str = "scenario") -> Scenario:
    try:
        return Scenario.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(format_error(e, source)) from None


_MODELS: dict[str, dict[str, Any]] | None = None


def server_models() -> dict[str, dict[str, Any]]:
    """GPU server models: GPU/NIC placement under PCIe switches (server_models.yaml)."""
    global _MODELS
    if _MODELS is None:
        _MODELS = yaml.safe_load(SERVER_MODELS_FILE.read_text())
    return _MODELS


__all__ = [
    "FAULT_KINDS",
    "FaultSpec",
    "JobSpec",
    "Scenario",
    "SpecField",
    "builtin_names",
    "load_scenario",
    "parse_scenario",
]
