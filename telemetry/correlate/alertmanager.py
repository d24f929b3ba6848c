"""Alertmanager sink: posts incidents to Alertmanager's v2 API (`POST /api/v2/alerts`).

Reads the incidents the engine changed after each tick (`IncidentTracker.changed`) and, on start,
the recent ones from the store. One alert per incident and tenant: stable labels (alertname,
incident, kind, subject, cluster, severity, tenant, team), annotations (summary, remediation,
action (the root finding's: a gpu_xid's immediate action from NVIDIA's Xid catalog),
runbook_url to the root kind's runbook, report_url), `endsAt` once the incident is resolved. An alert that could not be delivered stays
pending and is re-sent with backoff, latest version only: nothing is lost while Alertmanager is
down. Open incidents are re-posted every `resend_seconds` so Alertmanager never times them out.
It never writes to the store.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from telemetry.config import AlertmanagerConfig
from telemetry.contracts import ComponentStats
from telemetry.correlate.remediation import runbook
from telemetry.times import as_utc

log = logging.getLogger(__name__)

ALERTNAME = "RailscopeIncident"
_RANK = {"critical": 0, "warning": 1, "info": 2}


def _iso(t: datetime) -> str:
    return as_utc(t).isoformat().replace("+00:00", "Z")


class AlertmanagerSink:
    """`offer(incidents)` queues the alerts that changed; `flush()` posts what is pending when
    its backoff allows; `on_cycle(corr, tick, result)` does both after each engine tick."""

    name = "alertmanager"

    def __init__(
        self,
        cfg: AlertmanagerConfig,
        cluster: str,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        assert cfg.url, "alertmanager.url is validated up front"
        self.cfg, self.cluster, self.clock = cfg, cluster, clock
        self.url = cfg.url.rstrip("/") + "/api/v2/alerts"
        self.stats = ComponentStats("sink:alertmanager", unit="alerts")
        self.pending: dict[tuple[str, str], dict[str, Any]] = {}  # (incident, tenant) -> alert
        self.firing: dict[tuple[str, str], dict[str, Any]] = {}  # delivered, still open
        self._sent: dict[tuple[str, str], str] = {}  # what was last delivered, as JSON
        self._retry_at = 0.0
        self._backoff = cfg.retry_initial_seconds
        self._resend_at = clock() + cfg.resend_seconds
        self._primed = False

    # -- alerts ---------------------------------------------------------------------------------
    def alerts(self, inc: dict[str, Any]) -> list[dict[str, Any]]:
        """The alerts of one incident (a stored row, incident_store.read / Incident.row shape): one
        per tenant it touches (one with tenant "" when none); [] below `min_severity`."""
        if _RANK.get(inc["severity"], 9) > _RANK[self.cfg.min_severity]:
            return []
        tenants = inc["tenants"]
        if isinstance(tenants, str):
            tenants = json.loads(tenants or "[]")
        fields = {
            "id": inc["incident_id"],
            "kind": inc["root_kind"],
            "subject": inc["root_subject"],
            "cluster": inc["cluster"],
            "runbook": inc.get("runbook") or runbook(inc["root_kind"]),
        }
        annotations = {
            "summary": inc["summary"],
            "runbook_url": self.cfg.runbook_url.format(**fields),
            "findings": str(inc["findings"]),
        }
        if inc.get("remediation"):
            annotations["remediation"] = inc["remediation"]
        if inc.get("action"):
            annotations["action"] = inc["action"]
        if self.cfg.report_url:
            annotations["report_url"] = self.cfg.report_url.format(**fields)
        resolved = inc["state"] != "open" or bool(inc.get("merged_into"))
        out = []
        for tenant in tenants or [""]:
            a: dict[str, Any] = {
                "labels": {
                    "alertname": ALERTNAME,
                    "incident": inc["incident_id"],
                    "kind": inc["root_kind"],
                    "subject": inc["root_subject"],
                    "cluster": inc["cluster"],
                    "severity": inc["severity"],
                    "tenant": tenant,
                    "team": self.cfg.receivers.get(tenant, self.cfg.team),
                },
                "annotations": annotations,
                "startsAt": _iso(inc["first_seen"]),
            }
            if "report_url" in annotations:
                a["generatorURL"] = annotations["report_url"]
            if resolved:
                a["endsAt"] = _iso(inc["last_seen"])
            out.append(a)
        return out

    def offer(self, incidents: Iterable[Any]) -> int:
        """Queue the alerts of these incidents (Incident objects or stored rows) whose content
        differs from what was last delivered; returns how many were queued."""
        n = 0
        for inc in incidents:
            row = inc.row(datetime.now(UTC)) if hasattr(inc, "row") else inc
            if getattr(inc, "action", None):  # the root's action (a gpu_xid: NVIDIA's catalog)
                row = {**row, "action": inc.action}
            alerts = {(a["labels"]["incident"], a["labels"]["tenant"]): a for a in self.alerts(row)}
            # a tenant (or the whole incident, below min_severity now) that no longer applies:
            # resolve what was delivered for it
            for key, a in list(self.firing.items()):
                if key[0] == row["incident_id"] and key not in alerts:
                    alerts[key] = {**a, "endsAt": _iso(datetime.now(UTC))}
            for key, a in alerts.items():
                if json.dumps(a, sort_keys=True) != self._sent.get(key):
                    self.pending[key] = a
                    n += 1
        self.stats.received += n
        return n

    # -- delivery -------------------------------------------------------------------------------
    def flush(self, force: bool = False) -> bool:
        """Post every pending alert in one request, unless backing off (`force` ignores the
        backoff). True when nothing is left pending."""
        now = self.clock()
        if now >= self._resend_at:  # keep open alerts alive in Alertmanager
            for key, a in self.firing.items():
                self.pending.setdefault(key, a)
            self._resend_at = now + self.cfg.resend_seconds
        if not self.pending:
            return True
        if not force and now < self._retry_at:
            return False
        batch = dict(self.pending)
        body = json.dumps(list(batch.values())).encode()
        req = urllib.request.Request(
            self.url, data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        t = time.perf_counter()
        try:
            with urllib.request.urlopen(req, timeout=self.cfg.timeout_seconds) as resp:
                resp.read()
        except urllib.error.HTTPError as e:
            if 400 <= e.code < 500 and e.code != 429:  # Alertmanager rejected the alerts
                detail = e.read().decode(errors="replace")[:200]
                log.error("alertmanager rejected %d alert(s): %s %s", len(batch), e.code, detail)
                self.stats.error("rejected")
                self.stats.dropped += len(batch)
                for key in batch:
                    self.pending.pop(key, None)
                return not self.pending
            return self._failed(batch, f"HTTP {e.code}", now)
        except (OSError, urllib.error.URLError) as e:
            return self._failed(batch, type(e).__name__ + f": {e}", now)
        self.stats.last_duration_seconds = time.perf_counter() - t
        self.stats.last_success, self.stats.last_error = True, ""
        self.stats.sent += len(batch)
        for key, a in batch.items():
            if self.pending.get(key) is a:
                del self.pending[key]
            self._sent[key] = json.dumps(a, sort_keys=True)
            if "endsAt" in a:
                self.firing.pop(key, None)
            else:
                self.firing[key] = a
        self._backoff = self.cfg.retry_initial_seconds
        self._retry_at = 0.0
        return not self.pending

    def _failed(self, batch: dict[Any, Any], why: str, now: float) -> bool:
        self.stats.error("unreachable")
        self.stats.last_success, self.stats.last_error = False, why[:200]
        self._retry_at = now + self._backoff
        log.warning(
            "alertmanager %s: %s; %d alert(s) pending, retry in %.1fs",
            self.url,
            why,
            len(self.pending),
            self._backoff,
        )
        self._backoff = min(self._backoff * 2, self.cfg.retry_max_seconds)
        return False

    # -- the engine's loop ----------------------------------------------------------------------
    def prime(self, store: Any, recent: timedelta = timedelta(hours=1)) -> None:
        """On start: queue the incidents seen within `recent` (open and resolved), so what changed
        while this process was down is delivered (Alertmanager ignores repeats)."""
        from telemetry.correlate import incident_store

        rows = incident_store.read(
            store, cluster=self.cluster, since=datetime.now(UTC) - recent, limit=10_000
        )
        self.offer(rows)
        self._primed = True

    def on_cycle(self, corr: Any, tick: datetime, result: Any) -> None:
        """After each engine tick: queue what the incident tracker changed, post what is due."""
        if not self._primed:
            try:
                self.prime(corr.store)
            except Exception as e:  # no incidents table yet, store away: the ticks still post
                log.warning("alertmanager: could not read recent incidents: %s", e)
                self._primed = True
        self.offer(corr.incidents.changed)
        self.flush()

    def close(self, grace_seconds: float = 5.0) -> None:
        """One last delivery attempt, bounded; what is still pending is logged."""
        deadline = self.clock() + grace_seconds
        while self.pending and self.clock() < deadline:
            if self.flush(force=True):
                break
            time.sleep(min(0.5, max(0.0, deadline - self.clock())))
        if self.pending:
            log.error("alertmanager: %d alert(s) not delivered at shutdown", len(self.pending))


def build(cfg: Any) -> AlertmanagerSink | None:
    """The sink for a loaded Config, or None when `alertmanager.enabled` is false."""
    am = cfg.alertmanager
    return AlertmanagerSink(am, cfg.cluster) if am.enabled else None
