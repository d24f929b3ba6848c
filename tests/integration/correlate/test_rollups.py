"""Migration 12's per-interval rollups, kept on insert by materialized views, on the real
embedded engine: each equals the aggregation of its source table computed here in Python (so a
wrong view fails), a retried insert is not rolled up twice, a re-attributed window replaces its
intervals, an existing store is backfilled, and every detector that reads a rollup finds, at
every tick of the simulator's `small` scenario, exactly what it finds reading the raw tables."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from telemetry.correlate.attribution import attribute_window
from telemetry.correlate.engine import ticks
from telemetry.correlate.registry import Context, Window, detectors
from telemetry.correlate.sql import moved_series, rollup_table
from telemetry.correlate.thresholds import default_thresholds
from telemetry.records import KINDS, NIC_SAMPLE, SWITCH_PORT_SAMPLE
from telemetry.store import Store
from telemetry.store.migrations import MIGRATION_12_ROLLUPS
from telemetry.store.rollups import ROLLUPS
from tests.conftest import ScenarioRun

pytestmark = pytest.mark.scenario("small")  # the tests that take scenario_run read small's

EVERY = {r.table for r in ROLLUPS}
# the detectors that read a rollup (sql.moved_series / rollup_table)
READERS = (
    "link_flap",
    "pfc_storm",
    "ecn_hotspot",
    "nic_pcie_stall",
    "gpu_throttle",
    "network_bound",
)


def _t0() -> datetime:
    now = datetime.now(UTC).replace(microsecond=0)
    return now.replace(minute=0, second=0) - timedelta(hours=2)


def _ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


def _columns(store: Store, table: str) -> list[tuple[str, str]]:
    return [
        (r[0], r[1])
        for r in store.query_rows(
            "SELECT name, type FROM system.columns WHERE database = {db:String} AND table = {t:String} ORDER BY position",
            {"db": store.database, "t": table},
        )
    ]


def rollup_rows(store: Store, table: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The rollup as the engine reads it (parts merged by each column's own function), keyed by
    its sorting key."""
    cols = _columns(store, table)
    keys, aggs = [], []
    for name, typ in cols:
        if typ.startswith("SimpleAggregateFunction("):
            fn = typ[len("SimpleAggregateFunction(") :].split(",")[0]
            aggs.append(f"{fn}(`{name}`) AS `{name}`")
        elif name in ("flows", "bytes"):  # SummingMergeTree's summed columns
            aggs.append(f"sum(`{name}`) AS `{name}`")
        else:
            keys.append(name)
    res = store.client.query(
        f"SELECT {', '.join(f'`{k}`' for k in keys)}, {', '.join(aggs)} FROM {store.database}.`{table}` "
        f"GROUP BY {', '.join(f'`{k}`' for k in keys)}"
    )
    out = {}
    for r in res.result_rows:
        d = dict(zip(res.column_names, r, strict=True))
        out[tuple(d.pop(k) for k in keys)] = d
    return out


def expected(store: Store, table: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    """What the rollup must hold, aggregated here in Python from its source's rows: per series
    and 10 s interval the sample count, first/last time, and per counter the least/greatest
    value and how many samples lacked it (the GPU's over up samples only)."""
    (r,) = [r for r in MIGRATION_12_ROLLUPS if r.table.name == table]
    kind = next(k for k in KINDS.values() if k.table == r.source)
    cols = [c for c, _ in _columns(store, table)]
    keys = cols[: cols.index("bucket")]
    res = store.client.query(f"SELECT * FROM {store.table(kind)}")
    rows = [dict(zip(res.column_names, x, strict=True)) for x in res.result_rows]
    out: dict[tuple[Any, ...], dict[str, Any]] = defaultdict(dict)
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        ts = row["ts"].replace(tzinfo=UTC)
        bucket = datetime.fromtimestamp(math.floor(ts.timestamp() / 10) * 10, UTC)
        groups[(*(row[k] for k in keys), bucket.replace(tzinfo=None))].append(row)
    counters = [c[: -len("_min")] for c in cols if c.endswith("_min")]
    for key, g in groups.items():
        e = out[key]
        if table == "job_port_intervals":
            e.update(flows=len(g), bytes=sum(x["bytes"] for x in g))
            continue
        e.update(samples=len(g), first_ts=min(x["ts"] for x in g), last_ts=max(x["ts"] for x in g))
        over = [x for x in g if x["up"] == 1] if table == "gpu_intervals" else g
        for c in counters:
            vals = [x[c] for x in over if x[c] is not None]
            e[f"{c}_min"] = min(vals) if vals else None
            e[f"{c}_max"] = max(vals) if vals else None
            e[f"{c}_nulls"] = sum(1 for x in over if x[c] is None)
        if table == "switch_port_intervals":
            e["down_samples"] = sum(1 for x in g if x["up"] == 0)
        if table == "gpu_intervals":
            e["up_samples"] = len(over)
            bits = 0
            for x in over:
                bits |= x["clock_event_reasons"] or 0
            e["clock_event_reasons_or"] = bits
    return dict(out)


def assert_rollups_match(store: Store) -> None:
    for table in sorted(EVERY):
        got, want = rollup_rows(store, table), expected(store, table)
        assert want, f"{table}: no source rows: nothing was compared"
        assert got.keys() == want.keys(), table
        for key, w in want.items():
            g = {k: got[key][k] for k in w}
            assert g == w, (table, key, g, w)


@pytest.fixture
def small(scenario_run: Callable[[str], ScenarioRun]) -> Any:
    """The `small` scenario ingested into a store of its own, correlated once (attributed flows):
    the session's ScenarioRun (tests/conftest.py)."""
    run = scenario_run("small")
    return run.store, run.cluster, run.start, run.end


def test_rollups_equal_the_raw_aggregation(small: Any) -> None:
    store, _, _, _ = small
    assert_rollups_match(store)


def test_detectors_find_the_same_with_and_without_rollups_at_every_tick(small: Any) -> None:
    store, cluster, start, end = small
    th = default_thresholds()
    specs = detectors()
    have = set(EVERY)
    seen: dict[str, int] = defaultdict(int)
    pruned = 0
    for t in ticks(start, end + timedelta(seconds=10), 10):
        for name in READERS:
            d = specs[name]
            w = Window(t - timedelta(seconds=d.lookback_seconds(th)), t)
            raw = d.fn(Context(store, w, th, cluster, {"rollups": set()}))
            ctx = Context(store, w, th, cluster, {"rollups": have})
            roll = d.fn(ctx)
            as_rows = [(f.kind, f.subject, f.severity, f.summary, f.evidence) for f in raw]
            assert as_rows == [
                (f.kind, f.subject, f.severity, f.summary, f.evidence) for f in roll
            ], (name, t)
            seen[name] += len(raw)
        ctx = Context(store, Window(t - timedelta(seconds=30), t), th, cluster, {"rollups": have})
        moved = moved_series(ctx, "switch_port_sample", ["switch", "port"], ["pfc_rx_pause_total"])
        assert moved is not None
        pruned += len(moved) < len(
            store.query_rows(
                f"SELECT DISTINCT switch, port FROM {store.table('switch_port_sample')} "
                "WHERE ts >= {ws:DateTime64(3, 'UTC')} AND ts < {we:DateTime64(3, 'UTC')}",
                {"ws": t - timedelta(seconds=30), "we": t},
            )
        )
    # the scenario's faults make each counter detector find something, and the rollups
    # actually leave series out (else the comparison proves nothing)
    for name in ("link_flap", "pfc_storm", "nic_pcie_stall", "gpu_throttle", "ecn_hotspot"):
        assert seen[name] > 0, (name, dict(seen))
    assert pruned > 0


def _port(store: Store, s: datetime, port: str, vals: list[int | None], up: int = 1) -> None:
    rows = [
        {
            "ts": _ms(s) + i * 10_000,
            "cluster": "c",
            "switch": "leaf1",
            "port": port,
            "up": up,
            "pfc_rx_pause_total": v,
        }
        for i, v in enumerate(vals)
    ]
    store.insert(SWITCH_PORT_SAMPLE, SWITCH_PORT_SAMPLE.to_arrow(rows))


def test_moved_series_leaves_out_only_series_that_held_one_value(store: Store) -> None:
    s = _t0()
    _port(store, s, "constant", [100, 100, 100])
    _port(store, s, "reset", [100, 100, 5])  # a reset: rose by 5 (from zero)
    _port(store, s, "gap", [100, None, 100])  # a gap: the value after it counts whole
    _port(store, s, "unread", [None, None, None])  # never read: no increase at all
    _port(store, s, "rising", [1, 2, 3])
    _port(store, s, "down", [7, 7, 7], up=0)
    th = default_thresholds()
    ctx = Context(store, Window(s, s + timedelta(seconds=30)), th, "c", {"rollups": EVERY})
    keys = ["switch", "port"]
    moved = moved_series(ctx, "switch_port_sample", keys, ["pfc_rx_pause_total"])
    assert sorted(p for _, p in moved or []) == ["gap", "reset", "rising"]
    also = moved_series(
        ctx, "switch_port_sample", keys, ["pfc_rx_pause_total"], also="sum(down_samples) > 0"
    )
    assert sorted(p for _, p in also or []) == ["down", "gap", "reset", "rising"]
    # the window's last two intervals alone: the constant and the rising one... rose too
    last = Context(
        store,
        Window(s + timedelta(seconds=10), s + timedelta(seconds=30)),
        th,
        "c",
        {"rollups": EVERY},
    )
    moved = moved_series(last, "switch_port_sample", keys, ["pfc_rx_pause_total"])
    assert sorted(p for _, p in moved or []) == ["gap", "reset", "rising"]
    # a window that is not whole intervals, or a store without the rollups: no answer
    odd = Context(store, Window(s, s + timedelta(seconds=25)), th, "c", {"rollups": EVERY})
    assert rollup_table(odd, "switch_port_sample") is None
    assert moved_series(odd, "switch_port_sample", keys, ["pfc_rx_pause_total"]) is None
    bare = Context(store, Window(s, s + timedelta(seconds=30)), th, "c")
    assert moved_series(bare, "switch_port_sample", keys, ["pfc_rx_pause_total"]) is None


def test_two_inserts_into_one_interval_and_a_retry(store: Store) -> None:
    """Two blocks holding samples of one series in the same interval merge into one row; a
    retried block (same deduplication token) is dropped by the source table and never reaches
    the view."""
    s = _t0()
    nic = {"cluster": "c", "node": "n1", "device": "mlx5_0", "port": 1, "up": 1}
    first = NIC_SAMPLE.to_arrow([{**nic, "ts": _ms(s) + 1000, "pci_stalled_total": 40}])
    second = NIC_SAMPLE.to_arrow([{**nic, "ts": _ms(s) + 6000, "pci_stalled_total": 10}])
    store.insert(NIC_SAMPLE, first, token="a")
    store.insert(NIC_SAMPLE, second, token="b")
    store.insert(NIC_SAMPLE, second, token="b")  # the retry
    assert store.count(NIC_SAMPLE) == 2
    (row,) = rollup_rows(store, "nic_intervals").values()
    assert row["samples"] == 2
    assert (row["pci_stalled_total_min"], row["pci_stalled_total_max"]) == (10, 40)
    assert_rollups_match_one(store, "nic_intervals")


def assert_rollups_match_one(store: Store, table: str) -> None:
    got, want = rollup_rows(store, table), expected(store, table)
    assert got.keys() == want.keys()
    for key, w in want.items():
        assert {k: got[key][k] for k in w} == w, (key, got[key], w)


def test_reattributed_window_replaces_its_intervals(small: Any) -> None:
    """Attributing a window again (a batch run over a range already attributed) drops the
    rollup's intervals overlapping it and restores the rows outside it: the rollup still equals
    the attributed flows, also for a window that is not whole intervals."""
    store, cluster, start, _ = small
    th = default_thresholds()
    for lo, hi in ((120, 180), (133, 187)):
        w = Window(start + timedelta(seconds=lo), start + timedelta(seconds=hi))
        attribute_window(Context(store, w, th, cluster))
        assert_rollups_match_one(store, "job_port_intervals")


def test_migration_backfills_what_the_store_held(store: Store) -> None:
    """A store from before migration 12 (the rollups and views dropped, the version forgotten)
    gets them back, holding what the tables held."""
    s = _t0()
    _port(store, s, "p1", [1, 5, 9])
    _port(store, s, "p2", [3, None, 3], up=0)
    for r in MIGRATION_12_ROLLUPS:
        store.client.command(f"DROP VIEW IF EXISTS {store.database}.`{r.table.name}_mv`")
        store.client.command(f"DROP TABLE IF EXISTS {store.database}.`{r.table.name}`")
    store.client.command(f"DELETE FROM {store.database}.schema_migrations WHERE version = 12")
    assert [m.version for m in store.pending()] == [12]
    assert [m.version for m in store.migrate()] == [12]
    assert_rollups_match_one(store, "switch_port_intervals")
    _port(store, s + timedelta(minutes=1), "p1", [20])  # and the view keeps it from then on
    assert_rollups_match_one(store, "switch_port_intervals")


def test_rollup_ttl_follows_its_source(tmp_path: Path, chdb_dsn: str) -> None:
    import uuid

    db = f"ttl_{uuid.uuid4().hex[:8]}"
    store = Store(chdb_dsn, database=db, ttl_overrides={"switch_port_samples": 7})
    try:
        store.migrate()
        (engine,) = store.query_rows(
            "SELECT engine_full FROM system.tables WHERE database = {db:String} AND name = 'switch_port_intervals'",
            {"db": db},
        )[0]
        assert "toIntervalDay(7)" in engine
    finally:
        store.client.command(f"DROP DATABASE IF EXISTS `{db}`")


def test_a_rollup_named_in_the_config_keeps_its_own_ttl(chdb_dsn: str) -> None:
    """Flows kept two days, their per-job, per-port aggregates ninety (docs/sizing.md): a rollup
    named in store.ttl_days keeps its own TTL; the others still follow their source."""
    import uuid

    db = f"ttl_{uuid.uuid4().hex[:8]}"
    ttl = {"attributed_flows": 2, "job_port_intervals": 90, "switch_port_samples": 7}
    store = Store(chdb_dsn, database=db, ttl_overrides=ttl)
    try:
        store.migrate()
        engines = dict(
            store.query_rows(
                "SELECT name, engine_full FROM system.tables WHERE database = {db:String}",
                {"db": db},
            )
        )
        assert "toIntervalDay(2)" in engines["attributed_flows"]
        assert "toIntervalDay(90)" in engines["job_port_intervals"]
        assert "toIntervalDay(7)" in engines["switch_port_intervals"]
        store.migrate()  # reconciled once: the same TTLs again
        assert (
            "toIntervalDay(90)"
            in dict(
                store.query_rows(
                    "SELECT name, engine_full FROM system.tables WHERE database = {db:String}",
                    {"db": db},
                )
            )["job_port_intervals"]
        )
    finally:
        store.client.command(f"DROP DATABASE IF EXISTS `{db}`")
