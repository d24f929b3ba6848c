"""`railscope node`: the per-GPU-server exporter (runs as a DaemonSet). Reads NVML (GPUs, XID
events), sysfs (RDMA ports, netdev statistics, PCIe tree), ethtool statistics (per-priority PFC)
and the kubelet pod-resources socket; writes gpu_sample, gpu_event, gpu_nic_affinity, nic_sample
and nic_priority_sample records. It never changes device state and never talks to the K8s API.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from telemetry.errors import ConfigError, UserError
from telemetry.pipeline import BaseSource, Batch, register_source

log = logging.getLogger(__name__)

__all__ = ["NodeSource"]

GpuBackendName = Literal["auto", "nvml", "fake", "none"]
AFFINITY_EVERY_SECONDS = 3600  # the PCIe tree does not change while running: re-emit hourly


@register_source(
    "node",
    help="GPU (NVML), RDMA NIC, per-priority PFC, GPU<->NIC affinity and GPU/VF->pod on this node",
    kinds=["gpu_sample", "gpu_event", "gpu_nic_affinity", "nic_sample", "nic_priority_sample"],
)
class NodeSource(BaseSource):
    """Collect GPUs (NVML), RDMA NIC ports (sysfs counters + hw_counters), per-priority PFC and NIC
    health (ethtool statistics via the kernel ioctl), GPU<->NIC PCIe affinity and the pod holding
    each GPU / VF (kubelet pod-resources) on this node.

    --from DIR replays a captured node: DIR/sys (a sysfs snapshot), DIR/ethtool/<netdev>.txt
    (`ethtool -S` output), DIR/podresources.json (a List response as protobuf JSON) and
    DIR/nvml.json (a fake-GPU spec, used with --gpu-backend fake or auto).

    --gpu-backend: auto = NVML when it loads, else no GPUs (quietly); nvml = NVML, failures
    counted; fake = the NVML fake (spec from --gpu-fake or DIR/nvml.json); none = no GPUs.
    """

    name = "node"

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        node_name: str | None = Field(
            None, description="Node name on every record (default $NODE_NAME, else hostname)."
        )
        sysfs_root: str = Field(
            "/sys", description="sysfs mount (the DaemonSet mounts the host's /sys here)."
        )
        gpu_backend: GpuBackendName = Field("auto", description="auto | nvml | fake | none")
        gpu_fake: str | None = Field(
            None, description="JSON spec of the fake GPUs (gpu_backend: fake)."
        )
        ethtool: bool = Field(
            True, description="Read ethtool statistics (per-priority PFC, NIC health)."
        )
        podresources_socket: str = Field(
            "/var/lib/kubelet/pod-resources/kubelet.sock",
            description="kubelet pod-resources socket.",
        )
        gpu_resources: list[str] = Field(
            ["nvidia.com/gpu", "nvidia.com/mig-"],
            description="Resource names (or prefixes ending in - or /) that are GPUs.",
        )
        nic_resources: list[str] = Field(
            ["nvidia.com/rdma_", "openshift.io/", "intel.com/"],
            description="Resource names/prefixes (ending in -, _ or /) of SR-IOV VFs / RDMA devices.",
        )

    @classmethod
    def add_arguments(cls, p: Any) -> None:
        g = p.add_argument_group("node options")
        g.add_argument(
            "--sysfs-root", metavar="DIR", help="sysfs to read in a live run (default /sys)"
        )
        g.add_argument(
            "--gpu-backend",
            choices=["auto", "nvml", "fake", "none"],
            help="GPU backend (default auto)",
        )
        g.add_argument("--gpu-fake", metavar="JSON", help="fake GPU spec for --gpu-backend fake")
        g.add_argument(
            "--node-name",
            metavar="NAME",
            help="node name on every record (default $NODE_NAME / hostname)",
        )
        g.add_argument("--podresources-socket", metavar="PATH", help="kubelet pod-resources socket")
        g.add_argument("--no-ethtool", action="store_true", help="do not read ethtool statistics")
        g.add_argument(
            "--capture",
            metavar="DIR",
            help="write a replay bundle of this node (sysfs subset, ethtool -S text, pod-resources "
            "JSON, NVML snapshot) to the empty directory DIR and exit; replay with --from DIR",
        )

    @classmethod
    def run_subcommand(cls, args: Any, cfg: Any) -> int | None:
        if not getattr(args, "capture", None):
            return None
        from exporters.node.capture import capture

        src = cls.from_args(args, cfg)
        try:
            summary = capture(src, Path(args.capture))
        finally:
            src.close()
        print(json.dumps(summary))
        return 0

    @classmethod
    def from_args(cls, args: Any, cfg: Any) -> NodeSource:
        c = cfg.source("node")
        long_running = not (
            args.once or args.from_path or args.output or getattr(args, "capture", None)
        )
        if long_running and not 1.0 <= cfg.interval_seconds <= 60.0:
            raise ConfigError(
                f"interval_seconds: the node exporter collects every 1-60 s, got {cfg.interval_seconds:g}"
            )
        return cls(
            sysfs_root=args.sysfs_root or c.sysfs_root,
            from_path=args.from_path,
            gpu_backend=args.gpu_backend or c.gpu_backend,
            gpu_fake=args.gpu_fake or c.gpu_fake,
            node_name=args.node_name or c.node_name,
            ethtool=c.ethtool and not args.no_ethtool,
            podresources_socket=args.podresources_socket or c.podresources_socket,
            gpu_resources=c.gpu_resources,
            nic_resources=c.nic_resources,
            # a long-running exporter waits for XIDs in a thread so each is stamped on arrival
            xid_thread=long_running,
        )

    def __init__(
        self,
        *,
        sysfs_root: str = "/sys",
        from_path: str | None = None,
        gpu_backend: str = "auto",
        gpu_fake: str | dict[str, Any] | None = None,
        node_name: str | None = None,
        ethtool: bool = True,
        podresources_socket: str = "/var/lib/kubelet/pod-resources/kubelet.sock",
        gpu_resources: list[str] | None = None,
        nic_resources: list[str] | None = None,
        ethtool_reader: Any = None,
        gpu_backend_impl: Any = None,
        xid_thread: bool = False,
    ) -> None:
        super().__init__()
        from exporters.node import ethtool as eth
        from exporters.node import gpu, podresources, rdma

        self.node = node_name or os.environ.get("NODE_NAME") or socket.gethostname()
        replay = Path(from_path) if from_path else None
        self.replay = replay is not None
        if replay is not None and not replay.is_dir():
            raise UserError(
                f"--from {from_path}: not a directory (expected a captured node: sys/, ethtool/, ...)"
            )
        root = rdma.sysfs_root(replay if replay is not None else sysfs_root)
        if replay is not None and not (root / "class").is_dir():
            raise UserError(
                f"--from {from_path}: no sysfs snapshot (expected {replay}/sys/class/...)"
            )
        self.root = root

        spec: dict[str, Any] | None = None
        captured_gpus = replay / "nvml.json" if replay is not None else None
        if isinstance(gpu_fake, dict):
            spec = gpu_fake
        elif gpu_fake:
            spec = _load_json(Path(gpu_fake), "GPU fake spec")
        elif captured_gpus is not None and captured_gpus.is_file():
            spec = _load_json(captured_gpus, "GPU fake spec")
        if replay is not None and gpu_backend == "auto":
            # A replay has no live NVML: the captured GPUs come from nvml.json, if any.
            gpu_backend = "fake" if spec is not None else "none"
        if gpu_backend == "fake" and spec is None:
            raise UserError(
                "--gpu-backend fake needs --gpu-fake FILE (or nvml.json in the --from directory)"
            )
        if gpu_backend == "fake" and gpu_backend_impl is None:
            _check_fake_spec(spec, str(gpu_fake or captured_gpus))
        backend = (
            gpu_backend_impl
            if gpu_backend_impl is not None
            else gpu.make_backend(gpu_backend, spec)
        )
        self.gpus = gpu.GpuCollector(
            backend, self.node, quiet_absent=gpu_backend == "auto", event_thread=xid_thread
        )

        reader = ethtool_reader
        if reader is None and ethtool:
            if replay is not None:
                reader = (
                    eth.TextEthtool(replay / "ethtool") if (replay / "ethtool").is_dir() else None
                )
            else:
                reader = eth.IoctlEthtool()
        self.nics = rdma.RdmaCollector(root, self.node, reader)

        defaults = self.Config.model_validate({})
        matcher = podresources.Matcher(
            defaults.gpu_resources if gpu_resources is None else gpu_resources,
            defaults.nic_resources if nic_resources is None else nic_resources,
        )
        self.pods: Any
        if replay is not None:
            self.pods = podresources.JsonPodResources(replay / "podresources.json", matcher)
        else:
            self.pods = podresources.GrpcPodResources(podresources_socket, matcher)
        self._affinity_key: Any = None
        self._affinity_at = 0.0
        self._logged: dict[str, float] = {}

    # --- self-reporting ---------------------------------------------------------------------
    def _problem_for(self, collector: str, seen: list[str]) -> Any:
        def problem(reason: str, message: str) -> None:
            seen.append(reason)
            self.stats.error(f"{collector}:{reason}")
            # A broken file stays broken: log it once per 10 minutes, count it every time.
            now = time.monotonic()
            if now - self._logged.get(message, -1e9) > 600:
                self._logged[message] = now
                log.warning("node %s: %s", collector, message)

        return problem

    def _run(self, collector: str, fn: Any, *args: Any) -> Any:
        seen: list[str] = []
        t = time.perf_counter()
        try:
            result = fn(*args, self._problem_for(collector, seen))
        except Exception as e:  # one collector's bug must not cost the others their data
            seen.append("exception")
            self.stats.error(f"{collector}:exception")
            log.exception("node %s: collector failed: %s", collector, e)
            result = None
        self.stats.extra[f"collector_{collector}_duration_seconds"] = time.perf_counter() - t
        self.stats.extra[f"collector_{collector}_success"] = 0.0 if seen else 1.0
        return result

    # --- collection -------------------------------------------------------------------------
    def _collect(self) -> list[Batch]:
        ts = int(time.time() * 1000)
        gpu_rows, gpu_events = self._run("gpu", self.gpus.collect, ts) or ([], [])
        nic_rows, prio_rows = self._run("rdma", self.nics.collect, ts) or ([], [])
        assignments = self._run("podresources", self._pods)
        if assignments is not None:
            _attach(gpu_rows, nic_rows, assignments, self.stats)
        affinity = self._run("pcie", self._affinity, ts, gpu_rows, nic_rows) or []
        out = [
            Batch.from_rows("gpu_sample", gpu_rows),
            Batch.from_rows("gpu_event", gpu_events),
            Batch.from_rows("nic_sample", nic_rows),
            Batch.from_rows("nic_priority_sample", prio_rows),
            Batch.from_rows("gpu_nic_affinity", affinity),
        ]
        n = sum(b.num_rows for b in out)
        self.stats.received += n
        if self.replay:  # a capture is read once: keeping its files open buys nothing
            self.nics.close()
        return [b for b in out if b.num_rows]

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

        if self.gpus.backend is None or self.gpus.absent:
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
        self.gpus.close()
        self.nics.close()
        self.pods.close()
        closer = getattr(self.nics.ethtool, "close", None)
        if closer is not None:
            closer()


def _attach(
    gpu_rows: list[dict[str, Any]], nic_rows: list[dict[str, Any]], a: Any, stats: Any
) -> None:
    """Label GPUs (by GPU/MIG UUID) and NICs/VFs (by PCI address or RDMA device name) with the
    pod holding them. This runs on the node because the kubelet socket exists only there."""
    for r in gpu_rows:
        o = a.get(r.get("uuid", ""))
        if o is not None:
            r.update(pod=o.pod, namespace=o.namespace)
    for r in nic_rows:
        o = a.get(r.get("_pci", ""), r["device"])
        if o is not None:
            r.update(pod=o.pod, namespace=o.namespace, container=o.container)
    for res, n in a.allocatable.items():
        stats.extra[f"allocatable_{res.replace('.', '_').replace('/', '_').replace('-', '_')}"] = (
            float(n)
        )


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
