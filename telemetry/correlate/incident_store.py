"""Incidents as stored (telemetry/correlate/incidents.py writes them): the current version of
each, with its member findings, for the CLI, the HTML report and Alertmanager's first pass."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from telemetry.records import INCIDENT, INCIDENT_FINDING
from telemetry.store import Store


def read(
    store: Store,
    *,
    cluster: str | None = None,
    open_only: bool = False,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 1000,
) -> list[dict[str, Any]]:
    """Current incidents (latest version of each, merged ones left out), newest first, each with
    its member findings' ids (root first) under `finding_ids`."""
    from telemetry.correlate.findings import span_where

    where, params = span_where(cluster, since, until)
    where.append("merged_into = ''")
    params["limit"] = limit
    if open_only:
        where.append("state = 'open'")
    cols = ", ".join(INCIDENT.columns)
    rows = store.query_rows(
        f"SELECT {cols} FROM {store.table(INCIDENT, final=True)} WHERE {' AND '.join(where)} "
        "ORDER BY last_seen DESC, severity, incident_id LIMIT {limit:UInt32}",
        params,
    )
    out = [dict(zip(INCIDENT.columns, r, strict=True)) for r in rows]
    if not out:
        return out
    members: dict[str, list[tuple[bool, Any, str]]] = {}
    for iid, fid, role, first in store.query_rows(
        f"SELECT incident_id, finding_id, role, first_seen FROM {store.table(INCIDENT_FINDING, final=True)} "
        "WHERE member = 1 AND incident_id IN {ids:Array(String)}",
        {"ids": [r["incident_id"] for r in out]},
    ):
        members.setdefault(iid, []).append((role != "root", first, fid))
    for r in out:
        for k in ("kinds", "jobs", "tenants"):
            r[k] = json.loads(r[k]) if r[k] else []
        r["finding_ids"] = [fid for *_, fid in sorted(members.get(r["incident_id"], []))]
    return out


__all__ = ["read"]
