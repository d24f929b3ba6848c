"""Grafana ClickHouse datasource (grafana-clickhouse-datasource, v4) targets, template variables
and the plugin's macros, expanded the way the plugin does so every dashboard query can be run on
a store outside Grafana. Builds JSON only; never talks to Grafana or ClickHouse itself.

grafanalib's SqlTarget writes `format` as a string; this plugin wants the integer enum
(0 time series, 1 table) plus `queryType` and `editorType`, so targets are built here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

PLUGIN = "grafana-clickhouse-datasource"
CLICKHOUSE = {"type": PLUGIN, "uid": "railscope-clickhouse"}
PROMETHEUS = {"type": "prometheus", "uid": "railscope-prometheus"}

FORMAT_TIMESERIES = 0  # the plugin's Format enum
FORMAT_TABLE = 1
ALL = "__all"  # value of a variable's "All" option: queries test `'${v}' = '__all' OR ...`


@dataclass(frozen=True)
class ClickHouseTarget:
    """One query of the ClickHouse plugin in raw SQL mode."""

    rawSql: str
    refId: str = "A"
    format: int = FORMAT_TABLE
    queryType: str = "table"  # table | timeseries | logs | traces

    def __post_init__(self) -> None:
        if self.format not in (FORMAT_TIMESERIES, FORMAT_TABLE):
            raise ValueError(f"format must be 0 (time series) or 1 (table), not {self.format!r}")
        if self.queryType not in ("table", "timeseries"):
            raise ValueError(f"queryType {self.queryType!r}: use table or timeseries")

    @classmethod
    def timeseries(cls, sql: str, refId: str = "A") -> ClickHouseTarget:
        return cls(sql.strip(), refId, FORMAT_TIMESERIES, "timeseries")

    @classmethod
    def table(cls, sql: str, refId: str = "A") -> ClickHouseTarget:
        return cls(sql.strip(), refId, FORMAT_TABLE, "table")

    def to_json_data(self) -> dict[str, Any]:
        return {
            "datasource": CLICKHOUSE,
            "editorType": "sql",
            "format": self.format,
            "queryType": self.queryType,
            "rawSql": self.rawSql,
            "refId": self.refId,
        }


def variable(
    name: str,
    sql: str,
    label: str | None = None,
    include_all: bool = True,
    refresh: int = 2,
) -> dict[str, Any]:
    """A query template variable on the ClickHouse datasource. `refresh` 1 = on load, 2 = on time
    range change. With `include_all` the All option's value is ALL (see module doc)."""
    sql = sql.strip()
    v: dict[str, Any] = {
        "name": name,
        "label": label or name.capitalize(),
        "type": "query",
        "datasource": CLICKHOUSE,
        "definition": sql,
        "query": {"rawSql": sql, "editorType": "sql", "format": FORMAT_TABLE, "refId": name},
        "refresh": refresh,
        "sort": 1,
        "multi": False,
        "includeAll": include_all,
        "hide": 0,
        "options": [],
        "current": {},
    }
    if include_all:
        v["allValue"] = ALL
        v["current"] = {"text": "All", "value": ALL}
    return v


# --- macros --------------------------------------------------------------------------------------
_FUNC = re.compile(
    r"\$__(timeFilter_ms|timeFilter|timeInterval_ms|timeInterval)\(\s*([^()]+?)\s*\)"
)
_VAR = re.compile(r"\$\{(\w+)(?::(\w+))?\}|\$(\w+)")
_QUOTED_VAR = re.compile(r"'\$(?:\{\w+(?::\w+)?\}|\w+)'")


def expand(
    sql: str,
    start: datetime,
    end: datetime,
    variables: dict[str, str] | None = None,
    interval_seconds: int = 60,
) -> str:
    """The SQL the plugin sends for `sql` over [start, end] with these variable values: its time
    macros, then Grafana's ${var} / $var interpolation. An unknown macro or variable is an error
    (Grafana would leave it in and ClickHouse fail on it)."""
    f, t = int(start.timestamp()), int(end.timestamp())
    fms, tms = int(start.timestamp() * 1000), int(end.timestamp() * 1000)

    def func(m: re.Match[str]) -> str:
        name, col = m.group(1), m.group(2)
        if name == "timeFilter":
            return f"({col} >= toDateTime({f}) AND {col} <= toDateTime({t}))"
        if name == "timeFilter_ms":
            return (
                f"({col} >= fromUnixTimestamp64Milli({fms}) AND "
                f"{col} <= fromUnixTimestamp64Milli({tms}))"
            )
        if name == "timeInterval":
            return f"toStartOfInterval(toDateTime({col}), INTERVAL {interval_seconds} second)"
        return (
            f"fromUnixTimestamp64Milli(intDiv(toUnixTimestamp64Milli({col}), "
            f"{interval_seconds * 1000}) * {interval_seconds * 1000})"
        )

    out = _FUNC.sub(func, sql)
    simple = {
        "$__fromTime_ms": f"fromUnixTimestamp64Milli({fms})",
        "$__toTime_ms": f"fromUnixTimestamp64Milli({tms})",
        "$__fromTime": f"toDateTime({f})",
        "$__toTime": f"toDateTime({t})",
        "$__interval_s": str(interval_seconds),
    }
    for k, v in simple.items():  # longest first: _ms before the plain name
        out = out.replace(k, v)
    if "$__" in out:
        raise ValueError(f"unknown macro in: {out[out.index('$__') :][:40]!r}")
    values = variables or {}
    quoted = _QUOTED_VAR.search(out)
    if quoted:  # raw interpolation inside quotes: a viewer's value could close the string
        raise ValueError(f"quote variables with ${{var:sqlstring}}, not {quoted.group(0)!r}")

    def var(m: re.Match[str]) -> str:
        name, fmt = m.group(1) or m.group(3), m.group(2)
        if name not in values:
            raise ValueError(f"variable ${name} has no value")
        if fmt == "sqlstring":
            return sql_string(values[name])
        if fmt is not None:
            raise ValueError(f"variable ${{{name}:{fmt}}}: only :sqlstring is supported")
        return values[name].replace("\\", "\\\\").replace("'", "\\'")

    return _VAR.sub(var, out)


def sql_string(value: str) -> str:
    """A ClickHouse string literal holding `value`: Grafana's `:sqlstring` quoting, with the
    backslash escaped too (ClickHouse reads `\\'` as an escaped quote, so quote-doubling alone
    would let `\\' OR 1=1 --` out of the string)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def variables_in(sql: str) -> set[str]:
    return {m.group(1) or m.group(3) for m in _VAR.finditer(re.sub(r"\$__\w+", "", sql))}
