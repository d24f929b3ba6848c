"""The sizing model behind `railscope sizing`: from a cluster's size (GPUs, switches, sFlow
sampling, the collection interval) to rows and bytes per second per table family, disk per day
and at retention, ClickHouse shards and cores, collector and gateway replicas, and the engine's
CPU per tick.

Every coefficient is in `sizing.yaml`, next to this module, with the bench of this repository that
measured it and the machine it ran on; the public figures it is checked against are there too,
with their sources. This module only does arithmetic: it never measures, reads a store or
connects to anything.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Any

import yaml


@functools.cache
def coefficients() -> dict[str, Any]:
    text = resources.files("telemetry").joinpath("sizing.yaml").read_text()
    return dict(yaml.safe_load(text))


@dataclass(frozen=True)
class Inputs:
    gpus: int
    interval: float = 10.0
    gpus_per_server: int = 8
    nics_per_server: int = 8
    switches: int | None = None  # None: a rail-optimized Clos of `ports_per_switch`-port switches
    ports_per_switch: int = 64
    queues: int = 8
    sflow_rate: int = 400_000  # 1-in-N packets (SONiC's default is the port speed in Mb/s)
    port_gbps: float = 400.0
    load: float = 0.4  # host-facing ports' mean utilisation
    packet_bytes: int = 4096
    replicas: int = 2
    node_cores: int = 32
    node_disk_tb: float = 10.0
    flow_days: int = 2
    aggregate_days: int = 90
    flush_seconds: float = 2.0  # ingest.flush_seconds
    qps: float = 5.0  # dashboard and user queries per second


@dataclass
class Table:
    name: str
    family: str
    rows_per_s: float
    mb_per_s: float  # uncompressed, as ClickHouse holds the columns
    disk_mb_per_s: float  # on disk, one replica
    days: int

    @property
    def disk_gb_per_day(self) -> float:
        return self.disk_mb_per_s * 86_400 / 1e3

    @property
    def retained_tb(self) -> float:
        return self.disk_gb_per_day * self.days / 1e3


@dataclass
class Sizing:
    inputs: Inputs
    servers: int
    switches: int
    switch_ports: int
    flow_samples_per_s: float
    tables: list[Table]
    clickhouse: dict[str, Any]
    collectors: dict[str, Any]
    engine: dict[str, Any]
    parts: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def families(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for t in self.tables:
            f = out.setdefault(
                t.family,
                {"rows_per_s": 0.0, "mb_per_s": 0.0, "disk_gb_per_day": 0.0, "retained_tb": 0.0},
            )
            f["rows_per_s"] += t.rows_per_s
            f["mb_per_s"] += t.mb_per_s
            f["disk_gb_per_day"] += t.disk_gb_per_day
            f["retained_tb"] += t.retained_tb
        return out

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["families"] = self.families()
        for t, td in zip(self.tables, d["tables"], strict=True):
            td["disk_gb_per_day"] = t.disk_gb_per_day
            td["retained_tb"] = t.retained_tb
        return d


def clos_switches(host_ports: int, ports: int) -> int:
    """Switches of a rail-optimized Clos for `host_ports` NIC ports: leaves with half their
    ports down, spines and (past what two tiers reach) super-spines each half as many."""
    down = ports // 2
    leaves = math.ceil(host_ports / down)
    spines = math.ceil(leaves / 2)
    tiers3 = host_ports > down * ports  # two tiers reach `down` x `ports` host ports
    return leaves + spines + (math.ceil(spines / 2) if tiers3 else 0)


def size(inp: Inputs, coef: dict[str, Any] | None = None) -> Sizing:
    c = coef or coefficients()
    servers = math.ceil(inp.gpus / inp.gpus_per_server)
    nic_ports = servers * inp.nics_per_server
    switches = inp.switches or clos_switches(nic_ports, inp.ports_per_switch)
    switch_ports = switches * inp.ports_per_switch
    # sFlow: every host-facing port's packets sampled 1-in-R where the leaf receives them
    pkts = inp.port_gbps * 1e9 / 8 * inp.load / inp.packet_bytes
    samples = nic_ports * pkts / inp.sflow_rate
    entities = {
        "gpu": inp.gpus,
        "nic_port": nic_ports,
        "switch_port": switch_ports,
        "switch_queue": switch_ports * inp.queues,
    }
    bucket = max(inp.interval, 10.0)  # the rollups' interval is 10 s
    tables: list[Table] = []
    for name, t in c["tables"].items():
        per = t["per"]
        if per == "flow_sample":
            rows = samples * t["rows"]
        elif per == "egress_port":  # per-interval aggregates: a port carries a job's flows
            rows = min(samples * t["rows"], switch_ports / 10.0)
        elif t.get("per_second"):
            rows = entities[per] * t["rows"]
        elif t.get("rollup"):
            rows = entities[per] * t["rows"] / bucket
        else:
            rows = entities[per] * t["rows"] / inp.interval
        days = {"flow": inp.flow_days, "aggregate": inp.aggregate_days}.get(
            t.get("retention", ""), t.get("days", 30)
        )
        tables.append(
            Table(
                name,
                t["family"],
                rows,
                rows * t["bytes"] / 1e6,
                rows * t["disk_bytes"] / 1e6,
                int(days),
            )
        )
    mb = sum(t.mb_per_s for t in tables)
    disk_day_tb = sum(t.disk_gb_per_day for t in tables) / 1e3
    retained_tb = sum(t.retained_tb for t in tables)

    ing, pub, eng, col = c["ingest"], c["public"], c["engine"], c["collectors"]
    rows_s = sum(t.rows_per_s for t in tables)
    ingest_measured = mb * ing["store_cpu_s_per_uncompressed_mb"]["value"]
    ingest_public = mb / pub["ingest_mb_s_per_vcpu"]["value"]
    ingest_cores = max(ingest_measured, ingest_public)
    # the engine: its measured tick at 2,048 servers grown by its exponent, plus attributing
    # the tick's sampled flows (the large scenario samples sparsely: its tick holds few)
    ref = eng["cpu_s_per_tick"]
    tick_cpu = ref["value"] * (servers / ref["servers"]) ** eng["growth_exponent"]["value"]
    flows_tick = samples * inp.interval
    attr_cpu = flows_tick / 1e6 * eng["attribution_cpu_s_per_million_flows"]["value"]
    tick_total = tick_cpu + attr_cpu
    engine_cores = tick_total / inp.interval
    query_cores = inp.qps * pub["query_vcpu_per_qps"]["value"]
    util = c["policy"]["target_utilisation"]
    cores = (ingest_cores + engine_cores + query_cores) / util
    per_replica_tb = retained_tb * c["policy"]["disk_headroom"]
    shards = max(math.ceil(cores / inp.node_cores), math.ceil(per_replica_tb / inp.node_disk_tb), 1)
    # the agents' inserts, through `railscope ingest`
    inserts = servers * ing["node_inserts_per_cycle"]["value"] / inp.interval
    gw_cores = inserts * ing["gateway_cpu_ms_per_insert"]["value"] / 1e3
    gateways = max(1, math.ceil(gw_cores / util))
    per_table = len([t for t in tables if t.family in ("gpu", "nic")])
    sflow_workers = max(1, math.ceil(samples / col["sflow_samples_per_cpu_s"]["value"] / util))
    gnmi_cores = switches * col["gnmi_cpu_s_per_switch_interval"]["value"] / inp.interval
    pollers = max(1, math.ceil(gnmi_cores / util))
    direct = servers / inp.interval
    guidance = pub["inserts_per_s_per_table"]["value"]
    flush_for_guidance = gateways / guidance  # each gateway inserts each table once per flush
    notes = [
        f"today's path (every agent inserting): {_n(direct)} INSERTs/s per table, each a part on "
        f"every shard; through {gateways} gateway(s): {gateways / inp.flush_seconds:,.1f} per "
        f"table per shard (guidance: about {guidance:g}/s)",
    ]
    if gateways / inp.flush_seconds > guidance:
        notes.append(
            f"--flush-seconds {flush_for_guidance:g} keeps {guidance:g} insert/s per table per "
            f"shard with {gateways} gateways; rows then reach the store up to that long after "
            "collection: keep it below correlate --follow --lag (60 s in deploy/), or accept "
            "more, larger-than-tiny parts"
        )
    if tick_total > inp.interval * util:
        notes.append(
            f"engine: {tick_total:,.1f} CPU-s per {inp.interval:g} s tick is over "
            f"{util:.0%} of one interval; it parallelises inside ClickHouse, but attribution at "
            f"{flows_tick / 1e6:,.1f} M flows per tick is one query: sample more sparsely "
            "(--sflow-rate) or keep fewer flows per tick"
        )
    return Sizing(
        inputs=inp,
        servers=servers,
        switches=switches,
        switch_ports=switch_ports,
        flow_samples_per_s=samples,
        tables=tables,
        clickhouse={
            "rows_per_s": rows_s,
            "mb_per_s": mb,
            "disk_tb_per_day": disk_day_tb * inp.replicas,
            "retained_tb": retained_tb * inp.replicas,
            "ingest_cores_measured": ingest_measured,
            "ingest_cores_public_rule": ingest_public,
            "engine_cores": engine_cores,
            "query_cores": query_cores,
            "cores_per_replica_set": cores,
            "shards": shards,
            "replicas": inp.replicas,
            "nodes": shards * inp.replicas,
        },
        collectors={
            "gateway_inserts_per_s": inserts,
            "gateways": gateways,
            "sflow_workers": sflow_workers,
            "switch_pollers": pollers,
        },
        engine={
            "cpu_s_per_tick_inventory_and_counters": tick_cpu,
            "flows_per_tick": flows_tick,
            "cpu_s_per_tick_attribution": attr_cpu,
            "cpu_s_per_tick": tick_total,
            "cores": engine_cores,
        },
        parts={
            "direct_inserts_per_s_per_table": direct,
            "gateway_inserts_per_s_per_table_per_shard": gateways / inp.flush_seconds,
            "flush_seconds_for_guidance": flush_for_guidance,
            "tables_written_by_agents": per_table,
            "parts_to_delay_insert": pub["parts_to_delay_insert"]["value"],
            "parts_to_throw_insert": pub["parts_to_throw_insert"]["value"],
        },
        notes=notes,
    )


def _n(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:,.1f}" if x >= 1 else f"{x:.2f}"


def render(s: Sizing) -> str:
    i = s.inputs
    lines = [
        f"railscope sizing: {i.gpus:,} GPUs on {s.servers:,} servers, {s.switches:,} switches "
        f"({s.switch_ports:,} ports x {i.queues} queues), interval {i.interval:g} s; sFlow 1-in-"
        f"{i.sflow_rate:,} at {i.load:.0%} of {i.port_gbps:g}G: {_n(s.flow_samples_per_s)} samples/s",
        "",
        f"{'family':<16}{'rows/s':>12}{'MB/s':>10}{'disk GB/day':>13}{'kept':>7}{'TB kept':>10}"
        "   (one replica; MB/s uncompressed)",
    ]
    days = {t.family: t.days for t in s.tables}
    for fam, f in s.families().items():
        lines.append(
            f"{fam:<16}{_n(f['rows_per_s']):>12}{_n(f['mb_per_s']):>10}"
            f"{_n(f['disk_gb_per_day']):>13}{days[fam]:>6}d{_n(f['retained_tb']):>10}"
        )
    ch, co, en, pa = s.clickhouse, s.collectors, s.engine, s.parts
    lines += [
        f"{'total':<16}{_n(ch['rows_per_s']):>12}{_n(ch['mb_per_s']):>10}"
        f"{_n(ch['disk_tb_per_day'] / ch['replicas'] * 1e3):>13}{'':>7}"
        f"{_n(ch['retained_tb'] / ch['replicas']):>10}",
        "",
        f"ClickHouse: {ch['shards']} shard(s) x {ch['replicas']} replicas = {ch['nodes']} nodes of "
        f"{i.node_cores} cores / {i.node_disk_tb:g} TB; {_n(ch['disk_tb_per_day'])} TB/day and "
        f"{_n(ch['retained_tb'])} TB kept over all replicas",
        f"  cores per replica set: {_n(ch['cores_per_replica_set'])} = (ingest "
        f"{_n(max(ch['ingest_cores_measured'], ch['ingest_cores_public_rule']))} [measured "
        f"{_n(ch['ingest_cores_measured'])}, 1 vCPU/10 MB/s rule {_n(ch['ingest_cores_public_rule'])}]"
        f" + engine {_n(ch['engine_cores'])} + queries {_n(ch['query_cores'])}) / target utilisation",
        f"engine: {_n(en['cpu_s_per_tick'])} CPU-s per tick ({_n(en['cpu_s_per_tick_inventory_and_counters'])}"
        f" detectors and inventory + {_n(en['cpu_s_per_tick_attribution'])} attributing "
        f"{_n(en['flows_per_tick'] / 1e6)} M flows) = {_n(en['cores'])} cores",
        f"collectors: {co['gateways']} ingest gateway(s) for {_n(co['gateway_inserts_per_s'])} "
        f"agent inserts/s; {co['sflow_workers']} sFlow worker(s); {co['switch_pollers']} gNMI "
        "switch poller(s)",
        f"parts: {_n(pa['gateway_inserts_per_s_per_table_per_shard'])} inserts/s per table per shard "
        f"through the gateways (agents direct: {_n(pa['direct_inserts_per_s_per_table'])}); ClickHouse "
        f"slows inserts at {pa['parts_to_delay_insert']:,} active parts per partition, refuses at "
        f"{pa['parts_to_throw_insert']:,}",
    ]
    lines += [f"note: {n}" for n in s.notes]
    lines.append(
        "coefficients: telemetry/sizing.yaml (each names its bench and machine); docs/sizing.md"
    )
    return "\n".join(lines)
