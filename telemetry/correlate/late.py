"""Late data for the live engine: rows that reach the store after the engine judged their time (a
collector's retried batch, a spool replayed after a store outage, a slow poll).

It keeps, per sample kind, how many rows each interval bucket held when it last looked (a small
GROUP BY per kind over the last `time.late_seconds`, all kinds in one statement per tick), and
reports the buckets already judged whose count grew since. The engine then re-judges the latest evaluation whose
window holds them (docs/correlation.md, "Time"). Counts, not insert times: the store records no
insert time, parts merge, and a ClickHouse cluster spreads inserts over replicas; a row count per
bucket is the same question on every deployment. It never changes data.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from telemetry.records import KINDS
from telemetry.store import Store
from telemetry.times import EPOCH, from_ms


class LateArrivals:
    def __init__(
        self, store: Store, cluster: str, kinds: set[str], interval_s: float, horizon_s: float
    ) -> None:
        self.store, self.cluster = store, cluster
        self.kinds = sorted(k for k in kinds if "valid_to" not in KINDS[k].by_name)
        self.step_ms = int(interval_s * 1000)
        self.horizon = timedelta(seconds=horizon_s)
        self.counts: dict[str, dict[int, int]] = {}
        self.checked: datetime | None = None

    def _counts(self, lo: datetime, hi: datetime) -> dict[str, dict[int, int]]:
        """Per kind, its rows per interval bucket in [lo, hi): every kind in one statement."""
        parts = []
        for kind in self.kinds:
            col = f"`{KINDS[kind].time_field}`"
            parts.append(
                f"""SELECT '{kind}' AS kind, intDiv(toUnixTimestamp64Milli({col}), {self.step_ms}) AS b,
                       count() AS n
                FROM {self.store.table(kind)}
                WHERE cluster = {{c:String}} AND {col} >= {{lo:DateTime64(3, 'UTC')}}
                  AND {col} < {{hi:DateTime64(3, 'UTC')}}
                GROUP BY b"""
            )
        out: dict[str, dict[int, int]] = {k: {} for k in self.kinds}
        if parts:
            rows = self.store.query_rows(
                " UNION ALL ".join(parts), {"c": self.cluster, "lo": lo, "hi": hi}
            )
            for kind, b, n in rows:
                out[str(kind)][int(b)] = int(n)
        return out

    def check(self, judged_until: datetime, now: datetime) -> dict[str, datetime]:
        """Per kind, the start of the earliest bucket before `judged_until` (the last tick
        judged) that gained rows since the previous check, within the horizon. The first check
        only takes note."""
        lo = now - self.horizon
        out: dict[str, datetime] = {}
        first = self.checked is None
        limit = (judged_until - EPOCH) // timedelta(milliseconds=1)
        for kind, new in self._counts(lo, now).items():
            old = self.counts.get(kind, {})
            if not first:
                grew = [
                    b
                    for b, n in new.items()
                    if n > old.get(b, 0) and (b + 1) * self.step_ms <= limit
                ]
                if grew:
                    out[kind] = from_ms(min(grew) * self.step_ms)
            self.counts[kind] = new
        self.checked = now
        return out


__all__ = ["LateArrivals"]
