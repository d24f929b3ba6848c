"""Whether rows outlive the tables' TTL: rows older than a table's TTL are dropped by the store as
it merges, so storing them (a capture replayed weeks later, a simulated run pinned in the past)
loses them quietly. `expiring` compares a time range with TTLs; `table_ttls` reads the TTLs a
store's tables actually have; `ReplayAdmission` refuses a replay's rows before they are inserted,
or, asked to keep them, lengthens the TTLs so that they are kept as long as live rows would be.
Nothing here inserts or deletes rows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from telemetry.errors import UserError
from telemetry.records import KINDS
from telemetry.store.rollups import rollups_of
from telemetry.times import from_ms

if TYPE_CHECKING:
    from telemetry.contracts import Batch
    from telemetry.store.client import Store

DAY = timedelta(days=1)
_TTL_DAYS = re.compile(r"\bTTL\b.*?toIntervalDay\((\d+)\)", re.S)


def _fmt(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ")


@dataclass(frozen=True)
class Span:
    """The rows bound for one table: how many, and the range of their time column."""

    table: str
    rows: int
    first: datetime
    last: datetime

    def __or__(self, other: Span) -> Span:
        return Span(
            self.table,
            self.rows + other.rows,
            min(self.first, other.first),
            max(self.last, other.last),
        )


@dataclass(frozen=True)
class Expiry:
    """Rows of `span` that `table`'s TTL of `days` drops (`table` is the span's own table or a
    rollup fed from it); `all_rows` when even the newest is past it."""

    table: str
    days: int
    span: Span
    oldest_kept: datetime
    all_rows: bool

    def describe(self) -> str:
        lost = "every row" if self.all_rows else "the rows before " + _fmt(self.oldest_kept)
        return (
            f"{self.table} keeps {self.days} days (TTL) and the capture's rows run "
            f"{_fmt(self.span.first)} .. {_fmt(self.span.last)}: the store would drop {lost}"
        )

    def kept_days(self, now: datetime) -> int:
        """The TTL that keeps the span's oldest row `days` from `now` (from the load)."""
        return self.days + math.ceil((now - self.span.first) / DAY)


def expiring(
    first: datetime, last: datetime, table: str, days: int | None, now: datetime | None = None
) -> tuple[datetime, bool] | None:
    """(oldest row kept, whether every row is dropped) when rows from `first` to `last` are
    older than `table`'s TTL of `days`; None where none is (or the table has no TTL)."""
    if not days:
        return None
    oldest = (now or datetime.now(UTC)) - timedelta(days=days)
    if first >= oldest:
        return None
    return oldest, last < oldest


def shortest_ttl(ttl_days: Mapping[str, int | None]) -> tuple[str, int] | None:
    """(table, days) of the table that keeps its rows the shortest; None where none has a TTL."""
    ttls = [(k.table, ttl_days.get(k.table, k.ttl_days)) for k in KINDS.values()]
    kept = [(t, int(d)) for t, d in ttls if d]
    return min(kept, key=lambda td: td[1]) if kept else None


def outlived(
    begin: datetime, minutes: float, ttl_days: Mapping[str, int | None], now: datetime | None = None
) -> str:
    """Why rows from `begin` on (for `minutes`), in every table, would be dropped by a table's TTL
    ("" where none would). The TTLs are the record kinds' own, with the config's overrides."""
    short = shortest_ttl(ttl_days)
    if short is None:
        return ""
    table, days = short
    end = begin + timedelta(minutes=minutes)
    hit = expiring(begin, end, table, days, now)
    if hit is None:
        return ""
    lost = "every row" if hit[1] else "the rows before " + _fmt(hit[0])
    return f"older than the tables' TTL ({table} keeps {days} days): the store would drop {lost}"


def spans(batches: Iterable[Batch]) -> dict[str, Span]:
    """Per table, the rows `batches` hold and the range of their kind's time column."""
    out: dict[str, Span] = {}
    for b in batches:
        if not b.num_rows or b.kind.time_field not in b.table.column_names:
            continue
        col = b.table.column(b.kind.time_field)
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.int64())
        mm = pc.min_max(col).as_py()  # nulls left out; in ms, as every record kind's times are
        if mm["min"] is None:
            continue
        span = Span(
            b.kind.table,
            b.num_rows,
            datetime.fromtimestamp(mm["min"] / 1000, UTC),
            datetime.fromtimestamp(mm["max"] / 1000, UTC),
        )
        out[span.table] = out[span.table] | span if span.table in out else span
    return out


# Tables the correlation engine writes from a table's rows, dated by those rows' time: a replay
# that is stored but whose attribution or findings the TTL drops is lost all the same (a month-old
# capture's flows attributed into a 14-day table vanish as they are written).
ENGINE_DERIVED: dict[str, tuple[str, ...]] = {"flow_samples": ("attributed_flows",)}
ENGINE_FINDINGS = ("findings", "incidents", "incident_findings")


def _rollups_of(table: str) -> list[str]:
    return [r.table for r in rollups_of(table)]


def fed_from(table: str) -> list[str]:
    """`table` and every table whose rows are made from its rows with their time: its rollups,
    what the engine derives from it (and their rollups), and the engine's findings."""
    out = [table, *_rollups_of(table)]
    for derived in ENGINE_DERIVED.get(table, ()):
        out += [derived, *_rollups_of(derived)]
    kind = next((k for k in KINDS.values() if k.table == table), None)
    if kind is None or not kind.ttl_days:  # inventory: valid from then, not an event of then
        return out
    return out + [t for t in ENGINE_FINDINGS if t not in out]


def table_ttls(store: Store, tables: Iterable[str]) -> dict[str, int | None]:
    """The TTL in days each of `tables` has in `store` now (None: none), read from the store's
    own DDL (a kept replay or `store.ttl_days` may have changed the record kind's default). A
    table the store lacks is left out."""
    from telemetry.store.schema import LOCAL_SUFFIX

    suffix = LOCAL_SUFFIX if store.cluster else ""
    names = {t + suffix: t for t in tables}
    rows = store.query_rows(
        "SELECT name, engine_full FROM system.tables "
        "WHERE database = {db:String} AND name IN {names:Array(String)}",
        {"db": store.database, "names": list(names)},
    )
    out: dict[str, int | None] = {}
    for name, engine in rows:
        m = _TTL_DAYS.search(str(engine))
        out[names[str(name)]] = int(m[1]) if m else None
    return out


def expiries(
    found: Mapping[str, Span], ttls: Mapping[str, int | None], now: datetime
) -> list[Expiry]:
    """What the TTLs in `ttls` would drop of the rows in `found`, in each table they go to and in
    the tables fed from it (`fed_from`), one per table (its oldest span): the tables the rows go
    to first, each group shortest TTL first."""
    out: dict[str, Expiry] = {}
    for table, span in found.items():
        for target in fed_from(table):
            days = ttls.get(target)
            hit = expiring(span.first, span.last, target, days, now)
            if hit is None or not days:
                continue
            was = out.get(target)
            if was is None or span.first < was.span.first:
                out[target] = Expiry(target, days, span, hit[0], hit[1])
    # the tables the rows go to first, then the ones fed from them
    return sorted(out.values(), key=lambda e: (e.table != e.span.table, e.days, e.table))


@dataclass(frozen=True)
class Held:
    """What one table of a store holds: its rows, their time range and its TTL."""

    table: str
    rows: int
    first: datetime | None
    last: datetime | None
    days: int | None

    def describe(self) -> str:
        ttl = f"TTL {self.days} days" if self.days else "no TTL"
        if not self.rows or self.first is None or self.last is None:
            return f"{self.table:<28} {0:>12,} rows  {'-':<35}  {ttl}"
        span = f"{_fmt(self.first)} .. {_fmt(self.last)}"
        out = f"{self.table:<28} {self.rows:>12,} rows  {span:<35}  {ttl}"
        if self.days:
            out += f": the oldest expire from {_fmt(self.first + timedelta(days=self.days))}"
        return out


def held(store: Store) -> list[Held]:
    """Every record kind's table in `store` (the ones it has): rows, time range, TTL."""
    ttls = table_ttls(store, [k.table for k in KINDS.values()])
    kinds = [k for k in KINDS.values() if k.table in ttls]
    if not kinds:
        return []
    sql = " UNION ALL ".join(
        f"SELECT {i} AS i, count() AS n, toUnixTimestamp64Milli(min(toDateTime64(`{k.time_field}`, 3))), "
        f"toUnixTimestamp64Milli(max(toDateTime64(`{k.time_field}`, 3))) FROM {store.table(k)}"
        for i, k in enumerate(kinds)
    )
    out = []
    for i, n, lo, hi in sorted(store.query_rows(sql)):
        k = kinds[int(i)]
        first, last = (from_ms(lo), from_ms(hi)) if n else (None, None)
        out.append(Held(k.table, int(n), first, last, ttls[k.table]))
    return out


class ReplayAdmission:
    """Checks a replay's rows against `store`'s table TTLs before anything is inserted. Rows the
    store would drop are refused (one line: the table, its TTL, the capture's time range and
    `--keep`), or with `keep` the table's TTL (and its rollups') is lengthened by the capture's
    age, so that its rows are kept for the TTL counted from the load, as live rows are; live rows
    written into that store later are kept that much longer too."""

    def __init__(
        self,
        store: Store,
        *,
        what: str,
        keep: bool = False,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.store = store
        self.what = what
        self.keep = keep
        self.now = now
        self.lengthened: dict[str, int] = {}  # table -> the TTL in days it now has

    def check(self, found: Mapping[str, Span]) -> list[Expiry]:
        """What the store's TTLs would drop of `found`; raises the refusal unless `keep`, else
        lengthens the TTLs. Returns the expiries it found."""
        if not found:
            return []
        now = self.now()
        tables = {t for table in found for t in fed_from(table)}
        hit = expiries(found, table_ttls(self.store, tables), now)
        if not hit:
            return []
        if not self.keep:
            more = f" (and {len(hit) - 1} more table(s))" if len(hit) > 1 else ""
            raise UserError(
                f"{self.what}: {hit[0].describe()}{more}; nothing stored: add --keep to keep them "
                f"(the TTL then counts from this load), or replay into another store"
            )
        self._lengthen(hit, now)
        return hit

    def __call__(self, batches: list[Batch]) -> None:
        """The pipeline's admission hook: a cycle's batches, before any is published."""
        self.check(spans(batches))

    def _lengthen(self, hit: list[Expiry], now: datetime) -> None:
        from telemetry.records import KINDS
        from telemetry.store.schema import table_ttl_sql

        columns = {k.table: k.time_field for k in KINDS.values()}
        want: dict[str, int] = {}
        for e in hit:
            want[e.table] = max(want.get(e.table, 0), e.kept_days(now))
        for table, days in sorted(want.items()):
            column = columns.get(table, "bucket")  # a rollup keeps its rows by its bucket
            try:
                self.store.client.command(
                    table_ttl_sql(table, column, self.store.database, days, self.store.cluster)
                )
            except Exception as e:  # e.g. a user that may insert but not ALTER
                from telemetry.store.client import first_line

                raise UserError(
                    f"{self.what}: --keep: cannot set the TTL of {table} to {days} days: "
                    f"{first_line(e)}; nothing stored"
                ) from None
            self.lengthened[table] = days


__all__ = [
    "Expiry",
    "Held",
    "ReplayAdmission",
    "Span",
    "expiries",
    "expiring",
    "fed_from",
    "held",
    "outlived",
    "shortest_ttl",
    "spans",
    "table_ttls",
]
