"""Record kinds: the one definition of every typed record railscope collects or derives.

Sources build Arrow tables with `kind.arrow_schema` (or plain columns with `kind.to_columns`,
which become that table when a sink reads it), the store renders its DDL from the same fields,
the Prometheus sink names metrics after them and the docs list them. Adding a field is one line
here plus a migration (a script in `telemetry/store/migrations/`). Never define a column elsewhere.

pyarrow is imported when an Arrow type or table is first asked for, not with this module: the
/metrics-only node exporter (`railscope node --no-store`) never asks, and stays small.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import pyarrow as pa

# Logical types: (arrow type, ClickHouse type, default codec). The arrow type is named by its
# pyarrow factory and its arguments (`_arrow_type` builds it).
_TYPES: dict[str, tuple[tuple[str, ...], str, str | None]] = {
    "time": (("timestamp", "ms", "UTC"), "DateTime64(3, 'UTC')", "DoubleDelta, ZSTD(1)"),
    "str": (("string",), "String", "ZSTD(1)"),
    "lstr": (("string",), "LowCardinality(String)", None),
    "bool": (("bool_",), "Bool", None),
    "u8": (("uint8",), "UInt8", None),
    "u16": (("uint16",), "UInt16", None),
    "u32": (("uint32",), "UInt32", "T64, ZSTD(1)"),
    "u64": (("uint64",), "UInt64", "T64, ZSTD(1)"),
    "i64": (("int64",), "Int64", "T64, ZSTD(1)"),
    "counter": (("uint64",), "UInt64", "Delta, ZSTD(1)"),  # monotonically rising totals
    "f64": (("float64",), "Float64", "Gorilla, ZSTD(1)"),
}
_ARROW: dict[str, pa.DataType] = {}


def _arrow_type(type_: str) -> pa.DataType:
    t = _ARROW.get(type_)
    if t is None:
        import pyarrow as pa

        factory, *args = _TYPES[type_][0]
        t = _ARROW[type_] = getattr(pa, factory)(*args[:1], **({"tz": args[1]} if args[1:] else {}))
    return t


# The integer range of each integer type: a Python int inside it converts to Arrow exactly.
_INT_RANGE = {
    "u8": (0, 2**8 - 1),
    "u16": (0, 2**16 - 1),
    "u32": (0, 2**32 - 1),
    "u64": (0, 2**64 - 1),
    "counter": (0, 2**64 - 1),
    "i64": (-(2**63), 2**63 - 1),
}
_EXACT_DOUBLE = 2**53  # ints up to this magnitude are exact as a float64 (Arrow checks the same)


def _plain(type_: str, values: list[Any]) -> list[Any] | None:
    """`values` as the Arrow column of `type_` gives them back (`to_pylist`), when every value is
    a plain Python value of that type (None, str, bool, an int in range, a float; ints in a
    float64 column become floats and floats in an integer one are truncated, as Arrow does; a
    time as epoch milliseconds, kept as the int). None when one
    is not: the caller converts through Arrow, which casts it or names the error."""
    if type_ in ("str", "lstr"):
        ok: Any = str
    elif type_ == "bool":
        ok = bool
    elif type_ == "f64":
        out = values
        for i, v in enumerate(values):
            t = type(v)
            if t is float or v is None:
                continue
            if t is not int or not -_EXACT_DOUBLE <= v <= _EXACT_DOUBLE:
                return None
            if out is values:
                out = list(values)
            out[i] = float(v)
        return out
    else:  # integers, and time as epoch milliseconds
        lo, hi = _INT_RANGE.get(type_, _INT_RANGE["i64"])
        out = values
        for i, v in enumerate(values):
            t = type(v)
            if v is None or (t is int and lo <= v <= hi):
                continue
            # Arrow truncates a float into an integer field; do the same where that is plain
            # (0 <= v < 2**53; a negative, huge or non-finite one goes through Arrow)
            if t is not float or not 0.0 <= v < _EXACT_DOUBLE or type_ == "time":
                return None
            if out is values:
                out = list(values)
            out[i] = int(v)
        return out
    for v in values:
        if v is not None and type(v) is not ok:
            return None
    return values


Role = Literal["time", "label", "gauge", "counter", "info"]


@dataclass(frozen=True)
class Field:
    """One column/field. `role` says how the Prometheus sink treats it:
    label (identifies the series), gauge or counter (a value), info (stored only)."""

    name: str
    type: str
    doc: str
    role: Role = "info"
    unit: str = ""
    nullable: bool = False
    codec: str | None = "default"

    def __post_init__(self) -> None:
        if self.type not in _TYPES:
            raise ValueError(f"field {self.name}: unknown type {self.type!r}")

    @property
    def arrow_type(self) -> pa.DataType:
        return _arrow_type(self.type)

    @property
    def clickhouse_type(self) -> str:
        t = _TYPES[self.type][1]
        if self.nullable:
            # LowCardinality(Nullable(String)) is the legal nesting for nullable low-card strings.
            if t.startswith("LowCardinality("):
                return f"LowCardinality(Nullable({t[len('LowCardinality(') : -1]}))"
            return f"Nullable({t})"
        return t

    @property
    def clickhouse_codec(self) -> str | None:
        if self.codec != "default":
            return self.codec
        codec = _TYPES[self.type][2]
        if codec and self.nullable:
            # T64/DoubleDelta/Gorilla don't apply to Nullable columns' null maps; keep ZSTD.
            return "ZSTD(1)"
        return codec


def _f(name: str, type_: str, doc: str, role: Role = "info", unit: str = "", **kw: Any) -> Field:
    return Field(name, type_, doc, role, unit, **kw)


def label(name: str, doc: str, type_: str = "lstr", **kw: Any) -> Field:
    return Field(name, type_, doc, "label", **kw)


def gauge(name: str, doc: str, unit: str = "", type_: str = "f64", nullable: bool = True) -> Field:
    return Field(name, type_, doc, "gauge", unit, nullable=nullable)


def counter(name: str, doc: str, unit: str = "", nullable: bool = True) -> Field:
    return Field(name, "counter", doc, "counter", unit, nullable=nullable)


def seconds_counter(name: str, doc: str) -> Field:
    """A counter of seconds (f64: durations converted from the device's micro/nanoseconds)."""
    return Field(name, "f64", doc, "counter", "seconds", nullable=True)


TS = Field("ts", "time", "Sample time (UTC).", "time")


def plural(name: str) -> str:
    """English plural of a snake_case name's last word (regular forms only)."""
    if name.endswith(("s", "x", "ch", "sh")):
        return name + "es"
    if name.endswith("y") and name[-2:-1] not in ("a", "e", "i", "o", "u"):
        return name[:-1] + "ies"
    return name + "s"


@dataclass(frozen=True)
class RecordKind:
    """A typed record kind and the table that stores it.

    One name per kind: the table and the Prometheus subsystem are derived from `name` by the same
    rule for every kind (`table`, `subsystem`), never spelled out per kind."""

    name: str
    doc: str
    fields: tuple[Field, ...]
    order_by: tuple[str, ...]
    time_field: str = "ts"
    ttl_days: int | None = 30
    # Versioned kinds (inventory, findings) keep history as rows and are updated by inserting a
    # newer version; ReplacingMergeTree keeps the latest per ORDER BY key.
    version_field: str | None = None
    partition_by: str | None = "toYYYYMMDD(ts)"
    by_name: Mapping[str, Field] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.name}: duplicate field names")
        object.__setattr__(self, "by_name", {f.name: f for f in self.fields})
        for col in (*self.order_by, self.time_field, self.version_field):
            if col is not None and col not in self.by_name:
                raise ValueError(f"{self.name}: {col!r} is not a field")

    @property
    def table(self) -> str:
        """The table that stores this kind: the kind's plural (`attributed_flow` ->
        `attributed_flows`, `switch_status` -> `switch_statuses`)."""
        return plural(self.name)

    @property
    def subsystem(self) -> str:
        """Prometheus subsystem, `railscope_<subsystem>_<field>`: the kind's name without a
        trailing `_sample` (every kind is a sample of something; the metric names its subject)."""
        return self.name.removesuffix("_sample")

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        import pyarrow as pa

        return pa.schema(
            [pa.field(f.name, f.arrow_type, nullable=f.nullable) for f in self.fields],
            metadata={"railscope.kind": self.name},
        )

    @property
    def columns(self) -> list[str]:
        return [f.name for f in self.fields]

    def labels(self) -> list[Field]:
        return [f for f in self.fields if f.role == "label"]

    def values(self) -> list[Field]:
        return [f for f in self.fields if f.role in ("gauge", "counter")]

    def to_columns(
        self, rows: Sequence[Mapping[str, Any]] | Iterable[Mapping[str, Any]]
    ) -> dict[str, list[Any]]:
        """The columns of this kind from dict rows (field -> values, in field order); missing
        keys become null, or '' in a non-nullable string field (an error in any other
        non-nullable field)."""
        rows = list(rows)
        cols = {}
        for f in self.fields:
            values = [r.get(f.name) for r in rows]
            if not f.nullable and any(v is None for v in values):
                if f.type not in ("str", "lstr"):
                    raise SchemaError(
                        f"{self.name}.{f.name}: missing value in a non-nullable field"
                    )
                values = ["" if v is None else v for v in values]  # '' = not known / none
            cols[f.name] = values
        return cols

    def plain_columns(self, cols: dict[str, list[Any]]) -> dict[str, list[Any]] | None:
        """`to_columns` output as its Arrow table would give it back (see `_plain`), or None
        when a value needs Arrow to convert it (or to refuse it)."""
        out = {}
        for f in self.fields:
            values = _plain(f.type, cols[f.name])
            if values is None:
                return None
            out[f.name] = values
        return out

    def arrow_from_columns(self, cols: Mapping[str, list[Any]]) -> pa.Table:
        """The Arrow table of `to_columns` output."""
        import pyarrow as pa

        arrays = {f.name: pa.array(cols[f.name], type=f.arrow_type) for f in self.fields}
        return pa.Table.from_pydict(arrays, schema=self.arrow_schema)

    def to_arrow(self, rows: Sequence[Mapping[str, Any]] | Iterable[Mapping[str, Any]]) -> pa.Table:
        """Build a table of this kind from dict rows; missing keys become null (or error when the
        field is not nullable)."""
        return self.arrow_from_columns(self.to_columns(rows))

    def conform(self, table: pa.Table) -> pa.Table:
        """Cast/reorder a table to this kind's schema; fills absent nullable columns with nulls.
        Raises SchemaError naming the column that does not fit."""
        import pyarrow as pa

        if table.schema.equals(self.arrow_schema, check_metadata=False):
            return table
        out = []
        for f in self.fields:
            if f.name in table.column_names:
                col = table.column(f.name)
                if col.type != f.arrow_type:
                    try:
                        col = col.cast(f.arrow_type)
                    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                        raise SchemaError(
                            f"{self.name}.{f.name}: cannot cast {col.type} to {f.arrow_type}: {e}"
                        ) from None
                if not f.nullable and col.null_count:
                    if f.arrow_type != pa.string():
                        raise SchemaError(
                            f"{self.name}.{f.name}: {col.null_count} null value(s) in a non-nullable field"
                        )
                    col = col.fill_null("")
                out.append(col)
            elif f.nullable:
                out.append(pa.nulls(table.num_rows, f.arrow_type))
            elif (
                f.arrow_type == pa.string()
            ):  # an unknown label is '' (stamp_cluster fills cluster)
                out.append(pa.array([""] * table.num_rows, pa.string()))
            else:
                raise SchemaError(f"{self.name}: missing required field {f.name!r}")
        extra = set(table.column_names) - set(self.columns)
        if extra:
            raise SchemaError(f"{self.name}: unknown field(s) {sorted(extra)}")
        return pa.Table.from_arrays(out, schema=self.arrow_schema)


class SchemaError(ValueError):
    """A batch does not fit its record kind."""


# --- inventory helpers -------------------------------------------------------------------------
# Inventory facts are time-versioned: valid_from/valid_to (null = still valid) and updated_at, the
# version that ReplacingMergeTree keeps (closing a row = inserting it again with valid_to set).
VALID_FROM = Field("valid_from", "time", "Start of validity of this fact (UTC).")
VALID_TO = Field(
    "valid_to",
    "time",
    "End of validity (UTC); null while the fact still holds.",
    nullable=True,
    codec="ZSTD(1)",
)
UPDATED_AT = Field("updated_at", "time", "Version of this row: the latest wins.")
CLUSTER = label("cluster", "Cluster name from the config.")


def _inventory(name: str, doc: str, key: tuple[str, ...], *fields: Field) -> RecordKind:
    return RecordKind(
        name=name,
        doc=doc,
        fields=(CLUSTER, *fields, VALID_FROM, VALID_TO, UPDATED_AT),
        order_by=("cluster", *key, "valid_from"),
        time_field="valid_from",
        ttl_days=None,
        version_field="updated_at",
        partition_by=None,
    )


KINDS: dict[str, RecordKind] = {}


def _register(kind: RecordKind) -> RecordKind:
    KINDS[kind.name] = kind
    return kind


# --- GPU ---------------------------------------------------------------------------------------
GPU_SAMPLE = _register(
    RecordKind(
        name="gpu_sample",
        doc="One GPU (or MIG instance) sampled through NVML. Null = not supported / not read.",
        fields=(
            TS,
            CLUSTER,
            label("node", "Kubernetes node name."),
            label("gpu", "GPU index on the node.", "u16"),
            label("uuid", "GPU UUID."),
            label("mig", "MIG instance (GPU instance/compute instance), empty for a full GPU."),
            label("model", "Product name."),
            label("pci_bus_id", "PCI bus id of the GPU."),
            label("pod", "Pod using the GPU (from kubelet pod-resources), empty if none."),
            label("namespace", "Namespace of that pod."),
            gauge(
                "up",
                "1 when the GPU answered NVML, 0 when lost / fallen off the bus.",
                type_="u8",
                nullable=False,
            ),
            gauge("utilization_ratio", "GPU utilization (0-1).", "ratio"),
            gauge("memory_utilization_ratio", "Memory controller utilization (0-1).", "ratio"),
            gauge("memory_used_bytes", "Frame buffer used.", "bytes"),
            gauge("memory_total_bytes", "Frame buffer size.", "bytes"),
            gauge("memory_free_bytes", "Frame buffer free.", "bytes"),
            gauge(
                "memory_reserved_bytes", "Frame buffer reserved by driver and firmware.", "bytes"
            ),
            gauge("encoder_utilization_ratio", "Video encoder busy time.", "ratio"),
            gauge("decoder_utilization_ratio", "Video decoder busy time.", "ratio"),
            gauge("sm_clock_hertz", "SM clock.", "hertz"),
            gauge("memory_clock_hertz", "Memory clock.", "hertz"),
            gauge("temperature_celsius", "GPU die temperature.", "celsius"),
            gauge("memory_temperature_celsius", "HBM temperature.", "celsius"),
            gauge("power_watts", "Power draw.", "watts"),
            gauge("power_limit_watts", "Enforced power limit.", "watts"),
            counter("energy_joules_total", "Energy since driver load.", "joules"),
            gauge(
                "clock_event_reasons",
                "Bitmask of NVML clock-event (throttle) reasons.",
                type_="u64",
            ),
            # f64 counters: NVML reports violation time in ns; whole seconds would hide short stalls.
            Field(
                "power_violation_seconds_total",
                "f64",
                "Time throttled by power.",
                "counter",
                "seconds",
                nullable=True,
            ),
            Field(
                "thermal_violation_seconds_total",
                "f64",
                "Time throttled by temperature.",
                "counter",
                "seconds",
                nullable=True,
            ),
            counter("ecc_corrected_errors_total", "Volatile corrected ECC errors."),
            counter("ecc_uncorrected_errors_total", "Volatile uncorrected ECC errors."),
            gauge("remapped_rows_pending", "Rows pending remap (1 = reset needed).", type_="u64"),
            counter("remapped_rows_failure_total", "Row remapping failures."),
            counter("remapped_rows_correctable_total", "Rows remapped for correctable errors."),
            counter("remapped_rows_uncorrectable_total", "Rows remapped for uncorrectable errors."),
            gauge(
                "retired_pages_single_bit_ecc",
                "Pages retired for repeated single-bit ECC errors (pre-Ampere).",
            ),
            gauge("retired_pages_double_bit_ecc", "Pages retired for a double-bit ECC error."),
            gauge("retired_pages_pending", "1 when a page retirement waits for a GPU reset."),
            gauge("pcie_tx_bytes_per_second", "PCIe TX throughput.", "bytes_per_second"),
            gauge("pcie_rx_bytes_per_second", "PCIe RX throughput.", "bytes_per_second"),
            counter("pcie_replay_total", "PCIe replay counter."),
            counter("nvlink_tx_bytes_total", "NVLink bytes sent, all links.", "bytes"),
            counter("nvlink_rx_bytes_total", "NVLink bytes received, all links.", "bytes"),
            counter("nvlink_errors_total", "NVLink CRC/replay/recovery errors, all links."),
            counter("nvlink_crc_flit_errors_total", "NVLink flow-control CRC errors, all links."),
            counter("nvlink_crc_data_errors_total", "NVLink data CRC errors, all links."),
            counter("nvlink_replay_errors_total", "NVLink replays, all links."),
            counter("nvlink_recovery_errors_total", "NVLink link recoveries, all links."),
            gauge("sm_active_ratio", "GPM SM activity (Hopper+).", "ratio"),
            gauge("sm_occupancy_ratio", "GPM SM occupancy (Hopper+).", "ratio"),
            gauge("tensor_active_ratio", "GPM tensor pipe activity (Hopper+).", "ratio"),
            gauge("dram_active_ratio", "GPM DRAM activity (Hopper+).", "ratio"),
            gauge(
                "graphics_active_ratio", "GPM graphics/compute engine activity (Hopper+).", "ratio"
            ),
            counter("xid_errors_total", "XID errors seen since the exporter started."),
        ),
        order_by=("cluster", "node", "gpu", "ts"),
    )
)

GPU_EVENT = _register(
    RecordKind(
        name="gpu_event",
        doc="An event on a GPU: XID error, GPU lost, throttling start/end.",
        fields=(
            TS,
            CLUSTER,
            label("node", "Kubernetes node name."),
            label("gpu", "GPU index on the node.", "u16"),
            label("uuid", "GPU UUID."),
            label("event", "xid | gpu_lost | throttle_start | throttle_end"),
            _f("xid", "u32", "XID code (0 when not an XID event)."),
            _f("detail", "str", "Free text from the driver/exporter."),
        ),
        order_by=("cluster", "node", "ts"),
        ttl_days=365,
    )
)

GPU_PROCESS = _register(
    RecordKind(
        name="gpu_process",
        doc="A process holding a context on a GPU (NVML's running compute and graphics "
        "processes): the GPU memory it uses, and its pod from /proc/PID/cgroup.",
        fields=(
            TS,
            CLUSTER,
            label("node", "Kubernetes node name."),
            label("gpu", "GPU index on the node.", "u16"),
            label("uuid", "GPU UUID."),
            label(
                "mig",
                "MIG instance (GPU instance/compute instance) the process runs in, empty "
                "for a full GPU.",
            ),
            label("pid", "Process id, in the host's pid namespace (NVML's).", "u32"),
            label("type", "compute | graphics (a process with both contexts has a row each)."),
            label(
                "pod_uid", "Pod UID from the process's cgroup path; '' when not in a pod.", "str"
            ),
            label("container_id", "Container id from the process's cgroup path.", "str"),
            gauge(
                "used_memory_bytes",
                "GPU memory used by the process; null when NVML reports it not available "
                "(Windows/WSL WDDM, and MIG without the privilege to read it).",
                "bytes",
                type_="u64",
            ),
        ),
        order_by=("cluster", "node", "gpu", "pid", "ts"),
    )
)

NVLINK_SAMPLE = _register(
    RecordKind(
        name="nvlink_sample",
        doc="One NVLink of one GPU, sampled through NVML (nvmlDeviceGetNvLinkErrorCounter per "
        "link): its state and its data-link error counters. Null = the link cannot report it "
        "(NVML_ERROR_NOT_SUPPORTED).",
        fields=(
            TS,
            CLUSTER,
            label("node", "Kubernetes node name."),
            label("gpu", "GPU index on the node.", "u16"),
            label("uuid", "GPU UUID."),
            label("link", "NVLink index on the GPU (0 .. the GPU's link count - 1).", "u16"),
            gauge(
                "up",
                "1 when the link is active (nvmlDeviceGetNvLinkState), 0 when it is down.",
                type_="u8",
                nullable=False,
            ),
            counter("crc_flit_errors_total", "Data-link flow-control CRC errors (DL_CRC_FLIT)."),
            counter("crc_data_errors_total", "Data-link data CRC errors (DL_CRC_DATA)."),
            counter("replay_errors_total", "Data-link replays, retransmissions (DL_REPLAY)."),
            counter("recovery_errors_total", "Data-link recoveries, link retrains (DL_RECOVERY)."),
        ),
        order_by=("cluster", "node", "gpu", "link", "ts"),
    )
)

GPU_NIC_AFFINITY = _register(
    RecordKind(
        name="gpu_nic_affinity",
        doc="Per GPU: the NIC under the same PCIe switch (if any), NUMA node and rail.",
        fields=(
            TS,
            CLUSTER,
            label("node", "Kubernetes node name."),
            label("gpu", "GPU index.", "u16"),
            label("gpu_pci", "GPU PCI address."),
            label("nic", "RDMA device (mlx5_0) under the same PCIe switch; empty if none."),
            label("netdev", "Netdev of that NIC."),
            label("pcie_switch", "PCI address of the shared upstream bridge."),
            gauge("numa_node", "NUMA node of the GPU.", type_="i64", nullable=True),
            gauge("rail", "Rail (NIC index) the GPU uses.", type_="i64", nullable=True),
            gauge(
                "direct_nic",
                "1 when a NIC shares the GPU's PCIe switch.",
                type_="u8",
                nullable=False,
            ),
        ),
        order_by=("cluster", "node", "gpu", "ts"),
        ttl_days=365,
    )
)

# --- NIC ---------------------------------------------------------------------------------------
NIC_SAMPLE = _register(
    RecordKind(
        name="nic_sample",
        doc="One RDMA NIC port: traffic, RoCE congestion (ECN/CNP), per-priority PFC, health.",
        fields=(
            TS,
            CLUSTER,
            label("node", "Kubernetes node name."),
            label("device", "RDMA device (mlx5_0)."),
            label("port", "Port number.", "u8"),
            label("netdev", "Netdev (eth0 / ens1f0np0)."),
            label("link_layer", "Ethernet | InfiniBand."),
            label(
                "pod",
                "Pod holding this NIC/VF (kubelet pod-resources), empty if none.",
                nullable=True,
            ),
            label("namespace", "Namespace of that pod.", nullable=True),
            label("container", "Container of that pod.", nullable=True),
            gauge("up", "1 when the port state is ACTIVE.", type_="u8", nullable=False),
            gauge("rate_bytes_per_second", "Port rate.", "bytes_per_second"),
            counter("rx_bytes_total", "Bytes received (port_rcv_data x 4).", "bytes"),
            counter("tx_bytes_total", "Bytes sent (port_xmit_data x 4).", "bytes"),
            counter("rx_packets_total", "Packets received."),
            counter("tx_packets_total", "Packets sent."),
            counter("rx_errors_total", "Receive errors."),
            counter("tx_discards_total", "Transmit discards."),
            counter(
                "ecn_marked_packets_total",
                "RoCE packets received with ECN CE (np_ecn_marked_roce_packets).",
            ),
            counter("cnp_sent_total", "CNPs sent as notification point (np_cnp_sent)."),
            counter("cnp_handled_total", "CNPs handled as reaction point (rp_cnp_handled)."),
            counter("cnp_ignored_total", "CNPs ignored (rp_cnp_ignored)."),
            counter("out_of_sequence_total", "Out-of-sequence packets."),
            counter("packet_seq_errors_total", "NAK sequence errors."),
            counter("local_ack_timeout_errors_total", "Local ACK timeouts."),
            counter("out_of_buffer_total", "Drops for lack of receive WQEs."),
            counter("pfc_rx_pause_total", "PFC pause frames received, all priorities."),
            counter("pfc_tx_pause_total", "PFC pause frames sent, all priorities."),
            # Deprecated (kept for writers that still fill it); the node exporter fills the seconds
            # field below: promtool rejects abbreviated units in metric names.
            counter(
                "pfc_pause_duration_us_total", "Time paused (rx), microseconds.", "microseconds"
            ),
            Field(
                "pfc_rx_pause_duration_seconds_total",
                "f64",
                "Time paused by received PFC, all priorities.",
                "counter",
                "seconds",
                nullable=True,
            ),
            # link-level (802.3x) flow control: the whole port paused, whatever the priority
            counter("global_rx_pause_total", "Link-level (802.3x) pause frames received."),
            counter("global_tx_pause_total", "Link-level (802.3x) pause frames sent."),
            Field(
                "global_rx_pause_duration_seconds_total",
                "f64",
                "Time the port was paused by received link-level pause frames.",
                "counter",
                "seconds",
                nullable=True,
            ),
            Field(
                "global_tx_pause_duration_seconds_total",
                "f64",
                "Time the port paused its peer with link-level pause frames.",
                "counter",
                "seconds",
                nullable=True,
            ),
            counter("rx_discards_phy_total", "Packets discarded by the PHY for lack of buffer."),
            counter("pause_storm_events_total", "tx pause storm warning+error events."),
            counter("pci_stalled_total", "Outbound PCIe stalled reads+writes."),
            counter("link_downed_total", "Times the link went down (counters/link_downed)."),
            counter("symbol_errors_total", "Physical symbol errors (counters/symbol_error)."),
            counter(
                "xmit_wait_total",
                "Ticks the port had data but could not send (counters/port_xmit_wait).",
            ),
            counter("rx_dropped_total", "Packets dropped by the netdev (statistics/rx_dropped)."),
            # Every InfiniBand port counter node_exporter's infiniband collector reads, the mlx4
            # 64-bit extended counters and every mlx5 hw_counters entry (nic_counters.csv).
            gauge(
                "state_id",
                "IB port state (ports/N/state): 1 down, 2 init, 3 armed, 4 active, 5 active defer.",
                type_="u8",
            ),
            gauge(
                "phys_state_id",
                "Physical port state (ports/N/phys_state): 1 sleep, 2 polling, 3 disabled, "
                "4 port configuration training, 5 link up, 6 link error recovery, 7 phy test.",
                type_="u8",
            ),
            counter(
                "rx_discards_total",
                "Inbound packets discarded because the port was down or congested (counters/port_rcv_discards).",
            ),
            counter(
                "rx_constraint_errors_total",
                "Inbound packets discarded by the switch port's partition/filter constraints (counters/port_rcv_constraint_errors).",
            ),
            counter(
                "tx_constraint_errors_total",
                "Outbound packets not sent because of partition/filter constraints (counters/port_xmit_constraint_errors).",
            ),
            counter(
                "rx_remote_physical_errors_total",
                "Packets received marked with EBP (bad packet upstream) (counters/port_rcv_remote_physical_errors).",
            ),
            counter(
                "rx_switch_relay_errors_total",
                "Packets a switch port could not relay (counters/port_rcv_switch_relay_errors).",
            ),
            counter(
                "rx_unicast_packets_total",
                "Unicast packets received (counters/unicast_rcv_packets).",
            ),
            counter(
                "tx_unicast_packets_total",
                "Unicast packets sent (counters/unicast_xmit_packets).",
            ),
            counter(
                "rx_multicast_packets_total",
                "Multicast packets received (counters/multicast_rcv_packets).",
            ),
            counter(
                "tx_multicast_packets_total",
                "Multicast packets sent (counters/multicast_xmit_packets).",
            ),
            counter(
                "link_error_recovery_total",
                "Link error recoveries (retrained without going down) (counters/link_error_recovery).",
            ),
            counter(
                "local_link_integrity_errors_total",
                "Times local physical errors exceeded LocalPhyErrors (counters/local_link_integrity_errors).",
            ),
            counter(
                "excessive_buffer_overrun_errors_total",
                "Consecutive flow-control periods with buffer overruns (counters/excessive_buffer_overrun_errors).",
            ),
            counter(
                "vl15_dropped_total",
                "Subnet-management (VL15) packets dropped for lack of buffer (counters/VL15_dropped).",
            ),
            counter(
                "ext_rx_bytes_total",
                "Data received (64-bit extended counter; 4-byte words) (counters_ext/port_rcv_data_64 x 4).",
                "bytes",
            ),
            counter(
                "ext_tx_bytes_total",
                "Data sent (64-bit extended counter; 4-byte words) (counters_ext/port_xmit_data_64 x 4).",
                "bytes",
            ),
            counter(
                "ext_rx_packets_total",
                "Packets received (64-bit extended counter) (counters_ext/port_rcv_packets_64).",
            ),
            counter(
                "ext_tx_packets_total",
                "Packets sent (64-bit extended counter) (counters_ext/port_xmit_packets_64).",
            ),
            counter(
                "ext_rx_unicast_packets_total",
                "Unicast packets received (64-bit extended counter) (counters_ext/port_unicast_rcv_packets).",
            ),
            counter(
                "ext_tx_unicast_packets_total",
                "Unicast packets sent (64-bit extended counter) (counters_ext/port_unicast_xmit_packets).",
            ),
            counter(
                "ext_rx_multicast_packets_total",
                "Multicast packets received (64-bit extended counter) (counters_ext/port_multicast_rcv_packets).",
            ),
            counter(
                "ext_tx_multicast_packets_total",
                "Multicast packets sent (64-bit extended counter) (counters_ext/port_multicast_xmit_packets).",
            ),
            counter(
                "rx_write_requests_total",
                "RDMA WRITE requests received (hw_counters/rx_write_requests).",
            ),
            counter(
                "rx_read_requests_total",
                "RDMA READ requests received (hw_counters/rx_read_requests).",
            ),
            counter(
                "rx_atomic_requests_total",
                "ATOMIC requests received (hw_counters/rx_atomic_requests).",
            ),
            counter(
                "rx_dct_connect_requests_total",
                "DCT connection requests received (hw_counters/rx_dct_connect).",
            ),
            counter(
                "duplicate_requests_total",
                "Duplicate requests received (the requester retransmitted) (hw_counters/duplicate_request).",
            ),
            counter(
                "rnr_nak_retry_errors_total",
                "RNR NAKs received (the responder had no receive WQE) (hw_counters/rnr_nak_retry_err).",
            ),
            counter(
                "implied_nak_seq_errors_total",
                "Implied NAK sequence errors (READ/ATOMIC response PSN gap) (hw_counters/implied_nak_seq_err).",
            ),
            counter(
                "resp_local_length_errors_total",
                "Responder: local length errors (hw_counters/resp_local_length_error).",
            ),
            counter(
                "resp_cqe_errors_total",
                "Responder: completions with error (hw_counters/resp_cqe_error).",
            ),
            counter(
                "req_cqe_errors_total",
                "Requester: completions with error (hw_counters/req_cqe_error).",
            ),
            counter(
                "req_remote_invalid_request_errors_total",
                "Requester: remote invalid request errors (hw_counters/req_remote_invalid_request).",
            ),
            counter(
                "req_remote_access_errors_total",
                "Requester: remote access errors (hw_counters/req_remote_access_errors).",
            ),
            counter(
                "resp_remote_access_errors_total",
                "Responder: remote access errors (hw_counters/resp_remote_access_errors).",
            ),
            counter(
                "resp_cqe_flush_errors_total",
                "Responder: completions flushed with error (QP to error state) (hw_counters/resp_cqe_flush_error).",
            ),
            counter(
                "req_cqe_flush_errors_total",
                "Requester: completions flushed with error (hw_counters/req_cqe_flush_error).",
            ),
            counter(
                "roce_adp_retransmits_total",
                "RoCE adaptive retransmissions (hw_counters/roce_adp_retrans).",
            ),
            counter(
                "roce_adp_retransmit_timeouts_total",
                "RoCE adaptive retransmission timeouts (hw_counters/roce_adp_retrans_to).",
            ),
            counter(
                "roce_slow_restarts_total",
                "Times RoCE slow restart was used (hw_counters/roce_slow_restart).",
            ),
            counter(
                "roce_slow_restart_cnps_total",
                "CNPs generated by RoCE slow restart (hw_counters/roce_slow_restart_cnps).",
            ),
            counter(
                "roce_slow_restart_transitions_total",
                "Transitions to the RoCE slow-restart state (hw_counters/roce_slow_restart_trans).",
            ),
            counter(
                "rx_icrc_encapsulated_errors_total",
                "RoCE packets with ICRC errors (hw_counters/rx_icrc_encapsulated).",
            ),
            counter("resets_total", "Counter resets detected (NIC reset / driver reload)."),
        ),
        order_by=("cluster", "node", "device", "port", "ts"),
    )
)

# Per-priority PFC is its own small kind (one row per netdev x priority) rather than 8 x 9 columns
# on nic_sample: queries filter `priority = 3` and dashboards group by it like a label.
NIC_PRIORITY_SAMPLE = _register(
    RecordKind(
        name="nic_priority_sample",
        doc="One 802.1p priority of a NIC (ethtool statistics): traffic, PFC pauses, discards.",
        fields=(
            TS,
            CLUSTER,
            label("node", "Kubernetes node name."),
            label("netdev", "Netdev the ethtool statistics belong to."),
            label("device", "RDMA device of that netdev (mlx5_0); empty if none."),
            label("priority", "802.1p priority (0-7).", "u8"),
            counter(
                "rx_bytes_total", "Bytes received on this priority (rx_prio{p}_bytes).", "bytes"
            ),
            counter("tx_bytes_total", "Bytes sent on this priority (tx_prio{p}_bytes).", "bytes"),
            counter("rx_packets_total", "Packets received (rx_prio{p}_packets)."),
            counter("tx_packets_total", "Packets sent (tx_prio{p}_packets)."),
            counter("rx_pause_total", "PFC pause frames received (rx_prio{p}_pause)."),
            counter("tx_pause_total", "PFC pause frames sent (tx_prio{p}_pause)."),
            seconds_counter(
                "rx_pause_duration_seconds_total",
                "Time paused by received PFC (rx_prio{p}_pause_duration, us).",
            ),
            seconds_counter(
                "tx_pause_duration_seconds_total",
                "Time this NIC paused its peer (tx_prio{p}_pause_duration, us).",
            ),
            counter(
                "rx_pause_transitions_total",
                "XOFF->XON transitions received (rx_prio{p}_pause_transition).",
            ),
            counter(
                "rx_discards_total",
                "Packets discarded for lack of buffer on this priority (rx_prio{p}_discards).",
            ),
            counter("resets_total", "Counter resets detected on this netdev's ethtool statistics."),
        ),
        order_by=("cluster", "node", "netdev", "priority", "ts"),
    )
)

# --- switches ----------------------------------------------------------------------------------
# The labels naming one switch port (one ASIC of a multi-ASIC switch).
SWITCH_PORT_LABELS = (
    label("switch", "Switch hostname."),
    label("asic", "ASIC namespace on multi-ASIC switches; empty otherwise."),
    label("port", "Port name as the switch shows it (Ethernet0)."),
)

SWITCH_PORT_SAMPLE = _register(
    RecordKind(
        name="switch_port_sample",
        doc="One switch port: traffic, errors, discards, PFC (all priorities summed).",
        fields=(
            TS,
            CLUSTER,
            *SWITCH_PORT_LABELS,
            label(
                "role",
                "Role of the switch (leaf | spine | superspine), or dci for the ports of a data-center interconnect link.",
            ),
            gauge("up", "1 when oper status is up.", type_="u8", nullable=True),
            gauge("speed_bps", "Port speed, bits/s.", "bps"),
            counter("rx_bytes_total", "Octets received.", "bytes"),
            counter("tx_bytes_total", "Octets sent.", "bytes"),
            counter("rx_packets_total", "Unicast+multicast+broadcast packets received."),
            counter("tx_packets_total", "Packets sent."),
            counter("rx_discards_total", "Inbound discards."),
            counter("tx_discards_total", "Outbound discards."),
            counter("rx_errors_total", "Inbound errors."),
            counter("tx_errors_total", "Outbound errors."),
            counter("pfc_rx_pause_total", "PFC frames received, all priorities."),
            counter("pfc_tx_pause_total", "PFC frames sent, all priorities."),
            counter(
                "pfc_rx_pause_duration_us_total",
                "Pause duration received, microseconds.",
                "microseconds",
            ),
            counter("link_down_events_total", "Link down transitions (flaps)."),
            gauge("rx_bytes_per_second", "Rate from RATES:* or derived.", "bytes_per_second"),
            gauge("tx_bytes_per_second", "Rate from RATES:* or derived.", "bytes_per_second"),
            gauge("tx_utilization_ratio", "tx rate / speed.", "ratio"),
        ),
        order_by=("cluster", "switch", "port", "ts"),
    )
)

# Per-priority PFC of a switch port, shaped like nic_priority_sample: one row per port x priority.
# Rows, not Array columns: every detector and dashboard asks "how much did (port, priority) rise
# in the window" for a few priorities (the configured lossless ones, or all but them); as rows
# that is the shared increase_sql over a key column of the sort order, and `priority` is a
# Prometheus label for free. Arrays would make every query arrayJoin all 8 elements of every
# row and need array support in each sink; the 8x rows are mostly zeros that ZSTD folds away.
SWITCH_PRIORITY_SAMPLE = _register(
    RecordKind(
        name="switch_priority_sample",
        doc="One 802.1p priority of a switch port: PFC pause frames and pause time.",
        fields=(
            TS,
            CLUSTER,
            *SWITCH_PORT_LABELS,
            label("priority", "802.1p priority (0-7).", "u8"),
            counter("rx_pause_total", "PFC frames received for this priority."),
            counter("tx_pause_total", "PFC frames sent for this priority."),
            seconds_counter(
                "rx_pause_duration_seconds_total",
                "Time paused by received PFC on this priority (where the switch counts it).",
            ),
            seconds_counter(
                "tx_pause_duration_seconds_total",
                "Time this port paused its peer on this priority (where the switch counts it).",
            ),
        ),
        order_by=("cluster", "switch", "port", "priority", "ts"),
    )
)

SWITCH_QUEUE_SAMPLE = _register(
    RecordKind(
        name="switch_queue_sample",
        doc="One egress queue or ingress priority group of a switch port.",
        fields=(
            TS,
            CLUSTER,
            label("switch", "Switch hostname."),
            label("asic", "ASIC namespace; empty otherwise."),
            label("port", "Port name."),
            label("queue", "Queue index (or PG index for priority groups).", "u8"),
            label("queue_type", "unicast | multicast | pg."),
            counter("tx_packets_total", "Packets sent from the queue."),
            counter("tx_bytes_total", "Bytes sent from the queue.", "bytes"),
            counter("dropped_packets_total", "Packets dropped."),
            counter("ecn_marked_packets_total", "Packets ECN-marked by WRED."),
            counter("ecn_marked_bytes_total", "Bytes ECN-marked by WRED.", "bytes"),
            counter("dropped_bytes_total", "Bytes dropped.", "bytes"),
            gauge("watermark_bytes", "Peak occupancy in the interval.", "bytes"),
            gauge("headroom_watermark_bytes", "PG headroom (xoff room) peak occupancy.", "bytes"),
            gauge("pfc_wd_storm_detected", "1 while the PFC watchdog sees a storm.", type_="u8"),
            counter("pfc_wd_storms_total", "PFC watchdog storms detected."),
            counter("pfc_wd_dropped_packets_total", "Packets dropped by the PFC watchdog."),
        ),
        order_by=("cluster", "switch", "port", "queue", "ts"),
    )
)

SWITCH_STATUS = _register(
    RecordKind(
        name="switch_status",
        doc="One poll of one switch (or one ASIC's COUNTERS_DB): did it answer, how long it took.",
        fields=(
            TS,
            CLUSTER,
            label("switch", "Switch hostname."),
            label("asic", "ASIC namespace on multi-ASIC switches; empty otherwise."),
            gauge(
                "up",
                "1 when the switch's Redis answered the poll, 0 when not.",
                type_="u8",
                nullable=False,
            ),
            gauge("poll_duration_seconds", "Duration of the poll.", "seconds"),
            gauge("ports", "Ports read.", type_="u32"),
            gauge("queues", "Queues and priority groups read.", type_="u32"),
            _f("error", "str", "Why the poll failed ('' when up)."),
        ),
        order_by=("cluster", "switch", "asic", "ts"),
    )
)

ECMP_GROUP_SAMPLE = _register(
    RecordKind(
        name="ecmp_group_sample",
        doc="Spread of tx utilization over the members of one ECMP uplink group in one interval.",
        fields=(
            TS,
            CLUSTER,
            label("switch", "Switch hostname."),
            label("group", "ECMP group name (from config or 'uplinks' from LLDP)."),
            _f("members", "str", "Member ports, comma-separated."),
            gauge("member_count", "Members with a rate this interval.", type_="u16"),
            gauge("mean_utilization_ratio", "Mean member tx utilization.", "ratio"),
            gauge("max_utilization_ratio", "Highest member tx utilization.", "ratio"),
            gauge("max_mean_ratio", "max / mean member tx rate (1 = perfectly even).", "ratio"),
            gauge(
                "cv_ratio", "Coefficient of variation of member tx rates (stddev / mean).", "ratio"
            ),
            _f("hottest_member", "lstr", "Member with the highest tx rate."),
            gauge("tx_bytes_per_second", "Sum of member tx rates.", "bytes_per_second"),
        ),
        order_by=("cluster", "switch", "group", "ts"),
    )
)

FLOW_SAMPLE = _register(
    RecordKind(
        name="flow_sample",
        doc="A sampled packet (sFlow) scaled by its sampling rate; RoCEv2 adds BTH fields.",
        fields=(
            TS,
            CLUSTER,
            label("agent", "sFlow agent address (the switch)."),
            label("switch", "Switch hostname, when known."),
            _f("in_port", "lstr", "Input interface (ifIndex or name)."),
            _f("out_port", "lstr", "Output interface: the ECMP member for uplinks."),
            _f("src_ip", "str", "Source IP."),
            _f("dst_ip", "str", "Destination IP."),
            _f(
                "src_port",
                "u16",
                "L4 source port (entropy for RoCEv2); null if not TCP/UDP.",
                nullable=True,
                codec=None,
            ),
            _f(
                "dst_port",
                "u16",
                "L4 destination port (4791 = RoCEv2); null if not TCP/UDP.",
                nullable=True,
                codec=None,
            ),
            _f(
                "protocol",
                "u8",
                "IP protocol; null if the sampled header is not IP.",
                nullable=True,
                codec=None,
            ),
            _f("vlan", "u16", "VLAN id, 0 if untagged."),
            _f("dscp", "u8", "DSCP; null if not IP.", nullable=True, codec=None),
            _f("ecn", "u8", "ECN bits (3 = CE); null if not IP.", nullable=True, codec=None),
            _f("bth_opcode", "u8", "InfiniBand BTH opcode (RoCEv2).", nullable=True, codec=None),
            _f(
                "dest_qp",
                "u32",
                "InfiniBand BTH destination QP (RoCEv2).",
                nullable=True,
                codec="ZSTD(1)",
            ),
            _f("psn", "u32", "InfiniBand BTH PSN (RoCEv2).", nullable=True, codec="ZSTD(1)"),
            _f("frame_bytes", "u32", "Sampled frame length."),
            _f("sampling_rate", "u32", "1-in-N sampling rate."),
            _f("bytes", "u64", "Estimated bytes this sample stands for (frame x rate)."),
            _f("packets", "u64", "Estimated packets (rate)."),
        ),
        order_by=("cluster", "ts", "src_ip", "dst_ip"),
        ttl_days=14,
    )
)

LLDP_LINK = _register(
    RecordKind(
        name="lldp_link",
        doc="An LLDP neighbour seen on a local port (host or switch).",
        fields=(
            TS,
            CLUSTER,
            label("local_device", "Host or switch that saw the neighbour."),
            label("local_port", "Local interface."),
            label("remote_device", "Neighbour system name."),
            label("remote_port", "Neighbour port id / description."),
            _f("remote_chassis_id", "str", "Neighbour chassis id."),
            _f("source", "lstr", "lldpcli | sonic | sim."),
        ),
        order_by=("cluster", "local_device", "local_port", "ts"),
        ttl_days=90,
    )
)

# --- HDFS --------------------------------------------------------------------------------------
HDFS_TRANSFER = _register(
    RecordKind(
        name="hdfs_transfer",
        doc="One HDFS block transfer from a DataNode clienttrace line, mapped to IDC/rack.",
        fields=(
            TS,
            CLUSTER,
            label("datanode", "DataNode that logged the transfer."),
            label("op", "HDFS_READ | HDFS_WRITE | replication."),
            _f("src", "str", "Source address host:port."),
            _f("dest", "str", "Destination address host:port."),
            label("src_idc", "IDC of the source ('' = unknown host)."),
            label("dest_idc", "IDC of the destination ('' = unknown host)."),
            _f("src_rack", "lstr", "Rack path of the source."),
            _f("dest_rack", "lstr", "Rack path of the destination."),
            _f("bytes", "u64", "Bytes transferred."),
            _f("client_id", "str", "DFSClient id."),
            _f("block_id", "str", "Block id (BP-...:blk_...)."),
            _f("duration_seconds", "f64", "Transfer duration.", nullable=True),
            _f("cross_idc", "bool", "Source and destination in different IDCs."),
            _f("write_mode", "lstr", "sync | async | '' for reads."),
        ),
        order_by=("cluster", "src_idc", "dest_idc", "ts"),
        ttl_days=30,
    )
)

HDFS_BLOCK_PLACEMENT = _register(
    RecordKind(
        name="hdfs_block_placement",
        doc="Replica placement of one block (from fsck or WebHDFS) judged against the policy.",
        fields=(
            TS,
            CLUSTER,
            _f("path", "str", "File path."),
            _f("block_id", "str", "Block id."),
            _f("replicas", "u16", "Replicas found."),
            _f("expected_replicas", "u16", "Replication factor."),
            _f("replicas_by_idc", "str", "JSON object IDC -> replica count."),
            _f("locations", "str", "JSON list of host/rack locations."),
            _f("violation", "bool", "Placement breaks the policy."),
            _f("reason", "str", "Why it breaks the policy ('' if it does not)."),
        ),
        order_by=("cluster", "violation", "path", "block_id", "ts"),
        ttl_days=90,
    )
)

HDFS_PLACEMENT_TOTAL = _register(
    RecordKind(
        name="hdfs_placement_total",
        doc="Replica placement audit totals per path prefix (one fsck / WebHDFS report).",
        fields=(
            TS,
            CLUSTER,
            label("prefix", "Path prefix the totals cover ('/' = everything audited)."),
            gauge("blocks", "Blocks audited under the prefix.", type_="u64", nullable=False),
            gauge(
                "violations",
                "Blocks whose placement breaks the policy.",
                type_="u64",
                nullable=False,
            ),
            gauge(
                "under_replicated",
                "Blocks with fewer replicas than the policy wants.",
                type_="u64",
                nullable=False,
            ),
            gauge(
                "unknown_hosts",
                "Replicas on hosts the topology does not know.",
                type_="u64",
                nullable=False,
            ),
        ),
        order_by=("cluster", "prefix", "ts"),
        ttl_days=90,
    )
)

HDFS_NAMENODE_SAMPLE = _register(
    RecordKind(
        name="hdfs_namenode_sample",
        doc="One NameNode /jmx scrape (FSNamesystem, FSNamesystemState, NameNodeInfo).",
        fields=(
            TS,
            CLUSTER,
            label("namenode", "NameNode JMX endpoint (host:port)."),
            label("ha_state", "active | standby | '' when not reported."),
            gauge(
                "up",
                "1 when the scrape succeeded, 0 when it failed (see error).",
                type_="u8",
                nullable=False,
            ),
            _f("error", "str", "Why the scrape failed ('' when it did not)."),
            gauge("live_datanodes", "Live DataNodes.", type_="u64"),
            gauge("dead_datanodes", "Dead DataNodes.", type_="u64"),
            gauge("stale_datanodes", "Stale DataNodes.", type_="u64"),
            gauge("blocks", "Blocks in the namespace.", type_="u64"),
            gauge("files", "Files in the namespace.", type_="u64"),
            gauge("under_replicated_blocks", "Blocks below their replication factor.", type_="u64"),
            gauge("missing_blocks", "Blocks with no live replica.", type_="u64"),
            gauge("corrupt_blocks", "Blocks with corrupt replicas.", type_="u64"),
            gauge(
                "pending_replication_blocks",
                "Blocks waiting for replication (async backlog).",
                type_="u64",
            ),
            gauge("pending_deletion_blocks", "Blocks waiting for deletion.", type_="u64"),
            gauge("capacity_total_bytes", "Configured capacity.", "bytes", type_="u64"),
            gauge("capacity_used_bytes", "DFS used.", "bytes", type_="u64"),
            gauge("capacity_remaining_bytes", "Capacity remaining.", "bytes", type_="u64"),
        ),
        order_by=("cluster", "namenode", "ts"),
        ttl_days=30,
    )
)

HDFS_DATANODE_SAMPLE = _register(
    RecordKind(
        name="hdfs_datanode_sample",
        doc="One DataNode /jmx scrape (DataNodeActivity-*, FSDatasetState, DataNodeInfo).",
        fields=(
            TS,
            CLUSTER,
            label("datanode", "DataNode JMX endpoint (host:port)."),
            label("idc", "IDC of the DataNode ('' = not in the topology)."),
            gauge(
                "up",
                "1 when the scrape succeeded, 0 when it failed (see error).",
                type_="u8",
                nullable=False,
            ),
            _f("error", "str", "Why the scrape failed ('' when it did not)."),
            counter("read_bytes_total", "Bytes read from this DataNode.", "bytes"),
            counter("written_bytes_total", "Bytes written to this DataNode.", "bytes"),
            counter(
                "remote_read_bytes_total",
                "Bytes read by non-local clients (RemoteBytesRead).",
                "bytes",
            ),
            counter("remote_written_bytes_total", "Bytes written by non-local clients.", "bytes"),
            counter("blocks_read_total", "Blocks read."),
            counter("blocks_written_total", "Blocks written."),
            counter("blocks_replicated_total", "Blocks replicated to other DataNodes."),
            counter("local_client_reads_total", "Reads from a client on the same host."),
            counter("remote_client_reads_total", "Reads from a client on another host."),
            counter("local_client_writes_total", "Writes from a client on the same host."),
            counter("remote_client_writes_total", "Writes from a client on another host."),
            counter("packet_ack_round_trips_total", "Write-pipeline packet acks measured."),
            gauge(
                "packet_ack_round_trip_seconds",
                "Mean packet-ack round trip (metrics window).",
                "seconds",
            ),
            counter("network_errors_total", "DataNode network errors."),
            counter("volume_failures_total", "Volume failures."),
            gauge("capacity_bytes", "Storage capacity.", "bytes", type_="u64"),
            gauge("dfs_used_bytes", "DFS used.", "bytes", type_="u64"),
            gauge("remaining_bytes", "Storage remaining.", "bytes", type_="u64"),
            gauge("failed_volumes", "Failed volumes now.", type_="u64"),
            gauge("xceivers", "Active data transfer threads.", type_="u64"),
        ),
        order_by=("cluster", "datanode", "ts"),
        ttl_days=30,
    )
)

DCI_USAGE = _register(
    RecordKind(
        name="dci_usage",
        doc="HDFS bytes/s on the DCI per direction (src IDC -> dest IDC) per interval, against the budget.",
        fields=(
            TS,
            CLUSTER,
            label("src_idc", "IDC the data left."),
            label("dest_idc", "IDC the data entered."),
            _f("interval_seconds", "f64", "Length of the interval starting at ts."),
            gauge(
                "read_bytes_per_second", "Cross-IDC HDFS reads.", "bytes_per_second", nullable=False
            ),
            gauge(
                "sync_write_bytes_per_second",
                "Cross-IDC write-pipeline traffic.",
                "bytes_per_second",
                nullable=False,
            ),
            gauge(
                "async_replication_bytes_per_second",
                "Cross-IDC background replication.",
                "bytes_per_second",
                nullable=False,
            ),
            gauge(
                "total_bytes_per_second",
                "All HDFS traffic on the pair.",
                "bytes_per_second",
                nullable=False,
            ),
            gauge(
                "capacity_bytes_per_second",
                "Configured budget for the pair (null = none).",
                "bytes_per_second",
            ),
            gauge(
                "headroom_bytes_per_second",
                "Budget minus total (negative = over budget).",
                "bytes_per_second",
            ),
            gauge("utilization_ratio", "Total / budget.", "ratio"),
        ),
        order_by=("cluster", "src_idc", "dest_idc", "ts"),
        ttl_days=90,
    )
)

# --- collectives (NCCL Inspector) --------------------------------------------------------------
COLLECTIVE_SAMPLE = _register(
    RecordKind(
        name="collective_sample",
        doc="One NCCL collective of one rank (NCCL Inspector JSON line or Prom textfile sample), "
        "joined to the pod, job and GPU of the process that ran it.",
        fields=(
            TS,
            CLUSTER,
            label("node", "Host that ran the rank (the Inspector's hostname)."),
            label("namespace", "Namespace (= tenant) of the pod; '' when not attributed."),
            label("pod", "Pod of the process ((hostname, pid) -> cgroup -> pod); '' if unknown."),
            _f("pod_uid", "str", "Pod UID from the process's cgroup path."),
            _f("container_id", "str", "Container id from the process's cgroup path."),
            label("job", "Volcano job of the pod; '' if none or unknown."),
            label("comm_id", "NCCL communicator id (header.id)."),
            label("collective", "AllReduce, AllGather, ReduceScatter, Broadcast, ..."),
            label("msg_size_bucket", "Message size rounded down to a power of two (1GiB)."),
            label("rank", "Rank in the communicator.", type_="u32"),
            _f("gpu", "lstr", "GPU of the rank: the pod's GPU assignment, or gpu_device_id."),
            _f("pid", "u32", "Process id on the host."),
            _f("n_ranks", "u32", "Ranks in the communicator."),
            _f("n_nodes", "u32", "Nodes the communicator spans."),
            _f("coll_sn", "u64", "Sequence number of the collective in the communicator."),
            _f("msg_size_bytes", "u64", "Message size."),
            gauge("exec_time_seconds", "Collective execution time.", "seconds", nullable=False),
            gauge(
                "algo_bandwidth_gbs",
                "Algorithm bandwidth (size / time), GB/s.",
                "gbs",
                nullable=False,
            ),
            gauge(
                "bus_bandwidth_gbs",
                "Bus bandwidth (algorithm bandwidth scaled by the collective's factor), GB/s.",
                "gbs",
                nullable=False,
            ),
            _f("timing_source", "lstr", "coll_timing_source (kernel_gpu, ...)."),
            _f("format_version", "lstr", "Inspector format version (v4.0), or 'prom'."),
            label(
                "algorithm",
                "NCCL algorithm it ran with (coll_algo: RING, TREE, NVLS, NVLS_TREE, PAT, "
                "COLLNET_DIRECT, COLLNET_CHAIN); '' when the Inspector does not say (before v4.2).",
            ),
            label("protocol", "NCCL protocol it ran with (coll_proto: LL, LL128, SIMPLE); ''."),
            _f(
                "channels",
                "u16",
                "Channels it ran on (coll_n_channels, else the verbose "
                "trace's distinct channels); null when not known.",
                nullable=True,
            ),
            _f("comm_name", "lstr", "Communicator name (header.comm_name, v4.2); '' unknown."),
        ),
        order_by=("cluster", "job", "comm_id", "collective", "ts"),
        ttl_days=30,
    )
)

# --- the job's and the kernel's own words (pod logs, /dev/kmsg) ---------------------------------
LOG_EVENT = _register(
    RecordKind(
        name="log_event",
        doc="A line of a pod's log or of the kernel log that railscope's grammar recognised "
        "(NCCL, PyTorch, NVIDIA driver, NIC driver, PCIe AER): its kind and matched fields. "
        "Lines that match nothing are counted by the source, never stored.",
        fields=(
            TS,
            CLUSTER,
            label("node", "Node whose pod or kernel wrote the line."),
            label("namespace", "The pod's namespace, from the log file's path; '' kernel log."),
            label("pod", "The pod's name, from the log file's path; '' for the kernel log."),
            _f("pod_uid", "str", "The pod's UID, from the log file's path; ''."),
            label("container", "The container, from the log file's path; '' kernel log."),
            _f("source", "lstr", "Where the line came from: cri | kmsg | text (a file of --from)."),
            label("kind", "Event kind: ib_completion_error, torch_watchdog_timeout, xid, ..."),
            _f(
                "fields",
                "str",
                "JSON object of the kind's matched fields, named as docs/logs.md lists them.",
            ),
            _f("excerpt", "str", "The line, bounded, with credentials and tokens redacted."),
            _f("file", "str", "The file it was read from; '' for /dev/kmsg."),
            _f(
                "line",
                "u64",
                "1-based line of the file (of the input, with --from) where it starts.",
            ),
        ),
        order_by=("cluster", "node", "kind", "ts"),
        ttl_days=30,
    )
)

# --- inventory (time-versioned) ----------------------------------------------------------------
POD = _register(
    _inventory(
        "pod",
        "A pod's placement and ownership over time.",
        ("namespace", "pod"),
        label("namespace", "Namespace = tenant."),
        label("pod", "Pod name."),
        _f("uid", "str", "Pod UID."),
        label("node", "Node the pod ran on."),
        _f("job", "lstr", "Volcano job (volcano.sh/job-name), '' if none."),
        _f("phase", "lstr", "Pod phase."),
        _f("gpus", "str", "JSON list of GPU indices/UUIDs assigned."),
        _f("gpu_requests", "u16", "nvidia.com/gpu requested (sum over containers).", nullable=True),
        _f("priority_class", "lstr", "spec.priorityClassName."),
        _f("podgroup", "lstr", "Volcano PodGroup (scheduling.k8s.io/group-name annotation)."),
        _f("gpu_model", "lstr", "nvidia.com/gpu.product the pod's nodeSelector requires, '' any."),
    )
)

NCCL_SETTING = _register(
    _inventory(
        "nccl_setting",
        "An NCCL setting (an NCCL_* environment variable) of a pod's container over time, as "
        "its spec gives it; secrets are never stored.",
        ("namespace", "pod", "container", "name"),
        label("namespace", "Namespace = tenant."),
        label("pod", "Pod name."),
        _f("container", "lstr", "Container of the pod (init containers included)."),
        _f("name", "lstr", "Variable name (NCCL_ALGO, NCCL_IB_QPS_PER_CONNECTION, ...)."),
        _f("value", "str", "Its value; '' when it comes from an object not at hand (see source)."),
        _f("source", "lstr", "value | configmap | configmap_unresolved | field | resource."),
        _f(
            "ref",
            "str",
            "Where a value not written in the spec comes from (configmap NAME "
            "key KEY, fieldRef PATH, resourceFieldRef RESOURCE); '' for a literal.",
        ),
        _f("job", "lstr", "Volcano job of the pod (volcano.sh/job-name), '' none."),
    )
)

POD_IP_LEASE = _register(
    _inventory(
        "pod_ip_lease",
        "An IP held by a pod over an interval: primary and Multus secondary (RDMA) IPs.",
        ("ip",),
        _f("ip", "str", "The IP address."),
        label("namespace", "Namespace = tenant."),
        label("pod", "Pod name."),
        label("node", "Node."),
        _f("interface", "lstr", "Pod interface (eth0, net1, ...)."),
        _f("network", "lstr", "Multus network name; '' for the primary."),
        _f("mac", "str", "MAC address."),
        _f("pci_address", "str", "SR-IOV VF PCI address (device-info)."),
        _f("primary", "bool", "The pod's primary IP."),
    )
)

NAMESPACE = _register(
    _inventory(
        "namespace",
        "A namespace (= tenant) and its labels over time.",
        ("namespace",),
        label("namespace", "Namespace name."),
        _f("tenant", "lstr", "Tenant: the railscope.io/tenant label, else the namespace name."),
        _f("labels", "str", "JSON object of namespace labels."),
    )
)

NODE = _register(
    _inventory(
        "node",
        "A Kubernetes node: labels and where it sits.",
        ("node",),
        label("node", "Node name."),
        _f("labels", "str", "JSON object of node labels."),
        _f("idc", "lstr", "Data center (from labels or topology)."),
        _f("su", "lstr", "Scalable unit."),
        _f("gpus", "u16", "Allocatable GPUs."),
        _f("gpu_capacity", "u16", "nvidia.com/gpu capacity.", nullable=True),
        _f("gpu_model", "lstr", "nvidia.com/gpu.product label (GPU Feature Discovery)."),
    )
)

HYPERNODE = _register(
    _inventory(
        "hypernode",
        "A Volcano HyperNode member: one row per (hypernode, member).",
        ("hypernode", "member"),
        label("hypernode", "HyperNode name."),
        _f("tier", "u8", "HyperNode tier (1 = lowest)."),
        _f("tier_name", "lstr", "Tier name, if given."),
        _f("member", "str", "Member: node name or child HyperNode name."),
        _f("member_type", "lstr", "Node | HyperNode."),
        _f(
            "selector",
            "lstr",
            "exactMatch | regexMatch | labelMatch, or invalidRegex: a regexMatch whose pattern"
            " RE2 cannot compile (it matches nothing, as in Volcano).",
        ),
    )
)

JOB = _register(
    _inventory(
        "job",
        "A Volcano job and its networkTopology constraint.",
        ("namespace", "job"),
        label("namespace", "Namespace = tenant."),
        label("job", "Job name."),
        _f("queue", "lstr", "Volcano queue."),
        _f("replicas", "u32", "Total task replicas."),
        _f("topology_mode", "lstr", "hard | soft | '' (no networkTopology)."),
        _f("highest_tier_allowed", "u8", "spec.networkTopology.highestTierAllowed.", nullable=True),
        _f("highest_tier_name", "lstr", "spec.networkTopology.highestTierName.", nullable=True),
        _f("allocated_hypernode", "str", "PodGroup volcano.sh/job-allocated-hypernode annotation."),
    )
)

# --- GPU pool (time-versioned) -----------------------------------------------------------------
QUEUE = _register(
    _inventory(
        "queue",
        "A Volcano Queue and its nvidia.com/gpu quota (capability, deserved, guarantee).",
        ("queue",),
        label("queue", "Queue name."),
        _f("parent", "lstr", "spec.parent, else the volcano.sh/hierarchy path's parent, '' none."),
        _f("state", "lstr", "status.state (Open, Closed, ...)."),
        _f("weight", "u32", "spec.weight."),
        _f("reclaimable", "bool", "spec.reclaimable (default true)."),
        _f("capability_gpus", "u32", "spec.capability nvidia.com/gpu; null = none.", nullable=True),
        _f("deserved_gpus", "u32", "spec.deserved nvidia.com/gpu; null = none.", nullable=True),
        _f(
            "guarantee_gpus",
            "u32",
            "spec.guarantee.resource nvidia.com/gpu; null = none.",
            nullable=True,
        ),
    )
)

PODGROUP = _register(
    _inventory(
        "podgroup",
        "A Volcano PodGroup (gang): size, queue, phase and why it is not scheduled.",
        ("namespace", "podgroup"),
        label("namespace", "Namespace = tenant."),
        label("podgroup", "PodGroup name."),
        _f("job", "lstr", "Owning Volcano Job, '' for a standalone PodGroup."),
        _f("queue", "lstr", "spec.queue."),
        _f("priority_class", "lstr", "spec.priorityClassName."),
        _f("min_member", "u32", "spec.minMember."),
        _f("min_gpus", "u32", "spec.minResources nvidia.com/gpu (0 = none stated)."),
        _f("phase", "lstr", "status.phase (Pending, Inqueue, Running, Unknown, ...)."),
        _f("unschedulable", "bool", "An Unschedulable condition with status True."),
        _f("reason", "str", "That condition's reason and message."),
    )
)

PRIORITY_CLASS = _register(
    _inventory(
        "priority_class",
        "A PriorityClass with the provisioning type and purpose its labels/annotations carry.",
        ("priority_class",),
        label("priority_class", "PriorityClass name."),
        _f("value", "i64", "value."),
        _f("preemption_policy", "lstr", "preemptionPolicy (PreemptLowerPriority | Never)."),
        _f("global_default", "bool", "globalDefault."),
        _f("provisioning", "lstr", "Provisioning type (Reserved, Spot, ...); '' unknown."),
        _f("purpose", "lstr", "Purpose (Serving, Training, Interactive, ...); '' unknown."),
    )
)

RESOURCE_QUOTA = _register(
    _inventory(
        "resource_quota",
        "A namespace ResourceQuota's GPU lines.",
        ("namespace", "quota"),
        label("namespace", "Namespace = tenant."),
        label("quota", "ResourceQuota name."),
        _f("gpus_hard", "u32", "requests.nvidia.com/gpu hard limit; null = none.", nullable=True),
        _f(
            "gpus_used",
            "u32",
            "status.used requests.nvidia.com/gpu; null = not reported.",
            nullable=True,
        ),
    )
)

POD_EVENT = _register(
    RecordKind(
        name="pod_event",
        doc="A pod preempted or evicted (Kubernetes Event); a re-listed event replaces itself.",
        fields=(
            TS,
            CLUSTER,
            label("namespace", "Namespace of the pod."),
            label("pod", "Pod name."),
            _f("uid", "str", "Event UID."),
            _f("reason", "lstr", "Preempted | Evict | Evicted | Preempting ..."),
            _f("message", "str", "Event message."),
            _f("preemptor", "str", "Preempting pod UID where the message names it."),
            _f("node", "lstr", "Node the message names, '' if none."),
            _f("source", "lstr", "Reporting component (default-scheduler, volcano, kubelet)."),
            _f("count", "u32", "Event count: the latest version wins."),
        ),
        order_by=("cluster", "namespace", "pod", "uid"),
        version_field="count",
        ttl_days=90,
        partition_by=None,
    )
)

# --- findings ----------------------------------------------------------------------------------
ATTRIBUTED_FLOW = _register(
    RecordKind(
        name="attributed_flow",
        doc="A flow sample joined, as of its own time, to the pods/jobs/tenants/nodes at both ends "
        "and the lowest common HyperNode they share. Written per window by the correlation engine.",
        fields=(
            TS,
            CLUSTER,
            _f("switch", "lstr", "Switch that sampled it."),
            _f("out_port", "lstr", "Egress port (the ECMP member for uplinks)."),
            _f("src_ip", "str", "Source IP."),
            _f("dst_ip", "str", "Destination IP."),
            _f("dst_port", "u16", "L4 destination port."),
            _f("dest_qp", "u32", "RoCEv2 destination QP.", nullable=True, codec="ZSTD(1)"),
            _f("rdma", "bool", "RoCEv2 (UDP 4791)."),
            _f("bytes", "u64", "Estimated bytes."),
            _f("src_namespace", "lstr", "Tenant of the source pod ('' = IP owned by nobody then)."),
            _f("src_pod", "str", "Source pod."),
            _f("src_node", "lstr", "Source node."),
            _f("src_job", "lstr", "Source Volcano job."),
            _f("dst_namespace", "lstr", "Tenant of the destination pod."),
            _f("dst_pod", "str", "Destination pod."),
            _f("dst_node", "lstr", "Destination node."),
            _f("dst_job", "lstr", "Destination Volcano job."),
            _f(
                "src_rail",
                "i64",
                "Rail of the source IP's interface (Multus network railN); -1 unknown.",
                codec=None,
            ),
            _f("src_nic", "lstr", "Source RDMA device on that rail (mlx5_N)."),
            _f("src_leaf_port", "lstr", "Leaf port cabled to that NIC (LLDP), SWITCH:PORT."),
            _f(
                "dst_rail", "i64", "Rail of the destination IP's interface; -1 unknown.", codec=None
            ),
            _f("dst_nic", "lstr", "Destination RDMA device on that rail."),
            _f("dst_leaf_port", "lstr", "Leaf port cabled to the destination NIC (LLDP)."),
            _f("src_su", "lstr", "Scalable unit of the source node."),
            _f("dst_su", "lstr", "Scalable unit of the destination node."),
            _f("src_idc", "lstr", "IDC of the source node."),
            _f("dst_idc", "lstr", "IDC of the destination node."),
            _f("lca_hypernode", "lstr", "Lowest common HyperNode of the two nodes ('' = none)."),
            _f("lca_tier", "u8", "Its tier (0 = no common HyperNode / unknown)."),
        ),
        order_by=("cluster", "ts", "src_namespace", "src_job"),
        ttl_days=14,
    )
)

FINDING = _register(
    RecordKind(
        name="finding",
        doc="A correlated finding; a persisting one is updated (same finding_id), not duplicated.",
        fields=(
            _f("finding_id", "str", "Stable id: hash of kind + subject + first window."),
            CLUSTER,
            label("kind", "Finding kind (placement_violation, ecmp_imbalance, pfc_storm, ...)."),
            label("category", "placement | fabric | node | storage | topology."),
            label("severity", "critical | warning | info."),
            _f(
                "subject_type",
                "lstr",
                "job | pod | link | port | nic | gpu | block | hypernode ...",
            ),
            _f("subject", "str", "What the finding is about."),
            _f("summary", "str", "One line a person reads."),
            _f("evidence", "str", "JSON: the numbers and the rows they came from."),
            _f("window_start", "time", "Start of the window that produced it."),
            _f("window_end", "time", "End of that window."),
            _f("first_seen", "time", "First window it appeared in."),
            _f("last_seen", "time", "Last window it appeared in."),
            _f("updated_at", "time", "Row version."),
        ),
        order_by=("cluster", "kind", "subject", "finding_id"),
        time_field="first_seen",
        ttl_days=180,
        version_field="updated_at",
        partition_by=None,
    )
)

INCIDENT = _register(
    RecordKind(
        name="incident",
        doc="Findings that share one root cause (telemetry/correlate/incidents.py); an update is a newer version of the same incident_id.",
        fields=(
            _f(
                "incident_id",
                "str",
                "Stable id: hash of the root finding when the incident opened.",
            ),
            CLUSTER,
            label("state", "open | resolved."),
            label(
                "severity",
                "critical | warning | info: the highest of the members, raised by blast radius.",
            ),
            _f("root_finding_id", "str", "The finding the others follow from."),
            label("root_kind", "Kind of the root finding."),
            _f("root_subject_type", "lstr", "Subject type of the root finding."),
            _f("root_subject", "str", "Subject of the root finding."),
            _f("summary", "str", "Summary of the root finding and what else it explains."),
            _f(
                "remediation",
                "str",
                "What to do about it: the root kind's remediation "
                "(telemetry/correlate/remediation.yaml) filled with the root finding's values.",
            ),
            _f("runbook", "str", "The docs page of the root kind (docs/PAGE.md#kind)."),
            _f("findings", "u32", "Member findings (root included)."),
            _f("kinds", "str", "JSON list: kinds of the member findings."),
            _f("jobs", "str", "JSON list of namespace/job affected."),
            _f("tenants", "str", "JSON list of tenants affected."),
            _f("gpus", "u32", "GPUs of the affected jobs."),
            _f("gpu_hours", "f64", "GPU-hours of the affected jobs over the span of the incident."),
            _f("first_seen", "time", "Earliest first_seen of the members."),
            _f("last_seen", "time", "Latest last_seen of the members."),
            _f("merged_into", "str", "Set when a later regrouping folded it into that incident."),
            _f("updated_at", "time", "Row version."),
        ),
        order_by=("cluster", "incident_id"),
        time_field="first_seen",
        ttl_days=180,
        version_field="updated_at",
        partition_by=None,
    )
)

INCIDENT_FINDING = _register(
    RecordKind(
        name="incident_finding",
        doc="Membership: which findings an incident groups (member = 0 once regrouping moved it out).",
        fields=(
            CLUSTER,
            _f("incident_id", "str", "The incident."),
            _f("finding_id", "str", "A member finding."),
            _f("role", "lstr", "root | cause | consequence."),
            _f("member", "u8", "1 while the finding belongs to the incident."),
            _f("first_seen", "time", "first_seen of the finding."),
            _f("updated_at", "time", "Row version."),
        ),
        order_by=("cluster", "incident_id", "finding_id"),
        time_field="first_seen",
        ttl_days=180,
        version_field="updated_at",
        partition_by=None,
    )
)

# --- railscope itself --------------------------------------------------------------------------
COMPONENT_STAT = _register(
    RecordKind(
        name="component_stat",
        doc="Self-report of a pipeline component (source, transform, sink) per interval.",
        fields=(
            TS,
            CLUSTER,
            label("host", "Where the component runs."),
            label("component", "Component name (source:node, sink:clickhouse, ...)."),
            counter("received_total", "Records received.", nullable=False),
            counter("sent_total", "Records sent on.", nullable=False),
            counter("dropped_total", "Records dropped.", nullable=False),
            counter("failed_total", "Failed operations.", nullable=False),
            gauge("last_duration_seconds", "Duration of the last collect/export.", "seconds"),
            gauge("success", "1 when the last operation succeeded.", type_="u8"),
            gauge("spool_bytes", "Bytes waiting in the spool (sinks).", "bytes"),
        ),
        order_by=("cluster", "component", "ts"),
    )
)


def kind(name: str) -> RecordKind:
    try:
        return KINDS[name]
    except KeyError:
        raise KeyError(
            f"unknown record kind {name!r} (known: {', '.join(sorted(KINDS))})"
        ) from None


def ms(dt: datetime) -> int:
    """Milliseconds since the epoch for a timezone-aware datetime."""
    return int(dt.timestamp() * 1000)


__all__ = ["KINDS", "Field", "RecordKind", "SchemaError", "kind"]
