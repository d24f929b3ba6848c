"""Grafana dashboards as code (grafanalib): build the dashboard JSON and Grafana provisioning
files, list every query target, and run the ClickHouse ones on a store (macros expanded).
Writes only under the directory it is given; reads the store only with SELECTs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from dashboards.clickhouse import ALL, CLICKHOUSE, PLUGIN, PROMETHEUS, expand

FOLDER = "railscope"


def build_all(database: str | None = None) -> dict[str, dict[str, Any]]:
    """name -> dashboard JSON model (what Grafana stores). Tables are unqualified (the
    datasource's default database) unless `database` is given (to run the queries on a store)."""
    from grafanalib._gen import DashboardEncoder

    from dashboards.definitions import DASHBOARDS
    from dashboards.panels import database as qualified

    out = {}
    with qualified(database):
        for name, make in DASHBOARDS.items():
            out[name] = json.loads(json.dumps(make().to_json_data(), cls=DashboardEncoder))
    return out


GRAFANA_CA_FILE = "/etc/grafana/clickhouse-tls/ca.crt"
"""Where deploy/grafana mounts the CA of the cluster's ClickHouse (Secret `clickhouse-tls`)."""


@dataclass(frozen=True)
class SingleMachine:
    """Where a single-machine Grafana finds railscope: `railscope serve`'s ClickHouse HTTP
    endpoint (--query-listen) and a local Prometheus scraping serve's /metrics."""

    query_listen: str = "127.0.0.1:8123"
    database: str = "railscope"
    prometheus_url: str = "http://127.0.0.1:9090"


def provisioning(
    dashboards_dir: str = "/var/lib/grafana/dashboards/railscope",
    single_machine: SingleMachine | None = None,
) -> dict[str, Any]:
    """Grafana provisioning documents: datasources (fixed uids the dashboards refer to) and the
    dashboard provider that loads the JSON files from `dashboards_dir`. By default the ClickHouse
    and Prometheus addresses come from Grafana's environment (the cluster deployment); with
    `single_machine` they point at `railscope serve` and a local Prometheus. User and password
    always come from the environment (never written into a file)."""
    host, port = "${RAILSCOPE_CLICKHOUSE_HOST}", 8443
    database, prom_url = "${RAILSCOPE_CLICKHOUSE_DATABASE}", "${RAILSCOPE_PROMETHEUS_URL}"
    # the cluster's ClickHouse speaks HTTPS on 8443 with a private CA (deploy/clickhouse):
    # Grafana reads the CA from the mounted Secret `clickhouse-tls` at provisioning time
    tls: dict[str, Any] = {"secure": True, "tlsAuthWithCACert": True}
    tls_secret: dict[str, str] = {"tlsCACert": "$__file{" + GRAFANA_CA_FILE + "}"}
    if single_machine is not None:
        h, _, p = single_machine.query_listen.rpartition(":")
        host, port = (h.strip("[]") or "127.0.0.1"), int(p)
        database, prom_url = single_machine.database, single_machine.prometheus_url
        tls, tls_secret = {}, {}  # `railscope serve` listens on loopback, plain HTTP
    datasources = {
        "apiVersion": 1,
        "datasources": [
            {
                "name": "railscope ClickHouse",
                "uid": CLICKHOUSE["uid"],
                "type": PLUGIN,
                "jsonData": {
                    "host": host,
                    "port": port,
                    "protocol": "http",
                    "defaultDatabase": database,
                    "username": "${RAILSCOPE_CLICKHOUSE_USER}",
                    **tls,
                },
                "secureJsonData": {"password": "${RAILSCOPE_CLICKHOUSE_PASSWORD}", **tls_secret},
                "editable": False,
            },
            {
                "name": "railscope Prometheus",
                "uid": PROMETHEUS["uid"],
                "type": "prometheus",
                "access": "proxy",
                "url": prom_url,
                "editable": False,
            },
        ],
    }
    providers = {
        "apiVersion": 1,
        "providers": [
            {
                "name": "railscope",
                "folder": FOLDER,
                "type": "file",
                "disableDeletion": True,
                "allowUiUpdates": False,
                "updateIntervalSeconds": 60,
                "options": {"path": dashboards_dir, "foldersFromFilesStructure": False},
            }
        ],
    }
    return {"datasources": datasources, "dashboards": providers}


def write(
    out: Path,
    dashboards_dir: str = "/var/lib/grafana/dashboards/railscope",
    single_machine: SingleMachine | None = None,
) -> list[Path]:
    """out/dashboards/*.json, out/provisioning/{datasources,dashboards}/railscope.yaml."""
    import yaml

    written = []
    (out / "dashboards").mkdir(parents=True, exist_ok=True)
    for name, d in build_all().items():
        p = out / "dashboards" / f"railscope-{name}.json"
        # compact: `kubectl apply` keeps the whole ConfigMap in a 256 KiB annotation
        p.write_text(json.dumps(d, sort_keys=True, separators=(",", ":")) + "\n")
        written.append(p)
    for kind, doc in provisioning(dashboards_dir, single_machine).items():
        folder = out / "provisioning" / kind
        folder.mkdir(parents=True, exist_ok=True)
        p = folder / "railscope.yaml"
        p.write_text(
            "# GENERATED by `railscope dashboards build`; ${VARS} are expanded by Grafana "
            "from its environment.\n" + yaml.safe_dump(doc, sort_keys=False)
        )
        written.append(p)
    return written


@dataclass(frozen=True)
class Query:
    dashboard: str
    panel: str
    kind: str  # "clickhouse" | "prometheus" | "variable"
    text: str  # SQL or PromQL

    @property
    def where(self) -> str:
        return f"{self.dashboard} / {self.panel}"


def queries(models: dict[str, dict[str, Any]] | None = None) -> Iterator[Query]:
    """Every panel target, every ClickHouse template variable and annotation of the dashboards."""
    for name, d in (models or build_all()).items():
        for v in d.get("templating", {}).get("list", []):
            if v.get("type") == "query" and v.get("datasource", {}).get("type") == PLUGIN:
                yield Query(name, f"${v['name']}", "variable", v["query"]["rawSql"])
        for a in d.get("annotations", {}).get("list", []):
            if a.get("datasource", {}).get("type") == PLUGIN:
                yield Query(name, f"annotation: {a['name']}", "clickhouse", a["target"]["rawSql"])
        for p in d.get("panels", []):
            for t in p.get("targets", []):
                ds = (t.get("datasource") or p.get("datasource") or {}).get("type")
                if ds == PLUGIN:
                    yield Query(name, p["title"], "clickhouse", t["rawSql"])
                elif ds == "prometheus":
                    yield Query(name, p["title"], "prometheus", t["expr"])


_TABLE = re.compile(
    r"\b(?:FROM|JOIN)\s+(?:`[^`]*`\.)?`?([a-z_][a-z0-9_]*)\b`?(?!\s*\()", re.IGNORECASE
)


def tables_of(sql: str) -> set[str]:
    """Store tables a query reads (subquery aliases and CTE names excluded by the caller)."""
    return {m.group(1) for m in _TABLE.finditer(sql)}


def run(
    store: Any,
    start: datetime,
    end: datetime,
    variables: dict[str, str],
    interval_seconds: int = 60,
    models: dict[str, dict[str, Any]] | None = None,
) -> list[tuple[Query, int | str]]:
    """Run every ClickHouse query (panels and variables) on `store`: (query, rows) or
    (query, error line). The dashboards are built with the store's database (`models`, when
    given, must have been built so)."""
    out: list[tuple[Query, int | str]] = []
    for q in queries(models or build_all(store.database)):
        if q.kind == "prometheus":
            continue
        sql = expand(q.text, start, end, variables, interval_seconds)
        try:
            out.append((q, len(store.client.query(sql).result_rows)))
        except Exception as e:  # a failing query is reported by name, the others still run
            out.append((q, str(e).strip().splitlines()[0][:300] if str(e).strip() else repr(e)))
    return out


__all__ = [
    "ALL",
    "Query",
    "SingleMachine",
    "build_all",
    "provisioning",
    "queries",
    "run",
    "tables_of",
    "write",
]
