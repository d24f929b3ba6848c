"""What the simulated jobs and nodes print: NCCL's and PyTorch's lines in the pods' logs and the
driver's in the kernel log, for the faults that would print them in a real job, and the ground
truth only those lines reveal.

- every job's ranks log NCCL's init (version, IB devices, the network chosen, two channels each,
  Init COMPLETE) when the job starts, and again when a fault restarts it:
  `nccl_transport_fallback` (a wrong NCCL_IB_HCA: NCCL finds no IB device and runs on Socket),
  `nccl_gdr_disabled` (GPU Direct RDMA off for every HCA: channels without GDRDMA);
- a link flap breaks the job connections routed over it as it first goes down (physics.py notes
  them): the sending rank logs a status-12 completion error naming its peer, then a burst of
  status-5 flush errors (its other QPs), the peer flush errors, and PyTorch an NCCL error;
- a lost GPU (Xid 79) logs the Xid and fallen-off-the-bus lines in its node's kernel log, and every
  other rank of its job a watchdog timeout WATCHDOG_MS later at the collective it waits in;
- `collective_timeout`: one rank never enters a collective; the others time out the same way.

Wording per version is log_text.py's. The fast path stores the recognised lines as `log_event`
rows (`LogLines.chunk` -> `batch`); the device path writes the same lines, with INFO chatter, as
CRI files and kernel log text (`render_logs`). It never reads the store.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from telemetry.contracts import Batch
from telemetry.errors import ConfigError
from telemetry.records import LOG_EVENT
from telemetry.sim import log_text as lt
from telemetry.sim.fabric import GPU_BUS, rdma_device
from telemetry.sim.model import Fault, SimView
from telemetry.sim.nccl import comm_id
from telemetry.sim.seeding import stable_hash

if TYPE_CHECKING:
    from telemetry.sim.fabric import Fabric
    from telemetry.sim.scenario import FaultSpec
    from telemetry.sim.workload import Job, Workload

# the simulated jobs call init_process_group(timeout=30 s): the watchdog fires 30 s into a hang (a
# detector can see a hang no sooner; PyTorch's default is 10 min, training jobs often set less)
WATCHDOG_MS = 30_000
INIT_DELAY_MS = 4_000  # a job's ranks finish NCCL's init this long after it starts
ERROR_DELAY_MS = 3_200  # a broken QP runs out of retries this long after its link goes down
FLUSH_BURST = 3  # flush errors a rank logs after its first status-12 (its connection's other QPs)
CONTAINER = "worker"  # the pods' container (inventory.py)
LOG_FAULT_KINDS = ("collective_timeout", "nccl_transport_fallback", "nccl_gdr_disabled")


@dataclass
class LogLine:
    """One line a pod or a node printed; `kind` '' for chatter railscope's grammar ignores."""

    ts_ms: int
    node: str
    namespace: str
    pod: str
    pod_uid: str
    kind: str
    fields: dict[str, Any]
    text: str
    stream: str = "stdout"
    source: str = "cri"


@dataclass
class _Rank:
    rank: int
    pod: int  # index in job.pods
    gpu: int


def versions(job: Job) -> tuple[str, str]:
    """The job image's NCCL and PyTorch versions."""
    h = stable_hash("image", job.key)
    return lt.NCCL_VERSIONS[h % 2], lt.TORCH_VERSIONS[(h >> 5) % 2]


def driver(node: str) -> str:
    return lt.DRIVER_VERSIONS[stable_hash("driver", node) % 2]


@dataclass
class LogLines:
    """The lines of a run, chunk by chunk of steps (in order): a chunk's triggers (jobs starting,
    faults starting, connections broken) make lines now or later; `chunk` returns those that fall
    inside it. With `chatter` it adds the INFO lines no detector reads (the device path)."""

    sim: SimView
    broken: dict[tuple[str, str, str, int], int]
    chatter: bool = False
    _pending: list[LogLine] = field(default_factory=list)

    def chunk(self, c0: int, c1: int) -> list[LogLine]:
        sim = self.sim
        for j in sim.workload.jobs:
            if not j.pending and j.pods and c0 <= j.start_step < c1:
                self._init(j, sim.ts(j.start_step) + INIT_DELAY_MS, *self._net_at(j, j.start_step))
        for f in sim.faults:
            if not c0 <= f.start_step < c1:
                continue
            if f.kind in ("nccl_transport_fallback", "nccl_gdr_disabled"):
                j = sim.workload.jobs[f.target["job"]]
                self._init(j, f.start_ms + INIT_DELAY_MS, *self._net_at(j, f.start_step))
            elif f.kind == "gpu_lost":
                self._gpu_lost(f)
            elif f.kind == "collective_timeout":
                j = sim.workload.jobs[f.target["job"]]
                self._timeouts(j, f.start_ms, f.start_step, missing={f.target["rank"]})
        for f in sim.faults:  # a fault that restarted a job ends: it restarts as it should
            if f.kind in ("nccl_transport_fallback", "nccl_gdr_disabled") and c0 <= f.end_step < c1:
                j = sim.workload.jobs[f.target["job"]]
                if f.end_step < min(j.end_step, sim.steps):
                    self._init(j, f.end_ms + INIT_DELAY_MS, *self._net_at(j, f.end_step))
        self._flaps(c0, c1)
        end = sim.ts(c1) if c1 < sim.steps else sim.ts(sim.steps)
        now = [x for x in self._pending if x.ts_ms < end]
        self._pending = [x for x in self._pending if x.ts_ms >= end]
        now.sort(key=lambda x: (x.ts_ms, x.node, x.pod, x.text))
        return now

    # -- what happens ------------------------------------------------------------------------
    def _net_at(self, j: Job, step: int) -> tuple[str, bool]:
        """(network NCCL picks, GPU Direct RDMA) for the job at `step`, faults considered."""
        net, gdr = "IB", True
        for f in self.sim.faults:
            if f.start_step <= step < f.end_step and f.target.get("job") == j.idx:
                if f.kind == "nccl_transport_fallback":
                    net = "Socket"
                elif f.kind == "nccl_gdr_disabled":
                    gdr = False
        return net, gdr

    def _ranks(self, j: Job) -> list[_Rank]:
        gpn = self.sim.fabric.gpus_per_node
        return [_Rank(p * gpn + g, p, g) for p in range(len(j.pods)) for g in range(gpn)]

    def _say(self, j: Job, r: _Rank, ts: int, kind: str, made: tuple[str, dict[str, Any]], *,
             level: str = "INFO", torch: bool = False) -> None:  # fmt: skip
        pod = j.pods[r.pod]
        text, fields = made
        if not torch:
            text = lt.nccl(pod.name, self._pid(j, r), r.gpu, level, text)
        self._pending.append(
            LogLine(
                ts,
                self.sim.fabric.nodes[pod.node].name,
                pod.namespace,
                pod.name,
                pod.uid,
                kind,
                fields,
                text,
                "stderr" if torch else "stdout",
            )
        )

    def _pid(self, j: Job, r: _Rank) -> int:
        return 4000 + 97 * j.idx + r.gpu  # the ranks' pids (collectives.py)

    def _init(self, j: Job, ts: int, net: str, gdr: bool) -> None:
        fab = self.sim.fabric
        ver, _ = versions(j)
        ranks = self._ranks(j)
        n, gpn = len(ranks), fab.gpus_per_node
        rails = fab.gpu_rail()
        nics = [rdma_device(k) for k in range(fab.nics_per_node)]
        cid = comm_id(j.key)
        for r in ranks:
            t = ts + 3 * r.gpu + r.pod % 50
            pod = j.pods[r.pod]
            if self.chatter:
                self._say(j, r, t - 900, "", (f"Bootstrap : Using eth0:{pod.ip}<0>", {}))
                self._say(j, r, t - 899, "", ("cudaDriverVersion 12040", {}))
            if r.rank == 0:
                self._say(j, r, t - 880, "nccl_version", lt.nccl_version(ver))
            if net == "IB":
                self._say(j, r, t - 800, "nccl_ib_devices", lt.ib_devices(nics, pod.ip))
                if not gdr:
                    dev = rails[r.gpu]
                    self._say(j, r, t - 700, "nccl_gdr_disabled", lt.gdr_disabled(dev, nics[dev]))
            elif self.chatter:
                self._say(j, r, t - 800, "", ("NET/IB : No device found.", {}))
                self._say(j, r, t - 799, "", (f"NET/Socket : Using [0]eth0:{pod.ip}<0>", {}))
            self._say(j, r, t - 600, "nccl_net_selected", lt.net_selected(net))
            if self.chatter:
                self._say(j, r, t - 500, "", (f"comm 0x{0x55D0 + r.rank:x} rank {r.rank} nRanks "
                          f"{n} nNodes {len(j.pods)} localRanks {gpn} localRank {r.gpu} MNNVL 0",
                          {}))  # fmt: skip
            if len(j.pods) > 1:
                peer = (r.rank + gpn) % n
                dev = rails[r.gpu] if net == "IB" else 0
                for ch in (0, 1):
                    made = lt.channel(ch, r.rank, r.gpu, peer, r.gpu, net, dev, gdr and net == "IB")
                    self._say(j, r, t - 300 + ch, "nccl_channel_net", made)
            bus = GPU_BUS[r.gpu % len(GPU_BUS)]
            made = lt.init_complete(ver, 0x55D0_0000 + r.rank, r.rank, n, r.gpu, bus, cid)
            self._say(j, r, t, "nccl_init_complete", made)

    def _timeouts(self, j: Job, since_ms: int, step: int, missing: set[int]) -> None:
        """Every rank but `missing` logs a watchdog timeout for the collective it waits in."""
        _, torch = versions(j)
        seq = 1000 + step * 2  # the process group's SeqNum of the collective at `step`
        for r in self._ranks(j):
            if r.rank in missing:
                continue
            ran = WATCHDOG_MS + 17 + (stable_hash(j.key, r.rank) % 40)
            ts = since_ms + ran
            made = lt.watchdog_timeout(torch, ts, self._pid(j, r), r.rank, seq, 262144,
                                       WATCHDOG_MS, ran)  # fmt: skip
            self._say(j, r, ts, "torch_watchdog_timeout", made, torch=True)

    def _gpu_lost(self, f: Fault) -> None:
        fab = self.sim.fabric
        node, gpu = f.target["node"], f.target["gpu"]
        name = fab.nodes[node].name
        bus = GPU_BUS[gpu % len(GPU_BUS)]
        # on a whole second: the kernel log's text (journalctl -k -o short-iso) keeps no less
        for dt, made, kind in (
            (1000, lt.xid(driver(name), bus, 79, "GPU has fallen off the bus."), "xid"),
            (1000, lt.fallen_off_bus(bus), "gpu_fallen_off_bus"),
        ):
            text, fields = made
            self._pending.append(
                LogLine(f.start_ms + dt, name, "", "", "", kind, fields, text, "", "kmsg")
            )
        for j in self.sim.workload.running(f.start_step):
            if node in j.nodes and j.pods:
                lost = j.nodes.index(node) * fab.gpus_per_node + gpu
                self._timeouts(j, f.start_ms, f.start_step, missing={lost})

    def _flaps(self, c0: int, c1: int) -> None:
        """The NCCL errors of the connections broken in steps c0 .. c1 - 1."""
        sim = self.sim
        rails = sim.fabric.gpu_rail()
        seen: set[tuple[int, int, int, int]] = set()
        for (_, sip, dip, ji), t in sorted(self.broken.items(), key=lambda kv: (kv[1], kv[0])):
            if not c0 <= t < c1:
                continue
            j = sim.workload.jobs[ji]
            a, b = _end(j, sip), _end(j, dip)
            if a is None or b is None:
                continue
            gpu_a = rails.index(a[1]) if a[1] in rails else a[1]
            gpu_b = rails.index(b[1]) if b[1] in rails else b[1]
            if (a[0], gpu_a, b[0], gpu_b) in seen:
                continue  # one connection, many QPs: its first error names it
            seen.add((a[0], gpu_a, b[0], gpu_b))
            self._broken(j, sim.ts(t), _Rank(0, a[0], gpu_a), _Rank(0, b[0], gpu_b), sip, dip)

    def _broken(self, j: Job, t_ms: int, a: _Rank, b: _Rank, sip: str, dip: str) -> None:
        gpn = self.sim.fabric.gpus_per_node
        a.rank, b.rank = a.pod * gpn + a.gpu, b.pod * gpn + b.gpu
        ver, torch = versions(j)
        pa_, pb = j.pods[a.pod], j.pods[b.pod]
        h = stable_hash(j.key, sip, dip)
        t = t_ms + ERROR_DELAY_MS + h % 500
        port = 40000 + h % 20000
        for k in range(1 + FLUSH_BURST):
            st = 12 if k == 0 else 5
            made = lt.ib_completion_error(ver, pa_.name, self._pid(j, a), a.gpu, dip, port + k,
                                          st, 129 if st == 12 else 249, "Send", sip)  # fmt: skip
            self._say(j, a, t + 40 * k, "ib_completion_error", made, level="WARN")
        for k in range(2):
            made = lt.ib_completion_error(ver, pb.name, self._pid(j, b), b.gpu, sip, port + 9 + k,
                                          5, 249, "Recv", dip)  # fmt: skip
            self._say(j, b, t + 150 + 40 * k, "ib_completion_error", made, level="WARN")
        self._say(j, a, t + 400, "torch_nccl_error", lt.torch_nccl_error(ver, torch, a.rank),
                  torch=True)  # fmt: skip


def _end(j: Job, ip: str) -> tuple[int, int] | None:
    """(pod index, rail) of the job's pod holding RDMA IP `ip`."""
    for k, p in enumerate(j.pods):
        if ip in p.rdma_ips:
            return k, p.rdma_ips.index(ip)
    return None


def batch(lines: list[LogLine]) -> Batch | None:
    """The recognised lines as log_event rows (the fast path), None when there are none."""
    from datetime import UTC, datetime

    rows = [
        {
            "ts": datetime.fromtimestamp(x.ts_ms / 1000, UTC),
            "cluster": "",
            "node": x.node,
            "namespace": x.namespace,
            "pod": x.pod,
            "pod_uid": x.pod_uid,
            "container": CONTAINER if x.pod else "",
            "source": x.source,
            "kind": x.kind,
            "fields": json.dumps(x.fields, sort_keys=True),
            "excerpt": x.text[:512],
            "file": _file(x),
            "line": 0,
        }
        for x in lines
        if x.kind
    ]
    return Batch.from_rows(LOG_EVENT, rows) if rows else None


def _file(x: LogLine) -> str:
    if not x.pod:
        return ""
    return f"/var/log/pods/{x.namespace}_{x.pod}_{x.pod_uid}/{CONTAINER}/0.log"


def render_logs(sim: SimView, broken: dict[tuple[str, str, str, int], int], out: Path,
                until_ms: int) -> int:  # fmt: skip
    """Write every line up to `until_ms`, chatter included, under `out/logs`: CRI files at
    pods/<namespace>_<pod>_<uid>/worker/0.log and nodes/<node>/kernel.log. Returns lines written."""
    gen = LogLines(sim, broken, chatter=True)
    lines: list[LogLine] = []
    for c0 in range(0, sim.steps, 30):
        lines += gen.chunk(c0, min(sim.steps, c0 + 30))
    files: dict[Path, list[str]] = {}
    seq = 0
    for x in lines:
        if x.ts_ms >= until_ms:
            continue
        seq += 1
        if x.source == "kmsg":
            files.setdefault(out / "logs" / "nodes" / x.node / "kernel.log", []).append(
                lt.journal_line(x.ts_ms, x.node, x.text)
            )
        else:
            p = out / "logs" / "pods" / f"{x.namespace}_{x.pod}_{x.pod_uid}" / CONTAINER / "0.log"
            files.setdefault(p, []).extend(lt.cri_lines(x.ts_ms, seq, x.stream, x.text))
    for p, text in files.items():
        if p.exists():
            p.unlink()
        lt.append(p, text)
    return seq


# --- faults and ground truth -------------------------------------------------------------------
def resolve(
    f: Fault, spec: FaultSpec, fab: Fabric, wl: Workload, rng: np.random.Generator, where: str
) -> None:
    """A fault only the job's logs show: its target is a job (`JOB`, or `JOB/rankN` for
    collective_timeout's missing rank; default: chosen by seed among the jobs running then)."""
    name, _, rank_s = (spec.target or "").partition("/")
    running = [j for j in wl.running(f.start_step) if j.pods and len(j.pods) > 1]
    job = next((j for j in wl.jobs if j.name == name and j.pods), None) if name else None
    if name and job is None and name not in {j.name for j in wl.jobs}:
        raise ConfigError(f"{where}.target: no job named {name!r}")
    if job is None:  # none named, or the named one found no nodes (a smaller --nodes): by seed
        if not running:
            raise ConfigError(f"{where}: no multi-node job runs at minute {spec.start_minute:g}")
        job = running[int(rng.integers(len(running)))]
    if f.start_step < job.start_step:  # a job's fault begins with the job
        step_ms = fab.scenario.resolution_seconds * 1000
        f.start_ms += (job.start_step - f.start_step) * step_ms
        f.start_step = job.start_step
    f.target = {"job": job.idx}
    f.subject_type, f.subject = "job", job.key
    f.subjects = [job.key, job.name]
    if f.kind != "collective_timeout":
        return
    gpn = fab.gpus_per_node
    n = len(job.pods) * gpn
    if rank_s:
        if not rank_s.removeprefix("rank").isdigit():
            raise ConfigError(f"{where}.target: {spec.target!r}: give JOB/rankN")
        rank = int(rank_s.removeprefix("rank")) % n  # a smaller --nodes has fewer ranks
    else:
        rank = int(rng.integers(n))
    node = fab.nodes[job.pods[rank // gpn].node].name
    pod = job.pods[rank // gpn]
    gpu = f"{node}/gpu{rank % gpn}"
    f.target["rank"] = rank
    f.subject_type, f.subject = "gpu", gpu
    f.subjects = [gpu, f"{pod.namespace}/{pod.name}"]
    f.detail = {"job": job.key, "rank": rank, "pod": f"{pod.namespace}/{pod.name}"}


def truth(sim: SimView, broken: dict[tuple[str, str, str, int], int]) -> list[Fault]:
    """nccl_network_error (origin='consequence'): per link flap, each pair of ranks whose
    connection it broke, named as the detector names it (JOB/rankA<->rankB, lower rank first),
    from the status-12 errors the flap made its ranks log."""
    out: list[Fault] = []
    gen = LogLines(sim, broken)
    lines: list[LogLine] = []
    for c0 in range(0, sim.steps, 30):
        lines += gen.chunk(c0, min(sim.steps, c0 + 30))
    flaps = [f for f in sim.faults if f.kind == "link_flap"]
    gpn = sim.fabric.gpus_per_node
    rails = sim.fabric.gpu_rail()
    seen: set[tuple[str, str]] = set()
    for x in lines:
        if x.kind != "ib_completion_error" or x.fields["status"] != 12:
            continue
        job = next(j for j in sim.workload.jobs if any(p.name == x.pod for p in j.pods))
        mine = next(k for k, p in enumerate(job.pods) if p.name == x.pod)
        peer = _end(job, str(x.fields["peer_ip"]))
        if peer is None:
            continue
        ra = mine * gpn + int(x.fields["cuda_dev"])
        rb = peer[0] * gpn + (rails.index(peer[1]) if peer[1] in rails else peer[1])
        subj = f"{job.key}/rank{min(ra, rb)}<->rank{max(ra, rb)}"
        late = ERROR_DELAY_MS + 500  # a QP runs out of retries this long after the flap at most
        cause = next((f for f in flaps if f.start_ms <= x.ts_ms <= f.end_ms + late), None)
        if cause is None or (cause.id, subj) in seen:
            continue
        seen.add((cause.id, subj))
        g = Fault(
            f"nccl_network_error-{cause.id}-{len(out)}",
            "nccl_network_error",
            x.ts_ms,
            max(cause.end_ms, x.ts_ms + sim.dt * 1000),
            "rank_pair",
            subj,
            [subj],
            origin="consequence",
            start_step=cause.start_step,
            end_step=cause.end_step,
        )
        g.detail = {"cause": cause.id, "cause_kind": cause.kind, "cause_subject": cause.subject,
                    "peer_ip": x.fields["peer_ip"], "reporter": f"{x.namespace}/{x.pod}"}  # fmt: skip
        out.append(g)
    return out


__all__ = ["LOG_FAULT_KINDS", "WATCHDOG_MS", "LogLine", "LogLines", "batch", "render_logs",
           "resolve", "truth", "versions"]  # fmt: skip
