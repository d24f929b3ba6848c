"""GPU collector: gpu_sample rows (one per GPU and per MIG instance), gpu_event rows (XID, GPU
lost) and nvlink_sample rows (one per NVLink) from a GpuBackend (nvml.py), with fields from
gpu_fields.csv.

It must never export a sentinel for an unsupported field (null instead), never let one lost GPU
stop the others, and never treat "no NVML on this host" as an error.
"""

from __future__ import annotations

import contextlib
import csv
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporters.node import nvml
from exporters.node.counters import CounterTracker
from exporters.node.counters import scaled as _scaled
from telemetry.records import GPU_SAMPLE

log = logging.getLogger(__name__)

FIELDS_CSV = Path(__file__).with_name("gpu_fields.csv")


@dataclass(frozen=True)
class GpuField:
    name: str
    type: str  # gauge | counter
    nvml: str
    scale: float
    help: str


def load_fields(path: Path = FIELDS_CSV) -> list[GpuField]:
    lines = [ln for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    out = []
    for row in csv.DictReader(lines):
        f = GpuField(row["field"], row["type"], row["nvml"], float(row["scale"]), row["help"])
        if f.name not in GPU_SAMPLE.by_name:
            raise ValueError(f"{path}: field {f.name!r} is not a gpu_sample field")
        out.append(f)
    return out


Problem = Callable[[str, str], None]  # (reason, message): counted in self-metrics and logged


class GpuCollector:
    """Reads every GPU through the backend once per `collect()`."""

    def __init__(
        self,
        backend: nvml.GpuBackend | None,
        node: str,
        *,
        quiet_absent: bool = True,
        event_thread: bool = False,
    ) -> None:
        self.backend = backend
        self.node = node
        self.fields = load_fields()
        # quiet_absent: `--gpu-backend auto` on a host without NVML is "nothing here", not an error.
        self.quiet_absent = quiet_absent
        self._ready = False
        self.absent = False
        self._unsupported: dict[tuple[int, str], set[str]] = {}
        self._lost: set[int] = set()
        self._xids: dict[int, int] = {}
        self._registered: set[int] = set()
        self._identity: dict[int, nvml.GpuIdentity] = {}
        self._links: dict[int, list[int]] = {}  # the NVLink indices each GPU has (probed once)
        self.counters = CounterTracker()
        # XID waiter thread (long-running exporter only): events stamped on arrival.
        self.event_thread = event_thread
        self._waiter: threading.Thread | None = None
        self._stop = threading.Event()
        self._pending_lock = threading.Lock()
        self._pending: list[tuple[int, nvml.XidEvent]] = []
        self._waiter_errors: dict[str, str] = {}

    def _init(self, problem: Problem) -> bool:
        if self._ready:
            return True
        if self.backend is None or self.absent:
            return False
        try:
            self.backend.init()
        except nvml.NvmlError as e:
            if e.code == nvml.LIBRARY_NOT_FOUND and self.quiet_absent:
                log.info("node: NVML not available on this host, no GPUs reported (%s)", e)
                self.absent = True
                return False
            problem(f"gpu_{e.reason}", f"NVML init failed: {e}")
            return False
        self._ready = True
        return True

    def collect(
        self, ts: int, problem: Problem
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Returns (gpu_sample rows, gpu_event rows)."""
        if not self._init(problem):
            return [], []
        assert self.backend is not None
        try:
            count = self.backend.device_count()
        except nvml.NvmlError as e:
            if e.code == nvml.UNINITIALIZED:
                self._ready = False  # re-init next cycle (the library was shut down under us)
            problem(f"gpu_{e.reason}", f"NVML device count failed: {e}")
            return [], []
        self.counters.next_cycle()
        samples: list[dict[str, Any]] = []
        events: list[dict[str, Any]] = []
        for i in range(count):
            samples += self._one(i, ts, events, problem)
        events += self._drain_xids(ts, count, problem)
        for row in samples:
            if not row["mig"]:
                row["xid_errors_total"] = self._xids.get(row["gpu"], 0)
        return samples, events

    def _one(
        self, i: int, ts: int, events: list[dict[str, Any]], problem: Problem
    ) -> list[dict[str, Any]]:
        assert self.backend is not None
        base: dict[str, Any] = {"ts": ts, "node": self.node, "gpu": i, "mig": ""}
        known = self._identity.get(i)
        if known is not None:
            # A lost GPU keeps its labels: up=0 must land on the same series that said up=1.
            base.update(uuid=known.uuid, model=known.model, pci_bus_id=known.pci_bus_id)
        try:
            ident = self.backend.identity(i)
            self._identity[i] = ident
            base.update(uuid=ident.uuid, model=ident.model, pci_bus_id=ident.pci_bus_id)
            if i not in self._registered:
                self._register(i, problem)
            row = {**base, **self._read(i, None, problem)}
            rows = [row]
            rows += [
                {**base, "uuid": m.uuid, "mig": m.label, **self._read(i, m.label, problem)}
                for m in self._migs(i)
            ]
        except nvml.NvmlError as e:
            if e.code != nvml.GPU_IS_LOST:
                problem(f"gpu_{e.reason}", f"GPU {i}: {e}")
                return [{**base, "up": 0}]
            if i not in self._lost:
                self._lost.add(i)
                events.append({**base, "event": "gpu_lost", "xid": 0, "detail": str(e)})
            problem("gpu_lost", f"GPU {i} ({base.get('uuid', '?')}) is lost: {e}")
            return [{**base, "up": 0}]
        if i in self._lost:
            self._lost.discard(i)
            log.info("node: GPU %d answers again", i)
        return rows

    def _read(self, i: int, mig: str | None, problem: Problem) -> dict[str, Any]:
        assert self.backend is not None
        skip = self._unsupported.setdefault((i, mig or ""), set())
        out: dict[str, Any] = {"up": 1}
        key = f"{i}/{mig or ''}"
        for f in self.fields:
            if f.name in skip:
                continue
            try:
                raw = self.backend.read(i, f.name, mig)
            except nvml.NvmlError as e:
                if e.code == nvml.NOT_SUPPORTED:
                    skip.add(f.name)  # capabilities do not change while the driver is loaded
                elif e.code == nvml.GPU_IS_LOST:
                    raise
                elif e.code != nvml.NOT_FOUND:  # NOT_FOUND: e.g. no GPM sample pair yet
                    problem(f"gpu_{e.reason}", f"GPU {key} {f.name}: {e}")
                continue
            if f.type == "counter":
                raw = self.counters.update(key, f.name, int(raw))
            out[f.name] = _scaled(raw, f.scale)
        return out

    def processes(
        self, ts: int, owner: Callable[[int], Any], problem: Problem
    ) -> list[dict[str, Any]]:
        """gpu_process rows: every process NVML lists (compute and graphics contexts) on each GPU
        that answered this cycle, with the pod and container its cgroup names (`owner(pid)`: an
        `exporters.common.cgroup.Owner`, or None when the process is in no pod or gone).
        A list the GPU cannot give (NOT_SUPPORTED) is not asked again, like a field."""
        if not self._ready or self.backend is None:
            return []
        rows: list[dict[str, Any]] = []
        for i, ident in sorted(self._identity.items()):
            if i in self._lost:
                continue  # its gpu_sample row says up=0
            skip = self._unsupported.setdefault((i, ""), set())
            for type_ in nvml.PROCESS_TYPES:
                key = f"__{type_}_processes__"
                if key in skip:
                    continue
                try:
                    procs = self.backend.processes(i, type_)
                except nvml.NvmlError as e:
                    if e.code == nvml.NOT_SUPPORTED:
                        skip.add(key)
                    elif e.code != nvml.GPU_IS_LOST:  # lost: reported by the GPU's own rows
                        problem(f"gpu_{e.reason}", f"GPU {i} {type_} processes: {e}")
                    continue
                for p in procs:
                    o = owner(p.pid)
                    rows.append(
                        {
                            "ts": ts,
                            "node": self.node,
                            "gpu": i,
                            "uuid": ident.uuid,
                            "mig": p.mig,
                            "pid": p.pid,
                            "type": type_,
                            "pod_uid": o.pod_uid if o is not None else "",
                            "container_id": o.container_id if o is not None else "",
                            "used_memory_bytes": p.used_memory_bytes,
                        }
                    )
        return rows

    def nvlinks(self, ts: int, problem: Problem) -> list[dict[str, Any]]:
        """nvlink_sample rows: each NVLink of each GPU that answered this cycle, its state and its
        error counters (nvmlDeviceGetNvLinkErrorCounter per link). The links a GPU has are probed
        once: INVALID_ARGUMENT ends them (an index the GPU does not have), NOT_SUPPORTED on the
        first is a GPU without NVLink; a counter a link cannot report is null and not asked
        again, like a field."""
        if not self._ready or self.backend is None:
            return []
        rows: list[dict[str, Any]] = []
        for i, ident in sorted(self._identity.items()):
            if i in self._lost:
                continue  # its gpu_sample row says up=0
            try:
                links = self._links.get(i)
                if links is None:
                    links = self._links[i] = self._probe_links(i)
                rows += [self._link(i, ident.uuid, link, ts, problem) for link in links]
            except nvml.NvmlError as e:
                if e.code != nvml.GPU_IS_LOST:  # lost: reported by the GPU's own rows
                    problem(f"gpu_{e.reason}", f"GPU {i} NVLink: {e}")
        return rows

    def _probe_links(self, i: int) -> list[int]:
        assert self.backend is not None
        links = []
        for link in range(nvml.NVLINK_MAX_LINKS):
            try:
                self.backend.nvlink_state(i, link)
            except nvml.NvmlError as e:
                if e.code in (nvml.INVALID_ARGUMENT, nvml.NOT_SUPPORTED):
                    break  # past the GPU's last link, or no NVLink at all
                raise
            links.append(link)
        return links

    def _link(self, i: int, uuid: str, link: int, ts: int, problem: Problem) -> dict[str, Any]:
        assert self.backend is not None
        row: dict[str, Any] = {"ts": ts, "node": self.node, "gpu": i, "uuid": uuid, "link": link}
        row["up"] = int(self.backend.nvlink_state(i, link))
        skip = self._unsupported.setdefault((i, f"nvlink{link}"), set())
        key = f"{i}/nvlink{link}"
        for name in nvml.NVLINK_ERROR_COUNTERS:
            if name in skip:
                continue
            try:
                raw = self.backend.nvlink_error_counter(i, link, name)
            except nvml.NvmlError as e:
                if e.code == nvml.NOT_SUPPORTED:
                    skip.add(name)
                elif e.code == nvml.GPU_IS_LOST:
                    raise
                else:
                    problem(f"gpu_{e.reason}", f"GPU {i} NVLink {link} {name}: {e}")
                continue
            row[name] = self.counters.update(key, name, int(raw))
        return row

    def _migs(self, i: int) -> list[nvml.MigInstance]:
        assert self.backend is not None
        if "__mig__" in self._unsupported.get((i, ""), set()):
            return []
        try:
            return self.backend.mig_instances(i)
        except nvml.NvmlError as e:
            if e.code == nvml.NOT_SUPPORTED:
                self._unsupported.setdefault((i, ""), set()).add("__mig__")
                return []
            raise

    def _register(self, i: int, problem: Problem) -> None:
        assert self.backend is not None
        try:
            self.backend.register_xid_events(i)
        except nvml.NvmlError as e:
            if e.code == nvml.GPU_IS_LOST:
                raise
            if e.code != nvml.NOT_SUPPORTED:
                problem(f"gpu_{e.reason}", f"GPU {i}: cannot register XID events: {e}")
        self._registered.add(i)

    def _drain_xids(self, ts: int, count: int, problem: Problem) -> list[dict[str, Any]]:
        """XID events since the last cycle. With the waiter thread (long-running exporter) each
        event carries the time it arrived; otherwise they are drained here with a zero timeout
        and carry the collection time."""
        assert self.backend is not None
        arrived: list[tuple[int, nvml.XidEvent]] = []
        if self._waiter is not None:
            with self._pending_lock:
                arrived, self._pending = self._pending, []
                errors, self._waiter_errors = self._waiter_errors, {}
            for reason, message in errors.items():
                problem(reason, message)
        else:
            for _ in range(1000):  # bound: a storm of events must not stall the collection
                try:
                    arrived.append((ts, self.backend.wait_xid(0)))
                except nvml.NvmlError as e:
                    if e.code not in (nvml.TIMEOUT, nvml.UNINITIALIZED):
                        problem(f"gpu_{e.reason}", f"XID event wait failed: {e}")
                    break
            if self.event_thread and self._registered:
                self._start_waiter()
        out: list[dict[str, Any]] = []
        for ev_ts, ev in arrived:
            gpu = ev.gpu
            if gpu < 0:  # the backend could not map the event's device: try by UUID
                gpu = next((i for i, ident in self._identity.items() if ident.uuid == ev.uuid), -1)
            detail = f"XID {ev.xid}"
            if gpu < 0:
                problem(
                    "gpu_xid_unknown_device", f"XID {ev.xid} from an unknown device {ev.uuid!r}"
                )
                detail += (
                    f" (device {ev.uuid!r} not among the enumerated GPUs; gpu=0 is a placeholder)"
                )
            else:
                self._xids[gpu] = self._xids.get(gpu, 0) + 1
            log.warning("node: GPU %d (%s): XID %d", gpu, ev.uuid, ev.xid)
            out.append(
                {
                    "ts": ev_ts,
                    "node": self.node,
                    "gpu": max(gpu, 0),
                    "uuid": ev.uuid,
                    "event": "xid",
                    "xid": ev.xid,
                    "detail": detail,
                }
            )
        return out

    def _start_waiter(self) -> None:
        self._stop.clear()
        self._waiter = threading.Thread(target=self._wait_loop, name="railscope-xid", daemon=True)
        self._waiter.start()

    def _wait_loop(self) -> None:
        # Blocks in nvmlEventSetWait (ctypes releases the GIL), so an XID is stamped when it
        # arrives, not at the next collection.
        assert self.backend is not None
        while not self._stop.is_set():
            try:
                ev = self.backend.wait_xid(500)
            except nvml.NvmlError as e:
                if e.code == nvml.TIMEOUT:
                    continue
                if e.code != nvml.UNINITIALIZED:
                    with self._pending_lock:  # one report per reason per cycle, not per retry
                        self._waiter_errors[f"gpu_{e.reason}"] = f"XID event wait failed: {e}"
                self._stop.wait(1.0)
                continue
            with self._pending_lock:
                self._pending.append((int(time.time() * 1000), ev))

    def close(self) -> None:
        self._stop.set()
        if self._waiter is not None:
            self._waiter.join(2.0)
            self._waiter = None
        if self._ready and self.backend is not None:
            with contextlib.suppress(nvml.NvmlError):
                self.backend.shutdown()
            self._ready = False


def make_backend(kind: str, fake_spec: dict[str, Any] | None = None) -> nvml.GpuBackend | None:
    """auto: real NVML when it loads (else no GPUs, quietly); nvml: real, errors counted; fake:
    the configurable fake; none: no GPU collection."""
    if kind == "none":
        return None
    if kind == "fake":
        return nvml.FakeNvml.from_dict(fake_spec or {"gpus": []})
    return nvml.RealNvml()
