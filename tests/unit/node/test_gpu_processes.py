"""Per-process GPU memory (issue 15, item 3): NVML's running compute/graphics process lists behind
the GpuBackend Protocol, the fake's NVML semantics, and pid -> pod through /proc/PID/cgroup (the
NCCL source's mapping, `exporters.nccl.attribution`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from exporters.nccl.attribution import Attributor
from exporters.node import nvml
from exporters.node.gpu import GpuCollector
from telemetry.contracts import Batch
from telemetry.records import GPU_PROCESS
from telemetry.sinks.prometheus import render_prometheus

from .conftest import NODE8, Problems

UID = "3f1c2a4e-9b1d-4c6e-8f00-1234567890ab"
CONTAINER = "a" * 64
# cgroup v2, systemd driver: what the kubelet writes for a burstable pod's containerd container
CGROUP = (
    "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
    f"{UID.replace('-', '_')}.slice/cri-containerd-{CONTAINER}.scope\n"
)


def spec(model: str = "NVIDIA H100 80GB HBM3", **gpu: object) -> dict:
    return {
        "gpus": [
            {
                "uuid": "GPU-0",
                "model": model,
                "fields": {"power_watts": 300_000},
                "processes": [
                    {"pid": 4242, "type": "compute", "used_memory_bytes": 2 * 2**30},
                    {"pid": 4243, "type": "compute", "used_memory_bytes": None},
                    {"pid": 4242, "type": "graphics", "used_memory_bytes": 2 * 2**30},
                ],
                **gpu,
            }
        ]
    }


def test_fake_lists_processes_with_nvml_semantics() -> None:
    f = nvml.FakeNvml.from_dict(spec())
    with pytest.raises(nvml.NvmlError) as e:
        f.processes(0, "compute")
    assert e.value.code == nvml.UNINITIALIZED  # like every NVML call before nvmlInit
    f.init()
    assert f.processes(0, "compute") == [
        nvml.GpuProcess(4242, 2 * 2**30),
        nvml.GpuProcess(4243, None),  # NVML_VALUE_NOT_AVAILABLE (WDDM/WSL, MIG unprivileged)
    ]
    assert f.processes(0, "graphics") == [nvml.GpuProcess(4242, 2 * 2**30)]
    with pytest.raises(nvml.NvmlError) as e:
        f.processes(0, "mps")
    assert e.value.code == nvml.NOT_SUPPORTED
    g = nvml.FakeNvml.from_dict(spec(unsupported=["graphics_processes"]))
    g.init()
    with pytest.raises(nvml.NvmlError) as e:
        g.processes(0, "graphics")
    assert e.value.code == nvml.NOT_SUPPORTED
    assert len(g.processes(0, "compute")) == 2
    f.lose(0)
    with pytest.raises(nvml.NvmlError) as e:
        f.processes(0, "compute")
    assert e.value.code == nvml.GPU_IS_LOST


def test_fake_applies_the_per_model_table_to_process_lists(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = (("NVIDIA GeForce", frozenset({"compute_processes"})), *nvml.MODEL_UNSUPPORTED)
    monkeypatch.setattr(nvml, "MODEL_UNSUPPORTED", table)
    f = nvml.FakeNvml.from_dict(spec("NVIDIA GeForce RTX 4090"))
    f.init()
    with pytest.raises(nvml.NvmlError) as e:
        f.processes(0, "compute")
    assert e.value.code == nvml.NOT_SUPPORTED


def _proc_root(tmp_path: Path, pids: dict[int, str]) -> Path:
    for pid, text in pids.items():
        (tmp_path / "proc" / str(pid)).mkdir(parents=True)
        (tmp_path / "proc" / str(pid) / "cgroup").write_text(text)
    return tmp_path / "proc"


def test_collector_rows_carry_the_pod_of_each_process(tmp_path: Path, problems: Problems) -> None:
    fake = nvml.FakeNvml.from_dict(spec())
    col = GpuCollector(fake, "node-1")
    owners = Attributor(_proc_root(tmp_path, {4242: CGROUP, 4243: "0::/system.slice/x.scope\n"}))
    col.collect(1_700_000_000_000, problems)
    rows = col.processes(1_700_000_000_000, owners.owner, problems)
    assert problems.items == []
    got = {(r["pid"], r["type"]): r for r in rows}
    assert set(got) == {(4242, "compute"), (4243, "compute"), (4242, "graphics")}
    assert got[4242, "compute"]["pod_uid"] == UID
    assert got[4242, "compute"]["container_id"] == CONTAINER
    assert got[4242, "compute"]["used_memory_bytes"] == 2 * 2**30
    assert got[4242, "compute"]["uuid"] == "GPU-0" and got[4242, "compute"]["gpu"] == 0
    assert got[4243, "compute"]["pod_uid"] == ""  # a host process: no pod
    assert got[4243, "compute"]["used_memory_bytes"] is None

    # /metrics: the unavailable value is absent, never a sentinel
    text = render_prometheus([Batch.from_rows(GPU_PROCESS, rows)])
    lines = [ln for ln in text.splitlines() if ln.startswith("railscope_gpu_process_")]
    assert len(lines) == 2, lines
    assert (
        'railscope_gpu_process_used_memory_bytes{cluster="",container_id="' + CONTAINER + '",'
        'gpu="0",mig="",node="node-1",pid="4242",pod_uid="' + UID + '",type="compute",'
        'uuid="GPU-0"} 2.147483648e+09'
    ) in lines


def test_a_list_the_gpu_cannot_give_is_asked_once(tmp_path: Path, problems: Problems) -> None:
    fake = nvml.FakeNvml.from_dict(spec(unsupported=["graphics_processes", "compute_processes"]))
    col = GpuCollector(fake, "n")
    col.collect(0, problems)
    owners = Attributor(tmp_path)
    assert col.processes(0, owners.owner, problems) == []
    calls = fake.calls
    assert col.processes(0, owners.owner, problems) == []
    assert fake.calls == calls  # NOT_SUPPORTED is remembered, like a field
    assert problems.items == []


def test_a_lost_gpu_lists_nothing_and_reports_once(problems: Problems) -> None:
    fake = nvml.FakeNvml.from_dict(spec())
    col = GpuCollector(fake, "n")
    col.collect(0, problems)
    fake.lose(0)
    col.collect(1, problems)
    assert col.processes(1, lambda pid: None, problems) == []
    assert problems.reasons == ["gpu_lost"]  # from the sample rows; not again per list


def test_a_spawned_process_under_a_fake_cgroup_is_its_pods(tmp_path: Path) -> None:
    """The real CLI, `railscope node --no-store --once`, on the node8 fixture: NVML (the fake)
    lists a process that runs; its cgroup file under --proc-root names a pod. Then the same
    process read through the real /proc: it is in no pod."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        nv = json.loads((NODE8 / "nvml.json").read_text())
        nv["gpus"][2]["processes"] = [
            {"pid": child.pid, "type": "compute", "used_memory_bytes": 81_920 * 2**20}
        ]
        fake = tmp_path / "nvml.json"
        fake.write_text(json.dumps(nv))
        root = _proc_root(tmp_path, {child.pid: CGROUP})

        def scrape(proc_root: Path) -> list[str]:
            out = subprocess.run(
                [sys.executable, "-m", "telemetry.cli", "node", "--no-store", "--once",
                 "--sysfs-root", str(NODE8 / "sys"), "--gpu-backend", "fake", "--gpu-fake",
                 str(fake), "--podresources-socket", "/nonexistent", "--proc-root",
                 str(proc_root), "--node-name", "n8"],
                capture_output=True, text=True, timeout=120, check=True,
            )  # fmt: skip
            return [ln for ln in out.stdout.splitlines() if ln.startswith("railscope_gpu_process")]

        (line,) = scrape(root)
        assert f'pid="{child.pid}"' in line and f'pod_uid="{UID}"' in line
        assert f'container_id="{CONTAINER}"' in line and 'gpu="2"' in line
        assert line.endswith(" 8.589934592e+10")
        (line,) = scrape(Path("/proc"))  # the real file of a process outside any pod
        assert f'pid="{child.pid}"' in line and 'pod_uid=""' in line
    finally:
        child.kill()
        child.wait()
