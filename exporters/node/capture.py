"""`railscope node --capture DIR`: write a replay bundle of this node — the sysfs files the node
source reads (symlinks kept as the kernel lays them out), `ethtool -S`-format text per netdev, the
pod-resources List response as protobuf JSON and an NVML snapshot as a fake-GPU spec — so that
`railscope node --from DIR` replays it through the same parsers.

It only reads the node; it writes nothing outside DIR and refuses a DIR that is not empty.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Protocol

from exporters.node import nvml, pcie
from exporters.node.ethtool import EthtoolError
from telemetry.errors import UserError


class Collectors(Protocol):
    """What a capture reads through: a node source's root and its collectors (NodeSource; None
    where switched off)."""

    root: Path
    gpus: Any
    nics: Any
    procs: Any
    pods: Any


_PCI_ATTRS = ("vendor", "device", "class", "numa_node")
_PORT_ATTRS = ("state", "phys_state", "rate", "link_layer")


class _Copier:
    """Copies paths below one sysfs root into another, recreating every symlink met on the way
    (class/infiniband/mlx5_0 -> ../../devices/...) so the copy resolves like the original."""

    def __init__(self, src: Path, dst: Path) -> None:
        self.src, self.dst = src, dst
        self.files = 0

    def copy(self, rel: str) -> None:
        parts = Path(rel).parts
        cur = ""
        for i, part in enumerate(parts):
            cur = os.path.join(cur, part)
            s = self.src / cur
            if os.path.islink(s):
                d = self.dst / cur
                target = os.readlink(s)
                if not os.path.lexists(d):
                    d.parent.mkdir(parents=True, exist_ok=True)
                    os.symlink(target, d)
                # continue from the link's target, relative to the root
                resolved = os.path.normpath(os.path.join(os.path.dirname(cur), target))
                if resolved.startswith(".."):
                    return  # points outside the root: keep the link, nothing to copy
                self.copy(os.path.join(resolved, *parts[i + 1 :]))
                return
        s = self.src / rel
        if s.is_file():
            d = self.dst / rel
            d.parent.mkdir(parents=True, exist_ok=True)
            try:
                shutil.copyfile(s, d)
                self.files += 1
            except OSError:
                pass  # a write-only or vanished attribute: leave it out of the capture
        elif s.is_dir():
            (self.dst / rel).mkdir(parents=True, exist_ok=True)

    def copy_dir_files(self, rel: str) -> None:
        try:
            names = sorted(os.listdir(self.src / rel))
        except OSError:
            return
        for n in names:
            self.copy(os.path.join(rel, n))


def capture(source: Collectors, out: Path) -> dict[str, Any]:
    """Write the bundle; returns a summary for the CLI."""
    if out.exists() and any(out.iterdir()):
        raise UserError(f"--capture {out}: directory is not empty")
    out.mkdir(parents=True, exist_ok=True)
    root = source.root
    cp = _Copier(root, out / "sys")
    problems: list[str] = []

    def problem(reason: str, message: str) -> None:
        problems.append(f"{reason}: {message}")

    ports = source.nics.ports(problem) if source.nics is not None else []
    pci_devices: set[str] = set()
    netdevs: set[str] = set()
    for p in ports:
        base = f"class/infiniband/{p.device}"
        for f in ("hca_type", "fw_ver", "board_id", "node_guid"):
            cp.copy(f"{base}/{f}")
        for f in _PORT_ATTRS:
            cp.copy(f"{base}/ports/{p.port}/{f}")
        cp.copy_dir_files(f"{base}/ports/{p.port}/counters")
        cp.copy_dir_files(f"{base}/ports/{p.port}/hw_counters")
        if p.pci:
            pci_devices.add(p.pci)
            cp.copy(f"{base}/device")
        if p.netdev:
            netdevs.add(p.netdev)
            cp.copy(f"{base}/device/net/{p.netdev}/dev_port")
            cp.copy_dir_files(f"class/net/{p.netdev}/statistics")
            for f in ("operstate", "speed", "mtu", "address"):
                cp.copy(f"class/net/{p.netdev}/{f}")

    gpu_spec = _nvml_snapshot(source, problem)
    gpus = [g["pci_bus_id"] for g in gpu_spec["gpus"]] if gpu_spec else pcie.sysfs_gpus(root)
    for addr in [*pci_devices, *(nvml.normalise_pci(g) for g in gpus)]:
        # the device and the bridges above it: the PCIe path is what the affinity reads
        for a in pcie.pci_chain(root, addr) or [addr]:
            for f in _PCI_ATTRS:
                cp.copy(f"bus/pci/devices/{a}/{f}")
    if gpu_spec is not None:
        (out / "nvml.json").write_text(json.dumps(gpu_spec, indent=1) + "\n")
    cgroups = 0
    if source.procs is not None and gpu_spec is not None:
        # each GPU process's cgroup file: the replay maps its pid to the same pod (DIR/proc)
        for pid in sorted({p["pid"] for g in gpu_spec["gpus"] for p in g.get("processes", ())}):
            try:
                text = (source.procs.proc_root / str(pid) / "cgroup").read_text(errors="replace")
            except OSError:
                continue  # ended since NVML listed it
            (out / "proc" / str(pid)).mkdir(parents=True, exist_ok=True)
            (out / "proc" / str(pid) / "cgroup").write_text(text)
            cgroups += 1

    ethtool_files = 0
    reader = source.nics.ethtool if source.nics is not None else None
    if reader is not None:
        for nd in sorted(netdevs):
            try:
                stats = reader.stats(nd)
            except EthtoolError as e:
                problem(e.reason, str(e))
                continue
            if stats:
                d = out / "ethtool"
                d.mkdir(exist_ok=True)
                body = "".join(f"     {k}: {v}\n" for k, v in stats.items())
                (d / f"{nd}.txt").write_text("NIC statistics:\n" + body)
                ethtool_files += 1

    pods = _podresources_json(source, problem)
    if pods is not None:
        (out / "podresources.json").write_text(pods)
    return {
        "dir": str(out),
        "sysfs_files": cp.files,
        "ethtool_files": ethtool_files,
        "gpus": len(gpu_spec["gpus"]) if gpu_spec else 0,
        "process_cgroups": cgroups,
        "podresources": pods is not None,
        "problems": problems,
    }


def _nvml_snapshot(source: Collectors, problem: Any) -> dict[str, Any] | None:
    """The GPUs as a FakeNvml spec: identities, raw field values, what is not supported."""
    col = source.gpus
    b = col.backend if col is not None else None
    if b is None:
        return None
    try:
        b.init()
    except nvml.NvmlError as e:
        if e.code != nvml.LIBRARY_NOT_FOUND:
            problem(f"gpu_{e.reason}", str(e))
        return None
    gpus: list[dict[str, Any]] = []
    try:
        for i in range(b.device_count()):
            try:
                ident = b.identity(i)
            except nvml.NvmlError as e:
                problem(f"gpu_{e.reason}", f"GPU {i}: {e}")
                gpus.append({"uuid": f"GPU-unknown-{i}", "lost": True})
                continue
            fields: dict[str, float] = {}
            unsupported: list[str] = []
            for f in col.fields:
                try:
                    fields[f.name] = b.read(i, f.name)
                except nvml.NvmlError as e:
                    if e.code == nvml.NOT_SUPPORTED:
                        unsupported.append(f.name)
            procs: list[dict[str, Any]] = []
            for type_ in nvml.PROCESS_TYPES if source.procs is not None else ():
                try:
                    listed = b.processes(i, type_)
                except nvml.NvmlError as e:
                    if e.code == nvml.NOT_SUPPORTED:
                        unsupported.append(f"{type_}_processes")
                    continue
                procs += [
                    {"pid": p.pid, "type": type_, "used_memory_bytes": p.used_memory_bytes,
                     "mig": p.mig}
                    for p in listed
                ]  # fmt: skip
            gpus.append(
                {
                    "uuid": ident.uuid,
                    "model": ident.model,
                    "pci_bus_id": ident.pci_bus_id,
                    "fields": fields,
                    "unsupported": unsupported,
                    "processes": procs,
                }
            )
    finally:
        with contextlib.suppress(nvml.NvmlError):
            b.shutdown()
    return {"_comment": "captured by `railscope node --capture`: raw NVML units", "gpus": gpus}


def _podresources_json(source: Collectors, problem: Any) -> str | None:
    from exporters.node.podresources import PodResourcesError

    raw = getattr(source.pods, "raw", None)
    if raw is None:
        return None
    try:
        got = raw()
    except PodResourcesError as e:
        problem(e.reason, str(e))
        return None
    if got is None:
        return None
    from google.protobuf import json_format

    listing, alloc = got
    data = json_format.MessageToDict(listing)
    if alloc is not None:
        data["allocatable"] = json_format.MessageToDict(alloc)
    return json.dumps(data, indent=1) + "\n"
