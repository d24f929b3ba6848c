"""Incidents posted to a real Prometheus Alertmanager (Debian `prometheus-alertmanager`, v2 API)
on a loopback port: visible through its API and amtool, routed to the tenant's receiver,
resolved when the incident closes, and delivered after Alertmanager was down."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from telemetry.config import AlertmanagerConfig
from telemetry.correlate import findings as fstore
from telemetry.correlate.alertmanager import AlertmanagerSink
from telemetry.correlate.findings import Finding
from telemetry.correlate.incidents import IncidentTracker
from telemetry.store import Store

BIN = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
AMTOOL = shutil.which("amtool")
pytestmark = pytest.mark.skipif(BIN is None, reason="prometheus-alertmanager is not installed")

ROUTES = """\
route:
  receiver: railscope
  group_by: [incident]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
  routes:
    - matchers: ['team="team-a-oncall"']
      receiver: team-a
receivers:
  - name: railscope
  - name: team-a
"""


class Alertmanager:
    def __init__(self, tmp: Path, port: int) -> None:
        self.tmp, self.port = tmp, port
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        (self.tmp / "am.yml").write_text(ROUTES)
        assert BIN is not None
        self.proc = subprocess.Popen(
            [
                BIN,
                f"--config.file={self.tmp / 'am.yml'}",
                f"--storage.path={self.tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--cluster.listen-address=",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(self.tmp / "am.log").open("ab"),
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"alertmanager did not start: {(self.tmp / 'am.log').read_text()}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None

    def alerts(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(self.url + "/api/v2/alerts", timeout=5) as r:
            return list(json.loads(r.read()))


@pytest.fixture
def am(tmp_path: Path, free_port: int) -> Iterator[Alertmanager]:
    a = Alertmanager(tmp_path, free_port)
    a.start()
    yield a
    a.stop()


def _cfg(url: str, **kw: Any) -> AlertmanagerConfig:
    return AlertmanagerConfig(
        enabled=True,
        url=url,
        retry_initial_seconds=0.2,
        receivers={"team-a": "team-a-oncall"},
        report_url="http://grafana.example/d/railscope-overview?var-incident={id}",
        **kw,
    )


def _incident(
    t0: datetime, state: str = "open", tenants: tuple[str, ...] = ("team-a",)
) -> dict[str, Any]:
    """The incident row opened at `t0`: a test passes one t0 to every call, so that "the same
    incident again" is the same row even when a second boundary passed between the calls."""
    return {
        "incident_id": "4f9bc0a380e09acde1ef",
        "cluster": "default",
        "state": state,
        "severity": "critical",
        "root_kind": "pfc_storm",
        "root_subject": "gpu-idc-a-s001-08/mlx5_6",
        "summary": "PFC storm from gpu-idc-a-s001-08/mlx5_6 (with 1 ecn_hotspot)",
        "remediation": "Drain NIC mlx5_6 on gpu-idc-a-s001-08: ...",
        "runbook": "docs/runbooks.md#pfc_storm",
        "findings": 2,
        "tenants": json.dumps(list(tenants)),
        "first_seen": t0,
        "last_seen": t0 + timedelta(minutes=2),
        "merged_into": "",
    }


def _opened() -> datetime:
    return datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)


def _wait(cond: Any, seconds: float = 10.0) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        got = cond()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def test_posted_visible_routed_by_tenant_and_resolved(am: Alertmanager) -> None:
    sink = AlertmanagerSink(_cfg(am.url), "default")
    t0 = _opened()
    assert sink.offer([_incident(t0, tenants=("team-a", "team-b"))]) == 2
    assert sink.flush() is True
    got = _wait(lambda: [a for a in am.alerts() if a["labels"].get("incident")])
    assert len(got) == 2
    by_tenant = {a["labels"]["tenant"]: a for a in got}
    a = by_tenant["team-a"]
    assert a["labels"] == {
        "alertname": "RailscopeIncident",
        "incident": "4f9bc0a380e09acde1ef",
        "kind": "pfc_storm",
        "subject": "gpu-idc-a-s001-08/mlx5_6",
        "cluster": "default",
        "severity": "critical",
        "tenant": "team-a",
        "team": "team-a-oncall",
    }
    assert a["annotations"]["runbook_url"] == "docs/runbooks.md#pfc_storm"
    assert a["annotations"]["remediation"] == "Drain NIC mlx5_6 on gpu-idc-a-s001-08: ..."
    assert a["annotations"]["report_url"].endswith("var-incident=4f9bc0a380e09acde1ef")
    assert a["status"]["state"] == "active"
    # each tenant's alert goes to its own receiver
    assert [r["name"] for r in a["receivers"]] == ["team-a"]
    assert [r["name"] for r in by_tenant["team-b"]["receivers"]] == ["railscope"]
    if AMTOOL:  # Alertmanager's own client sees the same
        out = subprocess.run(
            [
                AMTOOL,
                f"--alertmanager.url={am.url}",
                "alert",
                "query",
                "-o",
                "json",
                "tenant=team-a",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert out.returncode == 0, out.stderr
        assert [x["labels"]["incident"] for x in json.loads(out.stdout)] == ["4f9bc0a380e09acde1ef"]
    # the same incident again: nothing new to send
    assert sink.offer([_incident(t0, tenants=("team-a", "team-b"))]) == 0
    # closed: both alerts resolve
    assert sink.offer([_incident(t0, "resolved", tenants=("team-a", "team-b"))]) == 2
    assert sink.flush() is True
    assert _wait(lambda: not am.alerts())
    assert sink.firing == {}


def test_alertmanager_down_then_up_nothing_lost(tmp_path: Path, free_port: int) -> None:
    down = Alertmanager(tmp_path, free_port)
    sink = AlertmanagerSink(_cfg(down.url, resend_seconds=1.0), "default")
    t0 = _opened()
    sink.offer([_incident(t0)])
    assert sink.flush() is False  # connection refused: kept
    assert len(sink.pending) == 1 and sink.stats.errors == {"unreachable": 1}
    assert sink.flush() is False  # inside the backoff: not even tried
    assert sink.stats.errors == {"unreachable": 1}
    down.start()
    try:
        assert _wait(lambda: sink.flush(), 10)  # the backoff passes, then delivered
        assert sink.pending == {}
        got = _wait(lambda: am_alerts(down))
        assert [a["labels"]["incident"] for a in got] == ["4f9bc0a380e09acde1ef"]
        # down again (a restart forgets active alerts) while a second incident opens
        down.stop()
        second = {**_incident(t0), "incident_id": "second", "root_subject": "leaf1:Ethernet8"}
        sink.offer([second])
        assert sink.flush(force=True) is False
        down.start()
        # both arrive: the pending one, and the open one re-sent every resend_seconds (the
        # engine calls flush every tick)

        def ticked() -> list[dict[str, Any]]:
            sink.flush()
            got = am_alerts(down)
            return got if len(got) == 2 else []

        both = _wait(ticked, 15)
        assert sorted(a["labels"]["incident"] for a in both) == ["4f9bc0a380e09acde1ef", "second"]
        assert sink.pending == {}
    finally:
        down.stop()


def am_alerts(a: Alertmanager) -> list[dict[str, Any]]:
    return [x for x in a.alerts() if x["labels"].get("incident")]


def test_engine_ticks_post_what_the_tracker_changed(am: Alertmanager, store: Store) -> None:
    """on_cycle (what `correlate --follow` and `serve` call after each tick) with a real
    tracker: the storm posts, then resolves after the hysteresis."""
    hyst, step = timedelta(seconds=60), timedelta(seconds=10)
    ft = fstore.Tracker(store, "default", hyst)
    corr = SimpleNamespace(store=store, incidents=IncidentTracker(store, "default", hyst))
    sink = AlertmanagerSink(_cfg(am.url), "default")
    t = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=10)
    evidence = {"origin_pauses_per_second": 61234, "leaf_port": "leaf-1:Ethernet64"}
    storm = Finding("pfc_storm", "fabric", "critical", "nic", "n8/mlx5_6", "PFC storm", evidence)
    storm.window_start, storm.window_end = t - step, t
    corr.incidents.observe(t, ft.observe(t, [storm]))
    sink.on_cycle(corr, t, None)
    got = _wait(lambda: am_alerts(am))
    assert [(a["labels"]["kind"], a["labels"]["team"]) for a in got] == [("pfc_storm", "railscope")]
    # what to do, filled with the finding's own values, and the kind's runbook, as annotations
    ann = got[0]["annotations"]
    assert ann["remediation"] == (
        "Drain NIC mlx5_6 on n8: it pauses leaf-1:Ethernet64 at 61234 frames/s. Cordon n8, "
        "restart the pod holding the NIC, and check that the PFC watchdog is on for "
        "leaf-1:Ethernet64."
    )
    assert ann["runbook_url"] == "docs/runbooks.md#pfc_storm"
    for _ in range(8):
        t += step
        corr.incidents.observe(t, ft.observe(t, []))
        sink.on_cycle(corr, t, None)
    assert _wait(lambda: not am_alerts(am))
    assert sink.stats.sent == 2 and sink.pending == {}


def test_correlate_follow_posts_recent_incidents(
    am: Alertmanager, store: Store, query_endpoint: str, tmp_path: Path
) -> None:
    """`railscope correlate --follow` with `alertmanager.enabled`: what the store holds from
    before it started is delivered on its first tick."""
    hyst, step = timedelta(seconds=60), timedelta(seconds=10)
    ft = fstore.Tracker(store, "default", hyst)
    it = IncidentTracker(store, "default", hyst)
    t = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=30)
    lost = Finding("gpu_lost", "node", "critical", "gpu", "n4/gpu0", "GPU 0 on n4 is lost", {})
    lost.window_start, lost.window_end = t - step, t
    (inc,) = it.observe(t, ft.observe(t, [lost]))
    cfg = tmp_path / "railscope.yaml"
    cfg.write_text(
        f"alertmanager:\n  enabled: true\n  url: {am.url}\n  receivers: {{team-a: team-a-oncall}}\n"
    )
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "telemetry.cli",
            "--config",
            str(cfg),
            "correlate",
            "--follow",
            "--cycles",
            "1",
            "--lag",
            "0",
            "--listen",
            "127.0.0.1:0",
            "--dsn",
            f"{query_endpoint}/{store.database}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    got = _wait(lambda: am_alerts(am))
    assert [(a["labels"]["incident"], a["labels"]["kind"]) for a in got] == [
        (inc.incident_id, "gpu_lost")
    ]
    # read back from the store (the incident's stored remediation), not recomputed
    assert got[0]["annotations"]["remediation"].startswith(
        "GPU 0 on n4 is lost: NVIDIA's Xid catalog says RESTART_BM"
    )
    assert got[0]["annotations"]["runbook_url"] == "docs/runbooks.md#gpu_lost"
