from __future__ import annotations

from datetime import UTC, datetime

import pytest

from telemetry.correlate.engine import last_tick, ticks
from telemetry.correlate.thresholds import default_thresholds, merge_thresholds
from telemetry.errors import ConfigError, UserError
from telemetry.times import parse_time


def test_thresholds_file_loads_and_overrides_by_key() -> None:
    t = default_thresholds()
    assert t["pfc"]["storm_pauses_per_second"] > 0 and t["gpu"]["xid_ignore_repeats"] >= 2
    m = merge_thresholds(t, {"pfc": {"storm_pauses_per_second": 10}})
    assert (
        m["pfc"]["storm_pauses_per_second"] == 10
        and m["pfc"]["propagation_fraction"] == t["pfc"]["propagation_fraction"]
    )
    with pytest.raises(ConfigError, match=r"correlate\.thresholds\.pfc\.storm: unknown threshold"):
        merge_thresholds(t, {"pfc": {"storm": 1}})


def test_ticks_are_aligned_to_the_interval_and_cover_the_range() -> None:
    t = list(
        ticks(
            datetime(2026, 1, 1, 10, 0, 2, tzinfo=UTC),
            datetime(2026, 1, 1, 10, 0, 40, tzinfo=UTC),
            10,
        )
    )
    assert [x.second for x in t] == [10, 20, 30, 40]  # (start, end]: a batch and a follower agree
    assert last_tick(datetime(2026, 1, 1, 10, 0, 39, tzinfo=UTC), 10).second == 30


def test_each_detector_judges_its_own_trailing_window() -> None:
    from telemetry.correlate.registry import detectors

    th = default_thresholds()
    d = detectors()
    sl = th["sliding"]
    assert d["pfc_storm"].lookback_seconds(th) == sl["rate_seconds"]
    assert (
        d["ecmp_imbalance"].lookback_seconds(th)
        == th["ecmp"]["min_seconds"] + sl["interval_seconds"]
    )
    assert d["placement_violation"].lookback_seconds(th) == sl["state_seconds"]
    assert d["cross_tenant_rdma"].lookback_seconds(th) == sl["flow_seconds"]
    over = merge_thresholds(th, {"ecmp": {"min_seconds": 120}})
    assert d["ecmp_imbalance"].lookback_seconds(over) == 120 + sl["interval_seconds"]


def test_manual_clock_wakes_waiters_and_stops() -> None:
    import threading
    from datetime import timedelta

    from telemetry.correlate.clock import ManualClock

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    clock, stop, woke = ManualClock(t0), threading.Event(), []
    th = threading.Thread(
        target=lambda: woke.append(clock.wait_until(t0 + timedelta(seconds=10), stop))
    )
    th.start()
    assert clock.wait_idle(5)  # the waiter is blocked on a time ahead of the clock
    clock.advance(5)
    assert clock.wait_idle(5) and woke == []
    clock.advance(5)
    th.join(5)
    assert woke == [True]
    with pytest.raises(ValueError, match="cannot go back"):
        clock.set(t0)
    stop.set()
    assert clock.wait_until(t0 + timedelta(hours=1), stop) is False


def test_parse_time() -> None:
    now = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    assert parse_time("15m", now=now) == datetime(2026, 11, 21, 11, 45, tzinfo=UTC)
    assert parse_time("2026-11-21T10:02:00Z") == datetime(2026, 11, 21, 10, 2, tzinfo=UTC)
    assert parse_time("2026-11-21 10:02") == datetime(2026, 11, 21, 10, 2, tzinfo=UTC)
    with pytest.raises(UserError, match="use ISO 8601"):
        parse_time("yesterday-ish")
    assert parse_time("now", now=now) == now
    assert parse_time("1763726400000") == datetime(2025, 11, 21, 12, 0, tzinfo=UTC)
    with pytest.raises(UserError, match="--at '10:99'"):
        parse_time("10:99", what="--at")


def test_iso_to_ms_never_raises() -> None:
    from telemetry.times import iso_to_ms

    assert iso_to_ms("2026-11-21T10:02:00Z") == 1795255320000
    assert iso_to_ms("not a time") is None
    assert iso_to_ms(None) is None
