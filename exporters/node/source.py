"""`railscope node`: the per-GPU-server exporter (runs as a DaemonSet), a set of collectors:
gpu (NVML: samples, XID events), rdma (sysfs RDMA ports and netdev statistics), ethtool
(per-priority PFC, NIC health), pcie (GPU<->NIC affinity) and podresources (the pod holding each
GPU / VF). Writes gpu_sample, gpu_event, nvlink_sample, gpu_nic_affinity, nic_sample,
nic_priority_sample and gpu_process records. It never changes device state and never talks to the K8s API.

The pod of a GPU or VF is collected, not enriched: the kubelet's pod-resources socket is a
node-local fact that exists only on this host (like sysfs), so the podresources collector reads
it here and the rows leave the node labelled. Transforms (telemetry/transforms) add what is
known cluster-wide (the cluster name), never what only the node can see.
"""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from exporters.node.config import COLLECTORS, NodeConfig
from telemetry.contracts import Batch
from telemetry.errors import ConfigError, UserError
from telemetry.pipeline import BaseSource, ConfigFlags

log = logging.getLogger(__name__)

AFFINITY_EVERY_SECONDS = 3600  # the PCIe tree does not change while running: re-emit hourly
_NVML_REASONS = (
    "uninitialized",
    "invalid_argument",
    "not_supported",
    "no_permission",
    "not_found",
    "driver_not_loaded",
    "timeout",
    "library_not_found",
    "gpu_lost",
    "unknown",
)
# The `reason` label values of railscope_component_failed_total{component="source:node"}:
# COLLECTOR:REASON, plus COLLECTOR:exception when a collector raised.
REASONS: tuple[str, ...] = (
    *(f"gpu:gpu_{r}" for r in _NVML_REASONS),
    "gpu:gpu_lost",
    "gpu:gpu_xid_unknown_device",
    "rdma:missing_device",
    "rdma:malformed_sysfs",
    "rdma:sysfs_read_error",
    "ethtool:malformed_ethtool",
    "ethtool:bad_netdev",
    "ethtool:missing_device",
    "ethtool:no_permission",
    "ethtool:ethtool_ioctl",
    "podresources:podresources_rpc",
    "podresources:malformed_podresources",
    "pcie:missing_device",
    *(f"processes:gpu_{r}" for r in _NVML_REASONS),
    *(f"{c}:exception" for c in COLLECTORS),
)


class NodeSource(BaseSource):
    """Collect GPUs (NVML), RDMA NIC ports (sysfs counters + hw_counters), per-priority PFC and NIC
    health (ethtool statistics via the kernel ioctl), GPU<->NIC PCIe affinity and the pod holding
    each GPU / VF (kubelet pod-resources) on this node. --collector.X / --no-collector.X switch
    one collector (gpu, rdma, ethtool, pcie, podresources) on or off.

    --from DIR replays a captured node: DIR/sys (a sysfs snapshot), DIR/ethtool/<netdev>.txt
    (`ethtool -S` output), DIR/podresources.json (a List response as protobuf JSON) and
    DIR/nvml.json (a fake-GPU spec, used with --gpu-backend fake or auto).

    --gpu-backend: auto = NVML when it loads, else no GPUs (quietly); nvml = NVML, failures
    counted; fake = the NVML fake (spec from --gpu-fake or DIR/nvml.json); none = no GPUs.

    The processes collector lists the processes on each GPU (NVML) with the GPU memory each
    uses, and reads each one's pod from --proc-root/PID/cgroup (the host's /proc; DIR/proc in a
    replay).
    """

    name = "node"
    unit = "records"  # rows read from NVML, sysfs, ethtool and the PCI tree per cycle
    reasons = REASONS
    Config = NodeConfig

    def __init__(
        self,
        *,
        node: str,
        root: Path,
        gpus: Any,
        nics: Any,
        pods: Any,
        from_capture: bool = False,
        procs: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Prefer `live()` / `replay()`. A collector given as None is switched off (except pcie,
        which runs when `nics` or `gpus` give it something to place; see `pcie`). `procs`: the
        `exporters.common.cgroup.PodOwners` that maps a GPU process's pid to its pod. `clock`:
        the wall clock (epoch seconds) that stamps each collection."""
        super().__init__()
        self.clock = clock
        self.node, self.root, self.from_capture = node, root, from_capture
        self.gpus, self.nics, self.pods, self.procs = gpus, nics, pods, procs
        self.pcie = True
        self._affinity_key: Any = None
        self._affinity_at = 0.0

    # --- the two constructors -----------------------------------------------------------------
    @classmethod
    def live(
        cls,
        *,
        sysfs_root: str = "/sys",
        gpu_backend: str = "auto",
        gpu_fake: str | dict[str, Any] | None = None,
        node_name: str | None = None,
        podresources_socket: str = "/var/lib/kubelet/pod-resources/kubelet.sock",
        gpu_resources: list[str] | None = None,
        nic_resources: list[str] | None = None,
        collectors: frozenset[str] | None = None,
        gpu_backend_impl: Any = None,
        ethtool_reader: Any = None,
        xid_thread: bool = False,
        proc_root: str = "/proc",
    ) -> NodeSource:
        """This host: NVML, /sys, the ethtool ioctl and the kubelet socket."""
        from exporters.node import ethtool, podresources, rdma

        on = COLLECTORS.keys() if collectors is None else collectors
        node = _node_name(node_name)
        root = rdma.sysfs_root(sysfs_root)
        spec = _fake_spec(gpu_fake, None)
        gpus = _gpus(node, gpu_backend, spec, gpu_backend_impl, str(gpu_fake), xid_thread, on)
        reader = None
        if "ethtool" in on:
            reader = ethtool_reader if ethtool_reader is not None else ethtool.IoctlEthtool()
        nics = rdma.RdmaCollector(root, node, reader) if "rdma" in on else None
        pods = None
        if "podresources" in on:
            matcher = _matcher(gpu_resources, nic_resources)
            pods = podresources.GrpcPodResources(podresources_socket, matcher)
        src = cls(
            node=node, root=root, gpus=gpus, nics=nics, pods=pods, procs=_procs(proc_root, on)
        )
        src.pcie = "pcie" in on
        return src

    @classmethod
    def replay(
        cls,
        path: str | Path,
        *,
        gpu_backend: str = "auto",
        gpu_fake: str | dict[str, Any] | None = None,
        node_name: str | None = None,
        gpu_resources: list[str] | None = None,
        nic_resources: list[str] | None = None,
        collectors: frozenset[str] | None = None,
        gpu_backend_impl: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> NodeSource:
        """A captured node directory (see `capture.py`): sys/, ethtool/, podresources.json,
        nvml.json. A replay has no live NVML: with `auto` its GPUs come from nvml.json, if any.
        Its samples are stamped by `clock` (epoch seconds; the wall clock by default)."""
        from exporters.node import ethtool, podresources, rdma

        on = COLLECTORS.keys() if collectors is None else collectors
        d = Path(path)
        if not d.is_dir():
            raise UserError(
                f"--from {path}: not a directory (expected a captured node: sys/, ethtool/, ...)"
            )
        root = rdma.sysfs_root(d)
        if not (root / "class").is_dir():
            raise UserError(f"--from {path}: no sysfs snapshot (expected {d}/sys/class/...)")
        node = _node_name(node_name)
        captured = d / "nvml.json"
        spec = _fake_spec(gpu_fake, captured if captured.is_file() else None)
        if gpu_backend == "auto":
            gpu_backend = "fake" if spec is not None else "none"
        where = str(gpu_fake or captured)
        gpus = _gpus(node, gpu_backend, spec, gpu_backend_impl, where, False, on)
        reader = None
        if "ethtool" in on and (d / "ethtool").is_dir():
            reader = ethtool.TextEthtool(d / "ethtool")
        nics = rdma.RdmaCollector(root, node, reader) if "rdma" in on else None
        pods = None
        if "podresources" in on:
            matcher = _matcher(gpu_resources, nic_resources)
            pods = podresources.JsonPodResources(d / "podresources.json", matcher)
        src = cls(
            node=node,
            root=root,
            gpus=gpus,
            nics=nics,
            pods=pods,
            from_capture=True,
            procs=_procs(d / "proc", on),
            clock=clock,
        )
        src.pcie = "pcie" in on
        return src

    @classmethod
    def build(cls, c: NodeConfig, cfg: Any, *, from_path: str | None, once: bool) -> NodeSource:
        common: dict[str, Any] = {
            "gpu_backend": c.gpu_backend,
            "gpu_fake": c.gpu_fake,
            "node_name": c.node_name,
            "gpu_resources": c.gpu_resources,
            "nic_resources": c.nic_resources,
            "collectors": c.collectors.enabled(),
        }
        if from_path:
            return cls.replay(from_path, **common)
        interval = c.interval_seconds or cfg.interval_seconds
        if not once and not 1.0 <= interval <= 60.0:
            raise ConfigError(
                f"interval_seconds: the node exporter collects every 1-60 s, got {interval:g}"
            )
        # a long-running exporter waits for XIDs in a thread so each is stamped on arrival
        return cls.live(
            sysfs_root=c.sysfs_root,
            podresources_socket=c.podresources_socket,
            proc_root=c.proc_root,
            xid_thread=not once,
            **common,
        )

    # --- CLI ----------------------------------------------------------------------------------
    config_flags: ClassVar[ConfigFlags] = {
        "--sysfs-root": ("sysfs_root", "DIR"),
        "--gpu-backend": ("gpu_backend", None),
        "--gpu-fake": ("gpu_fake", "JSON"),
        "--node-name": ("node_name", "NAME"),
        "--podresources-socket": ("podresources_socket", "PATH"),
        "--proc-root": ("proc_root", "DIR"),
    }

    @classmethod
    def add_arguments(cls, p: Any) -> None:
        g = cls.add_config_flags(p)
        g.add_argument(
            "--no-ethtool",
            dest="collector_ethtool",
            action="store_false",
            default=None,
            help="same as --no-collector.ethtool",
        )
        g.add_argument(
            "--capture",
            metavar="DIR",
            help="write a replay bundle of this node (sysfs subset, ethtool -S text, pod-resources "
            "JSON, NVML snapshot) to the empty directory DIR and exit; replay with --from DIR",
        )
        g.add_argument(
            "--no-store",
            action="store_true",
            help="serve /metrics only (the DaemonSet mode): no store is opened and no pyarrow, "
            "numpy, ClickHouse client, polars, Kubernetes client or simulator is imported; with "
            "--once, one cycle",
        )
        c = p.add_argument_group("collectors (all on by default; config: collectors.NAME)")
        for name, help_ in COLLECTORS.items():
            c.add_argument(
                f"--collector.{name}",
                dest=f"collector_{name}",
                action="store_true",
                default=None,
                help=help_,
            )
            c.add_argument(
                f"--no-collector.{name}",
                dest=f"collector_{name}",
                action="store_false",
                default=None,
                help=argparse.SUPPRESS,
            )

    @classmethod
    def fold_args(cls, args: Any, section: dict[str, Any]) -> dict[str, Any]:
        """The `sources.node` section with this command line's flags on top."""
        out = cls.fold_config_flags(args, section)
        switched = {
            n: getattr(args, f"collector_{n}")
            for n in COLLECTORS
            if getattr(args, f"collector_{n}", None) is not None
        }
        if switched:
            if "ethtool" in out and "ethtool" in switched:
                out.pop("ethtool")  # the flag wins over the older `ethtool:` key
            out["collectors"] = {**(out.get("collectors") or {}), **switched}
        return out

    @classmethod
    def run_subcommand(cls, args: Any, cfg: Any, store: Any) -> int | None:
        if getattr(args, "no_store", False) and not (args.output or args.from_path):
            return _serve_metrics_only(args, cfg)
        if not getattr(args, "capture", None):
            return None
        from exporters.node.capture import capture
        from telemetry.registry import build_source

        src = build_source("node", cfg, once=True)
        try:
            summary = capture(src, Path(args.capture))  # type: ignore[arg-type]
        finally:
            src.close()  # type: ignore[attr-defined]
        print(json.dumps(summary))
        return 0

    # --- collection ---------------------------------------------------------------------------
    def _run(self, collector: str, fn: Any, *args: Any) -> Any:
        """Run one collector, timed; its problems are named `collector:reason`."""
        scope = self.problems.scoped(collector)
        t = time.perf_counter()
        try:
            result = fn(*args, scope)
        except Exception as e:  # one collector's bug must not cost the others their data
            scope("exception", f"{type(e).__name__}: {e}")
            log.exception("node %s: collector failed", collector)
            result = None
        self.stats.collectors[collector] = (time.perf_counter() - t, scope.count == 0)
        return result

    def _collect(self) -> list[Batch]:
        ts = int(self.clock() * 1000)
        gpu_rows: list[dict[str, Any]] = []
        gpu_events: list[dict[str, Any]] = []
        nvlink_rows: list[dict[str, Any]] = []
        nic_rows: list[dict[str, Any]] = []
        prio_rows: list[dict[str, Any]] = []
        proc_rows: list[dict[str, Any]] = []
        if self.gpus is not None:
            gpu_rows, gpu_events, nvlink_rows = self._run("gpu", self._gpus, ts) or ([], [], [])
            if self.procs is not None:
                proc_rows = self._run("processes", self._processes, ts) or []
        if self.nics is not None:
            nic_rows, prio_rows = self._run("rdma", self._nics, ts) or ([], [])
            if "ethtool" in self.stats.collectors:  # rdma's own time, without ethtool's
                spent, ok = self.stats.collectors["rdma"]
                eth_spent = self.stats.collectors["ethtool"][0]
                self.stats.collectors["rdma"] = (max(0.0, spent - eth_spent), ok)
        if self.pods is not None:
            assignments = self._run("podresources", self._pods)
            if assignments is not None:
                from exporters.node.podresources import attach

                attach(gpu_rows, nic_rows, assignments, self.stats)
        affinity: list[dict[str, Any]] = []
        if self.pcie:
            affinity = self._run("pcie", self._affinity, ts, gpu_rows, nic_rows) or []
        out = [
            Batch.from_rows("gpu_sample", gpu_rows),
            Batch.from_rows("gpu_event", gpu_events),
            Batch.from_rows("nic_sample", nic_rows),
            Batch.from_rows("nic_priority_sample", prio_rows),
            Batch.from_rows("gpu_nic_affinity", affinity),
            Batch.from_rows("gpu_process", proc_rows),
            Batch.from_rows("nvlink_sample", nvlink_rows),
        ]
        self.stats.received += sum(b.num_rows for b in out)
        if self.from_capture and self.nics is not None:  # a capture is read once: close its files
            self.nics.close()
        return [b for b in out if b.num_rows]

    def _gpus(self, ts: int, problem: Any) -> Any:
        """gpu: the GPUs' samples and events, then their NVLinks (same NVML session, same
        problems)."""
        rows, events = self.gpus.collect(ts, problem)
        return rows, events, self.gpus.nvlinks(ts, problem)

    def _nics(self, ts: int, problem: Any) -> Any:
        """rdma, with the ethtool statistics it reads per port reported as their own collector."""
        eth = self.problems.scoped("ethtool") if self.nics.ethtool is not None else None
        try:
            return self.nics.collect(ts, problem, eth)
        finally:
            if eth is not None:
                self.stats.collectors["ethtool"] = (self.nics.ethtool_seconds, eth.count == 0)

    def _processes(self, ts: int, problem: Any) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self.gpus.processes(ts, self.procs.owner, problem)
        self.procs.retain({r["pid"] for r in rows})  # an ended process's pid may be reused
        return rows

    def _pods(self, problem: Any) -> Any:
        from exporters.node.podresources import PodResourcesError

        try:
            return self.pods.fetch()
        except PodResourcesError as e:
            problem(e.reason, str(e))
            return None

    def _affinity(
        self, ts: int, gpu_rows: list[dict[str, Any]], nic_rows: list[dict[str, Any]], problem: Any
    ) -> list[dict[str, Any]]:
        from exporters.node import pcie

        if self.gpus is None or self.gpus.backend is None or self.gpus.absent:
            gpus = list(enumerate(pcie.sysfs_gpus(self.root)))  # no NVML: GPUs from the PCI tree
        else:
            gpus = sorted(
                {
                    (r["gpu"], r["pci_bus_id"])
                    for r in gpu_rows
                    if not r.get("mig") and r.get("pci_bus_id")
                }
            )
        nics = [pcie.Nic(r["device"], r["netdev"], r.get("_pci", "")) for r in nic_rows]
        key = (tuple(gpus), tuple(nics))
        now = time.monotonic()
        if key == self._affinity_key and now - self._affinity_at < AFFINITY_EVERY_SECONDS:
            return []
        rows = pcie.affinity(self.root, self.node, ts, gpus, nics)
        for r in rows:
            if not r["gpu_pci"] or not pcie.pci_chain(self.root, r["gpu_pci"]):
                problem(
                    "missing_device",
                    f"GPU {r['gpu']} ({r['gpu_pci']}) is not in {self.root}/bus/pci/devices",
                )
        self._affinity_key, self._affinity_at = key, now
        return rows

    def close(self) -> None:
        for part in (self.gpus, self.nics, self.pods):
            if part is not None:
                part.close()
        closer = getattr(getattr(self.nics, "ethtool", None), "close", None)
        if closer is not None:
            closer()


def _procs(proc_root: str | Path, on: Any) -> Any:
    """The pid -> pod mapping of the processes collector, or None when off."""
    if "processes" not in on:
        return None
    from exporters.common.cgroup import PodOwners

    return PodOwners(proc_root)


def _node_name(name: str | None) -> str:
    return name or os.environ.get("NODE_NAME") or socket.gethostname()


def _matcher(gpu_resources: list[str] | None, nic_resources: list[str] | None) -> Any:
    from exporters.node.podresources import Matcher

    defaults = NodeConfig()
    return Matcher(
        defaults.gpu_resources if gpu_resources is None else gpu_resources,
        defaults.nic_resources if nic_resources is None else nic_resources,
    )


class _NoPandas:
    """A meta-path finder refusing `pandas`: pyarrow imports pandas (when it is installed) on its
    first list -> array conversion only to ask whether the input is a pandas object. railscope
    never uses pandas; in the node exporter that import cost ~50 MiB and ~250 ms of CPU."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("pandas is not used by railscope node", name=name)


def without_pandas() -> None:
    """Keep pandas out of this process (unless something imported it already)."""
    if "pandas" not in sys.modules and not any(isinstance(f, _NoPandas) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())


def _serve_metrics_only(args: Any, cfg: Any) -> int:
    """`railscope node --no-store`: collect every interval and serve /metrics; nothing else.
    Imports the node collectors, the pipeline and the Prometheus sink only (see
    tests/integration/node/test_footprint.py)."""
    from telemetry.registry import build_source
    from telemetry.sinks.configured import configured_pipeline, serve_metrics

    without_pandas()
    src: Any = build_source("node", cfg, once=bool(args.once))
    pipeline, prom = configured_pipeline(cfg, [src], [], metrics=True)
    assert prom is not None
    try:
        if args.once:
            pipeline.run_once()
            sys.stdout.write(prom.render())
            return 0 if src.stats.last_success else 1
        log.info("node: serving /metrics on %s:%s, no store", *serve_metrics(prom, cfg))
        pipeline.run(src.interval_seconds)
    finally:
        pipeline.close()
    return 0


def _fake_spec(gpu_fake: str | dict[str, Any] | None, captured: Path | None) -> Any:
    if isinstance(gpu_fake, dict):
        return gpu_fake
    if gpu_fake:
        return _load_json(Path(gpu_fake), "GPU fake spec")
    if captured is not None:
        return _load_json(captured, "GPU fake spec")
    return None


def _gpus(
    node: str, backend: str, spec: Any, impl: Any, where: str, xid_thread: bool, on: Any
) -> Any:
    """The gpu collector, or None when it is switched off."""
    if "gpu" not in on:
        return None
    from exporters.node import gpu

    if backend == "fake" and spec is None and impl is None:
        raise UserError(
            "--gpu-backend fake needs --gpu-fake FILE (or nvml.json in the --from directory)"
        )
    if backend == "fake" and impl is None:
        _check_fake_spec(spec, where)
    chosen = impl if impl is not None else gpu.make_backend(backend, spec)
    return gpu.GpuCollector(chosen, node, quiet_absent=backend == "auto", event_thread=xid_thread)


def _check_fake_spec(spec: Any, where: str) -> None:
    """A typo in a fake-GPU spec must be an error naming it, not a silently unsupported field."""
    from exporters.node.gpu import load_fields

    known = {f.name for f in load_fields()}
    gpus = spec.get("gpus") if isinstance(spec, dict) else None
    if not isinstance(gpus, list):
        raise UserError(f"{where}: GPU fake spec needs a list under 'gpus'")
    for i, g in enumerate(gpus):
        if not isinstance(g, dict):
            raise UserError(f"{where}: gpus[{i}] is not an object")
        for name, value in (g.get("fields") or {}).items():
            if name not in known:
                raise UserError(
                    f"{where}: gpus[{i}].fields.{name}: not a GPU field (see gpu_fields.csv)"
                )
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise UserError(f"{where}: gpus[{i}].fields.{name}: {value!r} is not a number")
        for name in g.get("unsupported") or []:
            if name not in known:
                raise UserError(f"{where}: gpus[{i}].unsupported: {name!r} is not a GPU field")


def _load_json(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{path}: {what} not found") from None
    except ValueError as e:
        raise UserError(f"{path}: {what} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: {what} must be a JSON object")
    return data


# argparse shows the docstring as the command's description: drop the source indentation.
NodeSource.__doc__ = inspect.cleandoc(NodeSource.__doc__ or "")

__all__ = ["REASONS", "NodeSource"]
