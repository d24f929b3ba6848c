"""What the railscope dashboards share: template variables (built per call: table names depend on
`build_all`'s database), counter rates, the job's pods and nodes, and the dashboard frame."""

from __future__ import annotations

from typing import Any

from grafanalib import core as g

from dashboards.clickhouse import variable
from dashboards.panels import (
    CLUSTER,
    any_of,
    job_of,
    layout,
    tbl,
)


# --- template variables (built per call: table names depend on build_all's database) -----------
def v_cluster() -> dict[str, Any]:
    return variable(
        "cluster",
        f"SELECT DISTINCT cluster FROM {tbl('node', final=True)} ORDER BY cluster",
        include_all=False,
        refresh=1,
    )


def v_tenant() -> dict[str, Any]:
    return variable(
        "tenant",
        f"SELECT DISTINCT namespace FROM {tbl('pod', final=True)} WHERE {CLUSTER} ORDER BY namespace",
    )


def v_job(include_all: bool = True) -> dict[str, Any]:
    v = variable(
        "job",
        f"SELECT DISTINCT concat(namespace, '/', job) FROM {tbl('job', final=True)} "
        f"WHERE {CLUSTER} AND {any_of('tenant', 'namespace')} ORDER BY 1",
        include_all=include_all,
    )
    return v


def v_node() -> dict[str, Any]:
    return variable(
        "node",
        f"SELECT DISTINCT node FROM {tbl('node', final=True)} WHERE {CLUSTER} ORDER BY node",
    )


def v_switch() -> dict[str, Any]:
    return variable(
        "switch",
        f"SELECT DISTINCT switch FROM {tbl('switch_port_sample')} WHERE {CLUSTER} "
        "AND $__timeFilter(ts) ORDER BY switch",
    )


def counter_rate(kind: str, keys: str, counter: str, series: str, where: str = "1") -> str:
    """Per-second rate of a counter per `series`: increases between consecutive samples of one
    key (a decrease is a reset: the increase counts from zero, never negative), summed per bucket."""
    return f"""
SELECT time, series, sum(inc) / $__interval_s AS value
FROM (
  SELECT $__timeInterval(ts) AS time, {series} AS series,
         toFloat64({counter}) AS cur,
         lagInFrame(cur, 1, cur) OVER (
           PARTITION BY {keys} ORDER BY ts ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS prev,
         if(cur >= prev, cur - prev, cur) AS inc
  FROM {tbl(kind)}
  WHERE {CLUSTER} AND $__timeFilter(ts) AND {where}
)
GROUP BY time, series ORDER BY time, series"""


FINDINGS_IN_RANGE = f"{CLUSTER} AND last_seen >= $__fromTime AND first_seen <= $__toTime"


def job_pods() -> str:
    return f"SELECT namespace, pod FROM {tbl('pod', final=True)} WHERE {CLUSTER} AND {job_of('namespace', 'job')}"


def job_nodes() -> str:
    return f"SELECT node FROM {tbl('pod', final=True)} WHERE {CLUSTER} AND {job_of('namespace', 'job')}"


def build_dashboard(
    uid: str,
    title: str,
    description: str,
    variables: list[dict[str, object]],
    panels: list,
    annotations: list[dict[str, Any]] | None = None,
) -> g.Dashboard:
    """A railscope dashboard: scoped to one cluster ($cluster first), narrowed by `variables`,
    with `annotations` drawn on its time series."""
    return g.Dashboard(
        title=title,
        uid=uid,
        description=description,
        tags=["railscope"],
        timezone="utc",
        refresh="1m",
        schemaVersion=39,
        time=g.Time("now-1h", "now"),
        templating=g.Templating(list=[v_cluster(), *variables]),
        panels=layout(panels),
        annotations=g.Annotations(list=annotations or []),
        links=[
            g.DashboardLink(
                title="railscope",
                tags=["railscope"],
                type="dashboards",
                asDropdown=True,
                includeVars=True,
                keepTime=True,
            )
        ],
    ).auto_panel_ids()
