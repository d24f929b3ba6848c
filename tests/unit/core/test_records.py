from __future__ import annotations

import pyarrow as pa
import pytest

from telemetry.records import GPU_SAMPLE, KINDS, POD_IP_LEASE, SchemaError, kind


def test_every_kind_renders_consistent_types() -> None:
    for k in KINDS.values():
        schema = k.arrow_schema
        assert schema.names == k.columns
        assert k.time_field in k.columns
        for f in k.fields:
            ch = f.clickhouse_type
            assert ("Nullable" in ch) == f.nullable, (k.name, f.name, ch)
            if f.type == "time":
                assert ch.endswith("DateTime64(3, 'UTC')") or "DateTime64(3, 'UTC')" in ch


def test_kinds_needed_by_later_work_exist() -> None:
    for name in [
        "gpu_sample",
        "gpu_event",
        "nic_sample",
        "switch_port_sample",
        "switch_queue_sample",
        "flow_sample",
        "hdfs_transfer",
        "hdfs_block_placement",
        "pod",
        "pod_ip_lease",
        "node",
        "hypernode",
        "job",
        "lldp_link",
        "finding",
    ]:
        assert kind(name).name == name
    with pytest.raises(KeyError, match="unknown record kind 'nope'"):
        kind("nope")


def test_inventory_kinds_are_time_versioned() -> None:
    for name in ["pod", "pod_ip_lease", "node", "hypernode", "job"]:
        k = kind(name)
        assert {"valid_from", "valid_to", "updated_at"} <= set(k.columns)
        assert k.version_field == "updated_at"
        assert k.by_name["valid_to"].nullable
    assert POD_IP_LEASE.order_by[:2] == ("cluster", "ip")


def test_to_arrow_fills_missing_labels_and_nulls_values() -> None:
    t = GPU_SAMPLE.to_arrow(
        [{"ts": 1_700_000_000_000, "node": "n1", "gpu": 3, "up": 1, "power_watts": 301.5}]
    )
    row = t.to_pylist()[0]
    assert row["node"] == "n1" and row["gpu"] == 3 and row["power_watts"] == 301.5
    assert row["cluster"] == ""  # unknown yet: stamp_cluster fills it
    assert row["utilization_ratio"] is None  # unsupported stays null, never a sentinel


def test_to_arrow_refuses_missing_required_number() -> None:
    with pytest.raises(SchemaError, match=r"gpu_sample\.gpu"):
        GPU_SAMPLE.to_arrow([{"ts": 1, "node": "n1", "up": 1}])


def test_conform_casts_reorders_and_names_bad_columns() -> None:
    t = pa.table(
        {
            "power_watts": [1, 2],
            "ts": pa.array([1, 2], pa.int64()),
            "gpu": [0, 1],
            "up": [1, 1],
            "node": ["a", "b"],
        }
    )
    with pytest.raises(SchemaError, match="missing required field 'up'"):
        GPU_SAMPLE.conform(t.drop_columns(["up"]))
    out = GPU_SAMPLE.conform(t)
    assert out.column("cluster").to_pylist() == ["", ""]  # unknown label: '' until stamp_cluster
    assert out.schema.names == GPU_SAMPLE.columns
    assert out.column("power_watts").type == pa.float64()
    with pytest.raises(SchemaError, match=r"unknown field\(s\) \['bogus'\]"):
        GPU_SAMPLE.conform(t.append_column("bogus", pa.array([1, 2])))
    bad = t.set_column(t.column_names.index("gpu"), "gpu", pa.array(["x", "y"]))
    with pytest.raises(SchemaError, match=r"gpu_sample\.gpu: cannot cast"):
        GPU_SAMPLE.conform(bad)


def test_one_name_per_kind() -> None:
    """Table and metric subsystem are derived from the kind's name by one rule for every kind,
    and no two kinds share either."""
    from telemetry.records import plural

    assert [plural(n) for n in ("attributed_flow", "switch_status", "gpu_nic_affinity", "day")] == [
        "attributed_flows",
        "switch_statuses",
        "gpu_nic_affinities",
        "days",
    ]
    for k in KINDS.values():
        assert k.table == plural(k.name), k.name
        assert k.subsystem == k.name.removesuffix("_sample"), k.name
    assert len({k.table for k in KINDS.values()}) == len(KINDS)
    assert len({k.subsystem for k in KINDS.values()}) == len(KINDS)
    assert KINDS["hdfs_block_placement"].table == "hdfs_block_placements"
    assert KINDS["gpu_sample"].subsystem == "gpu"


# --- plain columns: a batch from plain Python rows reads as its Arrow table would ----------------
def _typed(cols: dict[str, list[object]]) -> dict[str, list[tuple[str, object]]]:
    return {k: [(type(v).__name__, v) for v in vs] for k, vs in cols.items()}


def _no_time(k: object) -> list[str]:
    return [f.name for f in k.fields if f.type != "time"]  # type: ignore[attr-defined]


def test_plain_batch_reads_as_its_arrow_table_on_the_node8_capture() -> None:
    """Every batch of a node8 replay: the /metrics path's `pylists` (no Arrow) hands out the
    values, types included, that the Arrow table of the same rows gives back."""
    from exporters.node.source import NodeSource
    from tests.sysfs_fixture import node8

    batches = NodeSource.replay(node8(), node_name="n").collect()
    assert {b.kind.name for b in batches} >= {"gpu_sample", "nic_sample"}
    for b in batches:
        assert repr(b).endswith("as columns)"), b  # every node batch stays plain until read
        names = _no_time(b.kind)
        plain = b.pylists(names)
        arrow = b.table.select(names).to_pydict()  # builds the table from the same columns
        assert _typed(plain) == _typed(arrow), b.kind.name
        assert b.pylists(names) == arrow  # and read from the table now


def test_plain_columns_convert_as_arrow_does() -> None:
    from telemetry.contracts import Batch

    rows = [
        # float into counters/ints: truncated; int into f64: a float; a missing value: null
        {"ts": 1_700_000_000_000, "node": "n", "gpu": 1, "up": 1, "energy_joules_total": 12.9,
         "power_watts": 300, "clock_event_reasons": 4.0},
        {"ts": 1_700_000_000_001, "node": "n", "gpu": 2, "up": 1, "energy_joules_total": 7,
         "power_watts": 1.5},
    ]  # fmt: skip
    b = Batch.from_rows(GPU_SAMPLE, rows)
    names = ["gpu", "energy_joules_total", "power_watts", "clock_event_reasons", "cluster"]
    got = _typed(b.pylists(names))
    assert got["energy_joules_total"] == [("int", 12), ("int", 7)]
    assert got["power_watts"] == [("float", 300.0), ("float", 1.5)]
    assert got["clock_event_reasons"] == [("int", 4), ("NoneType", None)]
    assert got["cluster"] == [("str", ""), ("str", "")]
    assert got == _typed(GPU_SAMPLE.to_arrow(rows).select(names).to_pydict())


@pytest.mark.parametrize(
    ("field", "value"),
    [("energy_joules_total", -1), ("energy_joules_total", 2.0**64), ("gpu", 2**16),
     ("energy_joules_total", float("nan")), ("power_watts", 2**60 + 1)],
)  # fmt: skip
def test_a_value_arrow_refuses_is_refused_at_from_rows(field: str, value: object) -> None:
    """Not plain: the rows go through Arrow at once, which refuses them where the source built
    them (as before batches could stay plain), not later in a sink."""
    from telemetry.contracts import Batch

    row = {"ts": 1_700_000_000_000, "node": "n", "gpu": 0, "up": 1, field: value}
    with pytest.raises((pa.ArrowInvalid, OverflowError, pa.ArrowTypeError)):
        Batch.from_rows(GPU_SAMPLE, [row])


def test_fill_empty_is_the_same_on_columns_and_on_a_table() -> None:
    from telemetry.contracts import Batch
    from telemetry.transforms import StampCluster

    rows = [
        {"ts": 1, "node": "a", "gpu": 0, "up": 1},
        {"ts": 2, "node": "b", "gpu": 1, "up": 0, "cluster": "x"},
    ]
    plain = StampCluster("c").process(Batch.from_rows(GPU_SAMPLE, rows))
    arrow = StampCluster("c").process(Batch(GPU_SAMPLE, GPU_SAMPLE.to_arrow(rows)))
    assert plain.pylists(["cluster"]) == arrow.pylists(["cluster"]) == {"cluster": ["c", "x"]}
    assert plain.table.equals(arrow.table)
