"""Per-step samples of a simulated run: NIC, switch port and queue, GPU, sFlow and collective
records for every step, from the epoch's solved state (physics.py) plus per-step noise, with real
cumulative counters carried across chunks (downstream rate logic works on them).

Builds record tables only: it solves nothing itself and writes nowhere.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from telemetry.contracts import Batch
from telemetry.records import (
    COLLECTIVE_SAMPLE,
    FLOW_SAMPLE,
    GPU_SAMPLE,
    KINDS,
    NIC_SAMPLE,
    SWITCH_PORT_SAMPLE,
    SWITCH_QUEUE_SAMPLE,
    RecordKind,
)
from telemetry.sim.collectives import CollectiveColumns
from telemetry.sim.fabric import GPU_BUS, netdev, rdma_device
from telemetry.sim.faults import gpu_uuid
from telemetry.sim.hdfs import HdfsModel
from telemetry.sim.physics import FRAME, ROCE_PORT, EpochSolver, EpochState, SolverSim
from telemetry.sim.pool import pool_gpus
from telemetry.sim.seeding import stream_rng
from telemetry.sim.tables import const_column, masked_column, record_table, ts_column

PRIO = 3  # lossless RoCE priority / queue
PAUSE_US = 84  # one 400G pause quantum (65535 x 512 bit times) in microseconds
SM_CLOCK_HZ = 1.98e9
MEM_CLOCK_HZ = 2.619e9


class SampleSim(SolverSim, Protocol):
    """What the samples read of a simulation besides the solver's part: HDFS traffic on the DCI."""

    @property
    def hdfs(self) -> HdfsModel: ...


class StepSamples:
    """Emits the per-step records of one run, chunk by chunk in step order, carrying counters
    across chunks."""

    def __init__(self, sim: SampleSim) -> None:
        self.sim = sim
        fab = self.fab = sim.fabric
        n_eps, n_nics = fab.n_eps, fab.n_nics
        st = stream_rng(sim.scenario.seed, "static")
        self.solver = EpochSolver(sim, st)  # draws the background load from `st` first
        self.n_gpus = self.solver.n_gpus
        self.cap = self.solver.cap
        self.peer = np.array(fab.ep_peer, dtype=np.int64)
        self.sw = np.arange(n_nics, n_eps)
        # counters start where a long-running device would be
        self.c_ep = {k: st.uniform(1e11, 1e13, n_eps) for k in ("txb", "rxb")}
        self.c_ep.update(
            {
                k: np.zeros(n_eps)
                for k in ("ecn", "ptx", "prx", "pdur", "err", "down", "wdst", "wdd", "qtx")
            }
        )
        self.c_nic = {k: np.zeros(n_nics) for k in ("ecn", "cnps", "cnph", "stall", "storm")}
        self.c_gpu = {
            "energy": st.uniform(1e8, 1e9, self.n_gpus),
            "pviol": np.zeros(self.n_gpus),
            "tviol": np.zeros(self.n_gpus),
            "xid": np.zeros(self.n_gpus),
            "ecc_c": np.zeros(self.n_gpus),
            "ecc_u": np.zeros(self.n_gpus),
        }
        self.prev_down = np.zeros(n_eps, dtype=bool)
        self.pod_names = [("", "")] + [
            (p.name, p.namespace) for j in sim.workload.jobs for p in j.pods
        ]
        self.gpu_node = np.repeat(np.arange(len(fab.nodes)), fab.gpus_per_node)
        self.power_limit = float(fab.model["power_limit_watts"])  # type: ignore[arg-type]
        self.mem_total = float(fab.model["memory_bytes"])  # type: ignore[arg-type]
        self.cols = self._static_columns()
        self.collectives = CollectiveColumns(sim)

    def _static_columns(self) -> dict[str, Any]:
        """Label columns that are the same every step, built once."""
        fab = self.fab
        nn, sw = fab.n_nics, self.sw
        nics = np.arange(nn)
        names = pa.array([n.name for n in fab.nodes])
        gidx = np.tile(np.arange(fab.gpus_per_node), len(fab.nodes))
        return {
            "nic_node": names.take(nics // fab.nics_per_node),
            "nic_dev": pa.array([rdma_device(r) for r in range(fab.nics_per_node)]).take(
                nics % fab.nics_per_node
            ),
            "nic_netdev": pa.array([netdev(r) for r in range(fab.nics_per_node)]).take(
                nics % fab.nics_per_node
            ),
            "nic_ll": const_column("Ethernet", nn),
            "sw_dev": pa.array(fab.ep_device).take(sw),
            "sw_port": pa.array(fab.ep_port).take(sw),
            "sw_role": pa.array(fab.ep_role).take(sw),
            "sw_qtype": const_column("unicast", len(sw)),
            "gpu_node": names.take(self.gpu_node),
            "gpu_idx": gidx.astype(np.uint16),
            "gpu_uuid": pa.array(
                [gpu_uuid(int(a), int(b)) for a, b in zip(self.gpu_node, gidx, strict=True)]
            ),
            "gpu_mig": const_column("", self.n_gpus),
            "gpu_model": const_column(str(fab.model["gpu_model"]), self.n_gpus),
            "gpu_bus": pa.array(
                [f"00000000:{GPU_BUS[k % 8]:02X}:00.0" for k in range(fab.gpus_per_node)]
            ).take(gidx),
            "pods": pa.array([p for p, _ in self.pod_names]),
            "pod_ns": pa.array([s for _, s in self.pod_names]),
            "sw_names": pa.array([s for s, _, _ in fab.switches]),
            "agents": pa.array([f"10.254.{i // 256}.{i % 256}" for i in range(len(fab.switches))]),
            "ports": pa.array(fab.ep_port),
        }

    def chunk(self, c0: int, c1: int) -> list[Batch]:
        out: dict[str, list[pa.Table]] = {}
        for t in range(c0, c1):
            ep = self.solver.epoch(t)
            rng = stream_rng(self.sim.scenario.seed, "steps", t)
            for kind, table in self._step(t, ep, rng):
                out.setdefault(kind.name, []).append(table)
        batches = []
        for name, tables in out.items():
            batches.append(Batch(KINDS[name], pa.concat_tables(tables)))
        return batches

    def _step(
        self, t: int, ep: EpochState, rng: np.random.Generator
    ) -> list[tuple[RecordKind, pa.Table]]:
        fab, sim = self.fab, self.sim
        dt = sim.dt
        ts_ms = sim.ts(t)
        n_eps, n_nics = fab.n_eps, fab.n_nics
        noise = rng.lognormal(0.0, 0.03, n_eps)
        tx = ep.tx * noise
        for (a, b), pairs in fab.dci.items():  # HDFS bytes crossing the DCI this step
            per_link = sim.hdfs.dci_bytes[(a, b)][t] / dt / len(pairs) / 2
            for ea, eb in pairs:
                tx[ea] += per_link
                tx[eb] += per_link
        tx = np.minimum(tx, self.cap * ep.up)
        rx = tx[self.peer]  # what one end sends the other receives
        up = ep.up.copy()
        downs = (~up) & (~self.prev_down)
        self.prev_down = ~up
        c = self.c_ep
        c["txb"] += tx * dt
        c["rxb"] += rx * dt
        c["qtx"] += tx * dt
        c["ecn"] += ep.ecn_q * noise * dt
        ptx = ep.pause_tx * noise * dt
        c["ptx"] += ptx
        prx = ptx[self.peer]
        c["prx"] += prx
        c["pdur"] += np.minimum(prx * PAUSE_US, dt * 1e6)
        c["err"] += ep.errors * dt * noise
        c["down"] += downs
        new_storm = ep.wd_storm & (t == ep.t0)
        c["wdst"] += new_storm
        c["wdd"] += ep.wd_drop * dt
        out: list[tuple[RecordKind, pa.Table]] = []
        # NICs
        nn = n_nics
        cn = self.c_nic
        cn["ecn"] += ep.nic_ecn * noise[:nn] * dt
        cn["cnps"] += ep.nic_cnp_sent * noise[:nn] * dt
        cn["cnph"] += ep.nic_cnp_handled * noise[:nn] * dt
        cn["stall"] += ep.nic_stall * dt
        cn["storm"] += ep.nic_storm
        sc_ = self.cols
        out.append(
            (
                NIC_SAMPLE,
                record_table(
                    NIC_SAMPLE,
                    nn,
                    {
                        "ts": ts_column(np.full(nn, ts_ms)),
                        "node": sc_["nic_node"],
                        "device": sc_["nic_dev"],
                        "port": np.ones(nn, np.uint8),
                        "netdev": sc_["nic_netdev"],
                        "link_layer": sc_["nic_ll"],
                        "up": up[:nn].astype(np.uint8),
                        "rate_bytes_per_second": self.cap[:nn] * (up[:nn]),
                        "rx_bytes_total": c["rxb"][:nn].astype(np.uint64),
                        "tx_bytes_total": c["txb"][:nn].astype(np.uint64),
                        "rx_packets_total": (c["rxb"][:nn] / FRAME).astype(np.uint64),
                        "tx_packets_total": (c["txb"][:nn] / FRAME).astype(np.uint64),
                        "rx_errors_total": c["err"][:nn].astype(np.uint64),
                        "tx_discards_total": np.zeros(nn, np.uint64),
                        "ecn_marked_packets_total": cn["ecn"].astype(np.uint64),
                        "cnp_sent_total": cn["cnps"].astype(np.uint64),
                        "cnp_handled_total": cn["cnph"].astype(np.uint64),
                        "cnp_ignored_total": np.zeros(nn, np.uint64),
                        "pfc_rx_pause_total": c["prx"][:nn].astype(np.uint64),
                        "pfc_tx_pause_total": c["ptx"][:nn].astype(np.uint64),
                        "pfc_pause_duration_us_total": c["pdur"][:nn].astype(np.uint64),
                        "pause_storm_events_total": cn["storm"].astype(np.uint64),
                        "pci_stalled_total": cn["stall"].astype(np.uint64),
                    },
                ),
            )
        )
        # switch ports and their lossless queue
        sw = self.sw
        ns = len(sw)
        sdev, sport, srole = sc_["sw_dev"], sc_["sw_port"], sc_["sw_role"]
        cap = self.cap[sw]
        ts_col = ts_column(np.full(ns, ts_ms))
        zeros = np.zeros(ns, np.uint64)
        out.append(
            (
                SWITCH_PORT_SAMPLE,
                record_table(
                    SWITCH_PORT_SAMPLE,
                    ns,
                    {
                        "ts": ts_col,
                        "switch": sdev,
                        "port": sport,
                        "role": srole,
                        "up": up[sw].astype(np.uint8),
                        "speed_bps": cap * 8,
                        "rx_bytes_total": c["rxb"][sw].astype(np.uint64),
                        "tx_bytes_total": c["txb"][sw].astype(np.uint64),
                        "rx_packets_total": (c["rxb"][sw] / FRAME).astype(np.uint64),
                        "tx_packets_total": (c["txb"][sw] / FRAME).astype(np.uint64),
                        "rx_discards_total": zeros,
                        "tx_discards_total": c["wdd"][sw].astype(np.uint64),
                        "rx_errors_total": c["err"][sw].astype(np.uint64),
                        "tx_errors_total": zeros,
                        "pfc_rx_pause_total": c["prx"][sw].astype(np.uint64),
                        "pfc_tx_pause_total": c["ptx"][sw].astype(np.uint64),
                        "pfc_rx_pause_duration_us_total": c["pdur"][sw].astype(np.uint64),
                        "link_down_events_total": c["down"][sw].astype(np.uint64),
                        "rx_bytes_per_second": rx[sw],
                        "tx_bytes_per_second": tx[sw],
                        "tx_utilization_ratio": tx[sw] / cap,
                    },
                ),
            )
        )
        out.append(
            (
                SWITCH_QUEUE_SAMPLE,
                record_table(
                    SWITCH_QUEUE_SAMPLE,
                    ns,
                    {
                        "ts": ts_col,
                        "switch": sdev,
                        "port": sport,
                        "queue": np.full(ns, PRIO, np.uint8),
                        "queue_type": sc_["sw_qtype"],
                        "tx_packets_total": (c["qtx"][sw] / FRAME).astype(np.uint64),
                        "tx_bytes_total": c["qtx"][sw].astype(np.uint64),
                        "dropped_packets_total": c["wdd"][sw].astype(np.uint64),
                        "ecn_marked_packets_total": c["ecn"][sw].astype(np.uint64),
                        "watermark_bytes": ep.wm[sw] * noise[sw],
                        "pfc_wd_storm_detected": ep.wd_storm[sw].astype(np.uint8),
                        "pfc_wd_storms_total": c["wdst"][sw].astype(np.uint64),
                        "pfc_wd_dropped_packets_total": c["wdd"][sw].astype(np.uint64),
                    },
                ),
            )
        )
        out.append((GPU_SAMPLE, pool_gpus(self.sim, t, self._gpus(t, ts_ms, ep, rng))))
        if sim.scenario.sflow.enabled and len(ep.flow_rate):
            fs = self._sflow(ts_ms, ep, rng)
            if fs is not None:
                out.append((FLOW_SAMPLE, fs))
        cs = self.collectives.table(
            t, ep.job_pace, ep.gpu_clock, stream_rng(sim.scenario.seed, "collectives", t)
        )
        if cs is not None:
            out.append((COLLECTIVE_SAMPLE, cs))
        return out

    def _gpus(self, t: int, ts_ms: int, ep: EpochState, rng: np.random.Generator) -> pa.Table:
        fab, sim = self.fab, self.sim
        n = self.n_gpus
        dt = sim.dt
        util = np.clip(ep.gpu_util * rng.normal(1.0, 0.02, n), 0, 1)
        busy = ep.gpu_pod > 0
        util[~busy] = 0.0
        clock = ep.gpu_clock
        throttled = clock < 1
        power = np.minimum(
            self.power_limit, 70 + (self.power_limit - 70) * util**0.9 * clock
        ) * rng.normal(1.0, 0.01, n)
        temp = 34 + 40 * util + rng.normal(0, 0.5, n)
        temp[throttled] = 91 + rng.normal(0, 0.5, int(throttled.sum()))
        g = self.c_gpu
        g["energy"] += power * dt
        g["tviol"] += throttled * dt
        xid_now = np.zeros(n)
        for f in sim.faults:
            if f.kind in ("gpu_xid", "gpu_lost") and f.start_step == t:
                k = f.target["node"] * fab.gpus_per_node + f.target["gpu"]
                xid_now[k] += 1
                if f.kind == "gpu_xid" and int(f.detail.get("xid", 48)) in (48, 94, 95):
                    g["ecc_u"][k] += 1
        g["xid"] += xid_now
        valid = ep.gpu_up
        sc_ = self.cols
        f64, u64 = pa.float64(), pa.uint64()
        return record_table(
            GPU_SAMPLE,
            n,
            {
                "ts": ts_column(np.full(n, ts_ms)),
                "node": sc_["gpu_node"],
                "gpu": sc_["gpu_idx"],
                "uuid": sc_["gpu_uuid"],
                "mig": sc_["gpu_mig"],
                "model": sc_["gpu_model"],
                "pci_bus_id": sc_["gpu_bus"],
                "pod": sc_["pods"].take(ep.gpu_pod),
                "namespace": sc_["pod_ns"].take(ep.gpu_pod),
                "up": valid.astype(np.uint8),
                "utilization_ratio": masked_column(util, valid, f64),
                "memory_utilization_ratio": masked_column(util * 0.55, valid, f64),
                "memory_used_bytes": masked_column(
                    np.where(busy, self.mem_total * 0.82, 5.2e8), valid, f64
                ),
                "memory_total_bytes": masked_column(np.full(n, self.mem_total), valid, f64),
                "sm_clock_hertz": masked_column(
                    np.where(busy | throttled, SM_CLOCK_HZ * clock, 3.45e8), valid, f64
                ),
                "memory_clock_hertz": masked_column(np.full(n, MEM_CLOCK_HZ), valid, f64),
                "temperature_celsius": masked_column(temp, valid, f64),
                "memory_temperature_celsius": masked_column(temp + 4, valid, f64),
                "power_watts": masked_column(power, valid, f64),
                "power_limit_watts": masked_column(np.full(n, self.power_limit), valid, f64),
                "energy_joules_total": masked_column(g["energy"].astype(np.uint64), valid, u64),
                "clock_event_reasons": masked_column(ep.gpu_reasons, valid, u64),
                "power_violation_seconds_total": masked_column(
                    g["pviol"].astype(np.uint64), valid, u64
                ),
                "thermal_violation_seconds_total": masked_column(
                    g["tviol"].astype(np.uint64), valid, u64
                ),
                "ecc_corrected_errors_total": masked_column(
                    g["ecc_c"].astype(np.uint64), valid, u64
                ),
                "ecc_uncorrected_errors_total": masked_column(
                    g["ecc_u"].astype(np.uint64), valid, u64
                ),
                "sm_active_ratio": masked_column(util * 0.9, valid, f64),
                "tensor_active_ratio": masked_column(util * 0.7, valid, f64),
                "xid_errors_total": masked_column(g["xid"].astype(np.uint64), valid, u64),
            },
        )

    def _sflow(self, ts_ms: int, ep: EpochState, rng: np.random.Generator) -> pa.Table | None:
        sim = self.sim
        spec = sim.scenario.sflow
        fl = ep.flows
        lam = ep.flow_rate * sim.dt / (FRAME * spec.sampling_rate)
        k = np.minimum(rng.poisson(lam), spec.max_samples_per_flow)
        if not k.any():
            return None
        idx = np.repeat(np.arange(len(k)), k)
        n = len(idx)
        sw_names, agents, ports = self.cols["sw_names"], self.cols["agents"], self.cols["ports"]
        marked = rng.random(n) < ep.flow_mark[idx]
        return record_table(
            FLOW_SAMPLE,
            n,
            {
                "ts": ts_column(ts_ms + rng.integers(0, sim.dt * 1000, n)),
                "agent": agents.take(ep.flow_agent[idx]),
                "switch": sw_names.take(ep.flow_agent[idx]),
                "in_port": ports.take(ep.flow_in[idx]),
                "out_port": ports.take(ep.flow_out[idx]),
                "src_ip": pa.array(fl.src_ip).take(idx),
                "dst_ip": pa.array(fl.dst_ip).take(idx),
                "src_port": fl.sport[idx].astype(np.uint16),
                "dst_port": np.full(n, ROCE_PORT, np.uint16),
                "protocol": np.full(n, 17, np.uint8),
                "vlan": np.zeros(n, np.uint16),
                "dscp": np.full(n, 26, np.uint8),
                "ecn": np.where(marked, 3, 2).astype(np.uint8),
                "bth_opcode": np.full(n, 7, np.uint8),
                "dest_qp": fl.qp[idx].astype(np.uint32),
                "psn": rng.integers(0, 1 << 24, n).astype(np.uint32),
                "frame_bytes": np.full(n, FRAME, np.uint32),
                "sampling_rate": np.full(n, spec.sampling_rate, np.uint32),
                "bytes": np.full(n, FRAME * spec.sampling_rate, np.uint64),
                "packets": np.full(n, spec.sampling_rate, np.uint64),
            },
        )


__all__ = ["SampleSim", "StepSamples"]
