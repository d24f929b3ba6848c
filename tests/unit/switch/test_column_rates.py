"""The switch source's rates for a whole switch at once (`SwitchSource._column_rates`, numpy over
the ports' uint64 columns) against the port-by-port rule (`_rates`): the same polls into two
sources, one with the column path switched off, must give the same rates and utilisation, value
for value, null where unknown, never negative, and count the same resets, across counter
resets, wraps, a port without a counter (a poll that goes port by port in between), a poll at
the same switch time, a port gone and back, and unknown or zero speeds."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from exporters.switch.sonic import Target
from exporters.switch.source import SwitchSource

U64 = 2**64 - 1
PORTS = ["Ethernet0", "Ethernet4", "Ethernet8", "Ethernet12"]


def _cols(ts: Any, rx: Any, tx: Any, speed: Any, ports: list[str] = PORTS) -> dict[str, Any]:
    def col(v: Any) -> Any:
        return np.array(v, dtype=np.uint64) if None not in v else list(v)

    return {"port": list(ports), "ts": ts, "rx_bytes_total": col(rx),
            "tx_bytes_total": col(tx), "speed_bps": list(speed)}  # fmt: skip


# (ts column, rx, tx, speed[, ports]) of successive polls of one switch
POLLS: list[tuple[Any, ...]] = [
    (np.full(4, 1_000_000, dtype=np.int64), [0, 10, 20, 30], [5, 5, 5, 5], [4e11, None, 0.0, 1e11]),
    (
        np.full(4, 1_010_000, dtype=np.int64),
        [100, 5, 20, U64],
        [U64 - 1, 6, 2**63 + 1, 7],
        [4e11, None, 0.0, 1e11],
    ),
    # a counter reset and a wrap past 2**64 (it went backwards: no rate, counted)
    (
        np.full(4, 1_020_000, dtype=np.int64),
        [50, 1000, 2**40, 3],
        [2, 9, 2**63 + 10, 17],
        [4e11, 1e11, 1e11, 1e11],
    ),
    # the same switch time again: no rate
    (
        np.full(4, 1_020_000, dtype=np.int64),
        [60, 1100, 2**40, 3],
        [3, 9, 2**63 + 11, 18],
        [4e11, 1e11, 1e11, 1e11],
    ),
    # a port without its tx counter: this poll goes port by port
    (
        [1_030_000, 1_030_001, 1_030_002, 1_030_003],
        [70, 1200, 2**40 + 7, 9],
        [4, None, 2**63 + 12, 20],
        [4e11, 1e11, 1e11, 1e11],
    ),
    # whole columns again, times per port differing
    (
        [1_040_000, 1_040_500, 1_039_000, 1_041_000],
        [90, 1300, 2**40 + 9, 19],
        [8, 12, 2**63 + 99, 25],
        [4e11, 1e11, 1e11, 2e11],
    ),
    # a port gone (other names: port by port state re-read), then back
    (
        np.full(3, 1_050_000, dtype=np.int64),
        [95, 1400, 30],
        [9, 13, 31],
        [4e11, 1e11, 2e11],
        ["Ethernet0", "Ethernet4", "Ethernet12"],
    ),
    (
        np.full(4, 1_060_000, dtype=np.int64),
        [99, 1500, 2**40 + 20, 40],
        [10, 14, 2**63 + 200, 41],
        [4e11, 1e11, 1e11, 2e11],
    ),
    (
        np.full(4, 1_070_000, dtype=np.int64),
        [199, 1400, 2**40 + 21, 50],
        [20, 24, 2**63 + 300, 51],
        [None, 1e11, 1e11, 2e11],
    ),
]


def _run(columns: bool) -> tuple[list[dict[str, list[Any]]], int, int]:
    src = SwitchSource([])
    if not columns:
        src._column_rates = lambda *a: None  # type: ignore[method-assign]
    t = Target("leaf0", "", "leaf", None)
    got, vector = [], 0
    for ts, rx, tx, speed, *ports in POLLS:
        parts: dict[str, list[Any]] = {k: [] for k in ("switch_port_sample",
                                       "switch_priority_sample", "switch_queue_sample")}  # fmt: skip
        c = _cols(ts, rx, tx, speed, *ports)
        empty = {"ts": []}
        src._merge_columns(t, (c, empty, dict(empty)), 0, parts)
        ((out, _),) = parts["switch_port_sample"]
        fields = ("rx_bytes_per_second", "tx_bytes_per_second", "tx_utilization_ratio")
        vector += isinstance(out["rx_bytes_per_second"], pa.Array)
        got.append({f: out[f].to_pylist() if isinstance(out[f], pa.Array) else out[f]
                    for f in fields})  # fmt: skip
    return got, src.resets, vector


def test_column_rates_equal_the_port_by_port_rates() -> None:
    want, want_resets, none = _run(columns=False)
    got, resets, vector = _run(columns=True)
    assert none == 0 and vector == len(POLLS) - 1  # every poll but the one with a gap
    assert got == want
    assert resets == want_resets == 5
    for poll in got:
        for vals in poll.values():
            assert all(v is None or v >= 0 for v in vals)
    # what the rule says, spelled out for the second poll: (cur - old) / 10 s
    assert got[1]["rx_bytes_per_second"] == [10.0, None, 0.0, (U64 - 30) / 10]
    assert got[1]["tx_utilization_ratio"][0] == (U64 - 1 - 5) / 10 * 8 / 4e11
    assert got[1]["tx_utilization_ratio"][1:3] == [None, None]  # speed unknown or 0
    assert got[0]["rx_bytes_per_second"] == [None] * 4  # no previous poll
    assert got[3]["tx_bytes_per_second"] == [None] * 4  # no time passed
