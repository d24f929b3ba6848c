"""The one counter model (timebase.counter_sql, docs/correlation.md "Time") as every detector that
reads counters sees it: on one off-grid series (samples at their own phase, unevenly spaced, a
lost poll, a counter reset), each detector's increase and rate at every tick are what the model
gives, computed here in Python from the samples: the increase from the series' last sample
before the window (the lead sample) to its last inside, a reset counted from zero, over the time
between the two. Per tick and set-based, with the rollups and without, the answer is the same."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest

from telemetry.correlate.registry import Context, Window, detectors
from telemetry.correlate.thresholds import default_thresholds, merge_thresholds
from telemetry.correlate.timebase import lead_ms
from telemetry.records import (
    GPU_SAMPLE,
    NIC_PRIORITY_SAMPLE,
    NIC_SAMPLE,
    SWITCH_PORT_SAMPLE,
    RecordKind,
)
from telemetry.store import Store
from telemetry.store.rollups import ROLLUPS
from tests.integration.correlate.test_detectors import ms, t0

# seconds between samples: never the 10 s grid, a lost poll (19.6 s), jitter both ways
SPACING = [9.1, 10.7, 8.4, 12.9, 10.0, 19.6, 9.3, 10.2, 7.8, 11.5, 10.4, 9.9, 13.2, 8.7, 10.3]
FIRST = 4.3  # the first sample, seconds after the hour: every sample off the grid
STEPS = [7, 11, 3, 20, 0, 9, 14, -1, 5, 8, 2, 17, 6, 0, 12]  # -1: the counter reset to 5
TICKS_S = range(40, 240, 10)  # judged ticks, seconds after the hour: past the series too


def series() -> list[tuple[int, float]]:
    """(ms after the hour, counter value) of the one series."""
    t, v, out = FIRST, 100.0, [(round(FIRST * 1000), 100.0)]
    for gap, step in zip(SPACING, STEPS, strict=True):
        t += gap
        v = 5.0 if step < 0 else v + step
        out.append((round(t * 1000), v))
    return out


def model(samples: list[tuple[int, float]], lo: int, hi: int, lead: int) -> tuple[float, float]:
    """(increase, span seconds) over [lo, hi) ms: the lead sample (the last before lo, at most
    `lead` ms before it) then every sample inside; a value below its predecessor counts whole."""
    before = [s for s in samples if lo - lead <= s[0] < lo][-1:]
    inside = [s for s in samples if lo <= s[0] < hi]
    read = before + inside
    inc = sum(v - p if v >= p else v for (_, p), (_, v) in itertools.pairwise(read))
    # a series' first sample ever (no lead) adds nothing and covers nothing
    span = (read[-1][0] - read[0][0]) / 1000 if inside else 0.0
    return float(inc), span


@dataclass(frozen=True)
class Case:
    detector: str  # the finding kind judged (a detector's name, or a kind it also reports)
    kind: RecordKind
    labels: dict[str, Any]  # the series' key and the other columns its samples carry
    counter: str
    # what the finding's evidence says, and what it says given the model's (increase, span)
    got: Callable[[dict[str, Any]], Any]
    want: Callable[[float, float], Any]
    thresholds: dict[str, Any] = field(default_factory=dict)
    scale: float = 1.0  # counter units per step
    fires: Callable[[float, float], bool] = lambda inc, span: inc > 0


GPU = {"node": "n1", "gpu": 0, "up": 1}
NIC = {"node": "n1", "device": "mlx5_0", "port": 1, "up": 1}
PORT = {"switch": "leaf1", "port": "Ethernet0", "role": "leaf", "up": 1}

CASES = [
    Case(
        "nic_pcie_stall", NIC_SAMPLE, NIC, "pci_stalled_total",
        lambda e: (e["stalls"], e["span_s"], e["stalls_per_second"]),
        lambda inc, span: (inc, span, round(inc / span, 1)),
        {"nic": {"pcie_stalls_per_second": 1e-9}},
    ),
    Case(
        "pcie_replays", GPU_SAMPLE, GPU, "pcie_replay_total",
        lambda e: (e["replays"], e["span_s"], e["replays_per_minute"]),
        lambda inc, span: (inc, span, round(60 * inc / span, 1)),
        {"gpu": {"pcie_replays_per_minute": 0}},
        fires=lambda inc, span: inc > 0 and span >= 30,  # half its 60 s window at least
    ),
    Case(
        "gpu_throttle", GPU_SAMPLE, {**GPU, "clock_event_reasons": 0},
        "power_violation_seconds_total",
        lambda e: (e["power_violation_s"], e["throttled_fraction"]),
        lambda inc, span: (pytest.approx(inc), round(min(inc / span, 1.0), 3)),
        {"gpu": {"throttle_ratio": 1e-9}},
        scale=0.05,
    ),
    Case(
        "gpu_memory_degraded", GPU_SAMPLE, GPU, "ecc_uncorrected_errors_total",
        lambda e: e["uncorrected_errors"],
        lambda inc, span: inc,
        {"gpu": {"uncorrected_ecc_errors": 1}},
    ),
    Case(
        "link_flap", SWITCH_PORT_SAMPLE, PORT, "link_down_events_total",
        lambda e: e["link_down_events"],
        lambda inc, span: int(inc),
    ),
    Case(
        "pfc_storm", NIC_SAMPLE, NIC, "pfc_tx_pause_total",
        lambda e: e["origin_pauses_per_second"],
        lambda inc, span: round(inc / span),
        {"pfc": {"storm_pauses_per_second": 1e-9}},
        scale=1000.0,
    ),
    Case(
        "pfc_unexpected_priority", NIC_PRIORITY_SAMPLE,
        {"node": "n1", "netdev": "eth0", "device": "mlx5_0", "priority": 5}, "rx_pause_total",
        lambda e: e["priorities"]["5"]["rx_pauses"],
        lambda inc, span: int(inc),
        {"pfc": {"unexpected_pauses": 1}},
    ),
]  # fmt: skip


def _insert(store: Store, case: Case, s: datetime) -> None:
    rows = [
        {"ts": ms(s) + t, "cluster": "c", **case.labels, case.counter: v * case.scale}
        for t, v in series()
    ]
    store.insert(case.kind, case.kind.to_arrow(rows))


def _answer(found: list[Any], kind: str) -> Any:
    mine = [f for f in found if f.kind == kind]
    assert len(mine) <= 1, mine
    return mine[0].evidence if mine else None


@pytest.mark.parametrize("case", CASES, ids=[c.detector for c in CASES])
def test_every_counter_detector_reads_the_one_model(store: Store, case: Case) -> None:
    s = t0()
    _insert(store, case, s)
    th = merge_thresholds(default_thresholds(), case.thresholds)
    spec = next(d for d in detectors().values() if case.detector in d.kinds)
    lookback = timedelta(seconds=spec.lookback_seconds(th))
    ticks = [s + timedelta(seconds=t) for t in TICKS_S]
    probe = Context(store, Window(ticks[0] - lookback, ticks[0]), th, "c")
    samples, lead = series(), lead_ms(probe)
    every = {r.table for r in ROLLUPS}
    want: dict[datetime, Any] = {}
    for t in ticks:
        lo, hi = ms(t - lookback) - ms(s), ms(t) - ms(s)
        inc, span = model(samples, lo, hi, lead)
        inc *= case.scale
        want[t] = case.want(inc, span) if case.fires(inc, span) else None
    assert any(w is not None for w in want.values()) and any(w is None for w in want.values())
    for rollups in (set(), every):
        got = {}
        for t in ticks:
            at = Context(store, Window(t - lookback, t), th, "c", {"rollups": rollups})
            e = _answer(spec.fn(at), case.detector)
            got[t] = None if e is None else case.got(e)
        assert got == want, f"per tick, rollups={bool(rollups)}"
        if spec.over is None:
            continue
        ctx = Context(
            store, Window(ticks[0] - lookback, ticks[-1]), th, "c", {"rollups": rollups},
            ticks=tuple(ticks),
        )  # fmt: skip
        found = spec.over(ctx)
        got = {
            t: None if (e := _answer(found.get(t, []), case.detector)) is None else case.got(e)
            for t in ticks
        }
        assert got == want, f"set-based, rollups={bool(rollups)}"
