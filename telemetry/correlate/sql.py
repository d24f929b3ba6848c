"""SQL building blocks shared by detectors, attribution and the job report: counter increases
per window and the latest LLDP neighbours. Tables and time ranges come from the record kind
through the Context; values are query parameters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from telemetry.correlate.registry import Context
from telemetry.records import KINDS, Field
from telemetry.topology.store_io import latest_lldp_sql


def rate(r: dict[str, Any], col: str) -> float:
    """Per-second rate of an increase_sql() column over its row's observed span (0 if none)."""
    span = r.get("span_s") or 0.0
    return float(r.get(col) or 0.0) / span if span > 0 else 0.0


def lldp_links(ctx: Context) -> list[dict[str, Any]]:
    """The latest LLDP neighbour of every local port seen before the window ends (the tick:
    computed once per tick)."""
    return ctx.cached(
        f"lldp_links@{ctx.window.end.isoformat()}",
        lambda: ctx.rows(latest_lldp_sql(ctx.store, lo=None, hi="we")),
    )


def lldp_peers(ctx: Context) -> dict[tuple[str, str], tuple[str, str]]:
    """(device, port) -> (neighbour device, neighbour port), from lldp_links()."""
    return {
        (r["local_device"], r["local_port"]): (r["remote_device"], r["remote_port"])
        for r in lldp_links(ctx)
    }


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
) -> str:
    """Per key, how much each counter of `kind` rose inside the window, resets counted from
    zero, plus the observed span in seconds. Never negative. `among` restricts the rows to
    parameter values (see in_params)."""
    k = ", ".join(keys)
    ts = f"`{KINDS[kind].time_field}`"
    deltas = ",\n".join(
        f"toFloat64({c}) - toFloat64(lagInFrame({c}, 1, {c}) OVER w) AS d_{c}, toFloat64({c}) AS v_{c}"
        for c in counters
    )
    sums = ",\n".join(
        f"sum(if(d_{c} >= 0, d_{c}, v_{c})) AS inc_{c}, countIf(d_{c} < 0) AS resets_{c}"
        for c in counters
    )
    where = " AND ".join([ctx.where(kind), *in_params(kind, among or {})])
    return f"""
        SELECT {k}, count() AS samples, dateDiff('millisecond', min(t), max(t)) / 1000 AS span_s,
        {sums}
        FROM (
            SELECT {k}, {ts} AS t,
            {deltas}
            FROM {ctx.table(kind)}
            WHERE {where}
            WINDOW w AS (PARTITION BY {k} ORDER BY {ts} ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)
        )
        GROUP BY {k}
    """
