"""Findings: what the engine concluded, stored in the `findings` table.

A finding that persists across windows keeps its id and first_seen; only last_seen (and the
evidence) move. Re-running a window writes the same ids again, and ReplacingMergeTree keeps one
row per id: nothing is duplicated.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from telemetry.records import FINDING
from telemetry.store import Store

SEVERITIES = ("critical", "warning", "info")


@dataclass
class Finding:
    kind: str
    category: str
    severity: str
    subject_type: str
    subject: str
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    window_start: datetime | None = None
    window_end: datetime | None = None
    # set by upsert:
    finding_id: str = ""
    first_seen: datetime | None = None
    last_seen: datetime | None = None

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"finding {self.kind}: severity {self.severity!r} not in {SEVERITIES}")


def _id(cluster: str, kind: str, subject: str, first_seen: datetime) -> str:
    key = f"{cluster}\x1f{kind}\x1f{subject}\x1f{int(first_seen.timestamp() * 1000)}"
    return hashlib.sha1(key.encode()).hexdigest()[:20]


def _utc(dt: datetime) -> datetime:
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def upsert(
    store: Store, findings: Sequence[Finding], *, cluster: str, merge_gap: timedelta
) -> list[Finding]:
    """Store findings of one window, continuing those seen within `merge_gap` before it."""
    if not findings:
        return []
    keys = sorted({(f.kind, f.subject) for f in findings})
    earliest = min(_utc(f.window_start) for f in findings if f.window_start) - merge_gap
    latest = max(_utc(f.window_start) for f in findings if f.window_start)
    rows = store.query_rows(
        f"""SELECT kind, subject, finding_id, first_seen, last_seen FROM {store.table(FINDING, final=True)}
            WHERE cluster = {{c:String}} AND last_seen >= {{t:DateTime64(3, 'UTC')}}
              AND first_seen <= {{t2:DateTime64(3, 'UTC')}} AND (kind, subject) IN {{keys:Array(Tuple(String, String))}}
            ORDER BY first_seen""",
        {"c": cluster, "t": earliest, "t2": latest, "keys": keys},
    )
    existing: dict[tuple[str, str], tuple[str, datetime, datetime]] = {}
    for kind, subject, fid, first, last in rows:
        existing[(kind, subject)] = (fid, _utc(first), _utc(last))  # latest first_seen wins
    now = datetime.now(UTC)
    out_rows = []
    for f in findings:
        assert f.window_start and f.window_end
        ws, we = _utc(f.window_start), _utc(f.window_end)
        prev = existing.get((f.kind, f.subject))
        if prev and prev[2] >= ws - merge_gap and prev[1] <= ws:
            f.finding_id, f.first_seen, f.last_seen = prev[0], prev[1], max(prev[2], we)
        else:
            f.finding_id, f.first_seen, f.last_seen = _id(cluster, f.kind, f.subject, ws), ws, we
        out_rows.append(
            {
                "finding_id": f.finding_id,
                "cluster": cluster,
                "kind": f.kind,
                "category": f.category,
                "severity": f.severity,
                "subject_type": f.subject_type,
                "subject": f.subject,
                "summary": f.summary,
                "evidence": json.dumps(f.evidence, default=str, sort_keys=True),
                "window_start": ws,
                "window_end": we,
                "first_seen": f.first_seen,
                "last_seen": f.last_seen,
                "updated_at": now,
            }
        )
    store.insert(FINDING, FINDING.to_arrow(out_rows))
    return list(findings)


def read(
    store: Store,
    *,
    cluster: str | None = None,
    kinds: Iterable[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    subject_like: str | None = None,
    limit: int = 1000,
) -> list[dict[str, Any]]:
    """Current findings (latest version of each), newest first."""
    where = ["1"]
    params: dict[str, Any] = {"limit": limit}
    if cluster:
        where.append("cluster = {cluster:String}")
        params["cluster"] = cluster
    if kinds:
        where.append("kind IN {kinds:Array(String)}")
        params["kinds"] = list(kinds)
    if since:
        where.append("last_seen >= {since:DateTime64(3, 'UTC')}")
        params["since"] = since
    if until:
        where.append("first_seen < {until:DateTime64(3, 'UTC')}")
        params["until"] = until
    if subject_like:
        where.append("subject LIKE {subj:String}")
        params["subj"] = subject_like
    cols = ", ".join(FINDING.columns)
    rows = store.query_rows(
        f"SELECT {cols} FROM {store.table(FINDING, final=True)} WHERE {' AND '.join(where)} "
        "ORDER BY last_seen DESC, severity, kind, subject LIMIT {limit:UInt32}",
        params,
    )
    out = []
    for r in rows:
        d = dict(zip(FINDING.columns, r, strict=True))
        d["evidence"] = json.loads(d["evidence"]) if d["evidence"] else {}
        out.append(d)
    return out
