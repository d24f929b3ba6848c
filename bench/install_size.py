"""Disk footprint of what the node exporter needs, against railscope's whole install: the Python
distributions a `railscope node --no-store` process imports (one cycle on the 8-GPU/8-NIC fixture,
plus what the live DaemonSet loads besides: aiohttp to serve /metrics, grpc + protobuf for the
kubelet's pod-resources socket, pynvml for real GPUs), summed from their installed files, and the
same sum over every distribution railscope requires (its dependency closure, extras excluded).
This is what the Python layer of a node-only image would hold; no container engine is needed.

    python bench/install_size.py

The last line printed is one JSON object (sizes in MiB).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.sysfs_fixture import node8  # noqa: E402

NODE8 = node8()
_CHILD = """
import json, sys
from telemetry.cli import main
rc = main(json.loads(sys.argv[1]))
import aiohttp.web, grpc, pynvml  # /metrics server, kubelet pod-resources socket, real NVML
import exporters.node.podresources_v1_pb2
print(json.dumps({"rc": rc, "modules": sorted({m.split(".")[0] for m in sys.modules})}))
"""
ARGS = ["node", "--no-store", "--once", "--sysfs-root", str(NODE8 / "sys"), "--gpu-backend", "fake",
        "--gpu-fake", str(NODE8 / "nvml.json"), "--podresources-socket", "/nonexistent/kubelet.sock"]  # fmt: skip


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _mib(dists: set[str]) -> float:
    total = 0
    for name in dists:
        d = metadata.distribution(name)
        total += sum(
            p.stat().st_size for f in d.files or () if (p := Path(d.locate_file(f))).is_file()
        )
    return round(total / 2**20, 1)


def _requirement(spec: str) -> str:
    return re.split(r"[ ;<>=!\\[~(]", spec, maxsplit=1)[0]


def closure(roots: list[str]) -> set[str]:
    seen: dict[str, str] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if _key(name) in seen:
            continue
        try:
            d = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen[_key(name)] = name
        todo += [_requirement(r) for r in d.requires or () if "extra ==" not in r]
    return set(seen.values())


def main() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(ARGS)],
        capture_output=True, text=True, check=True, cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    owners = metadata.packages_distributions()
    full = closure(
        [_requirement(r) for r in metadata.requires("railscope") or () if "extra ==" not in r]
    )
    # only what railscope requires: grpc imports grpc_tools when a test tool installed it, and
    # site imports setuptools' hook
    required = {_key(d) for d in full}
    node = {d for m in doc["modules"] for d in owners.get(m, ()) if _key(d) in required}
    biggest = sorted(full, key=lambda d: -_mib({d}))[:6]
    print(json.dumps({
        "bench": "install_size",
        "python": sys.version.split()[0],
        "node_dists": sorted(node, key=str.lower),
        "node_mib": _mib(node),
        "full_dists": len(full),
        "full_mib": _mib(full),
        "full_largest_mib": {d: _mib({d}) for d in biggest},
    }))  # fmt: skip


if __name__ == "__main__":
    main()
