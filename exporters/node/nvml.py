"""The narrow GPU backend interface, the real NVML implementation and a fake that follows NVML's
error semantics (NOT_SUPPORTED per field, GPU_IS_LOST, DRIVER_NOT_LOADED, UNINITIALIZED, TIMEOUT).

Reads GPUs only; it never changes GPU state (no clocks, no reset, no persistence mode).
Values come back in NVML's raw units; gpu_fields.csv scales them.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

# NVML return codes (nvml.h); the fake raises the same ones the real library does.
UNINITIALIZED = 1
INVALID_ARGUMENT = 2
NOT_SUPPORTED = 3
NO_PERMISSION = 4
NOT_FOUND = 6
DRIVER_NOT_LOADED = 9
TIMEOUT = 10
LIBRARY_NOT_FOUND = 12
GPU_IS_LOST = 15
UNKNOWN = 999

ERROR_NAMES = {
    UNINITIALIZED: "uninitialized",
    INVALID_ARGUMENT: "invalid_argument",
    NOT_SUPPORTED: "not_supported",
    NO_PERMISSION: "no_permission",
    NOT_FOUND: "not_found",
    DRIVER_NOT_LOADED: "driver_not_loaded",
    TIMEOUT: "timeout",
    LIBRARY_NOT_FOUND: "library_not_found",
    GPU_IS_LOST: "gpu_lost",
    UNKNOWN: "unknown",
}


# NVLink (nvml.h): the most links any GPU has (NVML_NVLINK_MAX_LINKS: 18 on Hopper, 36 since
# NVML 13 for Blackwell), and the data-link error counters of nvmlDeviceGetNvLinkErrorCounter by
# the name railscope stores each under (record kind nvlink_sample).
NVLINK_MAX_LINKS = 36
NVLINK_ERROR_COUNTERS = {
    "replay_errors_total": 0,  # NVML_NVLINK_ERROR_DL_REPLAY
    "recovery_errors_total": 1,  # NVML_NVLINK_ERROR_DL_RECOVERY
    "crc_flit_errors_total": 2,  # NVML_NVLINK_ERROR_DL_CRC_FLIT
    "crc_data_errors_total": 3,  # NVML_NVLINK_ERROR_DL_CRC_DATA
}


class NvmlError(Exception):
    def __init__(self, code: int, message: str = "") -> None:
        self.code = code
        self.reason = ERROR_NAMES.get(code, f"nvml_error_{code}")
        super().__init__(message or f"NVML error {code} ({self.reason})")


@dataclass(frozen=True)
class GpuIdentity:
    uuid: str
    model: str
    pci_bus_id: str  # normalised: 0000:1b:00.0


@dataclass(frozen=True)
class MigInstance:
    """A MIG device: label `gi/ci` (GPU instance / compute instance) and its UUID."""

    label: str
    uuid: str


@dataclass(frozen=True)
class GpuProcess:
    """One entry of nvmlDeviceGetComputeRunningProcesses / GetGraphicsRunningProcesses (v3)."""

    pid: int  # in the host's pid namespace
    # usedGpuMemory; None where NVML answers NVML_VALUE_NOT_AVAILABLE (always under Windows WDDM,
    # so in WSL; in MIG mode when the caller lacks the privilege for the aggregate view)
    used_memory_bytes: int | None
    mig: str = ""  # "gi/ci" when MIG is enabled (gpuInstanceId/computeInstanceId), else ''


PROCESS_TYPES = ("compute", "graphics")


@dataclass(frozen=True)
class XidEvent:
    gpu: int
    xid: int
    uuid: str = ""


class GpuBackend(Protocol):
    """What the GPU collector needs from NVML, nothing more."""

    def init(self) -> None: ...
    def shutdown(self) -> None: ...
    def device_count(self) -> int: ...
    def identity(self, gpu: int) -> GpuIdentity: ...
    def read(self, gpu: int, field: str, mig: str | None = None) -> float: ...
    def mig_instances(self, gpu: int) -> list[MigInstance]: ...
    def processes(self, gpu: int, type_: str) -> list[GpuProcess]:
        """The processes with a `type_` (compute | graphics) context on the GPU; NOT_SUPPORTED
        where the GPU (or the driver in this environment) cannot list them."""
        ...

    def nvlink_state(self, gpu: int, link: int) -> bool:
        """nvmlDeviceGetNvLinkState: True when the link is active. INVALID_ARGUMENT for a link
        index the GPU does not have; NOT_SUPPORTED on a GPU without NVLink."""
        ...

    def nvlink_error_counter(self, gpu: int, link: int, counter: str) -> int:
        """nvmlDeviceGetNvLinkErrorCounter for one counter of NVLINK_ERROR_COUNTERS on one link;
        INVALID_ARGUMENT / NOT_SUPPORTED as nvlink_state, NOT_SUPPORTED for a counter the link
        cannot report."""
        ...

    def register_xid_events(self, gpu: int) -> None: ...
    def wait_xid(self, timeout_ms: int) -> XidEvent:
        """The next XID event; raises NvmlError(TIMEOUT) when none arrives in time."""
        ...


def normalise_pci(bus_id: str) -> str:
    """NVML writes 00000000:1B:00.0 (8-digit domain); sysfs writes 0000:1b:00.0."""
    bus_id = bus_id.strip().lower()
    dom, _, rest = bus_id.partition(":")
    if rest and len(dom) > 4:
        dom = dom[-4:]
    return f"{dom}:{rest}" if rest else bus_id


# --- fake --------------------------------------------------------------------------------------
_GPM = frozenset(
    {
        "sm_active_ratio",
        "sm_occupancy_ratio",
        "tensor_active_ratio",
        "dram_active_ratio",
        "graphics_active_ratio",
    }
)
_RETIRED_PAGES = frozenset(
    {"retired_pages_single_bit_ecc", "retired_pages_double_bit_ecc", "retired_pages_pending"}
)
_ROW_REMAP = frozenset(
    {
        "remapped_rows_pending",
        "remapped_rows_failure_total",
        "remapped_rows_correctable_total",
        "remapped_rows_uncorrectable_total",
    }
)
_NVLINK = frozenset(
    {
        "nvlink_tx_bytes_total",
        "nvlink_rx_bytes_total",
        "nvlink_errors_total",
        "nvlink_crc_flit_errors_total",
        "nvlink_crc_data_errors_total",
        "nvlink_replay_errors_total",
        "nvlink_recovery_errors_total",
    }
)
# What real NVML answers NOT_SUPPORTED for, by GPU model (name prefix), applied by the fake on top
# of a spec's own `unsupported` list. Why: GPM is Hopper+ (nvmlGpmQueryDeviceSupport); Ampere+
# remap rows instead of retiring pages (nvmlDeviceGetRetiredPages: NOT_SUPPORTED) and Volta has no
# row remapping; A100 and H100/H200 have no NVENC; L40S (PCIe, GDDR6) has no NVLink and no HBM
# temperature sensor.
MODEL_UNSUPPORTED: tuple[tuple[str, frozenset[str]], ...] = (
    ("NVIDIA H100", _RETIRED_PAGES | {"encoder_utilization_ratio"}),
    ("NVIDIA H200", _RETIRED_PAGES | {"encoder_utilization_ratio"}),
    ("NVIDIA A100", _RETIRED_PAGES | _GPM | {"encoder_utilization_ratio"}),
    ("NVIDIA L40S", _RETIRED_PAGES | _GPM | _NVLINK | {"memory_temperature_celsius"}),
    ("Tesla V100", _ROW_REMAP | _GPM),
)


def model_unsupported(model: str) -> frozenset[str]:
    for prefix, fields in MODEL_UNSUPPORTED:
        if model.startswith(prefix):
            return fields
    return frozenset()


@dataclass
class FakeGpu:
    uuid: str
    model: str = "NVIDIA H100 80GB HBM3"
    pci_bus_id: str = "0000:00:00.0"
    fields: dict[str, float] = field(default_factory=dict)
    unsupported: set[str] = field(default_factory=set)
    mig: list[dict[str, Any]] = field(
        default_factory=list
    )  # [{"label": "1/0", "uuid":..., "fields": {...}}]
    # running processes: [{"pid": N, "type": "compute"|"graphics", "used_memory_bytes": N|null,
    # "mig": "gi/ci"}]; null memory = NVML_VALUE_NOT_AVAILABLE
    processes: list[dict[str, Any]] = field(default_factory=list)
    # NVLinks in index order: [{"active": bool, "<counter of NVLINK_ERROR_COUNTERS>": raw}];
    # a link index past the list is INVALID_ARGUMENT, a counter absent from a link NOT_SUPPORTED,
    # and no list at all (or `nvlink` in `unsupported`) a GPU without NVLink: NOT_SUPPORTED
    nvlinks: list[dict[str, Any]] = field(default_factory=list)
    lost_after_reads: int | None = None  # GPU_IS_LOST once this many field reads happened
    lost: bool = False
    events_supported: bool = True
    reads: int = 0


class FakeNvml:
    """Configurable fake. Build from a dict (the replay bundle's nvml.json) or in code:

    {"init_error": null | "driver_not_loaded" | "library_not_found",
     "gpus": [{"uuid": ..., "model": ..., "pci_bus_id": ..., "fields": {field: raw value},
               "unsupported": [field, ...], "mig": [...], "lost_after_reads": N,
               "processes": [{"pid": N, "type": "compute" | "graphics",
                              "used_memory_bytes": N | null, "mig": "gi/ci"}],
               "nvlinks": [{"active": true, "replay_errors_total": N, ...}, ...],
               "xid": [79, ...]}]}

    Like NVML: every call before init() raises UNINITIALIZED; a field the GPU does not have
    (absent from its spec, listed in `unsupported`, or not on that model: MODEL_UNSUPPORTED)
    raises NOT_SUPPORTED; a lost GPU raises GPU_IS_LOST on every call; wait_xid raises TIMEOUT
    when no event is queued. The process lists are the pseudo-fields `compute_processes` and
    `graphics_processes` for `unsupported` and MODEL_UNSUPPORTED; a process's memory given as
    null is NVML_VALUE_NOT_AVAILABLE. NVLink calls follow nvmlDeviceGetNvLinkState and
    nvmlDeviceGetNvLinkErrorCounter: INVALID_ARGUMENT for a link index the GPU does not have,
    NOT_SUPPORTED on a GPU without NVLink (none listed, `nvlink` unsupported, or a model without
    it: MODEL_UNSUPPORTED's nvlink fields) and for a counter a link does not report.
    """

    def __init__(self, gpus: list[FakeGpu] | None = None, init_error: str | None = None) -> None:
        self.gpus = gpus or []
        self.init_error = init_error
        self.initialised = False
        self._events: list[XidEvent] = []
        self._registered: set[int] = set()
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self.calls = 0

    @classmethod
    def from_dict(cls, spec: dict[str, Any]) -> FakeNvml:
        gpus = []
        pending: list[tuple[int, int]] = []
        for i, g in enumerate(spec.get("gpus", [])):
            gpus.append(
                FakeGpu(
                    uuid=g.get("uuid", f"GPU-fake-{i:04d}"),
                    model=g.get("model", "NVIDIA H100 80GB HBM3"),
                    pci_bus_id=g.get("pci_bus_id", f"0000:{i + 1:02x}:00.0"),
                    fields={k: float(v) for k, v in g.get("fields", {}).items()},
                    unsupported=set(g.get("unsupported", [])),
                    mig=list(g.get("mig", [])),
                    processes=list(g.get("processes", [])),
                    nvlinks=[dict(link) for link in g.get("nvlinks", [])],
                    lost_after_reads=g.get("lost_after_reads"),
                    lost=bool(g.get("lost", False)),
                    events_supported=bool(g.get("events_supported", True)),
                )
            )
            pending += [(i, int(x)) for x in g.get("xid", [])]
        fake = cls(gpus, spec.get("init_error"))
        for i, code in pending:
            fake.inject_xid(i, code)
        return fake

    # test controls
    def lose(self, gpu: int) -> None:
        self.gpus[gpu].lost = True

    def inject_xid(self, gpu: int, xid: int) -> None:
        with self._cond:
            self._events.append(XidEvent(gpu, xid, self.gpus[gpu].uuid))
            self._cond.notify_all()

    def set(self, gpu: int, name: str, value: float) -> None:
        self.gpus[gpu].fields[name] = value

    def set_nvlink(self, gpu: int, link: int, name: str, value: float | bool) -> None:
        self.gpus[gpu].nvlinks[link][name] = value

    # backend
    def _check(self) -> None:
        self.calls += 1
        if not self.initialised:
            raise NvmlError(UNINITIALIZED)

    def _gpu(self, gpu: int) -> FakeGpu:
        self._check()
        if not 0 <= gpu < len(self.gpus):
            raise NvmlError(NOT_FOUND)
        g = self.gpus[gpu]
        if g.lost:
            raise NvmlError(GPU_IS_LOST)
        return g

    def init(self) -> None:
        codes = {"driver_not_loaded": DRIVER_NOT_LOADED, "library_not_found": LIBRARY_NOT_FOUND}
        if self.init_error:
            raise NvmlError(codes.get(self.init_error, UNKNOWN))
        self.initialised = True

    def shutdown(self) -> None:
        self._check()
        self.initialised = False

    def device_count(self) -> int:
        self._check()
        return len(self.gpus)

    def identity(self, gpu: int) -> GpuIdentity:
        g = self._gpu(gpu)
        return GpuIdentity(g.uuid, g.model, normalise_pci(g.pci_bus_id))

    def read(self, gpu: int, field: str, mig: str | None = None) -> float:
        g = self._gpu(gpu)
        g.reads += 1
        if g.lost_after_reads is not None and g.reads > g.lost_after_reads:
            g.lost = True  # fell off the bus in the middle of this scrape
            raise NvmlError(GPU_IS_LOST)
        values = g.fields
        if mig is not None:
            inst = next((m for m in g.mig if m.get("label") == mig), None)
            if inst is None:
                raise NvmlError(NOT_FOUND)
            values = inst.get("fields", {})
        if field in g.unsupported or field in model_unsupported(g.model) or field not in values:
            raise NvmlError(NOT_SUPPORTED)
        return float(values[field])

    def mig_instances(self, gpu: int) -> list[MigInstance]:
        g = self._gpu(gpu)
        if not g.mig:
            raise NvmlError(NOT_SUPPORTED)
        return [MigInstance(str(m["label"]), str(m.get("uuid", ""))) for m in g.mig]

    def processes(self, gpu: int, type_: str) -> list[GpuProcess]:
        g = self._gpu(gpu)
        if type_ not in PROCESS_TYPES:
            raise NvmlError(NOT_SUPPORTED)  # no other NVML process list
        name = f"{type_}_processes"
        if name in g.unsupported or name in model_unsupported(g.model):
            raise NvmlError(NOT_SUPPORTED)
        out = []
        for p in g.processes:
            if p.get("type", "compute") != type_:
                continue
            used = p.get("used_memory_bytes")
            out.append(
                GpuProcess(int(p["pid"]), None if used is None else int(used), p.get("mig", ""))
            )
        return out

    def _nvlink(self, gpu: int, link: int) -> dict[str, Any]:
        g = self._gpu(gpu)
        if (
            not g.nvlinks
            or "nvlink" in g.unsupported
            or "nvlink_errors_total" in model_unsupported(g.model)
        ):
            raise NvmlError(NOT_SUPPORTED)
        if not 0 <= link < min(len(g.nvlinks), NVLINK_MAX_LINKS):
            raise NvmlError(INVALID_ARGUMENT)
        return g.nvlinks[link]

    def nvlink_state(self, gpu: int, link: int) -> bool:
        return bool(self._nvlink(gpu, link).get("active", True))

    def nvlink_error_counter(self, gpu: int, link: int, counter: str) -> int:
        values = self._nvlink(gpu, link)
        if counter not in NVLINK_ERROR_COUNTERS:
            raise NvmlError(INVALID_ARGUMENT)  # not an nvmlNvLinkErrorCounter_t
        if counter not in values:
            raise NvmlError(NOT_SUPPORTED)
        return int(values[counter])

    def register_xid_events(self, gpu: int) -> None:
        g = self._gpu(gpu)
        if not g.events_supported:
            raise NvmlError(NOT_SUPPORTED)
        self._registered.add(gpu)

    def wait_xid(self, timeout_ms: int) -> XidEvent:
        self._check()
        deadline = time.monotonic() + timeout_ms / 1000
        with self._cond:  # blocks like nvmlEventSetWait until an event or the timeout
            while True:
                for i, ev in enumerate(self._events):
                    if ev.gpu in self._registered:
                        return self._events.pop(i)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise NvmlError(TIMEOUT)
                self._cond.wait(left)


# --- real --------------------------------------------------------------------------------------
class RealNvml:
    """nvidia-ml-py (pynvml). Imported lazily: a host without the library must still start."""

    def __init__(self) -> None:
        self._nv: Any = None
        self._handles: dict[int, Any] = {}
        self._mig_handles: dict[tuple[int, str], Any] = {}
        self._events: Any = None
        self._gpm_prev: dict[int, Any] = {}
        self._gpm_pairs: dict[int, tuple[Any, Any]] = {}
        self._uuid_index: dict[str, int] = {}

    def _call(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except self._nv.NVMLError as e:
            raise NvmlError(int(e.value), str(e)) from None

    def init(self) -> None:
        try:
            import pynvml
        except ImportError:
            raise NvmlError(LIBRARY_NOT_FOUND, "nvidia-ml-py is not installed") from None
        self._nv = pynvml
        self._call(pynvml.nvmlInit)

    def shutdown(self) -> None:
        if self._nv is None:
            raise NvmlError(UNINITIALIZED)
        for pair in self._gpm_pairs.values():
            self._nv.nvmlGpmSampleFree(pair[0])
        for s in self._gpm_prev.values():
            self._nv.nvmlGpmSampleFree(s)
        self._gpm_prev.clear()
        self._gpm_pairs.clear()
        if self._events is not None:
            self._nv.nvmlEventSetFree(self._events)
            self._events = None
        self._handles.clear()
        self._mig_handles.clear()
        self._call(self._nv.nvmlShutdown)

    def _h(self, gpu: int, mig: str | None = None) -> Any:
        if self._nv is None:
            raise NvmlError(UNINITIALIZED)
        if gpu not in self._handles:
            self._handles[gpu] = self._call(self._nv.nvmlDeviceGetHandleByIndex, gpu)
        if mig is None:
            return self._handles[gpu]
        h = self._mig_handles.get((gpu, mig))
        if h is None:
            raise NvmlError(NOT_FOUND)
        return h

    def device_count(self) -> int:
        if self._nv is None:
            raise NvmlError(UNINITIALIZED)
        return int(self._call(self._nv.nvmlDeviceGetCount))

    def identity(self, gpu: int) -> GpuIdentity:
        nv, h = self._nv, self._h(gpu)
        uuid = _s(self._call(nv.nvmlDeviceGetUUID, h))
        self._uuid_index[uuid] = gpu
        pci = self._call(nv.nvmlDeviceGetPciInfo, h)
        return GpuIdentity(
            uuid, _s(self._call(nv.nvmlDeviceGetName, h)), normalise_pci(_s(pci.busId))
        )

    def mig_instances(self, gpu: int) -> list[MigInstance]:
        nv, h = self._nv, self._h(gpu)
        current, _pending = self._call(nv.nvmlDeviceGetMigMode, h)
        if current != nv.NVML_DEVICE_MIG_ENABLE:
            raise NvmlError(NOT_SUPPORTED)
        out = []
        for i in range(int(self._call(nv.nvmlDeviceGetMaxMigDeviceCount, h))):
            try:
                mh = self._call(nv.nvmlDeviceGetMigDeviceHandleByIndex, h, i)
            except NvmlError as e:
                if e.code == NOT_FOUND:
                    continue
                raise
            gi = self._call(nv.nvmlDeviceGetGpuInstanceId, mh)
            ci = self._call(nv.nvmlDeviceGetComputeInstanceId, mh)
            label = f"{gi}/{ci}"
            self._mig_handles[(gpu, label)] = mh
            out.append(MigInstance(label, _s(self._call(nv.nvmlDeviceGetUUID, mh))))
        return out

    def read(self, gpu: int, field: str, mig: str | None = None) -> float:
        nv, h = self._nv, self._h(gpu, mig)
        if field not in _READERS:
            raise NvmlError(NOT_SUPPORTED)
        reader = _READERS[field]
        try:
            if reader is None:
                return self._gpm(gpu if mig is None else -1, h, field)
            return float(reader(nv, h))
        except nv.NVMLError as e:
            raise NvmlError(int(e.value), str(e)) from None

    def _gpm(self, gpu: int, h: Any, field: str) -> float:
        # GPM metrics are a difference of two samples. sm_active_ratio (first in gpu_fields.csv)
        # takes a new sample per cycle; the other GPM fields reuse that pair. The first cycle has
        # no pair yet, so GPM metrics appear from the second cycle on.
        nv = self._nv
        if gpu < 0 or not nv.nvmlGpmQueryDeviceSupport(h).isSupportedDevice:
            raise NvmlError(NOT_SUPPORTED)
        metric = {
            "sm_active_ratio": nv.NVML_GPM_METRIC_SM_UTIL,
            "sm_occupancy_ratio": nv.NVML_GPM_METRIC_SM_OCCUPANCY,
            "tensor_active_ratio": nv.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
            "dram_active_ratio": nv.NVML_GPM_METRIC_DRAM_BW_UTIL,
            "graphics_active_ratio": nv.NVML_GPM_METRIC_GRAPHICS_UTIL,
        }[field]
        if field == "sm_active_ratio":
            cur = nv.nvmlGpmSampleAlloc()
            nv.nvmlGpmSampleGet(h, cur)
            old = self._gpm_pairs.get(gpu)
            if old is not None:
                nv.nvmlGpmSampleFree(old[0])
            prev = self._gpm_prev.get(gpu)
            self._gpm_prev[gpu] = cur
            if prev is not None:
                self._gpm_pairs[gpu] = (prev, cur)
        pair = self._gpm_pairs.get(gpu)
        if pair is None:
            raise NvmlError(NOT_FOUND, "no GPM sample pair yet")
        mg = nv.c_nvmlGpmMetricsGet_t()
        mg.version = nv.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = 1
        mg.sample1, mg.sample2 = pair
        mg.metrics[0].metricId = metric
        nv.nvmlGpmMetricsGet(mg)
        if mg.metrics[0].nvmlReturn != 0:
            raise NvmlError(int(mg.metrics[0].nvmlReturn))
        return float(mg.metrics[0].value)

    def processes(self, gpu: int, type_: str) -> list[GpuProcess]:
        nv, h = self._nv, self._h(gpu)
        fn = {
            "compute": nv.nvmlDeviceGetComputeRunningProcesses,
            "graphics": nv.nvmlDeviceGetGraphicsRunningProcesses,
        }.get(type_)
        if fn is None:
            raise NvmlError(NOT_SUPPORTED)
        out = []
        for p in self._call(fn, h):  # pynvml: usedGpuMemory None for NVML_VALUE_NOT_AVAILABLE
            gi, ci = getattr(p, "gpuInstanceId", _NO_ID), getattr(p, "computeInstanceId", _NO_ID)
            mig = f"{gi}/{ci}" if gi != _NO_ID and ci != _NO_ID else ""
            used = p.usedGpuMemory
            out.append(GpuProcess(int(p.pid), None if used is None else int(used), mig))
        return out

    def nvlink_state(self, gpu: int, link: int) -> bool:
        nv, h = self._nv, self._h(gpu)
        return bool(self._call(nv.nvmlDeviceGetNvLinkState, h, link) == nv.NVML_FEATURE_ENABLED)

    def nvlink_error_counter(self, gpu: int, link: int, counter: str) -> int:
        nv, h = self._nv, self._h(gpu)
        code = {
            "replay_errors_total": nv.NVML_NVLINK_ERROR_DL_REPLAY,
            "recovery_errors_total": nv.NVML_NVLINK_ERROR_DL_RECOVERY,
            "crc_flit_errors_total": nv.NVML_NVLINK_ERROR_DL_CRC_FLIT,
            "crc_data_errors_total": nv.NVML_NVLINK_ERROR_DL_CRC_DATA,
        }.get(counter)
        if code is None:
            raise NvmlError(INVALID_ARGUMENT)
        return int(self._call(nv.nvmlDeviceGetNvLinkErrorCounter, h, link, code))

    def register_xid_events(self, gpu: int) -> None:
        nv, h = self._nv, self._h(gpu)
        if self._events is None:
            self._events = self._call(nv.nvmlEventSetCreate)
        self._call(nv.nvmlDeviceRegisterEvents, h, nv.nvmlEventTypeXidCriticalError, self._events)

    def wait_xid(self, timeout_ms: int) -> XidEvent:
        nv = self._nv
        if self._events is None:
            raise NvmlError(TIMEOUT)
        data = self._call(nv.nvmlEventSetWait_v2, self._events, timeout_ms)
        uuid = _s(self._call(nv.nvmlDeviceGetUUID, data.device))
        return XidEvent(self._uuid_index.get(uuid, -1), int(data.eventData), uuid)


_NO_ID = 0xFFFFFFFF  # gpuInstanceId / computeInstanceId outside MIG mode


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _field_value(nv: Any, h: Any, *ids: int) -> float:
    """Sum of NVML field values (scope 0); NOT_SUPPORTED when any one is not."""
    vals = nv.nvmlDeviceGetFieldValues(h, list(ids))
    total = 0.0
    for v in vals:
        if v.nvmlReturn != 0:
            raise nv.NVMLError(v.nvmlReturn)
        kind = v.valueType
        total += {
            0: v.value.dVal,
            1: v.value.uiVal,
            2: v.value.ulVal,
            3: v.value.ullVal,
            5: v.value.llVal,
        }.get(kind, v.value.ullVal)
    return total


_READERS: dict[str, Any] = {
    "utilization_ratio": lambda nv, h: nv.nvmlDeviceGetUtilizationRates(h).gpu,
    "memory_utilization_ratio": lambda nv, h: nv.nvmlDeviceGetUtilizationRates(h).memory,
    "memory_used_bytes": lambda nv, h: nv.nvmlDeviceGetMemoryInfo(h).used,
    "memory_total_bytes": lambda nv, h: nv.nvmlDeviceGetMemoryInfo(h).total,
    "memory_free_bytes": lambda nv, h: nv.nvmlDeviceGetMemoryInfo(h).free,
    "memory_reserved_bytes": lambda nv, h: (
        nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2).reserved
    ),
    "encoder_utilization_ratio": lambda nv, h: nv.nvmlDeviceGetEncoderUtilization(h)[0],
    "decoder_utilization_ratio": lambda nv, h: nv.nvmlDeviceGetDecoderUtilization(h)[0],
    "sm_clock_hertz": lambda nv, h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
    "memory_clock_hertz": lambda nv, h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
    "temperature_celsius": lambda nv, h: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
    "memory_temperature_celsius": lambda nv, h: _field_value(nv, h, nv.NVML_FI_DEV_MEMORY_TEMP),
    "power_watts": lambda nv, h: nv.nvmlDeviceGetPowerUsage(h),
    "power_limit_watts": lambda nv, h: nv.nvmlDeviceGetEnforcedPowerLimit(h),
    "energy_joules_total": lambda nv, h: nv.nvmlDeviceGetTotalEnergyConsumption(h),
    "clock_event_reasons": lambda nv, h: nv.nvmlDeviceGetCurrentClocksEventReasons(h),
    "power_violation_seconds_total": lambda nv, h: (
        nv.nvmlDeviceGetViolationStatus(h, nv.NVML_PERF_POLICY_POWER).violationTime
    ),
    "thermal_violation_seconds_total": lambda nv, h: (
        nv.nvmlDeviceGetViolationStatus(h, nv.NVML_PERF_POLICY_THERMAL).violationTime
    ),
    "ecc_corrected_errors_total": lambda nv, h: nv.nvmlDeviceGetTotalEccErrors(
        h, nv.NVML_MEMORY_ERROR_TYPE_CORRECTED, nv.NVML_VOLATILE_ECC
    ),
    "ecc_uncorrected_errors_total": lambda nv, h: nv.nvmlDeviceGetTotalEccErrors(
        h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC
    ),
    "remapped_rows_pending": lambda nv, h: nv.nvmlDeviceGetRemappedRows(h)[2],
    "remapped_rows_failure_total": lambda nv, h: nv.nvmlDeviceGetRemappedRows(h)[3],
    "remapped_rows_correctable_total": lambda nv, h: nv.nvmlDeviceGetRemappedRows(h)[0],
    "remapped_rows_uncorrectable_total": lambda nv, h: nv.nvmlDeviceGetRemappedRows(h)[1],
    "retired_pages_single_bit_ecc": lambda nv, h: len(
        nv.nvmlDeviceGetRetiredPages(
            h, nv.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
        )
    ),
    "retired_pages_double_bit_ecc": lambda nv, h: len(
        nv.nvmlDeviceGetRetiredPages(h, nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
    ),
    "retired_pages_pending": lambda nv, h: nv.nvmlDeviceGetRetiredPagesPendingStatus(h),
    "pcie_tx_bytes_per_second": lambda nv, h: nv.nvmlDeviceGetPcieThroughput(
        h, nv.NVML_PCIE_UTIL_TX_BYTES
    ),
    "pcie_rx_bytes_per_second": lambda nv, h: nv.nvmlDeviceGetPcieThroughput(
        h, nv.NVML_PCIE_UTIL_RX_BYTES
    ),
    "pcie_replay_total": lambda nv, h: nv.nvmlDeviceGetPcieReplayCounter(h),
    "nvlink_tx_bytes_total": lambda nv, h: _field_value(
        nv, h, nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX
    ),
    "nvlink_rx_bytes_total": lambda nv, h: _field_value(
        nv, h, nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX
    ),
    "nvlink_errors_total": lambda nv, h: _field_value(
        nv,
        h,
        nv.NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL,
        nv.NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL,
        nv.NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL,
        nv.NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL,
    ),
    "nvlink_crc_flit_errors_total": lambda nv, h: _field_value(
        nv, h, nv.NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL
    ),
    "nvlink_crc_data_errors_total": lambda nv, h: _field_value(
        nv, h, nv.NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL
    ),
    "nvlink_replay_errors_total": lambda nv, h: _field_value(
        nv, h, nv.NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL
    ),
    "nvlink_recovery_errors_total": lambda nv, h: _field_value(
        nv, h, nv.NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL
    ),
    "sm_active_ratio": None,
    "sm_occupancy_ratio": None,
    "tensor_active_ratio": None,
    "dram_active_ratio": None,
    "graphics_active_ratio": None,
}
