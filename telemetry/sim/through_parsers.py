"""Through-parsers path: each simulated step is rendered into device files in their real formats
(render.py) and read back by the real sources exactly as `railscope SOURCE --from PATH` reads a
capture, so the records in the store, and the scores, come through the parsers.

Every source is built from a capture path in one place, `source_from_capture`. The sources stamp
samples with their clock at collection: a capture replayed for step s is collected at step s's
simulated time, so the collection time of what they return is set to it. Writes only under its
work directory; never writes to the store itself (the pipeline's sinks do).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pyarrow as pa

from telemetry.contracts import Batch
from telemetry.errors import UserError
from telemetry.records import LLDP_LINK, LOG_EVENT
from telemetry.sim.engine import Simulation
from telemetry.sim.render import Files, Rows, iter_steps, render_step
from telemetry.sim.source import SimSource

# Kinds whose time a source takes from its own clock when it collects (the rest carry the time
# the device recorded: sFlow datagram arrival, clienttrace log lines, inventory start times).
COLLECTED_AT = {
    "node": None,  # all of them
    "switch": None,
    "hdfs": (
        "hdfs_namenode_sample",
        "hdfs_datanode_sample",
        "hdfs_block_placement",
        "hdfs_placement_total",
    ),
}


@cache
def _parser() -> argparse.ArgumentParser:
    from telemetry.cli import build_parser

    return build_parser()


def source_from_capture(name: str, path: Path, cfg: Any, *flags: str) -> Any:
    """The source `name` reading the capture at `path`, configured by `cfg` and the source's own
    CLI flags — what `railscope NAME --from PATH FLAGS --output jsonl` builds (--output: the
    records come back to the caller; no store of the source's own)."""
    from telemetry.commands.sources import source_from_args

    args = _parser().parse_args([name, "--from", str(path), "--output", "jsonl", *flags])
    return source_from_args(args, cfg)


def check_size(sim: Simulation) -> None:
    """The device path writes every server's files every step: it is for scenarios that fit."""
    from telemetry.sim.render import MAX_RENDER_NODES

    if len(sim.fabric.nodes) > MAX_RENDER_NODES:
        raise UserError(
            f"{len(sim.fabric.nodes)} servers: the device path is for small scenarios (at most "
            f"{MAX_RENDER_NODES} for render and --through-parsers); use --nodes, or the fast path"
        )


class ThroughParsersSource(SimSource):
    """One `collect()` per simulated step: render the step, read it back through the sources.
    What the sources report as problems (a lost GPU, ...) is counted in this source's stats."""

    name = "sim-through-parsers"

    def __init__(
        self,
        sim: Simulation,
        cfg: Any,
        workdir: Path | None = None,
        switch_transport: str = "dump",
        leaf_times: bool = False,
    ) -> None:
        super().__init__(sim)
        if switch_transport not in ("dump", "gnmi"):
            raise UserError(f"switch transport {switch_transport!r}: expected dump or gnmi")
        # dump: each switch's COUNTERS_DB/APPL_DB files read as `railscope switch --from`;
        # gnmi: the same state served by a gNMI target per switch and streamed to one switch
        # source (SONiC telemetry paths), as a collector reads a live fabric. `leaf_times`
        # (gnmi): each switch samples at its own phase and stamps every port with its own time
        # (the scenario's switch phase and leaf jitter, at least 0.5 s), and the switch source
        # keeps those times: what reaches the store is what the target stamped
        self._leaf_times = leaf_times and switch_transport == "gnmi"
        self._gnmi = GnmiSwitches(sim, self._leaf_times) if switch_transport == "gnmi" else None
        self._it = self._per_step(iter_steps(sim))
        # thousands of small files per step: in memory (tmpfs) where the machine has one
        shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
        self._tmp = (
            None if workdir else tempfile.TemporaryDirectory(prefix="railscope-sim-", dir=shm)
        )
        self.dir = Path(workdir or self._tmp.name)  # type: ignore[union-attr]
        self.cfg = sources_config(sim, cfg)
        self._inventory: Any = None
        self._nccl: dict[str, Any] = {}  # node -> its nccl source (collectives)
        self._pods: Any = None  # pod UID -> PodInfo, from the inventory
        self._files = Files()
        # the placement policy the simulated writers follow: replicas spread evenly over the IDCs
        # with DataNodes (hdfs.py), as an operator states it to the auditor
        spec, dn_idcs = sim.scenario.hdfs, [i for i in sim.scenario.fabric.idcs if i.datanodes]
        if dn_idcs and spec.replicas % len(dn_idcs):
            raise UserError(
                f"scenario {sim.scenario.name}: {spec.replicas} replicas over {len(dn_idcs)} IDCs "
                "cannot be audited as a per-IDC placement policy; use a multiple of the IDCs"
            )
        self._hdfs_flags = ("--topology", str(self.dir / "topology.table"), "--replicas",
                            str(spec.replicas), "--policy", "per_idc", "--per-idc",
                            str(max(1, spec.replicas // max(1, len(dn_idcs)))))  # fmt: skip
        self._now_ms = sim.start_ms
        # the scenario's collection timing, applied to what the parsers read (timing.py): the
        # sources stamp a step's samples with its time; real devices' own phases, lost polls and
        # restarts are laid on them as on the fast path's records
        self._dist = sim.disturber()

    @property
    def chunks(self) -> int:
        return self.sim.steps

    def _per_step(self, steps: Iterator[tuple[int, Rows, Rows]]) -> Iterator[list[Batch]]:
        for step, inventory, rows in steps:
            yield self._step(step, inventory, rows)

    def _step(self, step: int, inventory: Rows, rows: Rows) -> list[Batch]:
        sim = self.sim
        at = sim.ts(step)
        self._now_ms = at
        end = at + sim.dt * 1000
        # HDFS events are listed once for the run: the DataNodes log, and fsck lists, this step's
        events = {
            k: [r for r in inventory.get(k, []) if at <= _ms(r["ts"]) < end]
            for k in ("hdfs_transfer", "hdfs_block_placement")
        }
        render_step(sim, self.dir, step, {**inventory, **rows}, events, self._files)
        out: list[Batch] = []
        for d in sorted((self.dir / "nodes").iterdir()):
            out += self._read("node", d, at, "--node-name", d.name)
        if self._gnmi is not None:
            got = self._gnmi.step(self.dir / "switches", at, step)
            # with leaf times the counters keep the targets' stamps; what the source stamps with
            # its own (wall) clock - LLDP, status - takes the step's time, as on the dump path
            out += [b if self._leaf_times and b.kind.name in _TARGET_TIMED else _at(b, at)
                    for b in got]  # fmt: skip
            self._note("switch", self._gnmi.source)
        else:
            out += self._read("switch", self.dir / "switches", at)
        out += self._read("sflow", self.dir / "sflow" / "sflow.pcap", at)
        if any((self.dir / "hdfs").iterdir()):
            out += self._read("hdfs", self.dir / "hdfs", at, *self._hdfs_flags)
        out += self._read_inventory()
        out += self._read_nccl(inventory, rows.get("collective_sample", []))
        # the jobs' and kernels' log lines go in as the fast path writes them until the `railscope
        # logs` source (issue 45) reads the CRI and kernel text render_devices writes of them
        if rows.get("log_event"):
            out.append(Batch.from_rows(LOG_EVENT, rows["log_event"]))
        if self._dist is not None:
            if step == 0:
                self._dist.inventory({"lldp_link": _table_of(inventory.get("lldp_link", []))})
            keep = {"switch"} if self._leaf_times else set()  # stamped by the targets
            out = self._dist.batches(out, keep=keep) + [
                Batch(LLDP_LINK, t) for t in self._dist.relearned_lldp(*sim.sampled(step, step + 1))
            ]
        return out

    def _read_nccl(self, inventory: Rows, rows: list[dict[str, Any]]) -> list[Batch]:
        """Collectives: rendered as Inspector files on each server (collectives.py) and read by
        one live nccl source per server for the whole run, as the DaemonSet's would: JSON files
        followed, textfiles read when rewritten, each rank's pid attributed through the
        rendered /proc/PID/cgroup to the pod the inventory lists under that UID."""
        from exporters.nccl.attribution import PodInfo, parse_gpus
        from exporters.nccl.config import NcclConfig
        from exporters.nccl.source import NcclSource
        from telemetry.sim.collectives import render_inspector

        if not rows:
            return []
        render_inspector(self.sim, self.dir, rows)
        if self._pods is None:
            pods = {
                p["uid"]: PodInfo(
                    p["namespace"], p["pod"], p["job"], parse_gpus(p["gpus"]), p["uid"]
                )
                for p in inventory.get("pod", [])
            }
            self._pods = pods.get
        out: list[Batch] = []
        for d in sorted((self.dir / "nccl").iterdir()):
            src = self._nccl.get(d.name)
            if src is None:
                c = NcclConfig(
                    dump_dir=str(d),
                    proc_root=str(self.dir / "nccl-proc" / d.name),
                    node_name=d.name,
                )
                src = self._nccl[d.name] = NcclSource(c)  # the pipeline stamps the cluster
                src.attributor.pods = self._pods
            out += src.collect()
            self._note("nccl", src)
        return out

    def _read(self, name: str, path: Path, at: int, *flags: str) -> list[Batch]:
        src = source_from_capture(name, path, self.cfg, *flags)
        try:
            batches = src.collect()
        finally:
            closer = getattr(src, "close", None)
            if closer is not None:
                closer()
        self._note(name, src)
        return [_at(b, at) if _collected_at(name, b.kind.name) else b for b in batches]

    def _read_inventory(self) -> list[Batch]:
        # One source for the whole run, as a live one would be: it keeps the open facts and closes
        # a pod's IPs when a later list shows the pod finished, at the simulated time.
        if self._inventory is None:
            self._inventory = source_from_capture("inventory", self.dir / "kubernetes", self.cfg)
            # the inventory source takes a clock (InventorySource(clock=...)); from_args gives it
            # the wall clock, so the simulated one is set where that one went
            clock = lambda: self._now_ms  # noqa: E731
            self._inventory.state.clock = self._inventory.state.ledger.clock = clock
        batches = self._inventory.collect()
        self._note("inventory", self._inventory)
        return batches

    def _note(self, name: str, src: Any) -> None:
        for reason, n in src.stats.errors.items():
            self.stats.error(f"{name}: {reason}", n)
        src.stats.errors.clear()

    def close(self) -> None:
        if self._gnmi is not None:
            self._gnmi.close()
        if self._inventory is not None:
            self._inventory.close()
        if self._tmp is not None:
            self._tmp.cleanup()


class GnmiSwitches:
    """The simulated switches as gNMI targets (gnmi_target.py, SONiC telemetry paths), one per
    switch on loopback, and one switch source streaming from all of them across the run (its
    streams, caches and derived rates persist from step to step, as a live collector's do)."""

    def __init__(self, sim: Simulation, leaf_times: bool = False) -> None:
        self.sim, self.leaf_times = sim, leaf_times
        # the SAMPLE interval asked of the targets: the scenario's step, as a collector set up
        # for this fabric would ask (a replaced state is sent at once, so the run does not wait
        # on it). A stream is stalled after two intervals of silence: a 1 s interval made that
        # 2 s of wall time, which a loaded CI machine's starved process can miss by itself.
        self.interval = float(sim.dt)
        self._dist = sim.disturber() if leaf_times else None  # timing.py's draws
        self.roles = {s: role for s, role, _ in sim.fabric.switches}
        self.targets: dict[str, Any] = {}
        self.servers: list[Any] = []
        self.source: Any = None

    def step(self, switches: Path, at: int, step: int = 0) -> list[Batch]:
        """Serve this step's rendered COUNTERS_DB/APPL_DB of every switch, stamped with the
        step's time (with `leaf_times`, each port with its own: `_leaf_offsets`), and collect
        once every stream has it."""
        from telemetry.sim.gnmi_target import Target, serve

        for d in sorted(x for x in switches.iterdir() if x.is_dir()):
            counters = _hashes(d / "counters_db.json")
            appl = _hashes(d / "appl_db.json")
            t = self.targets.get(d.name)
            if t is None:
                t = self.targets[d.name] = Target(counters, appl, {})
                server, port = serve(t, workers=4)
                self.servers.append((server, port, d.name))
            if self.leaf_times:
                t.leaf_offset_ns = self._leaf_offsets(d.name, step)
            t.set_state(counters, appl, at * 1_000_000)
        if self.source is None:
            self.source = self._source()
        # each leaf's time is this step's grid point less its offset (under one interval): the
        # step has arrived once every leaf is stamped after the previous step's grid point
        since = at - self.sim.dt * 1000 + 1 if self.leaf_times else at
        deadline = time.monotonic() + 60
        for st in self.source._streams:
            st.synced.wait(max(0.0, deadline - time.monotonic()))
            while not st.caught_up(since) and time.monotonic() < deadline:
                time.sleep(0.005)
            if not st.caught_up(since):
                raise RuntimeError(f"gNMI stream {st.name}: step at {at} not served in 60 s")
        return self.source.collect()

    def _leaf_offsets(self, switch: str, step: int) -> Any:
        """port -> ns before the step's grid point its leaf is stamped: the switch's own phase
        within the interval and each port's own jitter (the scenario's switch timing; at least
        0.5 s of it), drawn as timing.py draws them."""
        import numpy as np

        spec = self.sim.scenario.telemetry.switch
        dist = self._dist
        dt_ms = self.sim.dt * 1000
        if dist is None:
            return lambda port: 0
        sh = dist._hash(np.array([switch], dtype=object))
        phase = float(spec.phase * dt_ms * dist.uniform("phase", sh)[0])
        leaf_ms = max(500.0, spec.leaf_jitter_seconds * 1000)

        def offset(port: str) -> int:
            lh = dist._hash(np.array([f"{switch}\x1f{port}"], dtype=object))
            jit = leaf_ms * float(dist.uniform("leaf", lh, step)[0])
            return -int(min(dt_ms - 1, phase + jit) * 1_000_000)

        return offset

    def _source(self) -> Any:
        from exporters.switch.config import GnmiConfig, SwitchConfig, SwitchSourceConfig
        from exporters.switch.source import SwitchSource

        sws = [SwitchConfig(name=name, role=self.roles.get(name, ""),
                            gnmi=GnmiConfig(address=f"127.0.0.1:{port}"))
               for _, port, name in self.servers]  # fmt: skip
        cfg = SwitchSourceConfig(switches=sws, timeout_seconds=30)
        return SwitchSource([], cfg, gnmi=sws, interval=self.interval)

    def close(self) -> None:
        if self.source is not None:
            self.source.close()
        for server, _, _ in self.servers:
            server.stop(0)


def _table_of(rows: list[dict[str, Any]]) -> Any:
    return LLDP_LINK.to_arrow(rows) if rows else None


def _hashes(p: Path) -> dict[str, Any]:
    """A sonic-db-dump file as {key: hash} (the {type, value} wrapping removed)."""
    if not p.exists():
        return {}
    raw = json.loads(p.read_text())
    return {k: v["value"] if isinstance(v, dict) and "value" in v else v for k, v in raw.items()}


def _ms(v: Any) -> int:
    return int(v.timestamp() * 1000) if hasattr(v, "timestamp") else int(v)


# the records a gNMI target's notifications time (COUNTERS_DB leaves); the rest the source times
_TARGET_TIMED = frozenset({"switch_port_sample", "switch_priority_sample", "switch_queue_sample"})


def _collected_at(source: str, kind: str) -> bool:
    kinds = COLLECTED_AT.get(source, ())
    return kinds is None or kind in kinds


def _at(b: Batch, at: int) -> Batch:
    i = b.table.schema.get_field_index("ts")
    ts = pa.array([at] * b.num_rows, pa.int64()).cast(b.table.schema.field(i).type)
    return Batch(b.kind, b.table.set_column(i, b.table.schema.field(i), ts))


def sources_config(sim: Simulation, cfg: Any) -> Any:
    """The sources' settings an operator would give for this fabric: which switch each sFlow
    agent is and the names of its ifIndexes, and each switch's role."""
    from telemetry.sim.render import ifindex

    # agent addresses as the simulator numbers its switches (samples.py), ifIndex as render.py
    agents = {f"10.254.{i // 256}.{i % 256}": s for i, (s, _, _) in enumerate(sim.fabric.switches)}
    ifnames: dict[str, dict[int, str]] = {}
    for dev, port in zip(sim.fabric.ep_device, sim.fabric.ep_port, strict=True):
        if port.startswith("Ethernet") and dev in agents.values():
            ifnames.setdefault(dev, {})[ifindex(port)] = port
    sflow = {**cfg.sources.get("sflow", {}), "agents": agents, "ifnames": ifnames}
    switch = {
        **cfg.sources.get("switch", {}),
        "switches": [{"name": s, "role": role} for s, role, _ in sim.fabric.switches],
    }
    sources = {**cfg.sources, "sflow": sflow, "switch": switch}
    return cfg.model_copy(update={"sources": sources})


__all__ = [
    "GnmiSwitches",
    "ThroughParsersSource",
    "check_size",
    "source_from_capture",
    "sources_config",
]
