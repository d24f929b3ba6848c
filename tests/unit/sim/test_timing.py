"""The simulator's collection timing (telemetry/sim/timing.py): what reaches the store is sampled
at each device's own time, with the counters of that moment, less what was lost, plus what was
stored twice - deterministic, whatever the chunking."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from telemetry.errors import ConfigError
from telemetry.sim import build
from telemetry.sim.scenario import load_scenario, parse_scenario

START = "2026-11-01T00:00:00Z"


def _sim(minutes: float = 3, **telemetry: Any) -> Any:
    base = load_scenario("small").with_overrides(start=START, minutes=minutes)
    data = base.model_dump()
    data["telemetry"] = telemetry
    return build(type(base).model_validate(data))


def _frames(sim: Any, disturbed: bool = True) -> dict[str, pl.DataFrame]:
    parts: dict[str, list[pa.Table]] = {}
    for batches in sim.batches(disturbed=disturbed):
        for b in batches:
            parts.setdefault(b.kind.name, []).append(b.table)
    out = {}
    for k, v in parts.items():
        df = pl.from_arrow(pa.concat_tables(v))
        assert isinstance(df, pl.DataFrame)
        out[k] = df
    return out


def _offsets(df: pl.DataFrame, sim: Any) -> pl.DataFrame:
    """Each sample's time relative to the nearest grid point at or after it (ms, <= 0 mostly)."""
    dt = sim.dt * 1000
    t = df.get_column("ts").cast(pl.Int64) - sim.start_ms
    step = (t + dt - 1) // dt
    return df.with_columns((t - step * dt).alias("off"), step.alias("step"))


def test_ideal_timing_is_the_grid() -> None:
    sim = _sim(profile="ideal")
    a, b = _frames(sim), _frames(sim, disturbed=False)
    for k in b:
        if k in ("gpu_sample", "nic_sample", "switch_port_sample"):
            assert a[k].equals(b[k]), k


def test_every_device_samples_at_its_own_phase() -> None:
    sim = _sim(profile="ideal", node={"phase": 1.0}, switch={"phase": 1.0})
    f = _offsets(_frames(sim)["nic_sample"], sim)
    per_node = f.group_by("node").agg(pl.col("off").n_unique().alias("n"), pl.col("off").first())
    assert per_node["n"].max() == 1  # one phase per device, every step
    assert per_node["off"].n_unique() >= 0.8 * per_node.height  # and different devices differ
    assert f["off"].min() > -sim.dt * 1000 and f["off"].max() <= 0


def test_counters_are_the_counters_of_the_moment_sampled() -> None:
    """A sample taken at s, inside step t's interval (ts(t - 1), ts(t)], carries the counter the
    grid's values give at s: the step's increase spread evenly over the step."""
    # phases only (a sample jittered past its grid point would be matched to the next step)
    sim = _sim(profile="ideal", switch={"phase": 1.0})
    key = ["switch", "port"]
    grid = (
        _frames(sim, disturbed=False)["switch_port_sample"]
        .select(
            *key,
            (pl.col("ts").cast(pl.Int64)).alias("g"),
            pl.col("tx_bytes_total").cast(pl.Float64).alias("c"),
        )
        .sort([*key, "g"])
        .with_columns(pl.col("c").shift(1).over(key).alias("c_prev"))
    )
    got = _offsets(_frames(sim)["switch_port_sample"], sim).select(
        *key,
        (pl.col("step") * sim.dt * 1000 + sim.start_ms).alias("g"),
        "off",
        pl.col("tx_bytes_total").cast(pl.Float64).alias("v"),
    )
    j = got.join(grid, on=[*key, "g"]).drop_nulls("c_prev")
    want = j["c"] + (j["c"] - j["c_prev"]) * j["off"] / (sim.dt * 1000)
    assert j.height > 1000
    assert ((j["v"] - want).abs() <= 1.0).all()  # to the byte (counters are integers)
    assert (j["off"] < 0).mean() > 0.9  # and they were off the grid


def test_counters_never_go_back_but_for_a_restart() -> None:
    """Every counter of every series rises or holds from sample to sample under harsh timing
    without restarts, through epochs where a rate falls (a fault's end): a sample's counters are
    the step's it lies in, never extrapolated past it."""
    sim = _sim(
        minutes=10, profile="harsh", node={"restarts_per_hour": 0}, switch={"restarts_per_hour": 0}
    )
    for kind, key in (
        ("switch_port_sample", ["switch", "port"]),
        ("nic_sample", ["node", "device"]),
    ):
        df = _frames(sim)[kind].unique().sort([*key, "ts"])
        counters = [c for c in df.columns if c.endswith("_total")]
        back = df.select(
            [(pl.col(c).cast(pl.Float64).diff().over(key) < 0).sum().alias(c) for c in counters]
        )
        assert back.sum_horizontal().item() == 0, (kind, back)


def test_lost_and_duplicated_polls_and_sflow_loss() -> None:
    sim = _sim(minutes=6, profile="ideal", node={"missed": 0.05}, duplicates=0.02, sflow_loss=0.1)
    got, ideal = _frames(sim), _frames(sim, disturbed=False)
    ratio = got["gpu_sample"].height / ideal["gpu_sample"].height
    assert 0.95 * 1.02 - 0.02 < ratio < 0.95 * 1.02 + 0.02
    dups = got["nic_sample"].height - got["nic_sample"].unique().height
    assert dups > 0  # stored twice, row for row
    flows = got["flow_sample"].height / ideal["flow_sample"].height
    assert 0.8 < flows < 0.97


def test_a_restart_is_a_silence_then_counters_from_zero_and_lldp_relearnt() -> None:
    sim = _sim(minutes=10, profile="ideal", switch={"restarts_per_hour": 30})
    dist = sim.disturber()
    assert dist is not None and dist.restarts
    r = dist.restarts[0]
    f = _frames(sim)
    ports = f["switch_port_sample"].filter(pl.col("switch") == r.device).sort(["port", "ts"])
    ts = ports.get_column("ts").cast(pl.Int64)
    assert not ((ts > r.down_ms) & (ts < r.up_ms)).any()  # silent while it restarts
    after = ports.filter(pl.col("ts").cast(pl.Int64) >= r.up_ms)
    before = ports.filter(pl.col("ts").cast(pl.Int64) <= r.down_ms)
    assert after.height and before.height
    assert after["tx_bytes_total"].min() < before["tx_bytes_total"].min()  # from zero
    lldp = f["lldp_link"].filter(
        (pl.col("local_device") == r.device) & (pl.col("ts").cast(pl.Int64) == r.up_ms)
    )
    assert lldp.height > 0


def test_gnmi_stamps_each_leaf_and_snmp_walks() -> None:
    for transport, knob in (("gnmi", "leaf_jitter_seconds"), ("snmp", "walk_seconds")):
        sim = _sim(profile="ideal", switch={"transport": transport, knob: 0.5, "phase": 0.5})
        f = _frames(sim)["switch_port_sample"]
        per = f.group_by("switch", (pl.col("ts").cast(pl.Int64) // 10_000).alias("b")).agg(
            pl.col("ts").n_unique().alias("times"), pl.len().alias("ports")
        )
        assert (per["times"] > 1).mean() > 0.9, transport  # ports of one poll at their own times


def test_same_seed_same_records_whatever_the_chunking() -> None:
    def digest(chunk: int) -> str:
        sim = _sim(minutes=4, profile="harsh")
        sim.chunk_steps = chunk
        h = hashlib.sha256()
        for k, df in sorted(_frames(sim).items()):
            cols = sorted(df.columns)
            h.update(k.encode() + df.select(cols).sort(cols).write_csv().encode())
        return h.hexdigest()

    assert digest(30) == digest(7) == digest(1)


def test_late_polls_arrive_late_by_the_stated_delay() -> None:
    sim = _sim(profile="ideal", late_share=0.2, late_seconds=30)
    dist = sim.disturber()
    assert dist is not None
    t = _frames(sim)["nic_sample"].to_arrow()
    delay = dist.arrival_delay_ms("nic_sample", t)
    assert delay is not None and set(np.unique(delay)) == {0, 30_000}
    assert 0.15 < (delay > 0).mean() < 0.25


def test_profiles_and_overrides_validate() -> None:
    doc = {
        "fabric": {"idcs": [{"name": "a", "sus": 1}]},
        "telemetry": {"profile": "harsh", "node": {"missed": 0}},
    }
    sc = parse_scenario(doc)
    assert sc.telemetry.node.missed == 0 and sc.telemetry.node.jitter_seconds == 2.0
    assert sc.telemetry.switch.missed == 0.05 and sc.telemetry.late_share == 0.2
    assert parse_scenario({"fabric": doc["fabric"]}).telemetry.profile == "realistic"
    with pytest.raises(ConfigError, match=r"telemetry\.profile"):
        parse_scenario({**doc, "telemetry": {"profile": "chaos"}})
    with pytest.raises(ConfigError, match=r"telemetry\.node\.jiter_seconds"):
        parse_scenario({**doc, "telemetry": {"node": {"jiter_seconds": 1}}})
