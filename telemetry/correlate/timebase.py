"""How the engine compares samples in time: the one place that knows real telemetry is never on a
common grid (each device at its own phase, gNMI's per-leaf times, jitter, skewed clocks, missed
and duplicated samples). Detectors ask it; they never compare timestamps across series.

The model (docs/correlation.md, "Time"):
- a series is one device's one thing (a port, a queue, a GPU), keyed by its label columns;
- a sample stands for the time since its series' previous sample, at most `time.stale_after_
  seconds` (a sample after a longer silence covers only that much): durations ("hot for 60 s")
  are the sum of what the qualifying samples cover (`covered_sql`);
- to compare series (the members of an ECMP group, the two ends of a link), each is aligned onto
  the evaluation grid (multiples of `sliding.interval_seconds`): at a grid point a series has the
  value of its latest sample at or before it, when that sample is at most `stale_after_seconds`
  old, else none (`aligned_sql`); then series are compared at the same grid point;
- a series' sample spacing is its own (the median of its positive time deltas, `spacing_sql`);
- a counter's increase over a window is what it rose from the series' last sample before the
  window (the lead sample, read from `lead_ms` before it) to its last inside, over the time
  between the two (`counter_sql`, the one counter model: sql.increase_sql and sql.rate use it).
It reads nothing itself: it writes SQL that detectors run through their Context.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from telemetry.correlate.registry import Context, Later

if TYPE_CHECKING:
    from telemetry.correlate.findings import Finding
from telemetry.records import KINDS


def interval_ms(ctx: Context) -> int:
    return int(float(ctx.t("sliding.interval_seconds")) * 1000)


def stale_ms(ctx: Context) -> int:
    """How long a sample stands for its series at least (a longer silence is a gap, not a
    value); a series polled more slowly stands for `time.stale_after_spacings` of its own
    spacing, up to `lead_ms`."""
    return int(float(ctx.t("time.stale_after_seconds")) * 1000)


def lead_ms(ctx: Context) -> int:
    """How far before the window a query reads, for the samples that stand for its first
    instants: the longest a sample may stand for (`time.max_spacing_seconds` x the spacings)."""
    return int(
        max(
            float(ctx.t("time.stale_after_seconds")),
            float(ctx.t("time.max_spacing_seconds")) * float(ctx.t("time.stale_after_spacings")),
        )
        * 1000
    )


def lookback_ms(ctx: Context) -> int:
    """Set-based evaluation (Context.ticks): the span of each judged tick's trailing window, ms
    (from the context's window start to its first tick)."""
    return round((ctx.ticks[0] - ctx.window.start).total_seconds() * 1000)


def _limit(ctx: Context) -> str:
    """SQL: how long a sample stands for its series, given `spacing` (ms, its median delta)."""
    k = float(ctx.t("time.stale_after_spacings"))
    return f"greatest({stale_ms(ctx)}, least({lead_ms(ctx)}, toInt64({k} * spacing)))"


def _cols(keys: list[str]) -> str:
    return ", ".join(f"`{k}`" for k in keys)


def _window_with_lead(ctx: Context, kind: str, where: str) -> str:
    """Rows of `kind` from `time.stale_after_seconds` before the window to its end (the samples
    before the window stand for its first instants), filtered by `where`."""
    col = f"`{KINDS[kind].time_field}`"
    return (
        f"cluster = {{cluster:String}} AND {col} >= {{ws:DateTime64(3, 'UTC')}} - "
        f"toIntervalMillisecond({lead_ms(ctx)}) AND {col} < {{we:DateTime64(3, 'UTC')}}"
        + (f" AND ({where})" if where else "")
    )


def aligned_sql(
    ctx: Context,
    kind: str,
    keys: list[str],
    values: Mapping[str, str],
    where: str = "",
    *,
    over: bool = False,
) -> str:
    """Every series of `kind` (by `keys`) on the evaluation grid inside the window: one row
    (keys..., g, values...) per grid point g in [ws, we) at which the series' latest sample at or
    before g still stands for it (at most stale_after_seconds old, or stale_after_spacings of the
    series' own spacing when it is polled more slowly); `values` (name -> SQL expression over
    the kind's columns) are that sample's. A duplicated sample counts once; a series silent for
    longer has no row at the grid points of its silence. `over`: set-based (Context.ticks), per
    judged tick (a `tick` column first) on that tick's grid points, from that tick's window and
    the lead before it as the per-tick statement reads them (each tick's rows partitioned apart:
    a series' spacing, and its last sample's successor, are those in that tick's rows); bound
    with tick_params()."""
    col = f"`{KINDS[kind].time_field}`"
    k = _cols(keys)
    step = interval_ms(ctx)
    join = ""
    ws_ms = "toUnixTimestamp64Milli({ws:DateTime64(3, 'UTC')})"
    we_ms = "toUnixTimestamp64Milli({we:DateTime64(3, 'UTC')})"
    if over:
        lookback = lookback_ms(ctx)
        join = tick_join(ctx, kind, lead=lead_ms(ctx))
        where = (
            f"({where}) AND tick IN {{ticks:Array(Int64)}}"
            if where
            else "tick IN {ticks:Array(Int64)}"
        )
        ws_ms, we_ms = f"tick - {lookback}", "tick"
        k = f"tick, {k}"
    exprs = ", ".join(f"{e} AS `{n}`" for n, e in values.items())
    names = ", ".join(f"`{n}`" for n in values)
    return f"""
        SELECT {k}, toDateTime64(arrayJoin(range(
                   toUInt64(greatest(intDiv(t + {step} - 1, {step}) * {step}, ws_ms)),
                   toUInt64(greatest(least(nxt, t + {_limit(ctx)}, we_ms), ws_ms)),
                   {step})) / 1000, 3, 'UTC') AS g, {names}
        FROM (
            SELECT *, medianExactIf(t - prev, prev >= 0 AND t > prev)
                          OVER (PARTITION BY {k}) AS spacing
            FROM (
                SELECT {k}, toUnixTimestamp64Milli({col}) AS t, {exprs},
                       lagInFrame(toUnixTimestamp64Milli({col}), 1, toInt64(-1)) OVER (
                           PARTITION BY {k} ORDER BY {col}
                           ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS prev,
                       leadInFrame(toUnixTimestamp64Milli({col}), 1, toInt64(-1)) OVER (
                           PARTITION BY {k} ORDER BY {col}
                           ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING) AS nxt_raw,
                       if(nxt_raw < 0, t + {lead_ms(ctx)}, nxt_raw) AS nxt,
                       {ws_ms} AS ws_ms, {we_ms} AS we_ms
                FROM {ctx.table(kind)} {join}
                WHERE {_window_with_lead(ctx, kind, where)}
            )
        )
        WHERE nxt > t"""


def covered_sql(
    ctx: Context,
    kind: str,
    keys: list[str],
    conditions: Mapping[str, str],
    values: Mapping[str, str] | None = None,
    where: str = "",
    *,
    over: bool = False,
) -> str:
    """Per series of `kind`: for each of `conditions` (name -> SQL condition on a sample) the
    seconds covered by the window's samples where it held (`<name>_s`), the seconds covered by
    all of them (`covered_s`), their count (`samples`), and `values` (name -> aggregate over the
    window's samples). A sample covers the time since its series' previous sample (even one just
    before the window), at most what a sample stands for (see aligned_sql); a series' first
    sample ever covers its median spacing (one interval when it has none). A duplicated sample
    covers nothing. `over`: set-based (Context.ticks), per judged tick (a `tick` column first)
    over that tick's window and the lead before it, as the per-tick statement reads them (each
    tick's rows partitioned apart: a series' spacing is its spacing in that tick's rows); bound
    with tick_params()."""
    col = f"`{KINDS[kind].time_field}`"
    k = _cols(keys)
    tick, join, first = "", "", f"{col} >= {{ws:DateTime64(3, 'UTC')}}"
    if over:
        lookback = lookback_ms(ctx)
        tick, join = "tick, ", tick_join(ctx, kind, lead=lead_ms(ctx))
        where = (
            f"({where}) AND tick IN {{ticks:Array(Int64)}}"
            if where
            else "tick IN {ticks:Array(Int64)}"
        )
        first = f"t >= tick - {lookback}"  # the tick's own window, past its lead
        k = f"tick, {k}"
    step = interval_ms(ctx)
    conds = ", ".join(f"({c}) AS `_c_{n}`" for n, c in conditions.items())
    sums = ", ".join(f"sumIf(cover, `_c_{n}`) / 1000 AS `{n}_s`" for n in conditions)
    vals = "".join(f", {e} AS `{n}`" for n, e in (values or {}).items())
    return f"""
        SELECT {k}, sum(cover) / 1000 AS covered_s, count() AS samples, {sums}{vals}
        FROM (
            SELECT *, least(if(prev_t < 0, if(spacing > 0, spacing, {step}), t - prev_t),
                            {_limit(ctx)}) AS cover
            FROM (
                SELECT *, medianExactIf(t - prev_t, prev_t >= 0 AND t > prev_t)
                              OVER (PARTITION BY {k}) AS spacing
                FROM (
                    SELECT *, {tick}toUnixTimestamp64Milli({col}) AS t, {conds},
                           lagInFrame(toUnixTimestamp64Milli({col}), 1, toInt64(-1)) OVER (
                               PARTITION BY {k} ORDER BY {col}
                               ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS prev_t
                    FROM {ctx.table(kind)} {join}
                    WHERE {_window_with_lead(ctx, kind, where)}
                )
            )
            WHERE {first}
        )
        GROUP BY {k}"""


def counter_sql(
    ctx: Context,
    kind: str,
    keys: list[str],
    counters: list[str],
    where: str = "",
    *,
    over: bool = False,
) -> str:
    """The counter model: per series of `kind` (by `keys`), how much each of `counters` rose
    over the window (`inc_<c>`), how often it went backwards (`resets_<c>`), the window's samples
    (`samples`) and the time the increase covers (`span_s`). Each sample inside the window adds
    what its counter rose since the series' previous sample, even one just before the window
    (the lead sample, as covered_sql reads it), and covers the time since it: span_s runs from
    the lead sample (the first sample, for a series with none before the window) to the last,
    so inc / span_s is the series' rate whatever its phase, spacing or jitter against the
    window's bounds. A counter that went backwards (a reset) adds its new value, counted from
    zero; a sample after one without the counter adds its value whole; a duplicated sample adds
    nothing. Never negative. `where`: a condition on the rows (applied to the lead sample too).
    `over`: set-based (Context.ticks), per judged tick (a `tick` column first) over that tick's
    window and the lead before it, as the per-tick statement reads them; bound with
    tick_params()."""
    col = f"`{KINDS[kind].time_field}`"
    k = _cols(keys)
    # each sample's predecessor is found once, over the whole read; a sample counts from it
    # where the statement for its window would have read it (`held`: from the lead on)
    ticks, first, held = "", "t >= toUnixTimestamp64Milli({ws:DateTime64(3, 'UTC')})", "prev_t >= 0"
    out = k
    if over:
        lookback = lookback_ms(ctx)
        ticks = tick_join(ctx, kind, "t")
        first = "tick IN {ticks:Array(Int64)}"
        held = f"prev_t >= tick - {lookback + lead_ms(ctx)}"
        out = f"tick, {k}"
    deltas = "".join(
        f", toFloat64(`{c}`) - toFloat64(lagInFrame(`{c}`, 1, `{c}`) OVER w) AS `d_{c}`"
        f", toFloat64(`{c}`) AS `v_{c}`"
        for c in counters
    )
    sums = "".join(
        f", sum(if({held}, if(`d_{c}` >= 0, `d_{c}`, `v_{c}`), 0)) AS `inc_{c}`"
        f", countIf({held} AND `d_{c}` < 0) AS `resets_{c}`"
        for c in counters
    )
    return f"""
        SELECT {out}, count() AS samples, sum(if({held}, t - prev_t, 0)) / 1000 AS span_s{sums}
        FROM (
            SELECT {k}, toUnixTimestamp64Milli({col}) AS t,
                   lagInFrame(toUnixTimestamp64Milli({col}), 1, toInt64(-1)) OVER w AS prev_t{deltas}
            FROM {ctx.table(kind)}
            WHERE {_window_with_lead(ctx, kind, where)}
            WINDOW w AS (PARTITION BY {k} ORDER BY {col} ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)
        ) {ticks}
        WHERE {first}
        GROUP BY {out}"""


def spacing_sql(ctx: Context, kind: str, keys: list[str], where: str = "") -> str:
    """Per series of `kind` in the window: its own sample spacing (`spacing_s`, the median of its
    positive time deltas; null with fewer than two distinct times), its last sample (`last`) and
    how many samples it has (`samples`)."""
    col = f"`{KINDS[kind].time_field}`"
    k = _cols(keys)
    w = f"cluster = {{cluster:String}} AND {col} >= {{ws:DateTime64(3, 'UTC')}} AND {col} < {{we:DateTime64(3, 'UTC')}}"
    if where:
        w += f" AND ({where})"
    return f"""
        SELECT {k}, medianExactIf(d, d > 0) / 1000 AS spacing_s, max(ts_) AS last,
               min(ts_) AS first, count() AS samples
        FROM (
            SELECT {k}, {col} AS ts_,
                   toUnixTimestamp64Milli({col}) - lagInFrame(toUnixTimestamp64Milli({col}), 1,
                       toUnixTimestamp64Milli({col})) OVER (
                       PARTITION BY {k} ORDER BY {col} ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS d
            FROM {ctx.table(kind)}
            WHERE {w}
        )
        GROUP BY {k}"""


def activity_sql(
    ctx: Context, kind: str, device: str, series: list[str], *, over: bool = False
) -> str:
    """Per device of `kind` in the window (a device writes several series, `series` names their
    keys within it): its last and first sample, how many samples, and its spacing - the mean of
    its series' own time deltas, (last - first) / (samples per series - 1); null with fewer than
    two samples per series. One aggregation, no window function: cheap over long windows.
    `over`: per judged tick too (a `tick` column, tick_join; bound with tick_params())."""
    col = f"`{KINDS[kind].time_field}`"
    w = f"cluster = {{cluster:String}} AND {col} >= {{ws:DateTime64(3, 'UTC')}} AND {col} < {{we:DateTime64(3, 'UTC')}}"
    per = f"count() / uniqExact({_cols(series)})" if series else "count()"
    tick, join = "", ""
    if over:
        tick, join = "tick, ", tick_join(ctx, kind)
        w += " AND tick IN {ticks:Array(Int64)}"
    return f"""
        SELECT {tick}`{device}`, max({col}) AS last, min({col}) AS first, count() AS samples,
               if({per} > 1, dateDiff('millisecond', min({col}), max({col})) / 1000 / ({per} - 1),
                  NULL) AS spacing_s
        FROM {ctx.table(kind)} {join} WHERE {w}
        GROUP BY {tick}`{device}`"""


def tick_join(
    ctx: Context, kind: str, ms: str = "", *, lead: int = 0, span: int | None = None
) -> str:
    """Set-based evaluation (Context.ticks): an ARRAY JOIN clause that repeats each row of
    `kind` once for every judged tick whose trailing window [tick - lookback, tick) holds it, as
    `tick` (the tick's epoch milliseconds; ticks are multiples of sliding.interval_seconds since
    the epoch, engine.ticks). The lookback is the span from the context's window start to its
    first tick. `ms`: the row's time as epoch milliseconds, where it is not the kind's time
    column (a rollup's interval). `lead`: milliseconds more before each window (the samples that
    stand for its first instants, lead_ms). `span`: each window's length in milliseconds, in
    place of the lookback and `lead` (with `ms` the row's time shifted by S, the windows
    [tick - S - span, tick - S): what came before each tick's own window). Bound with
    tick_params()."""
    col = ms or f"toUnixTimestamp64Milli(`{KINDS[kind].time_field}`)"
    step = interval_ms(ctx)
    lookback = lookback_ms(ctx) + lead
    if span is not None:
        lookback = span
    return (
        f"ARRAY JOIN arrayFilter(k -> k >= {{first_tick:Int64}} AND k <= {{last_tick:Int64}}, "
        f"arrayMap(i -> i * {step}, range(intDiv({col}, {step}) + 1, "
        f"intDiv({col} + {lookback}, {step}) + 1))) AS tick"
    )


def tick_params(ctx: Context) -> dict[str, object]:
    """tick_join()'s parameters, and `ticks` (the judged ticks' epoch milliseconds: filter with
    `tick IN {ticks:Array(Int64)}` where the judged ticks are not every tick between the first
    and the last)."""
    ms = [round(t.timestamp() * 1000) for t in ctx.ticks]
    step = interval_ms(ctx)
    if any(m % step for m in ms):
        raise ValueError(f"ticks off the {step} ms grid: {ms[:3]}")
    return {"first_tick": ms[0], "last_tick": ms[-1], "ticks": ms}


def by_tick(ctx: Context) -> dict[int, datetime]:
    """Epoch milliseconds (a tick_join row's `tick`) -> the judged tick."""
    return {round(t.timestamp() * 1000): t for t in ctx.ticks}


def rows_at(ctx: Context, rows: list[dict[str, Any]]) -> dict[datetime, list[dict[str, Any]]]:
    """A set-based statement's rows (a `tick` column, tick_join) grouped by judged tick, in
    their order; every judged tick is a key, those without rows hold an empty list."""
    at = by_tick(ctx)
    out: dict[datetime, list[dict[str, Any]]] = {t: [] for t in ctx.ticks}
    for r in rows:
        out[at[r["tick"]]].append(r)
    return out


def per_tick(
    ctx: Context,
    rows: list[dict[str, Any]],
    make: Callable[[Context, list[dict[str, Any]]], list[Finding]],
) -> dict[datetime, list[Finding]]:
    """A detector's set-based answer (registry.over_ticks) from its one statement over the range:
    `make(ctx.at(t), rows)` with each judged tick's rows (rows_at), as its per-tick form would
    judge them at that tick alone; a tick without rows, or where `make` finds nothing, is left
    out (nothing found)."""
    out = {}
    for t, got in rows_at(ctx, rows).items():
        if got and (found := make(ctx.at(t), got)):
            out[t] = found
    return out


def per_tick_later(
    ctx: Context,
    rows: list[dict[str, Any]],
    make: Callable[[Context, list[dict[str, Any]]], list[Finding]],
) -> dict[datetime, Later]:
    """As `per_tick`, for a detector whose answer at a tick also reads the findings of the
    ticks before it (the engine writes them tick by tick): its one statement over the range runs
    ahead, and `make(c, rows)` runs when the engine reaches each tick, with that tick's Context
    `c` and rows (registry.Later); a tick without rows is left out (nothing found)."""

    def later(got: list[dict[str, Any]]) -> Later:
        return lambda c: make(c, got)

    return {t: later(got) for t, got in rows_at(ctx, rows).items() if got}


__all__ = [
    "activity_sql",
    "aligned_sql",
    "by_tick",
    "counter_sql",
    "covered_sql",
    "interval_ms",
    "lead_ms",
    "lookback_ms",
    "per_tick",
    "per_tick_later",
    "rows_at",
    "spacing_sql",
    "stale_ms",
    "tick_join",
    "tick_params",
]
