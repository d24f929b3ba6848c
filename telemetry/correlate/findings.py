"""Findings: what the engine concluded, stored in the `findings` table.

A finding that keeps holding across evaluations keeps its id and first_seen; only last_seen (and
the evidence) move; it closes after the hysteresis period without holding (`Tracker`).
Re-running the same evaluations writes the same ids again, and ReplacingMergeTree keeps one row
per id: nothing is duplicated.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from telemetry.correlate.pending import Pending
from telemetry.records import FINDING
from telemetry.sinks.gauges import state_gauges
from telemetry.store import Store
from telemetry.times import as_utc

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


def _row(f: Finding, cluster: str, now: datetime) -> dict[str, Any]:
    assert f.window_start and f.window_end and f.first_seen and f.last_seen
    return {
        "finding_id": f.finding_id,
        "cluster": cluster,
        "kind": f.kind,
        "category": f.category,
        "severity": f.severity,
        "subject_type": f.subject_type,
        "subject": f.subject,
        "summary": f.summary,
        "evidence": json.dumps(f.evidence, default=str, sort_keys=True),
        "window_start": as_utc(f.window_start),
        "window_end": as_utc(f.window_end),
        "first_seen": f.first_seen,
        "last_seen": f.last_seen,
        "updated_at": now,
    }


@dataclass
class _Open:
    finding_id: str
    first_seen: datetime
    last_seen: datetime


class Tracker:
    """Which findings are open, across evaluations. A finding opens at the first evaluation
    whose condition holds (first_seen = that evaluation time), is updated (last_seen, summary,
    evidence) at each evaluation where it holds, and closes once it has not held for
    `hysteresis`; held again later, it is a new finding with a new id. The id is a hash of
    cluster, kind, subject and first_seen, so a re-run of the same ticks writes the same ids and
    ReplacingMergeTree keeps one row per id. Open findings are read back from the store on the
    first evaluation: a restarted follower continues them."""

    def __init__(self, store: Store, cluster: str, hysteresis: timedelta) -> None:
        self.store, self.cluster, self.hysteresis = store, cluster, hysteresis
        self.open: dict[tuple[str, str], _Open] | None = None
        self._pending: Pending | None = None  # a batch run's rows kept back (defer/flush)

    def _load(self, now: datetime) -> dict[tuple[str, str], _Open]:
        rows = self.store.query_rows(
            f"""SELECT kind, subject, finding_id, first_seen, last_seen FROM {self.store.table(FINDING, final=True)}
                WHERE cluster = {{c:String}} AND last_seen >= {{t:DateTime64(3, 'UTC')}}
                  AND first_seen <= {{now:DateTime64(3, 'UTC')}}
                ORDER BY first_seen""",
            {"c": self.cluster, "t": now - self.hysteresis, "now": now},
        )
        return {  # the latest opened wins
            (k, subj): _Open(fid, as_utc(first), as_utc(last)) for k, subj, fid, first, last in rows
        }

    def observe(
        self,
        now: datetime,
        findings: Sequence[Finding],
        *,
        held: Sequence[Finding] = (),
        held_since: datetime | None = None,
    ) -> list[Finding]:
        """Record the findings holding at evaluation time `now` (`findings` and `held`);
        returns them with ids set. `held` held at every tick since `held_since`, though not
        observed then (a batch run skips ticks where nothing changed): those open then stay
        open, never closed and opened again."""
        now = as_utc(now)
        if self.open is None:
            self.open = self._load(now)
        findings = [*findings, *held]
        kept = {(f.kind, f.subject) for f in held} if held_since is not None else set()
        since = as_utc(held_since) - self.hysteresis if held_since is not None else now
        for key in [
            k
            for k, o in self.open.items()
            if o.last_seen < now - self.hysteresis and not (k in kept and o.last_seen >= since)
        ]:
            del self.open[key]  # closed: not held for the hysteresis period
        if not findings:
            return []
        out_rows = []
        for f in findings:
            key = (f.kind, f.subject)
            o = self.open.get(key)
            if o is None or o.first_seen > now:
                o = self.open[key] = _Open(_id(self.cluster, f.kind, f.subject, now), now, now)
            o.last_seen = max(o.last_seen, now)
            f.finding_id, f.first_seen, f.last_seen = o.finding_id, o.first_seen, o.last_seen
            out_rows.append(_row(f, self.cluster, datetime.now(UTC)))
        if self._pending is not None:  # a batch run: the last row of each finding (FINAL)
            self._pending.add(FINDING, out_rows)
        else:
            self.store.insert(FINDING, FINDING.to_arrow(out_rows))
        return list(findings)

    def defer(self) -> None:
        """A batch run: keep the last row of each finding until flush()."""
        self._pending = self._pending or Pending()

    def flush(self, *, stop: bool = False) -> int:
        """Insert what defer() kept; `stop`: observe() inserts its own rows again. Returns the
        rows inserted. An insert that fails raises and keeps them for the next flush (a run that
        stops there has failed, as a failed per-tick insert fails it)."""
        n = self._pending.flush(self.store) if self._pending is not None else 0
        if stop:
            self._pending = None
        return n


def span_where(
    cluster: str | None, since: datetime | None, until: datetime | None
) -> tuple[list[str], dict[str, Any]]:
    """WHERE terms (and their parameters) for rows of `cluster` whose first_seen..last_seen span
    meets [since, until): findings and incidents."""
    where = ["1"]
    params: dict[str, Any] = {}
    if cluster:
        where.append("cluster = {cluster:String}")
        params["cluster"] = cluster
    if since:
        where.append("last_seen >= {since:DateTime64(3, 'UTC')}")
        params["since"] = since
    if until:
        where.append("first_seen < {until:DateTime64(3, 'UTC')}")
        params["until"] = until
    return where, params


def read(
    store: Store,
    *,
    cluster: str | None = None,
    kinds: Iterable[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    subject_like: str | None = None,
    ids: Iterable[str] | None = None,
    limit: int = 1000,
) -> list[dict[str, Any]]:
    """Current findings (latest version of each), newest first."""
    where, params = span_where(cluster, since, until)
    params["limit"] = limit
    if ids is not None:
        where.append("finding_id IN {ids:Array(String)}")
        params["ids"] = list(ids)
    if kinds:
        where.append("kind IN {kinds:Array(String)}")
        params["kinds"] = list(kinds)
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


def findings_prometheus(rows: list[dict[str, Any]]) -> str:
    """railscope_finding_active{kind,severity,subject_type,subject}=1 per current finding, and a
    count per kind/severity: what the alert rules select on."""
    fields = ["cluster", "kind", "category", "severity", "subject_type", "subject"]
    return state_gauges(
        rows,
        ("railscope_finding_active", "A finding, 1 while it is current.", fields),
        lambda r: [[r[f] for f in fields]],
        (
            "railscope_findings",
            "Current findings per kind and severity.",
            ["cluster", "kind", "severity"],
        ),
        lambda r: (r["cluster"], r["kind"], r["severity"]),
    )


class FindingsCollector:
    """Open findings (held within the hysteresis period) as Prometheus metrics, read at scrape
    time."""

    def __init__(self, store: Any, cluster: str, recent: timedelta) -> None:
        self.store, self.cluster, self.recent = store, cluster, recent

    def collect(self):  # type: ignore[no-untyped-def]
        from prometheus_client.parser import text_string_to_metric_families

        rows = read(
            self.store, cluster=self.cluster, since=datetime.now(UTC) - self.recent, limit=100_000
        )
        yield from text_string_to_metric_families(findings_prometheus(rows))
