"""Panel helpers: grafanalib panels with ClickHouse (SQL) or Prometheus targets, laid out on the
24-column grid in the order given. Builds objects only."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from grafanalib import core as g

from dashboards.clickhouse import ALL, PROMETHEUS, ClickHouseTarget
from telemetry.store import table_ref

_DATABASE: ContextVar[str | None] = ContextVar("dashboards_database", default=None)


@contextmanager
def database(name: str | None) -> Iterator[None]:
    """Render tables qualified with `name` (None: unqualified, the datasource's default)."""
    token = _DATABASE.set(name)
    try:
        yield
    finally:
        _DATABASE.reset(token)


def tbl(kind: str, *, final: bool = False, alias: str = "") -> str:
    """A record kind's table in dashboard SQL, by the store's own helper (telemetry.store.table_ref)."""
    return table_ref(kind, _DATABASE.get(), final=final, alias=alias)


# SQL filters on the template variables (All = ALL, see dashboards.clickhouse)
CLUSTER = "cluster = ${cluster:sqlstring}"


def any_of(var: str, expr: str) -> str:
    """`expr` equals the variable, or the variable is All."""
    return f"(${{{var}:sqlstring}} = '{ALL}' OR {expr} = ${{{var}:sqlstring}})"


def job_of(ns_col: str, job_col: str) -> str:
    return any_of("job", f"concat({ns_col}, '/', {job_col})")


def _panel(
    kind: type[g.Panel],
    title: str,
    description: str,
    targets: list[Any],
    h: int,
    w: int,
    datasource: Any = None,
    **options: Any,
) -> g.Panel:
    """A panel of `kind` (h x w; layout() places it) on ClickHouse unless `datasource` says."""
    return kind(
        title=title,
        description=description or None,
        dataSource=datasource or ClickHouseTarget.table("").to_json_data()["datasource"],
        targets=targets,
        gridPos=g.GridPos(h=h, w=w, x=0, y=0),
        **options,
    )


def annotation(name: str, sql: str, color: str = "red") -> dict[str, Any]:
    """A dashboard annotation from ClickHouse, drawn on every time series panel: the query
    returns `time`, `timeEnd` (a region), `text` and `tags` (comma-separated)."""
    target = ClickHouseTarget.table(sql).to_json_data()
    return {
        "name": name,
        "enable": True,
        "hide": False,
        "iconColor": color,
        "datasource": target["datasource"],
        "target": target,
    }


def ts(title: str, sql: str, unit: str = "", w: int = 12, description: str = "") -> g.Panel:
    return _panel(g.TimeSeries, title, description, [ClickHouseTarget.timeseries(sql)], 8, w,
                  unit=unit)  # fmt: skip


def table(title: str, sql: str, w: int = 24, description: str = "", h: int = 8) -> g.Panel:
    return _panel(g.Table, title, description, [ClickHouseTarget.table(sql)], h, w,
                  filterable=True)  # fmt: skip


def stat(title: str, sql: str, unit: str = "none", w: int = 6, description: str = "") -> g.Panel:
    return _panel(g.Stat, title, description, [ClickHouseTarget.table(sql)], 4, w, format=unit,
                  reduceCalc="lastNotNull", graphMode="none")  # fmt: skip


def prom(
    title: str, exprs: list[tuple[str, str]], unit: str = "", w: int = 12, description: str = ""
) -> g.Panel:
    """Time series of PromQL expressions (expr, legend) against the Prometheus datasource."""
    targets = [
        g.Target(expr=e, legendFormat=legend, refId=chr(ord("A") + i), datasource=PROMETHEUS)
        for i, (e, legend) in enumerate(exprs)
    ]
    return _panel(g.TimeSeries, title, description, targets, 8, w, PROMETHEUS, unit=unit)


def layout(panels: list[Any]) -> list[Any]:
    """Place panels left to right, wrapping at 24 columns; a row starts at the tallest panel's
    bottom."""
    import attr

    out, x, y, row_h = [], 0, 0, 0
    for p in panels:
        gp = p.gridPos
        if x + gp.w > 24:
            x, y, row_h = 0, y + row_h, 0
        out.append(attr.evolve(p, gridPos=g.GridPos(h=gp.h, w=gp.w, x=x, y=y)))
        x += gp.w
        row_h = max(row_h, gp.h)
    return out
