from __future__ import annotations

from datetime import UTC, datetime

import pytest

from telemetry.correlate.engine import windows
from telemetry.correlate.thresholds import default_thresholds, merge_thresholds
from telemetry.errors import ConfigError, UserError
from telemetry.times import parse_time


def test_thresholds_file_loads_and_overrides_by_key() -> None:
    t = default_thresholds()
    assert t["pfc"]["storm_pauses_per_second"] > 0 and 79 in t["gpu"]["critical_xids"]
    m = merge_thresholds(t, {"pfc": {"storm_pauses_per_second": 10}})
    assert (
        m["pfc"]["storm_pauses_per_second"] == 10
        and m["pfc"]["propagation_fraction"] == t["pfc"]["propagation_fraction"]
    )
    with pytest.raises(ConfigError, match=r"correlate\.thresholds\.pfc\.storm: unknown threshold"):
        merge_thresholds(t, {"pfc": {"storm": 1}})


def test_windows_are_aligned_and_cover_the_range() -> None:
    ws = list(
        windows(
            datetime(2026, 1, 1, 10, 2, tzinfo=UTC), datetime(2026, 1, 1, 10, 16, tzinfo=UTC), 300
        )
    )
    assert [w.start.minute for w in ws] == [0, 5, 10, 15]
    assert all(w.seconds == 300 for w in ws)


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
