"""Versioned, idempotent schema migrations. Applied versions are rows in `schema_migrations`.

Rules: never edit a released migration's meaning; add a new one. Every migration carries its own
DDL text, frozen as it was released (the tables and columns at the bottom of this module): a
migration never renders today's record kinds, so renaming or removing a field later cannot
change what an old migration does. Adding a field to a kind is a new migration with
`add_columns(table, "<column_sql(field)> AFTER <previous>")`; adding a kind is a new migration
with a frozen `TableDef` (print today's with `TableDef.of(kind)`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import groupby

from telemetry.store.schema import (
    DEDUP_WINDOW,
    LOCAL_SUFFIX,
    TableDef,
    alter_sql,
    backfill_sql,
    create_table_sql,
    database_sql,
    distributed_sql,
    drop_view_sql,
    materialized_view_sql,
    rename_sql,
    table_ttl_sql,
    ttl_sql,
)


@dataclass(frozen=True)
class Context:
    database: str
    cluster: str | None
    ttl_overrides: Mapping[str, int | None]


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: Callable[[Context], list[str]]


Step = Callable[[Context], list[str]]


def create_tables(tables: Callable[[], tuple[TableDef, ...]]) -> Step:
    """CREATE TABLE IF NOT EXISTS for frozen table definitions (TTL overrides from the config
    are applied after the migrations, by `Store.migrate`)."""
    return lambda ctx: [s for t in tables() for s in create_table_sql(t, ctx.database, ctx.cluster)]


def alter_columns(columns: Callable[[], tuple[tuple[str, str, str], ...]]) -> Step:
    """(table, ADD | MODIFY | DROP, column text) -> ALTER TABLE on both tables in cluster mode.
    A run of one verb on one table is one ALTER with its actions comma-separated: one metadata
    change (and in cluster mode one DDL-queue entry) instead of one per column, which made a
    fresh store's migration ~3x faster."""
    verbs = {
        "ADD": "ADD COLUMN IF NOT EXISTS",
        "MODIFY": "MODIFY COLUMN",
        "DROP": "DROP COLUMN IF EXISTS",
    }

    def stmts(ctx: Context) -> list[str]:
        return [
            s
            for (table, verb), run in groupby(columns(), key=lambda c: c[:2])
            for s in alter_sql(
                table, ", ".join(f"{verbs[verb]} {c}" for _, _, c in run), ctx.database, ctx.cluster
            )
        ]

    return stmts


def rename_tables(renames: Mapping[str, str]) -> Step:
    return lambda ctx: [
        s for old, new in renames.items() for s in rename_sql(old, new, ctx.database, ctx.cluster)
    ]


def reshard(keys: Mapping[str, tuple[str, ...]]) -> Step:
    """Cluster mode: recreate each Distributed table sharded by its frozen key columns (nothing
    on a single server)."""
    return lambda ctx: [
        distributed_sql(t, ctx.database, ctx.cluster, cols, replace=True)
        for t, cols in keys.items()
        if ctx.cluster
    ]


@dataclass(frozen=True)
class Rollup:
    """A table kept by a materialized view on inserts into `source` (frozen like a TableDef):
    `select` reads `{source}`; the view is `<table.name>_mv`."""

    table: TableDef
    source: str
    select: str


def create_rollups(rollups: Callable[[], tuple[Rollup, ...]]) -> Step:
    """Per rollup: its table, the view feeding it from then on, then what the source already
    held (the view only sees new inserts; a row inserted between the view and the backfill is
    counted twice in the sums, never in the min/max/any columns the engine prunes with)."""
    return lambda ctx: [
        s
        for r in rollups()
        for s in (
            *create_table_sql(r.table, ctx.database, ctx.cluster),
            materialized_view_sql(
                r.table.name + "_mv", r.table.name, r.source, r.select, ctx.database, ctx.cluster
            ),
            backfill_sql(r.table.name, r.source, r.select, ctx.database),
        )
    ]


def steps(*parts: Step) -> Step:
    return lambda ctx: [s for p in parts for s in p(ctx)]


# Migration 7: Distributed tables sharded by the entity (schema.entity_columns as released), so a
# retried batch lands on the same shards (frozen: a later kind brings its key in its TableDef).
MIGRATION_7_SHARD_KEYS: dict[str, tuple[str, ...]] = {
    "attributed_flows": ("cluster", "src_namespace", "src_job"),
    "component_stats": ("cluster", "component"),
    "dci_usages": ("cluster", "src_idc", "dest_idc"),
    "ecmp_group_samples": ("cluster", "switch", "group"),
    "findings": ("cluster", "kind", "subject", "finding_id"),
    "flow_samples": ("cluster", "src_ip", "dst_ip"),
    "gpu_events": ("cluster", "node"),
    "gpu_nic_affinities": ("cluster", "node", "gpu"),
    "gpu_samples": ("cluster", "node", "gpu"),
    "hdfs_block_placements": ("cluster", "violation", "path", "block_id"),
    "hdfs_datanode_samples": ("cluster", "datanode"),
    "hdfs_namenode_samples": ("cluster", "namenode"),
    "hdfs_placement_totals": ("cluster", "prefix"),
    "hdfs_transfers": ("cluster", "src_idc", "dest_idc"),
    "hypernodes": ("cluster", "hypernode", "member"),
    "jobs": ("cluster", "namespace", "job"),
    "lldp_links": ("cluster", "local_device", "local_port"),
    "namespaces": ("cluster", "namespace"),
    "nic_priority_samples": ("cluster", "node", "netdev", "priority"),
    "nic_samples": ("cluster", "node", "device", "port"),
    "nodes": ("cluster", "node"),
    "pod_ip_leases": ("cluster", "ip"),
    "pods": ("cluster", "namespace", "pod"),
    "switch_port_samples": ("cluster", "switch", "port"),
    "switch_priority_samples": ("cluster", "switch", "port", "priority"),
    "switch_queue_samples": ("cluster", "switch", "port", "queue"),
    "switch_statuses": ("cluster", "switch", "asic"),
}

# Migration 4: tables named by the one rule (`RecordKind.table`, the kind's plural).
MIGRATION_4_RENAMES = {
    "gpu_nic_affinity": "gpu_nic_affinities",
    "switch_status": "switch_statuses",
    "dci_usage": "dci_usages",
    "inv_pods": "pods",
    "inv_pod_ips": "pod_ip_leases",
    "inv_namespaces": "namespaces",
    "inv_nodes": "nodes",
    "inv_hypernodes": "hypernodes",
    "inv_jobs": "jobs",
    "flows_attributed": "attributed_flows",
}


MIGRATIONS: list[Migration] = [
    Migration(1, "create the record tables", create_tables(lambda: FIRST_SCHEMA)),
    # Stores created from the first schema: the exporters' and the engine's kinds and fields.
    Migration(
        2,
        "exporter and correlation kinds and fields",
        steps(
            create_tables(lambda: MIGRATION_2_TABLES),
            alter_columns(lambda: MIGRATION_2_COLUMNS),
        ),
    ),
    Migration(
        3,
        "attributed flows carry rail, NIC and leaf port of both ends",
        alter_columns(lambda: MIGRATION_3_COLUMNS),
    ),
    Migration(
        4,
        "one name per kind: every table is its record kind's plural; flow_samples.ecmp_group removed",
        steps(
            rename_tables(MIGRATION_4_RENAMES),
            alter_columns(lambda: (("flow_samples", "DROP", "`ecmp_group`"),)),
        ),
    ),
    Migration(
        5,
        "PFC per priority on switch ports (switch_priority_samples); the priority-3 columns of "
        "nic_samples and switch_port_samples removed (lossless priorities come from config)",
        steps(
            create_tables(lambda: MIGRATION_5_TABLES),
            alter_columns(lambda: MIGRATION_5_COLUMNS),
        ),
    ),
    Migration(
        6,
        "nic_samples: every InfiniBand port counter, mlx4 extended and mlx5 hw_counters, port state ids; gpu_samples: dcgm-exporter default-counter parity fields",
        alter_columns(lambda: MIGRATION_6_COLUMNS),
    ),
    Migration(
        7,
        "cluster mode: Distributed tables sharded by cityHash64 of the entity columns instead "
        "of rand(), so a retried batch lands on the same shards",
        reshard(MIGRATION_7_SHARD_KEYS),
    ),
    Migration(
        8,
        "GPU pool: queues, podgroups, priority_classes, resource_quotas, pod_events; GPU requests, "
        "priority class, podgroup and GPU model of pods; GPU capacity and model of nodes",
        steps(
            create_tables(lambda: MIGRATION_8_TABLES),
            alter_columns(lambda: MIGRATION_8_COLUMNS),
        ),
    ),
    Migration(
        9,
        "collective_samples: NCCL Inspector collectives per rank, attributed to pod, job and GPU",
        create_tables(lambda: MIGRATION_9_TABLES),
    ),
    Migration(
        10,
        "incidents and incident_findings: findings grouped by root cause (issue 19)",
        create_tables(lambda: MIGRATION_10_TABLES),
    ),
    Migration(
        11,
        "gpu_processes: GPU memory per process (NVML) and the process's pod from its cgroup",
        create_tables(lambda: MIGRATION_11_TABLES),
    ),
    Migration(
        12,
        "per-interval rollups kept on insert by materialized views: switch port, queue, NIC and "
        "GPU counters (first/last sample time, min/max/nulls per counter) and the (job, switch, "
        "port) keys of attributed flows per 10 s, backfilled from what the tables held",
        create_rollups(lambda: MIGRATION_12_ROLLUPS),
    ),
    Migration(
        13,
        "job_port_intervals written by the engine after each attribution (INSERT ... SELECT of "
        "the window's attributed flows) instead of by job_port_intervals_mv: a view depending on "
        "attributed_flows left the attribution's INSERT on one thread",
        lambda ctx: [drop_view_sql("job_port_intervals_mv", ctx.database, ctx.cluster)],
    ),
    Migration(
        14,
        "attribution_index: the lease segments the attribution looks flows up in, as the "
        "engine built them from the inventory, kept between ticks and rebuilt when the "
        "inventory changes",
        create_tables(lambda: MIGRATION_14_TABLES),
    ),
    Migration(
        15,
        "nic_samples: link-level (802.3x) pause frames and pause time, received and sent",
        alter_columns(lambda: MIGRATION_15_COLUMNS),
    ),
    Migration(
        16,
        "attribution_index: each segment number in an array of its own, in the narrowest type "
        "that holds it (a query copied the one flattened array once per use and block)",
        alter_columns(lambda: MIGRATION_16_COLUMNS),
    ),
    Migration(
        17,
        "collective_samples: the NCCL algorithm, protocol, channels and communicator name of "
        "each collective (Inspector v4.2 coll_algo / coll_proto)",
        alter_columns(lambda: MIGRATION_17_COLUMNS),
    ),
    Migration(
        18,
        "nccl_settings: the NCCL_* environment variables of each pod's containers, as the "
        "inventory reads them from the pod spec, time-versioned",
        create_tables(lambda: MIGRATION_18_TABLES),
    ),
    Migration(
        19,
        "incidents: what to do about each (remediation) and the docs page of its root kind",
        alter_columns(lambda: MIGRATION_19_COLUMNS),
    ),
]


def bookkeeping_sql(ctx: Context) -> list[str]:
    db = f"`{ctx.database}`"
    cols = "(version UInt32, description String, applied_at DateTime64(3, 'UTC'))"
    if ctx.cluster:
        cl = f"`{ctx.cluster}`"
        return [
            database_sql(ctx.database, ctx.cluster),
            f"CREATE TABLE IF NOT EXISTS {db}.`schema_migrations{LOCAL_SUFFIX}` ON CLUSTER {cl} {cols} "
            f"ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{{shard}}/{ctx.database}/schema_migrations', '{{replica}}') ORDER BY version",
            f"CREATE TABLE IF NOT EXISTS {db}.`schema_migrations` ON CLUSTER {cl} AS {db}.`schema_migrations{LOCAL_SUFFIX}` "
            f"ENGINE = Distributed({cl}, {db}, `schema_migrations{LOCAL_SUFFIX}`, version)",
        ]
    return [
        database_sql(ctx.database),
        f"CREATE TABLE IF NOT EXISTS {db}.`schema_migrations` {cols} "
        f"ENGINE = ReplacingMergeTree ORDER BY version SETTINGS non_replicated_deduplication_window = {DEDUP_WINDOW}",
    ]


def render_all(ctx: Context) -> list[str]:
    """Every statement a fresh store runs, in order (for `db ddl` and tests), TTL overrides last."""
    from telemetry.records import KINDS

    out = bookkeeping_sql(ctx)
    for m in MIGRATIONS:
        out += m.statements(ctx)
    tables = {k.table: k for k in KINDS.values()}
    for table, days in ctx.ttl_overrides.items():
        if table in tables:
            out.append(ttl_sql(tables[table], ctx.database, days, ctx.cluster))
            out += [  # a rollup keeps what its source keeps
                table_ttl_sql(r.table.name, "bucket", ctx.database, days, ctx.cluster)
                for r in MIGRATION_12_ROLLUPS
                if r.source == table
            ]
    return out


# --- frozen DDL: never edit what a released migration created ----------------------------------
# Migration 1: the first schema (git 01dd334).
FIRST_SCHEMA: tuple[TableDef, ...] = (
    TableDef(
        "gpu_samples",
        """\
`ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`node` LowCardinality(String) COMMENT 'Kubernetes node name.'
`gpu` UInt16 COMMENT 'GPU index on the node.'
`uuid` LowCardinality(String) COMMENT 'GPU UUID.'
`mig` LowCardinality(String) COMMENT 'MIG instance (GPU instance/compute instance), empty for a full GPU.'
`model` LowCardinality(String) COMMENT 'Product name.'
`pci_bus_id` LowCardinality(String) COMMENT 'PCI bus id of the GPU.'
`pod` LowCardinality(String) COMMENT 'Pod using the GPU (from kubelet pod-resources), empty if none.'
`namespace` LowCardinality(String) COMMENT 'Namespace of that pod.'
`up` UInt8 COMMENT '1 when the GPU answered NVML, 0 when lost / fallen off the bus.'
`utilization_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'GPU utilization (0-1).'
`memory_utilization_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Memory controller utilization (0-1).'
`memory_used_bytes` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Frame buffer used.'
`memory_total_bytes` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Frame buffer size.'
`sm_clock_hertz` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'SM clock.'
`memory_clock_hertz` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Memory clock.'
`temperature_celsius` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'GPU die temperature.'
`memory_temperature_celsius` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'HBM temperature.'
`power_watts` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Power draw.'
`power_limit_watts` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Enforced power limit.'
`energy_joules_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Energy since driver load.'
`clock_event_reasons` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bitmask of NVML clock-event (throttle) reasons.'
`power_violation_seconds_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Time throttled by power.'
`thermal_violation_seconds_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Time throttled by temperature.'
`ecc_corrected_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Volatile corrected ECC errors.'
`ecc_uncorrected_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Volatile uncorrected ECC errors.'
`remapped_rows_pending` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Rows pending remap (1 = reset needed).'
`remapped_rows_failure_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Row remapping failures.'
`pcie_tx_bytes_per_second` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'PCIe TX throughput.'
`pcie_rx_bytes_per_second` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'PCIe RX throughput.'
`pcie_replay_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PCIe replay counter.'
`nvlink_tx_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'NVLink bytes sent, all links.'
`nvlink_rx_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'NVLink bytes received, all links.'
`nvlink_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'NVLink CRC/replay/recovery errors, all links.'
`sm_active_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'GPM SM activity (Hopper+).'
`sm_occupancy_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'GPM SM occupancy (Hopper+).'
`tensor_active_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'GPM tensor pipe activity (Hopper+).'
`dram_active_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'GPM DRAM activity (Hopper+).'
`xid_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'XID errors seen since the exporter started.'
""",
        order_by="`cluster`, `node`, `gpu`, `ts`",
        comment="One GPU (or MIG instance) sampled through NVML. Null = not supported / not read.",
        ttl=("ts", 30),
    ),
    TableDef(
        "gpu_events",
        """\
`ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`node` LowCardinality(String) COMMENT 'Kubernetes node name.'
`gpu` UInt16 COMMENT 'GPU index on the node.'
`uuid` LowCardinality(String) COMMENT 'GPU UUID.'
`event` LowCardinality(String) COMMENT 'xid | gpu_lost | throttle_start | throttle_end'
`xid` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'XID code (0 when not an XID event).'
`detail` String CODEC(ZSTD(1)) COMMENT 'Free text from the driver/exporter.'
""",
        order_by="`cluster`, `node`, `ts`",
        comment="An event on a GPU: XID error, GPU lost, throttling start/end.",
        ttl=("ts", 365),
    ),
    TableDef(
        "gpu_nic_affinity",
        """\
`ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`node` LowCardinality(String) COMMENT 'Kubernetes node name.'
`gpu` UInt16 COMMENT 'GPU index.'
`gpu_pci` LowCardinality(String) COMMENT 'GPU PCI address.'
`nic` LowCardinality(String) COMMENT 'RDMA device (mlx5_0) under the same PCIe switch; empty if none.'
`netdev` LowCardinality(String) COMMENT 'Netdev of that NIC.'
`pcie_switch` LowCardinality(String) COMMENT 'PCI address of the shared upstream bridge.'
`numa_node` Nullable(Int64) CODEC(ZSTD(1)) COMMENT 'NUMA node of the GPU.'
`rail` Nullable(Int64) CODEC(ZSTD(1)) COMMENT 'Rail (NIC index) the GPU uses.'
`direct_nic` UInt8 COMMENT '1 when a NIC shares the GPU\\'s PCIe switch.'
""",
        order_by="`cluster`, `node`, `gpu`, `ts`",
        comment="Per GPU: the NIC under the same PCIe switch (if any), NUMA node and rail.",
        ttl=("ts", 365),
    ),
    TableDef(
        "nic_samples",
        """\
`ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`node` LowCardinality(String) COMMENT 'Kubernetes node name.'
`device` LowCardinality(String) COMMENT 'RDMA device (mlx5_0).'
`port` UInt8 COMMENT 'Port number.'
`netdev` LowCardinality(String) COMMENT 'Netdev (eth0 / ens1f0np0).'
`link_layer` LowCardinality(String) COMMENT 'Ethernet | InfiniBand.'
`up` UInt8 COMMENT '1 when the port state is ACTIVE.'
`rate_bytes_per_second` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Port rate.'
`rx_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bytes received (port_rcv_data x 4).'
`tx_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bytes sent (port_xmit_data x 4).'
`rx_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets received.'
`tx_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets sent.'
`rx_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Receive errors.'
`tx_discards_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Transmit discards.'
`ecn_marked_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'RoCE packets received with ECN CE (np_ecn_marked_roce_packets).'
`cnp_sent_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'CNPs sent as notification point (np_cnp_sent).'
`cnp_handled_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'CNPs handled as reaction point (rp_cnp_handled).'
`cnp_ignored_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'CNPs ignored (rp_cnp_ignored).'
`out_of_sequence_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Out-of-sequence packets.'
`packet_seq_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'NAK sequence errors.'
`local_ack_timeout_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Local ACK timeouts.'
`out_of_buffer_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Drops for lack of receive WQEs.'
`pfc_rx_pause_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC pause frames received, all priorities.'
`pfc_tx_pause_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC pause frames sent, all priorities.'
`pfc_rx_pause_prio3_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC pauses received on priority 3 (RoCE default).'
`pfc_tx_pause_prio3_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC pauses sent on priority 3.'
`pfc_pause_duration_us_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Time paused (rx), microseconds.'
`rx_discards_phy_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets discarded by the PHY for lack of buffer.'
`pause_storm_events_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'tx pause storm warning+error events.'
`pci_stalled_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Outbound PCIe stalled reads+writes.'
`resets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Counter resets detected (NIC reset / driver reload).'
""",
        order_by="`cluster`, `node`, `device`, `port`, `ts`",
        comment="One RDMA NIC port: traffic, RoCE congestion (ECN/CNP), per-priority PFC, health.",
        ttl=("ts", 30),
    ),
    TableDef(
        "switch_port_samples",
        """\
`ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`switch` LowCardinality(String) COMMENT 'Switch hostname.'
`asic` LowCardinality(String) COMMENT 'ASIC namespace on multi-ASIC switches; empty otherwise.'
`port` LowCardinality(String) COMMENT 'Port name as the switch shows it (Ethernet0).'
`role` LowCardinality(String) COMMENT 'leaf | spine | superspine | dci.'
`up` Nullable(UInt8) COMMENT '1 when oper status is up.'
`speed_bps` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Port speed, bits/s.'
`rx_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Octets received.'
`tx_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Octets sent.'
`rx_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Unicast+multicast+broadcast packets received.'
`tx_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets sent.'
`rx_discards_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Inbound discards.'
`tx_discards_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Outbound discards.'
`rx_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Inbound errors.'
`tx_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Outbound errors.'
`pfc_rx_pause_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC frames received, all priorities.'
`pfc_tx_pause_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC frames sent, all priorities.'
`pfc_rx_pause_prio3_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC frames received on priority 3.'
`pfc_tx_pause_prio3_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC frames sent on priority 3.'
`pfc_rx_pause_duration_us_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Pause duration received, microseconds.'
`link_down_events_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Link down transitions (flaps).'
`rx_bytes_per_second` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Rate from RATES:* or derived.'
`tx_bytes_per_second` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Rate from RATES:* or derived.'
`tx_utilization_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'tx rate / speed.'
""",
        order_by="`cluster`, `switch`, `port`, `ts`",
        comment="One switch port: traffic, errors, discards, per-priority PFC.",
        ttl=("ts", 30),
    ),
    TableDef(
        "switch_queue_samples",
        """\
`ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`switch` LowCardinality(String) COMMENT 'Switch hostname.'
`asic` LowCardinality(String) COMMENT 'ASIC namespace; empty otherwise.'
`port` LowCardinality(String) COMMENT 'Port name.'
`queue` UInt8 COMMENT 'Queue index (or PG index for priority groups).'
`queue_type` LowCardinality(String) COMMENT 'unicast | multicast | pg.'
`tx_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets sent from the queue.'
`tx_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bytes sent from the queue.'
`dropped_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets dropped.'
`ecn_marked_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets ECN-marked by WRED.'
`watermark_bytes` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Peak occupancy in the interval.'
`pfc_wd_storm_detected` Nullable(UInt8) COMMENT '1 while the PFC watchdog sees a storm.'
`pfc_wd_storms_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC watchdog storms detected.'
`pfc_wd_dropped_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets dropped by the PFC watchdog.'
""",
        order_by="`cluster`, `switch`, `port`, `queue`, `ts`",
        comment="One egress queue or ingress priority group of a switch port.",
        ttl=("ts", 30),
    ),
    TableDef(
        "flow_samples",
        """\
`ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`agent` LowCardinality(String) COMMENT 'sFlow agent address (the switch).'
`switch` LowCardinality(String) COMMENT 'Switch hostname, when known.'
`in_port` LowCardinality(String) COMMENT 'Input interface (ifIndex or name).'
`out_port` LowCardinality(String) COMMENT 'Output interface: the ECMP member for uplinks.'
`src_ip` String CODEC(ZSTD(1)) COMMENT 'Source IP.'
`dst_ip` String CODEC(ZSTD(1)) COMMENT 'Destination IP.'
`src_port` UInt16 COMMENT 'L4 source port (entropy for RoCEv2).'
`dst_port` UInt16 COMMENT 'L4 destination port (4791 = RoCEv2).'
`protocol` UInt8 COMMENT 'IP protocol.'
`vlan` UInt16 COMMENT 'VLAN id, 0 if untagged.'
`dscp` UInt8 COMMENT 'DSCP.'
`ecn` UInt8 COMMENT 'ECN bits (3 = CE).'
`bth_opcode` Nullable(UInt8) COMMENT 'InfiniBand BTH opcode (RoCEv2).'
`dest_qp` Nullable(UInt32) CODEC(ZSTD(1)) COMMENT 'InfiniBand BTH destination QP (RoCEv2).'
`psn` Nullable(UInt32) CODEC(ZSTD(1)) COMMENT 'InfiniBand BTH PSN (RoCEv2).'
`frame_bytes` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Sampled frame length.'
`sampling_rate` UInt32 CODEC(T64, ZSTD(1)) COMMENT '1-in-N sampling rate.'
`bytes` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Estimated bytes this sample stands for (frame x rate).'
`packets` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Estimated packets (rate).'
""",
        order_by="`cluster`, `ts`, `src_ip`, `dst_ip`",
        comment="A sampled packet (sFlow) scaled by its sampling rate; RoCEv2 adds BTH fields.",
        ttl=("ts", 14),
    ),
    TableDef(
        "lldp_links",
        """\
`ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`local_device` LowCardinality(String) COMMENT 'Host or switch that saw the neighbour.'
`local_port` LowCardinality(String) COMMENT 'Local interface.'
`remote_device` LowCardinality(String) COMMENT 'Neighbour system name.'
`remote_port` LowCardinality(String) COMMENT 'Neighbour port id / description.'
`remote_chassis_id` String CODEC(ZSTD(1)) COMMENT 'Neighbour chassis id.'
`source` LowCardinality(String) COMMENT 'lldpcli | sonic | sim.'
""",
        order_by="`cluster`, `local_device`, `local_port`, `ts`",
        comment="An LLDP neighbour seen on a local port (host or switch).",
        ttl=("ts", 90),
    ),
    TableDef(
        "hdfs_transfers",
        """\
`ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`datanode` LowCardinality(String) COMMENT 'DataNode that logged the transfer.'
`op` LowCardinality(String) COMMENT 'HDFS_READ | HDFS_WRITE | replication.'
`src` String CODEC(ZSTD(1)) COMMENT 'Source address host:port.'
`dest` String CODEC(ZSTD(1)) COMMENT 'Destination address host:port.'
`src_idc` LowCardinality(String) COMMENT 'IDC of the source (\\'\\' = unknown host).'
`dest_idc` LowCardinality(String) COMMENT 'IDC of the destination (\\'\\' = unknown host).'
`src_rack` LowCardinality(String) COMMENT 'Rack path of the source.'
`dest_rack` LowCardinality(String) COMMENT 'Rack path of the destination.'
`bytes` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Bytes transferred.'
`client_id` String CODEC(ZSTD(1)) COMMENT 'DFSClient id.'
`block_id` String CODEC(ZSTD(1)) COMMENT 'Block id (BP-...:blk_...).'
`duration_seconds` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Transfer duration.'
`cross_idc` Bool COMMENT 'Source and destination in different IDCs.'
`write_mode` LowCardinality(String) COMMENT 'sync | async | \\'\\' for reads.'
""",
        order_by="`cluster`, `src_idc`, `dest_idc`, `ts`",
        comment="One HDFS block transfer from a DataNode clienttrace line, mapped to IDC/rack.",
        ttl=("ts", 30),
    ),
    TableDef(
        "hdfs_block_placements",
        """\
`ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`path` String CODEC(ZSTD(1)) COMMENT 'File path.'
`block_id` String CODEC(ZSTD(1)) COMMENT 'Block id.'
`replicas` UInt16 COMMENT 'Replicas found.'
`expected_replicas` UInt16 COMMENT 'Replication factor.'
`replicas_by_idc` String CODEC(ZSTD(1)) COMMENT 'JSON object IDC -> replica count.'
`locations` String CODEC(ZSTD(1)) COMMENT 'JSON list of host/rack locations.'
`violation` Bool COMMENT 'Placement breaks the policy.'
`reason` String CODEC(ZSTD(1)) COMMENT 'Why it breaks the policy (\\'\\' if it does not).'
""",
        order_by="`cluster`, `violation`, `path`, `block_id`, `ts`",
        comment="Replica placement of one block (from fsck or WebHDFS) judged against the policy.",
        ttl=("ts", 90),
    ),
    TableDef(
        "inv_pods",
        """\
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`namespace` LowCardinality(String) COMMENT 'Namespace = tenant.'
`pod` LowCardinality(String) COMMENT 'Pod name.'
`uid` String CODEC(ZSTD(1)) COMMENT 'Pod UID.'
`node` LowCardinality(String) COMMENT 'Node the pod ran on.'
`job` LowCardinality(String) COMMENT 'Volcano job (volcano.sh/job-name), \\'\\' if none.'
`phase` LowCardinality(String) COMMENT 'Pod phase.'
`gpus` String CODEC(ZSTD(1)) COMMENT 'JSON list of GPU indices/UUIDs assigned.'
`valid_from` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of validity of this fact (UTC).'
`valid_to` Nullable(DateTime64(3, 'UTC')) CODEC(ZSTD(1)) COMMENT 'End of validity (UTC); null while the fact still holds.'
`updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Version of this row: the latest wins.'
""",
        order_by="`cluster`, `namespace`, `pod`, `valid_from`",
        comment="A pod's placement and ownership over time.",
        partition_by=None,
        version="updated_at",
    ),
    TableDef(
        "inv_pod_ips",
        """\
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`ip` String CODEC(ZSTD(1)) COMMENT 'The IP address.'
`namespace` LowCardinality(String) COMMENT 'Namespace = tenant.'
`pod` LowCardinality(String) COMMENT 'Pod name.'
`node` LowCardinality(String) COMMENT 'Node.'
`interface` LowCardinality(String) COMMENT 'Pod interface (eth0, net1, ...).'
`network` LowCardinality(String) COMMENT 'Multus network name; \\'\\' for the primary.'
`mac` String CODEC(ZSTD(1)) COMMENT 'MAC address.'
`pci_address` String CODEC(ZSTD(1)) COMMENT 'SR-IOV VF PCI address (device-info).'
`primary` Bool COMMENT 'The pod\\'s primary IP.'
`valid_from` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of validity of this fact (UTC).'
`valid_to` Nullable(DateTime64(3, 'UTC')) CODEC(ZSTD(1)) COMMENT 'End of validity (UTC); null while the fact still holds.'
`updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Version of this row: the latest wins.'
""",
        order_by="`cluster`, `ip`, `valid_from`",
        comment="An IP held by a pod over an interval: primary and Multus secondary (RDMA) IPs.",
        partition_by=None,
        version="updated_at",
    ),
    TableDef(
        "inv_nodes",
        """\
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`node` LowCardinality(String) COMMENT 'Node name.'
`labels` String CODEC(ZSTD(1)) COMMENT 'JSON object of node labels.'
`idc` LowCardinality(String) COMMENT 'Data center (from labels or topology).'
`su` LowCardinality(String) COMMENT 'Scalable unit.'
`gpus` UInt16 COMMENT 'Allocatable GPUs.'
`valid_from` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of validity of this fact (UTC).'
`valid_to` Nullable(DateTime64(3, 'UTC')) CODEC(ZSTD(1)) COMMENT 'End of validity (UTC); null while the fact still holds.'
`updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Version of this row: the latest wins.'
""",
        order_by="`cluster`, `node`, `valid_from`",
        comment="A Kubernetes node: labels and where it sits.",
        partition_by=None,
        version="updated_at",
    ),
    TableDef(
        "inv_hypernodes",
        """\
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`hypernode` LowCardinality(String) COMMENT 'HyperNode name.'
`tier` UInt8 COMMENT 'HyperNode tier (1 = lowest).'
`tier_name` LowCardinality(String) COMMENT 'Tier name, if given.'
`member` String CODEC(ZSTD(1)) COMMENT 'Member: node name or child HyperNode name.'
`member_type` LowCardinality(String) COMMENT 'Node | HyperNode.'
`selector` LowCardinality(String) COMMENT 'exactMatch | regexMatch | labelMatch.'
`valid_from` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of validity of this fact (UTC).'
`valid_to` Nullable(DateTime64(3, 'UTC')) CODEC(ZSTD(1)) COMMENT 'End of validity (UTC); null while the fact still holds.'
`updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Version of this row: the latest wins.'
""",
        order_by="`cluster`, `hypernode`, `member`, `valid_from`",
        comment="A Volcano HyperNode member: one row per (hypernode, member).",
        partition_by=None,
        version="updated_at",
    ),
    TableDef(
        "inv_jobs",
        """\
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`namespace` LowCardinality(String) COMMENT 'Namespace = tenant.'
`job` LowCardinality(String) COMMENT 'Job name.'
`queue` LowCardinality(String) COMMENT 'Volcano queue.'
`replicas` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Total task replicas.'
`topology_mode` LowCardinality(String) COMMENT 'hard | soft | \\'\\' (no networkTopology).'
`highest_tier_allowed` Nullable(UInt8) COMMENT 'spec.networkTopology.highestTierAllowed.'
`highest_tier_name` LowCardinality(Nullable(String)) COMMENT 'spec.networkTopology.highestTierName.'
`allocated_hypernode` String CODEC(ZSTD(1)) COMMENT 'PodGroup volcano.sh/job-allocated-hypernode annotation.'
`valid_from` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of validity of this fact (UTC).'
`valid_to` Nullable(DateTime64(3, 'UTC')) CODEC(ZSTD(1)) COMMENT 'End of validity (UTC); null while the fact still holds.'
`updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Version of this row: the latest wins.'
""",
        order_by="`cluster`, `namespace`, `job`, `valid_from`",
        comment="A Volcano job and its networkTopology constraint.",
        partition_by=None,
        version="updated_at",
    ),
    TableDef(
        "findings",
        """\
`finding_id` String CODEC(ZSTD(1)) COMMENT 'Stable id: hash of kind + subject + first window.'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`kind` LowCardinality(String) COMMENT 'Finding kind (placement_violation, ecmp_imbalance, pfc_storm, ...).'
`category` LowCardinality(String) COMMENT 'placement | fabric | node | storage | topology.'
`severity` LowCardinality(String) COMMENT 'critical | warning | info.'
`subject_type` LowCardinality(String) COMMENT 'job | pod | link | port | nic | gpu | block | hypernode ...'
`subject` String CODEC(ZSTD(1)) COMMENT 'What the finding is about.'
`summary` String CODEC(ZSTD(1)) COMMENT 'One line a person reads.'
`evidence` String CODEC(ZSTD(1)) COMMENT 'JSON: the numbers and the rows they came from.'
`window_start` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of the window that produced it.'
`window_end` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'End of that window.'
`first_seen` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'First window it appeared in.'
`last_seen` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Last window it appeared in.'
`updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Row version.'
""",
        order_by="`cluster`, `kind`, `subject`, `finding_id`",
        comment="A correlated finding; a persisting one is updated (same finding_id), not duplicated.",
        ttl=("first_seen", 180),
        partition_by=None,
        version="updated_at",
    ),
    TableDef(
        "component_stats",
        """\
`ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`host` LowCardinality(String) COMMENT 'Where the component runs.'
`component` LowCardinality(String) COMMENT 'Component name (source:node, sink:clickhouse, ...).'
`received_total` UInt64 CODEC(Delta, ZSTD(1)) COMMENT 'Records received.'
`sent_total` UInt64 CODEC(Delta, ZSTD(1)) COMMENT 'Records sent on.'
`dropped_total` UInt64 CODEC(Delta, ZSTD(1)) COMMENT 'Records dropped.'
`failed_total` UInt64 CODEC(Delta, ZSTD(1)) COMMENT 'Failed operations.'
`last_duration_seconds` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Duration of the last collect/export.'
`success` Nullable(UInt8) COMMENT '1 when the last operation succeeded.'
`spool_bytes` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Bytes waiting in the spool (sinks).'
""",
        order_by="`cluster`, `component`, `ts`",
        comment="Self-report of a pipeline component (source, transform, sink) per interval.",
        ttl=("ts", 30),
    ),
)
# Migration 2: tables of the exporters' and the engine's kinds.
MIGRATION_2_TABLES: tuple[TableDef, ...] = (
    TableDef(
        "nic_priority_samples",
        """\
`ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`node` LowCardinality(String) COMMENT 'Kubernetes node name.'
`netdev` LowCardinality(String) COMMENT 'Netdev the ethtool statistics belong to.'
`device` LowCardinality(String) COMMENT 'RDMA device of that netdev (mlx5_0); empty if none.'
`priority` UInt8 COMMENT '802.1p priority (0-7).'
`rx_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bytes received on this priority (rx_prio{p}_bytes).'
`tx_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bytes sent on this priority (tx_prio{p}_bytes).'
`rx_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets received (rx_prio{p}_packets).'
`tx_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets sent (tx_prio{p}_packets).'
`rx_pause_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC pause frames received (rx_prio{p}_pause).'
`tx_pause_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC pause frames sent (tx_prio{p}_pause).'
`rx_pause_duration_seconds_total` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Time paused by received PFC (rx_prio{p}_pause_duration, us).'
`tx_pause_duration_seconds_total` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Time this NIC paused its peer (tx_prio{p}_pause_duration, us).'
`rx_pause_transitions_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'XOFF->XON transitions received (rx_prio{p}_pause_transition).'
`rx_discards_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets discarded for lack of buffer on this priority (rx_prio{p}_discards).'
`resets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Counter resets detected on this netdev\\'s ethtool statistics.'
""",
        order_by="`cluster`, `node`, `netdev`, `priority`, `ts`",
        comment="One 802.1p priority of a NIC (ethtool statistics): traffic, PFC pauses, discards.",
        ttl=("ts", 30),
    ),
    TableDef(
        "switch_status",
        """\
`ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`switch` LowCardinality(String) COMMENT 'Switch hostname.'
`asic` LowCardinality(String) COMMENT 'ASIC namespace on multi-ASIC switches; empty otherwise.'
`up` UInt8 COMMENT '1 when the switch\\'s Redis answered the poll, 0 when not.'
`poll_duration_seconds` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Duration of the poll.'
`ports` Nullable(UInt32) CODEC(ZSTD(1)) COMMENT 'Ports read.'
`queues` Nullable(UInt32) CODEC(ZSTD(1)) COMMENT 'Queues and priority groups read.'
`error` String CODEC(ZSTD(1)) COMMENT 'Why the poll failed (\\'\\' when up).'
""",
        order_by="`cluster`, `switch`, `asic`, `ts`",
        comment="One poll of one switch (or one ASIC's COUNTERS_DB): did it answer, how long it took.",
        ttl=("ts", 30),
    ),
    TableDef(
        "ecmp_group_samples",
        """\
`ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`switch` LowCardinality(String) COMMENT 'Switch hostname.'
`group` LowCardinality(String) COMMENT 'ECMP group name (from config or \\'uplinks\\' from LLDP).'
`members` String CODEC(ZSTD(1)) COMMENT 'Member ports, comma-separated.'
`member_count` Nullable(UInt16) COMMENT 'Members with a rate this interval.'
`mean_utilization_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Mean member tx utilization.'
`max_utilization_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Highest member tx utilization.'
`max_mean_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'max / mean member tx rate (1 = perfectly even).'
`cv_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Coefficient of variation of member tx rates (stddev / mean).'
`hottest_member` LowCardinality(String) COMMENT 'Member with the highest tx rate.'
`tx_bytes_per_second` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Sum of member tx rates.'
""",
        order_by="`cluster`, `switch`, `group`, `ts`",
        comment="Spread of tx utilization over the members of one ECMP uplink group in one interval.",
        ttl=("ts", 30),
    ),
    TableDef(
        "hdfs_placement_totals",
        """\
`ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`prefix` LowCardinality(String) COMMENT 'Path prefix the totals cover (\\'/\\' = everything audited).'
`blocks` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Blocks audited under the prefix.'
`violations` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Blocks whose placement breaks the policy.'
`under_replicated` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Blocks with fewer replicas than the policy wants.'
`unknown_hosts` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Replicas on hosts the topology does not know.'
""",
        order_by="`cluster`, `prefix`, `ts`",
        comment="Replica placement audit totals per path prefix (one fsck / WebHDFS report).",
        ttl=("ts", 90),
    ),
    TableDef(
        "hdfs_namenode_samples",
        """\
`ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`namenode` LowCardinality(String) COMMENT 'NameNode JMX endpoint (host:port).'
`ha_state` LowCardinality(String) COMMENT 'active | standby | \\'\\' when not reported.'
`up` UInt8 COMMENT '1 when the scrape succeeded, 0 when it failed (see error).'
`error` String CODEC(ZSTD(1)) COMMENT 'Why the scrape failed (\\'\\' when it did not).'
`live_datanodes` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Live DataNodes.'
`dead_datanodes` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Dead DataNodes.'
`stale_datanodes` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Stale DataNodes.'
`blocks` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Blocks in the namespace.'
`files` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Files in the namespace.'
`under_replicated_blocks` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Blocks below their replication factor.'
`missing_blocks` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Blocks with no live replica.'
`corrupt_blocks` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Blocks with corrupt replicas.'
`pending_replication_blocks` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Blocks waiting for replication (async backlog).'
`pending_deletion_blocks` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Blocks waiting for deletion.'
`capacity_total_bytes` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Configured capacity.'
`capacity_used_bytes` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'DFS used.'
`capacity_remaining_bytes` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Capacity remaining.'
""",
        order_by="`cluster`, `namenode`, `ts`",
        comment="One NameNode /jmx scrape (FSNamesystem, FSNamesystemState, NameNodeInfo).",
        ttl=("ts", 30),
    ),
    TableDef(
        "hdfs_datanode_samples",
        """\
`ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`datanode` LowCardinality(String) COMMENT 'DataNode JMX endpoint (host:port).'
`idc` LowCardinality(String) COMMENT 'IDC of the DataNode (\\'\\' = not in the topology).'
`up` UInt8 COMMENT '1 when the scrape succeeded, 0 when it failed (see error).'
`error` String CODEC(ZSTD(1)) COMMENT 'Why the scrape failed (\\'\\' when it did not).'
`read_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bytes read from this DataNode.'
`written_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bytes written to this DataNode.'
`remote_read_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bytes read by non-local clients (RemoteBytesRead).'
`remote_written_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bytes written by non-local clients.'
`blocks_read_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Blocks read.'
`blocks_written_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Blocks written.'
`blocks_replicated_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Blocks replicated to other DataNodes.'
`local_client_reads_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Reads from a client on the same host.'
`remote_client_reads_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Reads from a client on another host.'
`local_client_writes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Writes from a client on the same host.'
`remote_client_writes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Writes from a client on another host.'
`packet_ack_round_trips_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Write-pipeline packet acks measured.'
`packet_ack_round_trip_seconds` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Mean packet-ack round trip (metrics window).'
`network_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'DataNode network errors.'
`volume_failures_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Volume failures.'
`capacity_bytes` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Storage capacity.'
`dfs_used_bytes` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'DFS used.'
`remaining_bytes` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Storage remaining.'
`failed_volumes` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Failed volumes now.'
`xceivers` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Active data transfer threads.'
""",
        order_by="`cluster`, `datanode`, `ts`",
        comment="One DataNode /jmx scrape (DataNodeActivity-*, FSDatasetState, DataNodeInfo).",
        ttl=("ts", 30),
    ),
    TableDef(
        "dci_usage",
        """\
`ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`src_idc` LowCardinality(String) COMMENT 'IDC the data left.'
`dest_idc` LowCardinality(String) COMMENT 'IDC the data entered.'
`interval_seconds` Float64 CODEC(Gorilla, ZSTD(1)) COMMENT 'Length of the interval starting at ts.'
`read_bytes_per_second` Float64 CODEC(Gorilla, ZSTD(1)) COMMENT 'Cross-IDC HDFS reads.'
`sync_write_bytes_per_second` Float64 CODEC(Gorilla, ZSTD(1)) COMMENT 'Cross-IDC write-pipeline traffic.'
`async_replication_bytes_per_second` Float64 CODEC(Gorilla, ZSTD(1)) COMMENT 'Cross-IDC background replication.'
`total_bytes_per_second` Float64 CODEC(Gorilla, ZSTD(1)) COMMENT 'All HDFS traffic on the pair.'
`capacity_bytes_per_second` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Configured budget for the pair (null = none).'
`headroom_bytes_per_second` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Budget minus total (negative = over budget).'
`utilization_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Total / budget.'
""",
        order_by="`cluster`, `src_idc`, `dest_idc`, `ts`",
        comment="HDFS bytes/s on the DCI per direction (src IDC -> dest IDC) per interval, against the budget.",
        ttl=("ts", 90),
    ),
    TableDef(
        "flows_attributed",
        """\
`ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`switch` LowCardinality(String) COMMENT 'Switch that sampled it.'
`out_port` LowCardinality(String) COMMENT 'Egress port (the ECMP member for uplinks).'
`src_ip` String CODEC(ZSTD(1)) COMMENT 'Source IP.'
`dst_ip` String CODEC(ZSTD(1)) COMMENT 'Destination IP.'
`dst_port` UInt16 COMMENT 'L4 destination port.'
`dest_qp` Nullable(UInt32) CODEC(ZSTD(1)) COMMENT 'RoCEv2 destination QP.'
`rdma` Bool COMMENT 'RoCEv2 (UDP 4791).'
`bytes` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Estimated bytes.'
`src_namespace` LowCardinality(String) COMMENT 'Tenant of the source pod (\\'\\' = IP owned by nobody then).'
`src_pod` String CODEC(ZSTD(1)) COMMENT 'Source pod.'
`src_node` LowCardinality(String) COMMENT 'Source node.'
`src_job` LowCardinality(String) COMMENT 'Source Volcano job.'
`dst_namespace` LowCardinality(String) COMMENT 'Tenant of the destination pod.'
`dst_pod` String CODEC(ZSTD(1)) COMMENT 'Destination pod.'
`dst_node` LowCardinality(String) COMMENT 'Destination node.'
`dst_job` LowCardinality(String) COMMENT 'Destination Volcano job.'
`src_su` LowCardinality(String) COMMENT 'Scalable unit of the source node.'
`dst_su` LowCardinality(String) COMMENT 'Scalable unit of the destination node.'
`src_idc` LowCardinality(String) COMMENT 'IDC of the source node.'
`dst_idc` LowCardinality(String) COMMENT 'IDC of the destination node.'
`lca_hypernode` LowCardinality(String) COMMENT 'Lowest common HyperNode of the two nodes (\\'\\' = none).'
`lca_tier` UInt8 COMMENT 'Its tier (0 = no common HyperNode / unknown).'
""",
        order_by="`cluster`, `ts`, `src_namespace`, `src_job`",
        comment="A flow sample joined, as of its own time, to the pods/jobs/tenants/nodes at both ends and the lowest common HyperNode they share. Written per window by the correlation engine.",
        ttl=("ts", 14),
    ),
    TableDef(
        "inv_namespaces",
        """\
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`namespace` LowCardinality(String) COMMENT 'Namespace name.'
`tenant` LowCardinality(String) COMMENT 'Tenant: the railscope.io/tenant label, else the namespace name.'
`labels` String CODEC(ZSTD(1)) COMMENT 'JSON object of namespace labels.'
`valid_from` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of validity of this fact (UTC).'
`valid_to` Nullable(DateTime64(3, 'UTC')) CODEC(ZSTD(1)) COMMENT 'End of validity (UTC); null while the fact still holds.'
`updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Version of this row: the latest wins.'
""",
        order_by="`cluster`, `namespace`, `valid_from`",
        comment="A namespace (= tenant) and its labels over time.",
        partition_by=None,
        version="updated_at",
    ),
)
# Migration 2: columns added to (or retyped in) first-schema tables.
MIGRATION_2_COLUMNS: tuple[tuple[str, str, str], ...] = (
    (
        "nic_samples",
        "ADD",
        "`pod` LowCardinality(Nullable(String)) COMMENT 'Pod holding this NIC/VF (kubelet pod-resources), empty if none.' AFTER `link_layer`",
    ),
    (
        "nic_samples",
        "ADD",
        "`namespace` LowCardinality(Nullable(String)) COMMENT 'Namespace of that pod.' AFTER `pod`",
    ),
    (
        "nic_samples",
        "ADD",
        "`container` LowCardinality(Nullable(String)) COMMENT 'Container of that pod.' AFTER `namespace`",
    ),
    (
        "nic_samples",
        "ADD",
        "`pfc_rx_pause_duration_seconds_total` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Time paused by received PFC, all priorities.' AFTER `pfc_pause_duration_us_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`link_downed_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Times the link went down (counters/link_downed).' AFTER `pci_stalled_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`symbol_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Physical symbol errors (counters/symbol_error).' AFTER `link_downed_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`xmit_wait_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Ticks the port had data but could not send (counters/port_xmit_wait).' AFTER `symbol_errors_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`rx_dropped_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets dropped by the netdev (statistics/rx_dropped).' AFTER `xmit_wait_total`",
    ),
    (
        "switch_queue_samples",
        "ADD",
        "`ecn_marked_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bytes ECN-marked by WRED.' AFTER `ecn_marked_packets_total`",
    ),
    (
        "switch_queue_samples",
        "ADD",
        "`dropped_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bytes dropped.' AFTER `ecn_marked_bytes_total`",
    ),
    (
        "switch_queue_samples",
        "ADD",
        "`headroom_watermark_bytes` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'PG headroom (xoff room) peak occupancy.' AFTER `watermark_bytes`",
    ),
    (
        "flow_samples",
        "ADD",
        "`ecmp_group` LowCardinality(String) COMMENT 'ECMP group of out_port (\\'\\' when not an ECMP member).' AFTER `out_port`",
    ),
    (
        "gpu_samples",
        "MODIFY",
        "`power_violation_seconds_total` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Time throttled by power.'",
    ),
    (
        "gpu_samples",
        "MODIFY",
        "`thermal_violation_seconds_total` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Time throttled by temperature.'",
    ),
    (
        "flow_samples",
        "MODIFY",
        "`src_port` Nullable(UInt16) COMMENT 'L4 source port (entropy for RoCEv2); null if not TCP/UDP.'",
    ),
    (
        "flow_samples",
        "MODIFY",
        "`dst_port` Nullable(UInt16) COMMENT 'L4 destination port (4791 = RoCEv2); null if not TCP/UDP.'",
    ),
    (
        "flow_samples",
        "MODIFY",
        "`protocol` Nullable(UInt8) COMMENT 'IP protocol; null if the sampled header is not IP.'",
    ),
    ("flow_samples", "MODIFY", "`dscp` Nullable(UInt8) COMMENT 'DSCP; null if not IP.'"),
    (
        "flow_samples",
        "MODIFY",
        "`ecn` Nullable(UInt8) COMMENT 'ECN bits (3 = CE); null if not IP.'",
    ),
)
# Migration 3: rail, NIC and leaf port of both ends of an attributed flow.
MIGRATION_3_COLUMNS: tuple[tuple[str, str, str], ...] = (
    (
        "flows_attributed",
        "ADD",
        "`src_rail` Int64 COMMENT 'Rail of the source IP\\'s interface (Multus network railN); -1 unknown.' AFTER `dst_job`",
    ),
    (
        "flows_attributed",
        "ADD",
        "`src_nic` LowCardinality(String) COMMENT 'Source RDMA device on that rail (mlx5_N).' AFTER `src_rail`",
    ),
    (
        "flows_attributed",
        "ADD",
        "`src_leaf_port` LowCardinality(String) COMMENT 'Leaf port cabled to that NIC (LLDP), SWITCH:PORT.' AFTER `src_nic`",
    ),
    (
        "flows_attributed",
        "ADD",
        "`dst_rail` Int64 COMMENT 'Rail of the destination IP\\'s interface; -1 unknown.' AFTER `src_leaf_port`",
    ),
    (
        "flows_attributed",
        "ADD",
        "`dst_nic` LowCardinality(String) COMMENT 'Destination RDMA device on that rail.' AFTER `dst_rail`",
    ),
    (
        "flows_attributed",
        "ADD",
        "`dst_leaf_port` LowCardinality(String) COMMENT 'Leaf port cabled to the destination NIC (LLDP).' AFTER `dst_nic`",
    ),
)

# Migration 5: switch PFC per priority; priority 3 is no longer a column.
MIGRATION_5_TABLES: tuple[TableDef, ...] = (
    TableDef(
        "switch_priority_samples",
        """\
`ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`switch` LowCardinality(String) COMMENT 'Switch hostname.'
`asic` LowCardinality(String) COMMENT 'ASIC namespace on multi-ASIC switches; empty otherwise.'
`port` LowCardinality(String) COMMENT 'Port name as the switch shows it (Ethernet0).'
`priority` UInt8 COMMENT '802.1p priority (0-7).'
`rx_pause_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC frames received for this priority.'
`tx_pause_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC frames sent for this priority.'
`rx_pause_duration_seconds_total` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Time paused by received PFC on this priority (where the switch counts it).'
`tx_pause_duration_seconds_total` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Time this port paused its peer on this priority (where the switch counts it).'
""",
        order_by="`cluster`, `switch`, `port`, `priority`, `ts`",
        comment="One 802.1p priority of a switch port: PFC pause frames and pause time.",
        ttl=("ts", 30),
    ),
)
MIGRATION_5_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("nic_samples", "DROP", "`pfc_rx_pause_prio3_total`"),
    ("nic_samples", "DROP", "`pfc_tx_pause_prio3_total`"),
    ("switch_port_samples", "DROP", "`pfc_rx_pause_prio3_total`"),
    ("switch_port_samples", "DROP", "`pfc_tx_pause_prio3_total`"),
)

# Migration 6: nic_samples columns (issue 15), frozen as released.
MIGRATION_6_COLUMNS: tuple[tuple[str, str, str], ...] = (
    (
        "nic_samples",
        "ADD",
        "`state_id` Nullable(UInt8) COMMENT 'IB port state (ports/N/state): 1 down, 2 init, 3 armed, 4 active, 5 active defer.' AFTER `rx_dropped_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`phys_state_id` Nullable(UInt8) COMMENT 'Physical port state (ports/N/phys_state): 1 sleep, 2 polling, 3 disabled, 4 port configuration training, 5 link up, 6 link error recovery, 7 phy test.' AFTER `state_id`",
    ),
    (
        "nic_samples",
        "ADD",
        "`rx_discards_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Inbound packets discarded because the port was down or congested (counters/port_rcv_discards).' AFTER `phys_state_id`",
    ),
    (
        "nic_samples",
        "ADD",
        "`rx_constraint_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Inbound packets discarded by the switch port\\'s partition/filter constraints (counters/port_rcv_constraint_errors).' AFTER `rx_discards_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`tx_constraint_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Outbound packets not sent because of partition/filter constraints (counters/port_xmit_constraint_errors).' AFTER `rx_constraint_errors_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`rx_remote_physical_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets received marked with EBP (bad packet upstream) (counters/port_rcv_remote_physical_errors).' AFTER `tx_constraint_errors_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`rx_switch_relay_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets a switch port could not relay (counters/port_rcv_switch_relay_errors).' AFTER `rx_remote_physical_errors_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`rx_unicast_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Unicast packets received (counters/unicast_rcv_packets).' AFTER `rx_switch_relay_errors_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`tx_unicast_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Unicast packets sent (counters/unicast_xmit_packets).' AFTER `rx_unicast_packets_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`rx_multicast_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Multicast packets received (counters/multicast_rcv_packets).' AFTER `tx_unicast_packets_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`tx_multicast_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Multicast packets sent (counters/multicast_xmit_packets).' AFTER `rx_multicast_packets_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`link_error_recovery_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Link error recoveries (retrained without going down) (counters/link_error_recovery).' AFTER `tx_multicast_packets_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`local_link_integrity_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Times local physical errors exceeded LocalPhyErrors (counters/local_link_integrity_errors).' AFTER `link_error_recovery_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`excessive_buffer_overrun_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Consecutive flow-control periods with buffer overruns (counters/excessive_buffer_overrun_errors).' AFTER `local_link_integrity_errors_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`vl15_dropped_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Subnet-management (VL15) packets dropped for lack of buffer (counters/VL15_dropped).' AFTER `excessive_buffer_overrun_errors_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`ext_rx_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Data received (64-bit extended counter; 4-byte words) (counters_ext/port_rcv_data_64 x 4).' AFTER `vl15_dropped_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`ext_tx_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Data sent (64-bit extended counter; 4-byte words) (counters_ext/port_xmit_data_64 x 4).' AFTER `ext_rx_bytes_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`ext_rx_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets received (64-bit extended counter) (counters_ext/port_rcv_packets_64).' AFTER `ext_tx_bytes_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`ext_tx_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets sent (64-bit extended counter) (counters_ext/port_xmit_packets_64).' AFTER `ext_rx_packets_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`ext_rx_unicast_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Unicast packets received (64-bit extended counter) (counters_ext/port_unicast_rcv_packets).' AFTER `ext_tx_packets_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`ext_tx_unicast_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Unicast packets sent (64-bit extended counter) (counters_ext/port_unicast_xmit_packets).' AFTER `ext_rx_unicast_packets_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`ext_rx_multicast_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Multicast packets received (64-bit extended counter) (counters_ext/port_multicast_rcv_packets).' AFTER `ext_tx_unicast_packets_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`ext_tx_multicast_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Multicast packets sent (64-bit extended counter) (counters_ext/port_multicast_xmit_packets).' AFTER `ext_rx_multicast_packets_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`rx_write_requests_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'RDMA WRITE requests received (hw_counters/rx_write_requests).' AFTER `ext_tx_multicast_packets_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`rx_read_requests_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'RDMA READ requests received (hw_counters/rx_read_requests).' AFTER `rx_write_requests_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`rx_atomic_requests_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'ATOMIC requests received (hw_counters/rx_atomic_requests).' AFTER `rx_read_requests_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`rx_dct_connect_requests_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'DCT connection requests received (hw_counters/rx_dct_connect).' AFTER `rx_atomic_requests_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`duplicate_requests_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Duplicate requests received (the requester retransmitted) (hw_counters/duplicate_request).' AFTER `rx_dct_connect_requests_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`rnr_nak_retry_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'RNR NAKs received (the responder had no receive WQE) (hw_counters/rnr_nak_retry_err).' AFTER `duplicate_requests_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`implied_nak_seq_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Implied NAK sequence errors (READ/ATOMIC response PSN gap) (hw_counters/implied_nak_seq_err).' AFTER `rnr_nak_retry_errors_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`resp_local_length_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Responder: local length errors (hw_counters/resp_local_length_error).' AFTER `implied_nak_seq_errors_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`resp_cqe_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Responder: completions with error (hw_counters/resp_cqe_error).' AFTER `resp_local_length_errors_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`req_cqe_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Requester: completions with error (hw_counters/req_cqe_error).' AFTER `resp_cqe_errors_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`req_remote_invalid_request_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Requester: remote invalid request errors (hw_counters/req_remote_invalid_request).' AFTER `req_cqe_errors_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`req_remote_access_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Requester: remote access errors (hw_counters/req_remote_access_errors).' AFTER `req_remote_invalid_request_errors_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`resp_remote_access_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Responder: remote access errors (hw_counters/resp_remote_access_errors).' AFTER `req_remote_access_errors_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`resp_cqe_flush_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Responder: completions flushed with error (QP to error state) (hw_counters/resp_cqe_flush_error).' AFTER `resp_remote_access_errors_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`req_cqe_flush_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Requester: completions flushed with error (hw_counters/req_cqe_flush_error).' AFTER `resp_cqe_flush_errors_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`roce_adp_retransmits_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'RoCE adaptive retransmissions (hw_counters/roce_adp_retrans).' AFTER `req_cqe_flush_errors_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`roce_adp_retransmit_timeouts_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'RoCE adaptive retransmission timeouts (hw_counters/roce_adp_retrans_to).' AFTER `roce_adp_retransmits_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`roce_slow_restarts_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Times RoCE slow restart was used (hw_counters/roce_slow_restart).' AFTER `roce_adp_retransmit_timeouts_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`roce_slow_restart_cnps_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'CNPs generated by RoCE slow restart (hw_counters/roce_slow_restart_cnps).' AFTER `roce_slow_restarts_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`roce_slow_restart_transitions_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Transitions to the RoCE slow-restart state (hw_counters/roce_slow_restart_trans).' AFTER `roce_slow_restart_cnps_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`rx_icrc_encapsulated_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'RoCE packets with ICRC errors (hw_counters/rx_icrc_encapsulated).' AFTER `roce_slow_restart_transitions_total`",
    ),
    (
        "gpu_samples",
        "ADD",
        "`memory_free_bytes` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Frame buffer free.' AFTER `memory_total_bytes`",
    ),
    (
        "gpu_samples",
        "ADD",
        "`memory_reserved_bytes` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Frame buffer reserved by driver and firmware.' AFTER `memory_free_bytes`",
    ),
    (
        "gpu_samples",
        "ADD",
        "`encoder_utilization_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Video encoder busy time.' AFTER `memory_reserved_bytes`",
    ),
    (
        "gpu_samples",
        "ADD",
        "`decoder_utilization_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Video decoder busy time.' AFTER `encoder_utilization_ratio`",
    ),
    (
        "gpu_samples",
        "ADD",
        "`remapped_rows_correctable_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Rows remapped for correctable errors.' AFTER `remapped_rows_failure_total`",
    ),
    (
        "gpu_samples",
        "ADD",
        "`remapped_rows_uncorrectable_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Rows remapped for uncorrectable errors.' AFTER `remapped_rows_correctable_total`",
    ),
    (
        "gpu_samples",
        "ADD",
        "`retired_pages_single_bit_ecc` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Pages retired for repeated single-bit ECC errors (pre-Ampere).' AFTER `remapped_rows_uncorrectable_total`",
    ),
    (
        "gpu_samples",
        "ADD",
        "`retired_pages_double_bit_ecc` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Pages retired for a double-bit ECC error.' AFTER `retired_pages_single_bit_ecc`",
    ),
    (
        "gpu_samples",
        "ADD",
        "`retired_pages_pending` Nullable(Float64) CODEC(ZSTD(1)) COMMENT '1 when a page retirement waits for a GPU reset.' AFTER `retired_pages_double_bit_ecc`",
    ),
    (
        "gpu_samples",
        "ADD",
        "`nvlink_crc_flit_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'NVLink flow-control CRC errors, all links.' AFTER `nvlink_errors_total`",
    ),
    (
        "gpu_samples",
        "ADD",
        "`nvlink_crc_data_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'NVLink data CRC errors, all links.' AFTER `nvlink_crc_flit_errors_total`",
    ),
    (
        "gpu_samples",
        "ADD",
        "`nvlink_replay_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'NVLink replays, all links.' AFTER `nvlink_crc_data_errors_total`",
    ),
    (
        "gpu_samples",
        "ADD",
        "`nvlink_recovery_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'NVLink link recoveries, all links.' AFTER `nvlink_replay_errors_total`",
    ),
    (
        "gpu_samples",
        "ADD",
        "`graphics_active_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'GPM graphics/compute engine activity (Hopper+).' AFTER `dram_active_ratio`",
    ),
)


# Migration 8: GPU pool inventory (queues, podgroups, priority classes, quotas, pod events) and
# the GPU fields of pods and nodes.
MIGRATION_8_TABLES: tuple[TableDef, ...] = (
    TableDef(
        "queues",
        """\
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`queue` LowCardinality(String) COMMENT 'Queue name.'
`parent` LowCardinality(String) COMMENT 'spec.parent, else the volcano.sh/hierarchy path\\'s parent, \\'\\' none.'
`state` LowCardinality(String) COMMENT 'status.state (Open, Closed, ...).'
`weight` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'spec.weight.'
`reclaimable` Bool COMMENT 'spec.reclaimable (default true).'
`capability_gpus` Nullable(UInt32) CODEC(ZSTD(1)) COMMENT 'spec.capability nvidia.com/gpu; null = none.'
`deserved_gpus` Nullable(UInt32) CODEC(ZSTD(1)) COMMENT 'spec.deserved nvidia.com/gpu; null = none.'
`guarantee_gpus` Nullable(UInt32) CODEC(ZSTD(1)) COMMENT 'spec.guarantee.resource nvidia.com/gpu; null = none.'
`valid_from` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of validity of this fact (UTC).'
`valid_to` Nullable(DateTime64(3, 'UTC')) CODEC(ZSTD(1)) COMMENT 'End of validity (UTC); null while the fact still holds.'
`updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Version of this row: the latest wins.'
""",
        order_by="`cluster`, `queue`, `valid_from`",
        comment="A Volcano Queue and its nvidia.com/gpu quota (capability, deserved, guarantee).",
        ttl=None,
        partition_by=None,
        version="updated_at",
        shard_by=("cluster", "queue"),
    ),
    TableDef(
        "podgroups",
        """\
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`namespace` LowCardinality(String) COMMENT 'Namespace = tenant.'
`podgroup` LowCardinality(String) COMMENT 'PodGroup name.'
`job` LowCardinality(String) COMMENT 'Owning Volcano Job, \\'\\' for a standalone PodGroup.'
`queue` LowCardinality(String) COMMENT 'spec.queue.'
`priority_class` LowCardinality(String) COMMENT 'spec.priorityClassName.'
`min_member` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'spec.minMember.'
`min_gpus` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'spec.minResources nvidia.com/gpu (0 = none stated).'
`phase` LowCardinality(String) COMMENT 'status.phase (Pending, Inqueue, Running, Unknown, ...).'
`unschedulable` Bool COMMENT 'An Unschedulable condition with status True.'
`reason` String CODEC(ZSTD(1)) COMMENT 'That condition\\'s reason and message.'
`valid_from` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of validity of this fact (UTC).'
`valid_to` Nullable(DateTime64(3, 'UTC')) CODEC(ZSTD(1)) COMMENT 'End of validity (UTC); null while the fact still holds.'
`updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Version of this row: the latest wins.'
""",
        order_by="`cluster`, `namespace`, `podgroup`, `valid_from`",
        comment="A Volcano PodGroup (gang): size, queue, phase and why it is not scheduled.",
        ttl=None,
        partition_by=None,
        version="updated_at",
        shard_by=("cluster", "namespace", "podgroup"),
    ),
    TableDef(
        "priority_classes",
        """\
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`priority_class` LowCardinality(String) COMMENT 'PriorityClass name.'
`value` Int64 CODEC(T64, ZSTD(1)) COMMENT 'value.'
`preemption_policy` LowCardinality(String) COMMENT 'preemptionPolicy (PreemptLowerPriority | Never).'
`global_default` Bool COMMENT 'globalDefault.'
`provisioning` LowCardinality(String) COMMENT 'Provisioning type (Reserved, Spot, ...); \\'\\' unknown.'
`purpose` LowCardinality(String) COMMENT 'Purpose (Serving, Training, Interactive, ...); \\'\\' unknown.'
`valid_from` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of validity of this fact (UTC).'
`valid_to` Nullable(DateTime64(3, 'UTC')) CODEC(ZSTD(1)) COMMENT 'End of validity (UTC); null while the fact still holds.'
`updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Version of this row: the latest wins.'
""",
        order_by="`cluster`, `priority_class`, `valid_from`",
        comment="A PriorityClass with the provisioning type and purpose its labels/annotations carry.",
        ttl=None,
        partition_by=None,
        version="updated_at",
        shard_by=("cluster", "priority_class"),
    ),
    TableDef(
        "resource_quotas",
        """\
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`namespace` LowCardinality(String) COMMENT 'Namespace = tenant.'
`quota` LowCardinality(String) COMMENT 'ResourceQuota name.'
`gpus_hard` Nullable(UInt32) CODEC(ZSTD(1)) COMMENT 'requests.nvidia.com/gpu hard limit; null = none.'
`gpus_used` Nullable(UInt32) CODEC(ZSTD(1)) COMMENT 'status.used requests.nvidia.com/gpu; null = not reported.'
`valid_from` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of validity of this fact (UTC).'
`valid_to` Nullable(DateTime64(3, 'UTC')) CODEC(ZSTD(1)) COMMENT 'End of validity (UTC); null while the fact still holds.'
`updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Version of this row: the latest wins.'
""",
        order_by="`cluster`, `namespace`, `quota`, `valid_from`",
        comment="A namespace ResourceQuota's GPU lines.",
        ttl=None,
        partition_by=None,
        version="updated_at",
        shard_by=("cluster", "namespace", "quota"),
    ),
    TableDef(
        "pod_events",
        """\
`ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`namespace` LowCardinality(String) COMMENT 'Namespace of the pod.'
`pod` LowCardinality(String) COMMENT 'Pod name.'
`uid` String CODEC(ZSTD(1)) COMMENT 'Event UID.'
`reason` LowCardinality(String) COMMENT 'Preempted | Evict | Evicted | Preempting ...'
`message` String CODEC(ZSTD(1)) COMMENT 'Event message.'
`preemptor` String CODEC(ZSTD(1)) COMMENT 'Preempting pod UID where the message names it.'
`node` LowCardinality(String) COMMENT 'Node the message names, \\'\\' if none.'
`source` LowCardinality(String) COMMENT 'Reporting component (default-scheduler, volcano, kubelet).'
`count` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Event count: the latest version wins.'
""",
        order_by="`cluster`, `namespace`, `pod`, `uid`",
        comment="A pod preempted or evicted (Kubernetes Event); a re-listed event replaces itself.",
        ttl=("ts", 90),
        partition_by=None,
        version="count",
        shard_by=("cluster", "namespace", "pod", "uid"),
    ),
)
MIGRATION_8_COLUMNS: tuple[tuple[str, str, str], ...] = (
    (
        "pods",
        "ADD",
        "`gpu_requests` Nullable(UInt16) COMMENT 'nvidia.com/gpu requested (sum over containers).' AFTER `gpus`",
    ),
    (
        "pods",
        "ADD",
        "`priority_class` LowCardinality(String) COMMENT 'spec.priorityClassName.' AFTER `gpu_requests`",
    ),
    (
        "pods",
        "ADD",
        "`podgroup` LowCardinality(String) COMMENT 'Volcano PodGroup (scheduling.k8s.io/group-name annotation).' AFTER `priority_class`",
    ),
    (
        "pods",
        "ADD",
        "`gpu_model` LowCardinality(String) COMMENT 'nvidia.com/gpu.product the pod\\'s nodeSelector requires, \\'\\' any.' AFTER `podgroup`",
    ),
    (
        "nodes",
        "ADD",
        "`gpu_capacity` Nullable(UInt16) COMMENT 'nvidia.com/gpu capacity.' AFTER `gpus`",
    ),
    (
        "nodes",
        "ADD",
        "`gpu_model` LowCardinality(String) COMMENT 'nvidia.com/gpu.product label (GPU Feature Discovery).' AFTER `gpu_capacity`",
    ),
)

# Migration 9: collective_samples (issue 18, NCCL Inspector), frozen as released.
MIGRATION_9_TABLES: tuple[TableDef, ...] = (
    TableDef(
        "collective_samples",
        """\
`ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`node` LowCardinality(String) COMMENT 'Host that ran the rank (the Inspector\\'s hostname).'
`namespace` LowCardinality(String) COMMENT 'Namespace (= tenant) of the pod; \\'\\' when not attributed.'
`pod` LowCardinality(String) COMMENT 'Pod of the process ((hostname, pid) -> cgroup -> pod); \\'\\' if unknown.'
`pod_uid` String CODEC(ZSTD(1)) COMMENT 'Pod UID from the process\\'s cgroup path.'
`container_id` String CODEC(ZSTD(1)) COMMENT 'Container id from the process\\'s cgroup path.'
`job` LowCardinality(String) COMMENT 'Volcano job of the pod; \\'\\' if none or unknown.'
`comm_id` LowCardinality(String) COMMENT 'NCCL communicator id (header.id).'
`collective` LowCardinality(String) COMMENT 'AllReduce, AllGather, ReduceScatter, Broadcast, ...'
`msg_size_bucket` LowCardinality(String) COMMENT 'Message size rounded down to a power of two (1GiB).'
`rank` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Rank in the communicator.'
`gpu` LowCardinality(String) COMMENT 'GPU of the rank: the pod\\'s GPU assignment, or gpu_device_id.'
`pid` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Process id on the host.'
`n_ranks` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Ranks in the communicator.'
`n_nodes` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Nodes the communicator spans.'
`coll_sn` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Sequence number of the collective in the communicator.'
`msg_size_bytes` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Message size.'
`exec_time_seconds` Float64 CODEC(Gorilla, ZSTD(1)) COMMENT 'Collective execution time.'
`algo_bandwidth_gbs` Float64 CODEC(Gorilla, ZSTD(1)) COMMENT 'Algorithm bandwidth (size / time), GB/s.'
`bus_bandwidth_gbs` Float64 CODEC(Gorilla, ZSTD(1)) COMMENT 'Bus bandwidth (algorithm bandwidth scaled by the collective\\'s factor), GB/s.'
`timing_source` LowCardinality(String) COMMENT 'coll_timing_source (kernel_gpu, ...).'
`format_version` LowCardinality(String) COMMENT 'Inspector format version (v4.0), or \\'prom\\'.'
""",
        order_by="`cluster`, `job`, `comm_id`, `collective`, `ts`",
        comment="One NCCL collective of one rank (NCCL Inspector JSON line or Prom textfile sample), joined to the pod, job and GPU of the process that ran it.",
        ttl=("ts", 30),
        shard_by=("cluster", "job", "comm_id", "collective"),
    ),
)

# Migration 10: incidents and their membership (issue 19), frozen as released.
MIGRATION_10_TABLES: tuple[TableDef, ...] = (
    TableDef(
        "incidents",
        """\
`incident_id` String CODEC(ZSTD(1)) COMMENT 'Stable id: hash of the root finding when the incident opened.'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`state` LowCardinality(String) COMMENT 'open | resolved.'
`severity` LowCardinality(String) COMMENT 'critical | warning | info: the highest of the members, raised by blast radius.'
`root_finding_id` String CODEC(ZSTD(1)) COMMENT 'The finding the others follow from.'
`root_kind` LowCardinality(String) COMMENT 'Kind of the root finding.'
`root_subject_type` LowCardinality(String) COMMENT 'Subject type of the root finding.'
`root_subject` String CODEC(ZSTD(1)) COMMENT 'Subject of the root finding.'
`summary` String CODEC(ZSTD(1)) COMMENT 'Summary of the root finding and what else it explains.'
`findings` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Member findings (root included).'
`kinds` String CODEC(ZSTD(1)) COMMENT 'JSON list: kinds of the member findings.'
`jobs` String CODEC(ZSTD(1)) COMMENT 'JSON list of namespace/job affected.'
`tenants` String CODEC(ZSTD(1)) COMMENT 'JSON list of tenants affected.'
`gpus` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'GPUs of the affected jobs.'
`gpu_hours` Float64 CODEC(Gorilla, ZSTD(1)) COMMENT 'GPU-hours of the affected jobs over the span of the incident.'
`first_seen` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Earliest first_seen of the members.'
`last_seen` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Latest last_seen of the members.'
`merged_into` String CODEC(ZSTD(1)) COMMENT 'Set when a later regrouping folded it into that incident.'
`updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Row version.'
""",
        order_by="`cluster`, `incident_id`",
        comment="Findings that share one root cause (telemetry/correlate/incidents.py); an update "
        "is a newer version of the same incident_id.",
        ttl=("first_seen", 180),
        partition_by=None,
        version="updated_at",
        shard_by=("cluster", "incident_id"),
    ),
    TableDef(
        "incident_findings",
        """\
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`incident_id` String CODEC(ZSTD(1)) COMMENT 'The incident.'
`finding_id` String CODEC(ZSTD(1)) COMMENT 'A member finding.'
`role` LowCardinality(String) COMMENT 'root | cause | consequence.'
`member` UInt8 COMMENT '1 while the finding belongs to the incident.'
`first_seen` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'first_seen of the finding.'
`updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Row version.'
""",
        order_by="`cluster`, `incident_id`, `finding_id`",
        comment="Membership: which findings an incident groups (member = 0 once regrouping moved it out).",
        ttl=("first_seen", 180),
        partition_by=None,
        version="updated_at",
        shard_by=("cluster", "incident_id", "finding_id"),
    ),
)


# Migration 11: per-process GPU memory and the process's pod (issue 15), frozen as released.
MIGRATION_11_TABLES: tuple[TableDef, ...] = (
    TableDef(
        "gpu_processes",
        """\
`ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).'
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`node` LowCardinality(String) COMMENT 'Kubernetes node name.'
`gpu` UInt16 COMMENT 'GPU index on the node.'
`uuid` LowCardinality(String) COMMENT 'GPU UUID.'
`mig` LowCardinality(String) COMMENT 'MIG instance (GPU instance/compute instance) the process runs in, empty for a full GPU.'
`pid` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Process id, in the host\\'s pid namespace (NVML\\'s).'
`type` LowCardinality(String) COMMENT 'compute | graphics (a process with both contexts has a row each).'
`pod_uid` String CODEC(ZSTD(1)) COMMENT 'Pod UID from the process\\'s cgroup path; \\'\\' when not in a pod.'
`container_id` String CODEC(ZSTD(1)) COMMENT 'Container id from the process\\'s cgroup path.'
`used_memory_bytes` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'GPU memory used by the process; null when NVML reports it not available (Windows/WSL WDDM, and MIG without the privilege to read it).'
""",
        order_by="`cluster`, `node`, `gpu`, `pid`, `ts`",
        comment="A process holding a context on a GPU (NVML's running compute and graphics processes): the GPU memory it uses, and its pod from /proc/PID/cgroup.",
        ttl=("ts", 30),
        shard_by=("cluster", "node", "gpu", "pid"),
    ),
)


# Migration 12: per-interval rollups (issue 13 item 2), one row per series per 10 s interval
# (`bucket`), sorted by interval first so that a trailing window reads its intervals' rows
# only. Counters keep min, max and how many samples were null, per interval: a series whose
# counters did not move inside a window (max over its intervals = min, no nulls) rose by exactly
# 0 there, which is all the engine asks of them (telemetry/correlate/sql.py, moved_series).
_BUCKET = "toDateTime(toStartOfInterval(`ts`, INTERVAL 10 SECOND), 'UTC')"
_INTERVAL_COLUMNS = """\
`bucket` DateTime('UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of the 10 s interval (UTC).'
`samples` SimpleAggregateFunction(sum, UInt64) COMMENT 'Samples in the interval.'
`first_ts` SimpleAggregateFunction(min, DateTime64(3, 'UTC')) COMMENT 'First sample time in the interval.'
`last_ts` SimpleAggregateFunction(max, DateTime64(3, 'UTC')) COMMENT 'Last sample time in the interval.'
"""


def _counter_columns(counters: tuple[tuple[str, str], ...]) -> str:
    """min / max / nulls columns per (counter, ClickHouse type), frozen into migration 12."""
    return "".join(
        f"`{c}_min` SimpleAggregateFunction(min, Nullable({t})) COMMENT 'Least {c} in the interval.'\n"
        f"`{c}_max` SimpleAggregateFunction(max, Nullable({t})) COMMENT 'Greatest {c} in the interval.'\n"
        f"`{c}_nulls` SimpleAggregateFunction(sum, UInt64) COMMENT 'Samples without {c}.'\n"
        for c, t in counters
    )


def _counter_select(counters: tuple[tuple[str, str], ...], where: str = "") -> str:
    cond = f", {where}" if where else ""
    agg = "If" if where else ""
    return ", ".join(
        f"min{agg}(`{c}`{cond}) AS `{c}_min`, max{agg}(`{c}`{cond}) AS `{c}_max`, "
        f"countIf(isNull(`{c}`){' AND ' + where if where else ''}) AS `{c}_nulls`"
        for c, _ in counters
    )


_PORT_COUNTERS = (
    ("link_down_events_total", "UInt64"),
    ("rx_errors_total", "UInt64"),
    ("pfc_rx_pause_total", "UInt64"),
    ("pfc_tx_pause_total", "UInt64"),
)
_QUEUE_COUNTERS = (("ecn_marked_packets_total", "UInt64"),)
_NIC_COUNTERS = (
    ("pfc_tx_pause_total", "UInt64"),
    ("cnp_sent_total", "UInt64"),
    ("cnp_handled_total", "UInt64"),
    ("pci_stalled_total", "UInt64"),
)
_GPU_COUNTERS = (
    ("power_violation_seconds_total", "Float64"),
    ("thermal_violation_seconds_total", "Float64"),
)
_KEYS = {
    "switch": "`switch` LowCardinality(String) COMMENT 'Switch hostname.'\n",
    "port": "`port` LowCardinality(String) COMMENT 'Port name as the switch shows it.'\n",
    "queue": "`queue` UInt8 COMMENT 'Egress queue index.'\n",
    "node": "`node` LowCardinality(String) COMMENT 'Kubernetes node name.'\n",
    "device": "`device` LowCardinality(String) COMMENT 'RDMA device (mlx5_0).'\n",
    "nic_port": "`port` UInt8 COMMENT 'Port number.'\n",
    "gpu": "`gpu` UInt16 COMMENT 'GPU index on the node.'\n",
}
_CLUSTER = "`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'\n"


def _interval_rollup(
    name: str, source: str, keys: tuple[str, ...], cols: str, extra: str, select: str, comment: str
) -> Rollup:
    names = tuple("port" if k == "nic_port" else k for k in keys)
    key_sql = ", ".join(f"`{k}`" for k in names)
    return Rollup(
        TableDef(
            name,
            _CLUSTER + "".join(_KEYS[k] for k in keys) + _INTERVAL_COLUMNS + cols + extra,
            order_by=f"`cluster`, `bucket`, {key_sql}",
            comment=comment,
            ttl=("bucket", 30),
            partition_by="toYYYYMMDD(bucket)",
            shard_by=("cluster", *names),
            engine="AggregatingMergeTree",
        ),
        source,
        f"""SELECT `cluster`, {key_sql}, {_BUCKET} AS `bucket`, count() AS `samples`,
       min(`ts`) AS `first_ts`, max(`ts`) AS `last_ts`, {select}
FROM {{source}}
GROUP BY `cluster`, {key_sql}, `bucket`""",
    )


MIGRATION_12_ROLLUPS: tuple[Rollup, ...] = (
    _interval_rollup(
        "switch_port_intervals",
        "switch_port_samples",
        ("switch", "port"),
        _counter_columns(_PORT_COUNTERS),
        "`down_samples` SimpleAggregateFunction(sum, UInt64) COMMENT 'Samples with the port down.'\n",
        _counter_select(_PORT_COUNTERS) + ", countIf(`up` = 0) AS `down_samples`",
        "Per switch port and 10 s interval: samples, down samples, and the link-down, error and "
        "PFC pause counters' least and greatest value (kept on insert by switch_port_intervals_mv).",
    ),
    _interval_rollup(
        "switch_queue_intervals",
        "switch_queue_samples",
        ("switch", "port", "queue"),
        _counter_columns(_QUEUE_COUNTERS),
        "",
        _counter_select(_QUEUE_COUNTERS),
        "Per switch queue and 10 s interval: samples and the ECN-marked counter's least and "
        "greatest value (kept on insert by switch_queue_intervals_mv).",
    ),
    _interval_rollup(
        "nic_intervals",
        "nic_samples",
        ("node", "device", "nic_port"),
        _counter_columns(_NIC_COUNTERS),
        "",
        _counter_select(_NIC_COUNTERS),
        "Per NIC port and 10 s interval: samples and the PFC pause, CNP and PCIe stall counters' "
        "least and greatest value (kept on insert by nic_intervals_mv).",
    ),
    _interval_rollup(
        "gpu_intervals",
        "gpu_samples",
        ("node", "gpu"),
        _counter_columns(_GPU_COUNTERS),
        "`up_samples` SimpleAggregateFunction(sum, UInt64) COMMENT 'Samples with the GPU up.'\n"
        "`clock_event_reasons_or` SimpleAggregateFunction(groupBitOr, UInt64) COMMENT "
        "'Bitwise OR of the clock-event reasons of the up samples.'\n",
        _counter_select(_GPU_COUNTERS, "`up` = 1")
        + ", countIf(`up` = 1) AS `up_samples`"
        + ", groupBitOrIf(ifNull(`clock_event_reasons`, 0), `up` = 1) AS `clock_event_reasons_or`",
        "Per GPU and 10 s interval, over the samples with the GPU up: the power and thermal "
        "violation counters' least and greatest value and the OR of the clock-event reasons "
        "(kept on insert by gpu_intervals_mv).",
    ),
    Rollup(
        TableDef(
            "job_port_intervals",
            _CLUSTER
            + """\
`src_namespace` LowCardinality(String) COMMENT 'Namespace of the sending pod.'
`src_job` LowCardinality(String) COMMENT 'Job of the sending pod.'
`switch` LowCardinality(String) COMMENT 'Switch that sampled the flows.'
`out_port` LowCardinality(String) COMMENT 'Egress port the flows left by.'
"""
            + "`bucket` DateTime('UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of the 10 s interval (UTC).'\n"
            + """\
`flows` UInt64 COMMENT 'Attributed flow samples.'
`bytes` UInt64 COMMENT 'Their bytes (a re-attributed interval is subtracted and added again).'
""",
            order_by="`cluster`, `bucket`, `src_namespace`, `src_job`, `switch`, `out_port`",
            comment="Per sending job, switch egress port and 10 s interval: the attributed flow "
            "samples and bytes (kept on insert by job_port_intervals_mv).",
            ttl=("bucket", 14),
            partition_by="toYYYYMMDD(bucket)",
            shard_by=("cluster", "src_namespace", "src_job"),
            engine="SummingMergeTree",
        ),
        "attributed_flows",
        f"""SELECT `cluster`, `src_namespace`, `src_job`, `switch`, `out_port`, {_BUCKET} AS `bucket`,
       count() AS `flows`, sum(`bytes`) AS `bytes`
FROM {{source}}
GROUP BY `cluster`, `src_namespace`, `src_job`, `switch`, `out_port`, `bucket`""",
    ),
)


# Migration 15: link-level pause on NICs (exporters/node/nic_counters.csv names the drivers').
MIGRATION_15_COLUMNS: tuple[tuple[str, str, str], ...] = (
    (
        "nic_samples",
        "ADD",
        "`global_rx_pause_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Link-level (802.3x) pause frames received.' AFTER `pfc_rx_pause_duration_seconds_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`global_tx_pause_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Link-level (802.3x) pause frames sent.' AFTER `global_rx_pause_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`global_rx_pause_duration_seconds_total` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Time the port was paused by received link-level pause frames.' AFTER `global_tx_pause_total`",
    ),
    (
        "nic_samples",
        "ADD",
        "`global_tx_pause_duration_seconds_total` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Time the port paused its peer with link-level pause frames.' AFTER `global_rx_pause_duration_seconds_total`",
    ),
)


# Migration 16: the index's per-segment numbers (lease_index.NUMERIC), one array each. The old
# `numbers` column goes: an index row is a cache, rebuilt by a railscope whose build query
# differs (its fingerprint covers the query), so no row that had only `numbers` is read again.
MIGRATION_16_COLUMNS: tuple[tuple[str, str, str], ...] = (
    *(
        (
            "attribution_index",
            "ADD",
            f"`{col}` Array({t}) COMMENT '{doc}' AFTER `{after}`",
        )
        for col, t, doc, after in (
            ("starts", "UInt64", "Per segment (sorted by IP, then start): its start (ms).", "pods"),
            ("rails", "UInt32", "Per segment: its rail + 1 (0 unknown).", "starts"),
            (
                "node_index",
                "UInt32",
                "Per segment: the position of its node among the node facts.",
                "rails",
            ),
            (
                "path_codes",
                "UInt64",
                "Per segment: the HyperNode path code of its node (0 none).",
                "node_index",
            ),
            (
                "namespace_job_keys",
                "UInt32",
                "Per segment: its (namespace, job) key.",
                "path_codes",
            ),
            ("node_keys", "UInt32", "Per segment: its (node, SU, IDC) key.", "namespace_job_keys"),
            ("nic_keys", "UInt32", "Per segment: its (NIC, leaf port) key.", "node_keys"),
        )
    ),
    ("attribution_index", "DROP", "`numbers`"),
)


# Migration 14: the attribution's lookup arrays (telemetry/correlate/lease_index.py), one row per
# build; the newest build of a cluster wins (ReplacingMergeTree by built_at). Default codecs: the
# row is written and read whole, and LZ4 is the cheapest to do both.
MIGRATION_14_TABLES: tuple[TableDef, ...] = (
    TableDef(
        "attribution_index",
        _CLUSTER
        + """\
`built_at` DateTime64(3, 'UTC') COMMENT 'When the engine built it (the newest build wins).'
`fingerprint` UInt64 COMMENT 'Hash of what it was built from: the pod IP leases and pod versions begun before the window end, the node facts, the NICs and their leaf ports, and the build query itself.'
`since` DateTime64(3, 'UTC') COMMENT 'Leases over before this time were left out: it serves windows that start at or after it.'
`segments` UInt32 COMMENT 'Lease segments held.'
`pods` Array(String) COMMENT 'Per segment (sorted by IP, then start): its pod.'
`numbers` Array(Array(UInt64)) COMMENT 'Per segment: start (ms), rail + 1, node index, and the keys of its (namespace, job), (node, SU, IDC) and (NIC, leaf port).'
`namespace_job` Array(Array(String)) COMMENT 'Per (namespace, job) key: the namespaces, then the jobs.'
`node_su_idc` Array(Array(String)) COMMENT 'Per (node, SU, IDC) key: the nodes, SUs and IDCs.'
`nic_port` Array(Array(String)) COMMENT 'Per (NIC, leaf port) key: the NICs and leaf ports.'
`ips` Array(String) COMMENT 'Every IP with a segment, sorted.'
`ip_segments` Array(UInt64) COMMENT 'Per IP: its first segment << 32 | how many it has.'
""",
        order_by="`cluster`",
        comment="The lease segments the attribution looks flow ends up in (by IP and time), as "
        "arrays, built by the correlation engine from the inventory and rebuilt when it changes.",
        partition_by=None,
        version="built_at",
        shard_by=("cluster",),
    ),
)


# Migration 17: how each collective ran (issue 39), NCCL Inspector v4.2.
MIGRATION_17_COLUMNS: tuple[tuple[str, str, str], ...] = (
    (
        "collective_samples",
        "ADD",
        "`algorithm` LowCardinality(String) COMMENT 'NCCL algorithm it ran with (coll_algo: RING, TREE, NVLS, NVLS_TREE, PAT, COLLNET_DIRECT, COLLNET_CHAIN); \\'\\' when the Inspector does not say (before v4.2).' AFTER `format_version`",
    ),
    (
        "collective_samples",
        "ADD",
        "`protocol` LowCardinality(String) COMMENT 'NCCL protocol it ran with (coll_proto: LL, LL128, SIMPLE); \\'\\'.' AFTER `algorithm`",
    ),
    (
        "collective_samples",
        "ADD",
        "`channels` Nullable(UInt16) CODEC(ZSTD(1)) COMMENT 'Channels it ran on (coll_n_channels, else the verbose trace\\'s distinct channels); null when not known.' AFTER `protocol`",
    ),
    (
        "collective_samples",
        "ADD",
        "`comm_name` LowCardinality(String) COMMENT 'Communicator name (header.comm_name, v4.2); \\'\\' unknown.' AFTER `channels`",
    ),
)


# Migration 18: the pods' NCCL settings (issue 39), time-versioned like the rest of the inventory.
MIGRATION_18_TABLES: tuple[TableDef, ...] = (
    TableDef(
        "nccl_settings",
        """\
`cluster` LowCardinality(String) COMMENT 'Cluster name from the config.'
`namespace` LowCardinality(String) COMMENT 'Namespace = tenant.'
`pod` LowCardinality(String) COMMENT 'Pod name.'
`container` LowCardinality(String) COMMENT 'Container of the pod (init containers included).'
`name` LowCardinality(String) COMMENT 'Variable name (NCCL_ALGO, NCCL_IB_QPS_PER_CONNECTION, ...).'
`value` String CODEC(ZSTD(1)) COMMENT 'Its value; \\'\\' when it comes from an object not at hand (see source).'
`source` LowCardinality(String) COMMENT 'value | configmap | configmap_unresolved | field | resource.'
`ref` String CODEC(ZSTD(1)) COMMENT 'Where a value not written in the spec comes from (configmap NAME key KEY, fieldRef PATH, resourceFieldRef RESOURCE); \\'\\' for a literal.'
`job` LowCardinality(String) COMMENT 'Volcano job of the pod (volcano.sh/job-name), \\'\\' none.'
`valid_from` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of validity of this fact (UTC).'
`valid_to` Nullable(DateTime64(3, 'UTC')) CODEC(ZSTD(1)) COMMENT 'End of validity (UTC); null while the fact still holds.'
`updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Version of this row: the latest wins.'
""",
        order_by="`cluster`, `namespace`, `pod`, `container`, `name`, `valid_from`",
        comment="An NCCL setting (an NCCL_* environment variable) of a pod's container over time, "
        "as its spec gives it; secrets are never stored.",
        ttl=None,
        partition_by=None,
        version="updated_at",
        shard_by=("cluster", "namespace", "pod", "container", "name"),
    ),
)


# Migration 19: remediation and runbook of incidents (issue 39).
MIGRATION_19_COLUMNS: tuple[tuple[str, str, str], ...] = (
    (
        "incidents",
        "ADD",
        "`remediation` String CODEC(ZSTD(1)) COMMENT 'What to do about it: the root kind\\'s remediation (telemetry/correlate/remediation.yaml) filled with the root finding\\'s values.' AFTER `summary`",
    ),
    (
        "incidents",
        "ADD",
        "`runbook` String CODEC(ZSTD(1)) COMMENT 'The docs page of the root kind (docs/PAGE.md#kind).' AFTER `remediation`",
    ),
)
