"""Collectives of the simulated jobs (NCCL Inspector, `collective_sample`) and their ground truth.

Every running job has one communicator (all its GPUs, one rank per GPU, ranks laid out node by
node) and runs `PER_STEP` AllReduce collectives of `MSG_BYTES` each step, with the algorithm and
protocol NCCL picks for its shape or its NCCL_ALGO / NCCL_PROTO force (telemetry/sim/nccl.py),
at that algorithm's share of the bandwidth. Their bus bandwidth follows the job's network pace in the simulated epoch (its slowest flow's share of the links it
crosses: an ECMP collision, a PFC storm or a stalled NIC on its path slows it); a throttled GPU
takes longer on its own rank only (a straggler). A job hung by a lost GPU completes none.

The ground truth of the two consequence kinds comes from the same physics, never from a
detector: `collective_slowdown` where a job's pace drops `SLOWDOWN_DROP` under its own median pace
of the `BASELINE_SECONDS` before, for at least `MIN_SECONDS`, tied to the fault that owns the
bottleneck link; `collective_straggler` for a throttled GPU under a job of at least 3 ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from telemetry.records import COLLECTIVE_SAMPLE
from telemetry.sim.model import Fault, SimView
from telemetry.sim.nccl import comm_id, job_choice
from telemetry.sim.visibility import throttle_clock

MSG_BYTES = 1 << 30  # 1 GiB AllReduce (gradient bucket)
PER_STEP = 2  # collectives per job and step
NOISE = 0.02  # lognormal sigma of one rank's bandwidth
BUSBW_EFFICIENCY = 0.9  # bus bandwidth reached of a NIC's line rate share when unimpeded
# ground truth: what a job feels as a slowdown (the detector's defaults agree; the truth is physics)
SLOWDOWN_DROP = 0.25
BASELINE_SECONDS = 600
MIN_SECONDS = 60
STRAGGLER_MIN_RANKS = 3


@dataclass
class JobPace:
    """One epoch of one job: network pace (1 = unimpeded), the endpoint that set it, hung."""

    t0: int
    t1: int
    pace: float
    bottleneck: int
    hung: bool


@dataclass
class PaceLog:
    by_job: dict[int, list[JobPace]] = field(default_factory=dict)

    def note(self, job: int, p: JobPace) -> None:
        runs = self.by_job.setdefault(job, [])
        if not any(r.t0 == p.t0 for r in runs):
            runs.append(p)


class CollectiveColumns:
    """Builds each step's collective_sample table with numpy; the label columns of a job's ranks
    are built once per job."""

    def __init__(self, sim: SimView) -> None:
        self.sim = sim
        self._static: dict[int, dict[str, Any]] = {}

    def _job(self, j: Any) -> dict[str, Any]:
        st = self._static.get(j.idx)
        if st is None:
            fab = self.sim.fabric
            gpn = fab.gpus_per_node
            n = len(j.pods) * gpn
            pod_of = np.repeat(np.arange(len(j.pods)), gpn)
            g = np.tile(np.arange(gpn), len(j.pods))

            def per_pod(values: list[str]) -> pa.Array:
                return pa.array(values, pa.string()).take(pod_of)

            st = self._static[j.idx] = {
                "n": n,
                "node": per_pod([fab.nodes[p.node].name for p in j.pods]),
                "namespace": per_pod([p.namespace for p in j.pods]),
                "pod": per_pod([p.name for p in j.pods]),
                "pod_uid": per_pod([p.uid for p in j.pods]),
                "job": pa.array([j.name] * n, pa.string()),
                "comm_id": pa.array([comm_id(j.key)] * n, pa.string()),
                "rank": np.arange(n, dtype=np.uint32),
                "gpu": pa.array([str(x) for x in range(gpn)], pa.string()).take(g),
                "pid": (4000 + 97 * j.idx + g).astype(np.uint32),
                "gpu_index": np.array([p.node for p in j.pods])[pod_of] * gpn + g,
                "choice": job_choice(self.sim, j),
            }
        return st

    def table(
        self,
        t: int,
        pace: dict[int, tuple[float, bool]],
        gpu_clock: np.ndarray,
        rng: np.random.Generator,
    ) -> pa.Table | None:
        """The Inspector records of step t (fast path), or None when no job runs collectives."""
        sim = self.sim
        parts: list[pa.Table] = []
        for j in sim.workload.running(t):
            s, hung = pace.get(j.idx, (1.0, False))
            if hung or not j.pods:
                continue
            st = self._job(j)
            n = st["n"]
            ch = st["choice"]  # the algorithm and protocol it runs with (telemetry/sim/nccl.py)
            nominal = j.spec.gbps_per_nic / 8 * BUSBW_EFFICIENCY * ch.efficiency
            factor = 2 * (n - 1) / n if n > 1 else 1.0
            clock = np.minimum(1.0, gpu_clock[st["gpu_index"]])
            for k in range(PER_STEP):
                busbw = nominal * s * rng.lognormal(0.0, NOISE, n) * clock
                algbw = busbw / factor
                ts = sim.ts(t) + k * sim.dt * 1000 // PER_STEP + 200
                cols = {
                    "ts": pa.array(np.full(n, ts, np.int64)).cast(pa.timestamp("ms", tz="UTC")),
                    "cluster": pa.array([""] * n, pa.string()),
                    "container_id": pa.array([""] * n, pa.string()),
                    "collective": pa.array(["AllReduce"] * n, pa.string()),
                    "msg_size_bucket": pa.array(["1GiB"] * n, pa.string()),
                    "n_ranks": np.full(n, n, np.uint32),
                    "n_nodes": np.full(n, len(j.pods), np.uint32),
                    "coll_sn": np.full(n, t * PER_STEP + k, np.uint64),
                    "msg_size_bytes": np.full(n, MSG_BYTES, np.uint64),
                    "exec_time_seconds": MSG_BYTES / (algbw * 1e9),
                    "algo_bandwidth_gbs": algbw,
                    "bus_bandwidth_gbs": busbw,
                    "timing_source": pa.array(["kernel_gpu"] * n, pa.string()),
                    "format_version": pa.array(["v4.2"] * n, pa.string()),
                    "algorithm": pa.array([ch.algorithm] * n, pa.string()),
                    "protocol": pa.array([ch.protocol] * n, pa.string()),
                    "channels": pa.nulls(n, pa.uint16()),
                    "comm_name": pa.array([""] * n, pa.string()),
                    **{c: st[c] for c in ("node", "namespace", "pod", "pod_uid", "job")},
                    **{c: st[c] for c in ("comm_id", "rank", "gpu", "pid")},
                }
                schema = COLLECTIVE_SAMPLE.arrow_schema
                parts.append(
                    pa.Table.from_arrays(
                        [_arr(cols[f.name], f.type) for f in schema], schema=schema
                    )
                )
        return pa.concat_tables(parts) if parts else None


def _arr(v: Any, type_: pa.DataType) -> pa.Array:
    a = v if isinstance(v, pa.Array) else pa.array(v)
    return a if a.type == type_ else a.cast(type_)


def truth(sim: SimView, log: PaceLog, faults: list[Fault]) -> list[Fault]:
    """collective_slowdown / collective_straggler faults (origin='consequence'), each naming the
    fault that caused it in `detail.cause`."""
    fab = sim.fabric
    out: list[Fault] = []
    base_steps = max(1, BASELINE_SECONDS // sim.dt)
    min_steps = max(1, -(-MIN_SECONDS // sim.dt))
    jobs = {j.idx: j for j in sim.workload.jobs}
    for ji, runs in sorted(log.by_job.items()):
        j = jobs[ji]
        per_step: list[tuple[int, JobPace]] = []
        for r in sorted(runs, key=lambda r: r.t0):
            per_step += [(t, r) for t in range(r.t0, r.t1)]
        hist: list[float] = []
        spans: list[list[Any]] = []  # [t0, t1, worst drop, cause (a fault or None), endpoints]
        for t, r in per_step:
            if r.hung:
                continue
            drop = 0.0
            if hist:
                ref = float(np.median(hist[-base_steps:]))
                drop = 1 - r.pace / ref if ref > 0 else 0.0
            hist.append(r.pace)
            if drop < SLOWDOWN_DROP:
                continue
            names = _names(fab, r.bottleneck)
            cause = next(
                (f for f in faults if f.start_step <= t < f.end_step and names & set(f.subjects)),
                None,
            )
            last = spans[-1] if spans else None
            if last is not None and last[1] == t and last[3] is cause:
                last[1] = t + 1
                last[2] = max(last[2], drop)
                last[4] |= names
            else:
                spans.append([t, t + 1, drop, cause, set(names)])
        for t0, t1, drop, cause, names in spans:
            if t1 - t0 < min_steps:
                continue
            subj = f"{j.key}/{comm_id(j.key)}"
            g = Fault(
                f"collective_slowdown-{j.name}-{t0}",
                "collective_slowdown",
                sim.ts(t0),
                sim.ts(t1),
                "communicator",
                subj,
                [subj, j.key],
                origin="consequence",
                start_step=t0,
                end_step=t1,
            )
            g.detail = {
                "drop_ratio": round(drop, 3),
                "cause": cause.id if cause else "",
                "cause_kind": cause.kind if cause else "",
                "cause_subject": cause.subject if cause else "",
                "bottleneck": sorted(names),
            }
            out.append(g)
    gpn = fab.gpus_per_node
    for f in faults:
        if f.kind != "gpu_throttle" or (f.end_step - f.start_step) < min_steps:
            continue
        node = f.target["node"]
        running = [j for j in sim.workload.running(f.start_step) if node in j.nodes and j.pods]
        if not running or len(running[0].pods) * gpn < STRAGGLER_MIN_RANKS:
            continue
        j = running[0]
        name = fab.nodes[node].name
        subj = f"{name}/gpu{f.target['gpu']}"
        g = Fault(
            f"collective_straggler-{f.id}",
            "collective_straggler",
            f.start_ms,
            min(f.end_ms, sim.ts(j.end_step)),
            "gpu",
            subj,
            [subj, name],
            origin="consequence",
            start_step=f.start_step,
            end_step=min(f.end_step, j.end_step),
        )
        g.detail = {
            "cause": f.id,
            "cause_kind": f.kind,
            "cause_subject": f.subject,
            "job": j.key,
            # its collectives take 1 / clock of the others' time (visibility.py: the floor)
            "slowdown_ratio": round(1 / throttle_clock(float(f.target.get("severity", 1.0))), 3),
        }
        out.append(g)
    return out


# --- device files (through-parsers path) ---------------------------------------------------------
PROM_EVERY = 4  # every 4th server's ranks dump Prom textfiles (NCCL_INSPECTOR_PROM_DUMP=1)
_METRICS = (
    ("nccl_bus_bandwidth_gbs", "NCCL bus bandwidth in GB/s", "bus_bandwidth_gbs"),
    ("nccl_algorithm_bandwidth_gbs", "NCCL algorithm bandwidth in GB/s", "algo_bandwidth_gbs"),
    (
        "nccl_collective_exec_time_microseconds",
        "NCCL collective execution time in microseconds",
        "exec_us",
    ),
)


def render_inspector(sim: SimView, out: Path, rows: list[dict[str, Any]]) -> int:
    """Write one step's collectives as NCCL Inspector writes them on each server: under
    `out/nccl/NODE/` one JSON-lines file per rank's process, appended to (v4.2), or on every
    PROM_EVERY-th server one Prom textfile per GPU, rewritten; and the process's
    `/proc/PID/cgroup` (its pod's kubepods cgroup) under `out/nccl-proc/NODE/`. Returns lines
    written."""
    prom_nodes = {n.name for n in sim.fabric.nodes if n.idx % PROM_EVERY == PROM_EVERY - 1}
    by_proc: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in rows:
        by_proc.setdefault((r["node"], int(r["pid"])), []).append(r)
    n = 0
    for (node, pid), rs in sorted(by_proc.items()):
        cg = out / "nccl-proc" / node / str(pid) / "cgroup"
        if not cg.exists():
            cg.parent.mkdir(parents=True, exist_ok=True)
            uid = rs[0]["pod_uid"].replace("-", "_")
            cid = f"{zlib_hex(rs[0]['pod_uid'])}{pid:08x}".ljust(64, "0")
            cg.write_text(
                f"0::/kubepods.slice/kubepods-pod{uid}.slice/cri-containerd-{cid}.scope\n"
            )
        d = out / "nccl" / node
        d.mkdir(parents=True, exist_ok=True)
        if node in prom_nodes:
            gpu = rs[0]["gpu"]
            (d / f"nccl_inspector_pid{pid}_GPU{gpu}.prom").write_text(_prom(rs, gpu))
        else:
            with (d / f"{node}-pid{pid}.log").open("a") as fh:
                fh.writelines(_json_line(r) for r in rs)
        n += len(rs)
    return n


def zlib_hex(text: str) -> str:
    import zlib

    return f"{zlib.crc32(text.encode()):08x}"


def _ts_ms(v: Any) -> int:
    return int(v.timestamp() * 1000) if hasattr(v, "timestamp") else int(v)


def _json_line(r: dict[str, Any]) -> str:
    import json

    return (
        json.dumps(
            {
                "header": {
                    "id": r["comm_id"],
                    "rank": r["rank"],
                    "n_ranks": r["n_ranks"],
                    "nnodes": r["n_nodes"],
                },
                "metadata": {
                    "inspector_output_format_version": "v4.2",
                    "git_rev": "",
                    "rec_mechanism": "nccl_profiler_interface",
                    "dump_timestamp_us": _ts_ms(r["ts"]) * 1000,
                    "hostname": r["node"],
                    "pid": r["pid"],
                },
                "coll_perf": {
                    "coll": r["collective"],
                    "coll_algo": r["algorithm"],
                    "coll_proto": r["protocol"],
                    "coll_sn": r["coll_sn"],
                    "coll_msg_size_bytes": r["msg_size_bytes"],
                    "coll_exec_time_us": round(r["exec_time_seconds"] * 1e6, 3),
                    "coll_timing_source": r["timing_source"],
                    "coll_algobw_gbs": round(r["algo_bandwidth_gbs"], 6),
                    "coll_busbw_gbs": round(r["bus_bandwidth_gbs"], 6),
                },
            }
        )
        + "\n"
    )


def _prom(rs: list[dict[str, Any]], gpu: str) -> str:
    lines: list[str] = []
    for name, help_, col in _METRICS:
        lines += [f"# HELP {name} {help_}", f"# TYPE {name} gauge"]
        for r in rs:
            labels = (
                f'comm_id="{r["comm_id"]}",collective="{r["collective"]}",'
                f'hostname="{r["node"]}",rank="{r["rank"]}",pid="{r["pid"]}",'
                f'n_ranks="{r["n_ranks"]}",n_nodes="{r["n_nodes"]}",coll_sn="{r["coll_sn"]}",'
                f'coll_timing_source="{r["timing_source"]}",gpu_device_id="GPU{gpu}",'
                f'message_size="{r["msg_size_bytes"] / (1 << 30):.2f}GB",'
                f'algo_proto="{r["algorithm"]}_{r["protocol"]}"'
            )
            v = r["exec_time_seconds"] * 1e6 if col == "exec_us" else r[col]
            lines.append(f"{name}{{{labels}}} {round(v, 6)} {_ts_ms(r['ts'])}")
    return "\n".join(lines) + "\n"


def _names(fab: Any, ep: int) -> set[str]:
    """The names a fault may carry for endpoint `ep` (port and link)."""
    return {fab.ep_name(ep), fab.link_name(ep)} if ep >= 0 else set()


__all__ = [
    "CollectiveColumns",
    "PaceLog",
    "comm_id",
    "render_inspector",
    "truth",
]
