"""`railscope sizing`: the model's arithmetic against its coefficients (sizing.yaml), and the
command as an operator runs it (help, the model printed, one-line errors)."""

from __future__ import annotations

import json
import re

import pytest

from telemetry.sizing import Inputs, clos_switches, coefficients, size
from tests.cli import rs

C = coefficients()


def table(s, name):  # type: ignore[no-untyped-def]
    return next(t for t in s.tables if t.name == name)


def test_counter_rows_follow_gpus_ports_and_the_interval() -> None:
    s = size(Inputs(gpus=16_384, interval=10))
    gpu = C["tables"]["gpu_samples"]
    assert table(s, "gpu_samples").rows_per_s == pytest.approx(16_384 * gpu["rows"] / 10)
    assert table(s, "gpu_samples").mb_per_s == pytest.approx(
        16_384 * gpu["rows"] / 10 * gpu["bytes"] / 1e6
    )
    q = C["tables"]["switch_queue_samples"]
    assert table(s, "switch_queue_samples").rows_per_s == pytest.approx(
        s.switches * 64 * 8 * q["rows"] / 10
    )
    ten = size(Inputs(gpus=163_840, interval=10))
    assert table(ten, "gpu_samples").rows_per_s == pytest.approx(
        10 * table(s, "gpu_samples").rows_per_s
    )
    slow = size(Inputs(gpus=16_384, interval=30))
    assert table(slow, "nic_samples").rows_per_s == pytest.approx(
        table(s, "nic_samples").rows_per_s / 3
    )
    # a 10 s rollup bucket holds one row per entity whatever the interval below it
    fast = size(Inputs(gpus=16_384, interval=5))
    assert table(fast, "gpu_intervals").rows_per_s == pytest.approx(
        table(s, "gpu_intervals").rows_per_s
    )
    assert table(fast, "gpu_samples").rows_per_s == pytest.approx(
        2 * table(s, "gpu_samples").rows_per_s
    )


def test_flow_samples_follow_the_sampling_and_aggregates_are_capped_by_ports() -> None:
    s = size(Inputs(gpus=100_000))
    expected = 100_000 * 400e9 / 8 * 0.4 / 4096 / 400_000  # 12.2 samples/s per host port
    assert s.flow_samples_per_s == pytest.approx(expected)
    assert 1.1e6 < expected < 1.3e6  # the issue's ~0.9-1.5 M samples/s
    sparse = size(Inputs(gpus=100_000, sflow_rate=4_000_000))
    assert sparse.flow_samples_per_s == pytest.approx(expected / 10)
    # dense: one aggregate row per switch port per 10 s at most; sparse: per sample
    assert table(s, "job_port_intervals").rows_per_s == pytest.approx(s.switch_ports / 10)
    few = size(Inputs(gpus=1_000, sflow_rate=400_000_000))
    jp = C["tables"]["job_port_intervals"]
    assert table(few, "job_port_intervals").rows_per_s == pytest.approx(
        few.flow_samples_per_s * jp["rows"]
    )
    # raw flows kept --flow-days, their aggregates --aggregate-days
    assert table(s, "flow_samples").days == 2 and table(s, "job_port_intervals").days == 90
    week = size(Inputs(gpus=100_000, flow_days=7))
    assert table(week, "flow_samples").retained_tb == pytest.approx(
        3.5 * table(s, "flow_samples").retained_tb
    )


def test_disk_and_shards_follow_the_bytes_measured() -> None:
    s = size(Inputs(gpus=10_000))
    per_day = sum(t.rows_per_s * C["tables"][t.name]["disk_bytes"] * 86_400 for t in s.tables)
    assert s.clickhouse["disk_tb_per_day"] == pytest.approx(2 * per_day / 1e12)
    small_disks = size(Inputs(gpus=10_000, node_disk_tb=0.5))
    assert small_disks.clickhouse["shards"] > s.clickhouse["shards"]
    assert size(Inputs(gpus=10_000, replicas=3)).clickhouse["nodes"] == 3 * s.clickhouse["shards"]


def test_the_gateways_keep_inserts_per_table_near_the_guidance() -> None:
    s = size(Inputs(gpus=100_000, interval=10))
    assert s.parts["direct_inserts_per_s_per_table"] == pytest.approx(1_250)
    assert s.parts["gateway_inserts_per_s_per_table_per_shard"] == pytest.approx(
        s.collectors["gateways"] / 2.0
    )
    assert s.collectors["gateways"] >= 1 and s.collectors["sflow_workers"] >= 1


def test_a_rail_optimized_clos() -> None:
    assert clos_switches(1_024, 64) == 32 + 16  # two tiers reach 32 x 64 host ports
    assert clos_switches(100_000, 64) == 3_125 + 1_563 + 782


def test_every_coefficient_names_its_bench_and_machine() -> None:
    machines = set(C["machines"])
    for section in ("ingest", "engine", "collectors"):
        for name, e in C[section].items():
            assert e["value"] > 0, f"{section}.{name} is not measured"
            assert e["bench"], name
            assert e.get("machine") in machines or e["bench"].startswith("not a measurement"), name
    for name, t in C["tables"].items():
        assert {"family", "per", "rows", "bytes", "disk_bytes"} <= set(t), name
        assert t["disk_bytes"] < t["bytes"], name  # compressed on disk
    for name, e in C["public"].items():
        assert re.search(r"https://clickhouse\.com/docs/", e["source"]), name


def test_the_command_prints_the_model() -> None:
    r = rs("sizing", "--gpus", "100000", "--interval", "10")
    assert r.returncode == 0, r.stderr
    for fam in ("gpu", "nic", "switch_port", "switch_queue", "flows_raw", "flows_aggregate"):
        assert re.search(rf"^{fam}\s+[\d,]+", r.stdout, re.M), fam
    assert "ClickHouse:" in r.stdout and "shard(s)" in r.stdout and "sFlow worker(s)" in r.stdout
    out = rs("sizing", "--gpus", "100000", "--interval", "10", "--json")
    d = json.loads(out.stdout)
    expected = size(Inputs(gpus=100_000, interval=10.0))
    assert d["clickhouse"]["shards"] == expected.clickhouse["shards"]
    assert d["families"]["gpu"]["rows_per_s"] == pytest.approx(
        expected.families()["gpu"]["rows_per_s"]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "--gpus is required"),
        (("--gpus", "lots"), "--gpus expects a whole number, not 'lots'"),
        (("--gpus", "0"), "--gpus expects a whole number of at least 1, not '0'"),
        (("--gpus", "64", "--load", "1.5"), "--load expects a number from 0 to 1, not '1.5'"),
        (("--gpus", "64", "--interval", "nan"), "--interval expects a number of at least 1"),
        (("--gpus", "4", "--gpus-per-server", "8"), "--gpus-per-server 8 exceeds --gpus 4"),
    ],
)
def test_a_wrong_flag_is_one_line(args: tuple[str, ...], message: str) -> None:
    r = rs("sizing", *args)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and message in r.stderr, r.stderr


def test_help_explains_the_model_and_where_its_numbers_come_from() -> None:
    r = rs("sizing", "--help")
    assert r.returncode == 0
    assert "telemetry/sizing.yaml" in r.stdout and "--sflow-rate" in r.stdout
    assert "railscope sizing --gpus 100000 --interval 10" in r.stdout


def test_the_sizes_in_docs_are_what_the_model_prints() -> None:
    """docs/sizing.md shows 1k / 10k / 100k GPUs as `railscope sizing` prints them: a changed
    coefficient or formula fails here until the page is regenerated."""
    from pathlib import Path

    from telemetry.sizing import render

    doc = (Path(__file__).resolve().parents[3] / "docs" / "sizing.md").read_text()
    for gpus in (1_000, 10_000, 100_000):
        head = f"`railscope sizing --gpus {gpus} --interval 10`:\n\n```\n"
        assert head in doc, gpus
        shown = doc.split(head, 1)[1].split("\n```", 1)[0]
        assert shown == render(size(Inputs(gpus=gpus, interval=10.0))), gpus
