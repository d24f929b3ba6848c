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
