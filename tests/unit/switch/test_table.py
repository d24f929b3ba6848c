"""source._table: every switch's columns of a kind in one Arrow table, equal row by row to the
table of the same records as dict rows (Arrays concatenated where every switch has one; lists,
absent fields and per-switch constants otherwise)."""

from __future__ import annotations

from typing import Any

import numpy as np

from exporters.switch.source import _table
from telemetry.records import KINDS


def test_parts_of_many_switches_equal_their_rows() -> None:
    kind = KINDS["switch_queue_sample"]
    a = {  # every counter an array, one time for all rows
        "port": ["Ethernet0", "Ethernet0", "Ethernet4"],
        "queue": np.array([0, 1, 0]),
        "queue_type": ["unicast"] * 3,
        "ts": np.full(3, 1_700_000_000_000, dtype=np.int64),
        "tx_packets_total": np.array([1, 2, 3], dtype=np.uint64),
        "tx_bytes_total": np.array([10, 20, 30], dtype=np.uint64),
    }
    b = {  # lists with nulls, a field the first lacks, one the first has missing
        "port": ["Ethernet8", "Ethernet8"],
        "queue": [3, 4],
        "queue_type": ["multicast", "unicast"],
        "ts": [1_700_000_001_000, 1_700_000_002_000],
        "tx_packets_total": [7, None],
        "dropped_packets_total": [5, 6],
    }
    c = {"port": ["Ethernet0"], "queue": np.array([7]), "queue_type": ["unicast"],
         "ts": np.full(1, 1_700_000_003_000, dtype=np.int64),
         "tx_packets_total": np.array([9], dtype=np.uint64)}  # fmt: skip
    parts = [(a, {"switch": "leaf1", "asic": ""}), (b, {"switch": "leaf2", "asic": "asic0"}),
             (c, {"switch": "leaf3", "asic": ""})]  # fmt: skip
    rows: list[dict[str, Any]] = []
    for cols, const in parts:
        n = len(cols["ts"])
        for i in range(n):
            rows.append({**{k: (v[i].item() if isinstance(v, np.ndarray) else v[i])
                            for k, v in cols.items()}, **const})  # fmt: skip
    got = _table(kind, parts)
    assert got.schema == kind.arrow_schema
    assert got.to_pylist() == kind.to_arrow(rows).to_pylist()
    assert got.column("switch").to_pylist() == ["leaf1"] * 3 + ["leaf2"] * 2 + ["leaf3"]
    assert got.column("tx_packets_total").to_pylist() == [1, 2, 3, 7, None, 9]
    # one switch, or switches that share the constants
    assert _table(kind, parts[:1]).to_pylist() == kind.to_arrow(rows[:3]).to_pylist()
