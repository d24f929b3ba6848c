"""list incidents: findings grouped by root cause

One line per incident: its root finding (the cause), severity (the highest of its findings, raised
one step when it touches several jobs or tenants), state, span and impact, then what to do about
it (its root kind's remediation, filled with the root finding's values; docs/runbooks.md). Incidents are kept up
to date by `railscope correlate` / `serve` after each evaluation (docs/incidents.md).
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from telemetry.commands.common import (
    add_command,
    add_listing_args,
    add_store_args,
    config_from_args,
    open_store,
    print_listing,
)
from telemetry.sinks.gauges import state_gauges
from telemetry.times import as_utc, parse_time

# JSON key -> the stored incident's column: the keys every line carries (issue 19's contract)
# first, then the rest
_COLUMNS = {"id": "incident_id", "findings": "finding_ids"}
JSON_KEYS = (
    "id",
    "root_kind",
    "root_subject",
    "severity",
    "state",
    "first_seen",
    "last_seen",
    "findings",
    "jobs",
    "tenants",
)
EXTRA_KEYS = (
    "cluster",
    "root_subject_type",
    "root_finding_id",
    "kinds",
    "gpus",
    "gpu_hours",
    "summary",
    "remediation",
    "runbook",
)
_TIMES = ("first_seen", "last_seen")


def register(sub: Any) -> list[str]:
    p = add_command(sub, "incidents", __doc__)
    p.add_argument("--open", action="store_true", help="only incidents still open")
    add_listing_args(p)
    add_store_args(p)
    p.set_defaults(func=run)
    return ["incidents"]


def to_json(r: dict[str, Any]) -> dict[str, Any]:
    """A stored incident (incident_store.read) as one JSON object: JSON_KEYS first."""
    out = {k: r.get(_COLUMNS.get(k, k), "") for k in (*JSON_KEYS, *EXTRA_KEYS)}
    for k in _TIMES:
        out[k] = _iso(out[k])
    return out


def _iso(t: datetime) -> str:
    return as_utc(t).isoformat().replace("+00:00", "Z")


def run(args: argparse.Namespace) -> int:
    from telemetry.correlate import incident_store

    cfg = config_from_args(args)
    store = open_store(cfg, reading=True)
    rows = incident_store.read(
        store,
        open_only=args.open,
        since=parse_time(args.since) if args.since else None,
        limit=args.limit,
    )
    print_listing(rows, args.format, "incidents", to_json, incidents_prometheus, _line)
    return 0


def _line(r: dict[str, Any]) -> str:
    impact = ", ".join(r["jobs"][:3]) + (" ..." if len(r["jobs"]) > 3 else "")
    return (
        f"{r['severity']:<8} {r['state']:<8} {r['incident_id'][:12]}  {r['root_kind']:<22} "
        f"{r['root_subject']:<36} {r['findings']:>3} finding(s) "
        f"{r['first_seen']:%m-%d %H:%M}..{r['last_seen']:%H:%M}Z  "
        f"{impact or '-'}  {r['summary']}"
    ) + (f"\n{'':<18}do: {r['remediation']}" if r.get("remediation") else "")


def incidents_prometheus(rows: list[dict[str, Any]]) -> str:
    """railscope_incident_open{cluster,incident,kind,subject,severity,tenant}=1 per open incident
    (one series per tenant it touches; tenant="" when none) and a count per severity and state."""
    fields = ["cluster", "incident_id", "root_kind", "root_subject", "severity"]
    return state_gauges(
        rows,
        (
            "railscope_incident_open",
            "An open incident (root cause), 1 while open.",
            ["cluster", "incident", "kind", "subject", "severity", "tenant"],
        ),
        lambda r: (
            [[*(r[f] for f in fields), t] for t in r["tenants"] or [""]]
            if r["state"] == "open"
            else []
        ),
        (
            "railscope_incidents",
            "Incidents per severity and state.",
            ["cluster", "severity", "state"],
        ),
        lambda r: (r["cluster"], r["severity"], r["state"]),
    )
