"""SQL building blocks shared by detectors, attribution and the job report: counter increases
per window and the latest LLDP neighbours. Tables and time ranges come from the record kind
through the Context; values are query parameters.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from telemetry.correlate.registry import Context
from telemetry.correlate.timebase import counter_sql, lead_ms
from telemetry.records import KINDS, Field
from telemetry.store import time_range
from telemetry.store.rollups import BY_KIND, ROLLUP_SECONDS
from telemetry.store.schema import quote
from telemetry.times import as_utc
from telemetry.topology.store_io import latest_lldp_sql


def rollup_table(ctx: Context, kind: str) -> str | None:
    """The rollup of `kind`, when it answers for exactly this window: the store has it (the
    engine lists the rollups in `ctx.extra["rollups"]`; a Context without that list reads the
    raw tables) and the window is whole rollup intervals. None otherwise."""
    have = ctx.extra.get("rollups")
    if not have or kind not in BY_KIND or BY_KIND[kind].table not in have:
        return None
    step = ROLLUP_SECONDS * 1000
    for t in (ctx.window.start, ctx.window.end):
        if round(t.timestamp() * 1000) % step:
            return None
    return f"{quote(ctx.store.database)}.{quote(BY_KIND[kind].table)}"


ROLLUP_WINDOW = (
    "cluster = {cluster:String} AND bucket >= {ws:DateTime64(3, 'UTC')} "
    "AND bucket < {we:DateTime64(3, 'UTC')}"
)


def moved_series(
    ctx: Context, kind: str, keys: list[str], counters: list[str], *, also: str = ""
) -> list[tuple[Any, ...]] | None:
    """The series (tuples of `keys`) of `kind` for which any of `counters` moved over the
    window and the lead before it (the intervals from timebase.lead_ms before the window's
    start), or `also` (a condition on the rollup's aggregates) holds there, read from the kind's
    rollup; None when no rollup answers for the window (every series may have).

    A series whose counter holds one value at every sample of the window and the lead (the
    greatest over its intervals equals the least, and no sample lacks it) rose by exactly 0
    from its lead sample on: increase_sql() gives it 0 and no reset, so a detector that needs a
    positive increase can compute increase_sql() among these series alone and find what it
    finds over all of them. A series with some samples lacking the counter counts as moved
    (increase_sql() counts the value after a gap whole)."""
    table = rollup_table(ctx, kind)
    if table is None:
        return None
    step = ROLLUP_SECONDS * 1000
    lead = -(-lead_ms(ctx) // step) * step  # whole intervals, back to the earliest lead sample
    total = BY_KIND[kind].samples
    conds = [
        f"max(`{c}_max`) != min(`{c}_min`) "
        f"OR (sum(`{c}_nulls`) > 0 AND sum(`{c}_nulls`) < sum(`{total}`))"
        for c in counters
    ] + ([also] if also else [])
    cols = ", ".join(f"`{k}`" for k in keys)
    res = ctx.store.query(
        f"""SELECT {cols} FROM {table} WHERE cluster = {{cluster:String}}
              AND bucket >= {{ws:DateTime64(3, 'UTC')}} - toIntervalMillisecond({lead})
              AND bucket < {{we:DateTime64(3, 'UTC')}}
            GROUP BY {cols} HAVING {" OR ".join(f"({c})" for c in conds)}""",
        ctx.params(),
    )
    return [tuple(r) for r in res.result_rows]


def rollup_values(ctx: Context, kind: str, col: str) -> set[Any] | None:
    """The distinct values of `col` among the rows of `kind` inside the window, from its rollup
    (None when no rollup answers for the window)."""
    table = rollup_table(ctx, kind)
    if table is None:
        return None
    res = ctx.store.query(
        f"SELECT DISTINCT `{col}` FROM {table} WHERE {ROLLUP_WINDOW}", ctx.params()
    )
    return {r[0] for r in res.result_rows}


def rollup_values_at(ctx: Context, kind: str, col: str) -> dict[datetime, set[Any]] | None:
    """Set-based (Context.ticks): per judged tick, what rollup_values() gives over that tick's
    trailing window, from one read of the rollup over the range (None when no rollup answers)."""
    table = rollup_table(ctx, kind)
    if table is None:
        return None
    res = ctx.store.query(
        f"SELECT DISTINCT bucket, `{col}` FROM {table} WHERE {ROLLUP_WINDOW}", ctx.params()
    )
    lookback = ctx.ticks[0] - ctx.window.start
    out: dict[datetime, set[Any]] = {t: set() for t in ctx.ticks}
    for bucket, value in res.result_rows:
        b = as_utc(bucket)
        for t in ctx.ticks:
            if t - lookback <= b < t:
                out[t].add(value)
    return out


def among_moved(
    keys: list[str], moved: list[tuple[Any, ...]] | None, param: str = "moved"
) -> tuple[dict[str | tuple[str, ...], str], dict[str, Any]]:
    """increase_sql()'s `among` and the query parameters that restrict it to `moved` (nothing
    when `moved` is None: every series)."""
    if moved is None:
        return {}, {}
    if len(keys) == 1:
        return {keys[0]: param}, {param: [m[0] for m in moved]}
    return {tuple(keys): param}, {param: [tuple(m) for m in moved]}


def rate(r: dict[str, Any], col: str) -> float:
    """Per-second rate of an increase_sql() column over the time its increase covers (0 if
    none)."""
    span = r.get("span_s") or 0.0
    return float(r.get(col) or 0.0) / span if span > 0 else 0.0


def lldp_links(ctx: Context) -> list[dict[str, Any]]:
    """The latest LLDP neighbour of every local port seen before the window ends (the tick:
    computed once per tick)."""
    return ctx.as_of_state(  # type: ignore[no-any-return]
        "lldp_links", ("lldp_link",), lambda: ctx.rows(latest_lldp_sql(ctx.store, lo=None, hi="we"))
    )


def lldp_peers(ctx: Context) -> dict[tuple[str, str], tuple[str, str]]:
    """(device, port) -> (neighbour device, neighbour port), from lldp_links()."""
    return {
        (r["local_device"], r["local_port"]): (r["remote_device"], r["remote_port"])
        for r in lldp_links(ctx)
    }


def lldp_peers_at(ctx: Context) -> dict[datetime, dict[tuple[str, str], tuple[str, str]]]:
    """Set-based (Context.ticks): per judged tick, what lldp_peers() gives at it (the latest
    neighbour of every local port seen before the tick): the neighbours as of the first tick,
    then the rows seen up to the last one, applied in time order."""
    first = {"hi": ctx.ticks[0], "lo": ctx.ticks[0], "last": ctx.ticks[-1]}
    state = {
        (r["local_device"], r["local_port"]): (r["remote_device"], r["remote_port"])
        for r in ctx.rows(latest_lldp_sql(ctx.store, lo=None, hi="hi"), first)
    }
    later = ctx.rows(
        f"""SELECT ts, local_device, local_port, remote_device, remote_port
            FROM {ctx.table("lldp_link")}
            WHERE cluster = {{cluster:String}} AND {time_range("lldp_link", "lo", "last")}
            ORDER BY ts""",
        first,
    )
    out, i = {}, 0
    for t in ctx.ticks:
        while i < len(later) and as_utc(later[i]["ts"]) < t:
            r = later[i]
            state[(r["local_device"], r["local_port"])] = (r["remote_device"], r["remote_port"])
            i += 1
        out[t] = dict(state)
    return out


def increase_cols(alias: str, keys: list[str], counters: list[str]) -> str:
    """The columns of an increase_sql() subquery, unprefixed, for SELECTs that join it."""
    cols = [
        *keys,
        "samples",
        "span_s",
        *(f"inc_{c}" for c in counters),
        *(f"resets_{c}" for c in counters),
    ]
    return ", ".join(f"{alias}.{c} AS {c}" for c in cols)


def _param_type(f: Field) -> str:
    """The ClickHouse type of a query parameter compared with field `f`."""
    t = f.clickhouse_type
    for wrapper in ("LowCardinality(", "Nullable("):
        if t.startswith(wrapper):
            t = t[len(wrapper) : -1]
    return t


def in_params(kind: str, among: Mapping[str | tuple[str, ...], str]) -> list[str]:
    """`col IN {param:Array(T)}` (or `(a, b) IN {param:Array(Tuple(A, B))}`) per entry of
    `among`, typed from the kind's fields: rows whose column(s) are among a parameter's values."""
    k = KINDS[kind]
    out = []
    for cols, param in among.items():
        names = (cols,) if isinstance(cols, str) else cols
        types = [_param_type(k.by_name[c]) for c in names]
        if len(names) == 1:
            out.append(f"`{names[0]}` IN {{{param}:Array({types[0]})}}")
        else:
            lhs = ", ".join(f"`{c}`" for c in names)
            out.append(f"({lhs}) IN {{{param}:Array(Tuple({', '.join(types)}))}}")
    return out


def increase_sql(
    ctx: Context,
    kind: str,
    keys: list[str],
    counters: list[str],
    among: Mapping[str | tuple[str, ...], str] | None = None,
    *,
    over: bool = False,
) -> str:
    """Per key, how much each counter of `kind` rose over the window, resets counted from zero,
    and the time that increase covers (`span_s`, from the series' last sample before the window):
    the one counter model, timebase.counter_sql. Never negative. `among` restricts the rows to
    parameter values (see in_params). `over`: set-based (Context.ticks), per judged tick (a
    `tick` column first) over that tick's own trailing window; bound with
    timebase.tick_params()."""
    where = " AND ".join(in_params(kind, among or {}))
    return counter_sql(ctx, kind, keys, counters, where, over=over)
