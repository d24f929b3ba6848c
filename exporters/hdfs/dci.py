"""DCI budget: HDFS bytes per second crossing IDCs, per direction (src IDC -> dest IDC) and per
interval, split into reads / sync (write-pipeline) writes / async replication, against a
configured capacity per IDC pair; headroom = capacity - use.

Input: mapped transfer columns; output: dci_usage rows. Transfers with an unknown end are not
DCI traffic we can place: they are counted (`unplaced_bytes`), never added to a pair.
A transfer's bytes go to the interval holding its log time (the end of the transfer).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(bit|bps|b)?(?:/s|ps)?\s*$", re.IGNORECASE)
_SCALE = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}


def parse_rate(v: Any) -> float:
    """Bytes/s from a number (bytes/s) or '100Gbit', '100Gbps', '12.5GB/s', '400M' (bytes)."""
    if isinstance(v, int | float) and not isinstance(v, bool):
        try:
            n = float(v)
        except OverflowError:
            raise ValueError(f"capacity of {len(str(v))} digits is too large") from None
        if not 0 < n < math.inf:  # NaN fails this too
            raise ValueError(f"capacity must be positive and finite, got {v}")
        return n
    m = _RATE.match(str(v))
    if not m:
        raise ValueError(f"not a rate: {v!r} (use bytes/s or e.g. 100Gbit, 12.5GB/s)")
    n = float(m[1]) * _SCALE[m[2].lower()]
    unit = m[3] or ""
    if unit.lower() == "bit" or unit in ("b", "bps"):  # lowercase b = bits, B = bytes
        n /= 8
    if not 0 < n < math.inf:  # '0Gbit', or more digits than a float holds
        raise ValueError(f"capacity must be positive and finite, got {v!r:.40}")
    return n


def parse_pair(key: str) -> tuple[str, str, bool]:
    """'idc1->idc2' (one direction) or 'idc1-idc2' / 'idc1<->idc2' (each direction) -> (a, b, both)."""
    for sep, both in (("<->", True), ("->", False), ("-", True)):
        if sep in key:
            a, _, b = key.partition(sep)
            if a.strip() and b.strip() and a.strip() != b.strip():
                return a.strip(), b.strip(), both
    raise ValueError(f"not an IDC pair: {key!r} (use 'idc1->idc2' or 'idc1-idc2')")


def capacities(raw: Mapping[str, Any]) -> dict[tuple[str, str], float]:
    """Capacity per direction. A link is full duplex: 'a-b: 100Gbit' budgets 100 Gbit/s each way."""
    out: dict[tuple[str, str], float] = {}
    for k, v in raw.items():
        a, b, both = parse_pair(k)
        rate = parse_rate(v)
        out[(a, b)] = rate
        if both:
            out.setdefault((b, a), rate)
    return out


CLASSES = ("read", "sync_write", "async_replication")


def traffic_class(op: str, write_mode: str) -> str:
    if op == "HDFS_READ":
        return "read"
    return "async_replication" if write_mode == "async" or op == "replication" else "sync_write"


@dataclass
class Budget:
    interval_seconds: float
    capacity: dict[tuple[str, str], float] = field(default_factory=dict)
    # bucket start (ms) -> (src, dest) -> class -> bytes
    buckets: dict[int, dict[tuple[str, str], dict[str, int]]] = field(default_factory=dict)
    unplaced_bytes: int = 0

    def add(
        self,
        ts: Sequence[int],
        src_idc: Sequence[str],
        dest_idc: Sequence[str],
        op: Sequence[str],
        write_mode: Sequence[str],
        nbytes: Sequence[int],
    ) -> None:
        step = int(self.interval_seconds * 1000)
        for t, s, d, o, w, n in zip(ts, src_idc, dest_idc, op, write_mode, nbytes, strict=True):
            if not s or not d:
                self.unplaced_bytes += n
                continue
            if s == d:
                continue  # stays inside one IDC: not on the DCI
            b = self.buckets.setdefault(t - t % step, {}).setdefault(
                (s, d), dict.fromkeys(CLASSES, 0)
            )
            b[traffic_class(o, w)] += n

    def flush(self, before_ms: int | None = None) -> list[dict[str, Any]]:
        """Rows for every bucket that ended before `before_ms` (all when None); those are forgotten.
        Every configured pair gets a row in each emitted interval, even with no traffic."""
        step = int(self.interval_seconds * 1000)
        done = sorted(b for b in self.buckets if before_ms is None or b + step <= before_ms)
        rows = []
        for start in done:
            pairs = self.buckets.pop(start)
            for pair in sorted(set(pairs) | set(self.capacity)):
                c = pairs.get(pair) or dict.fromkeys(CLASSES, 0)
                rate = {k: v / self.interval_seconds for k, v in c.items()}
                total = sum(rate.values())
                cap = self.capacity.get(pair)
                rows.append(
                    {
                        "ts": start,
                        "src_idc": pair[0],
                        "dest_idc": pair[1],
                        "interval_seconds": self.interval_seconds,
                        "read_bytes_per_second": rate["read"],
                        "sync_write_bytes_per_second": rate["sync_write"],
                        "async_replication_bytes_per_second": rate["async_replication"],
                        "total_bytes_per_second": total,
                        "capacity_bytes_per_second": cap,
                        "headroom_bytes_per_second": None if cap is None else cap - total,
                        "utilization_ratio": None if cap is None else total / cap,
                    }
                )
        return rows
