"""Supervision: a pipeline run that dies is restarted with backoff and counted, /healthz answers
503 while it waits and 200 once it runs again; a graceful shutdown is bounded by its grace."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request

from telemetry.contracts import Batch, ComponentStats, ExportResult
from telemetry.pipeline import Pipeline
from telemetry.records import COMPONENT_STAT
from telemetry.sinks.memory import MemorySink
from telemetry.sinks.prometheus import PrometheusSink


class OneRow:
    name = "one"

    def __init__(self) -> None:
        self.stats = ComponentStats("source:one")

    def collect(self) -> list[Batch]:
        row = {"ts": 0, "host": "h", "component": "x", "received_total": 1, "sent_total": 1,
               "dropped_total": 0, "failed_total": 0, "last_duration_seconds": 0.0, "success": 1}  # fmt: skip
        return [Batch.from_rows(COMPONENT_STAT, [row])]


class FailsTwice:
    """A sink whose export raises (as a full disk would) the first two times."""

    name = "fails"

    def __init__(self) -> None:
        self.stats = ComponentStats("sink:fails")
        self.calls = 0

    def export(self, batch: Batch) -> ExportResult:
        self.calls += 1
        if self.calls <= 2:
            raise OSError(28, "No space left on device")
        return ExportResult(True, batch.num_rows)

    def flush(self, force: bool = False) -> None:
        pass

    def close(self) -> None:
        pass


def _healthz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_dead_run_restarts_with_backoff_counted_and_healthz_says_so() -> None:
    src, sink = OneRow(), FailsTwice()
    p = Pipeline([src], [sink])
    prom = PrometheusSink(components=p.components, health=p.health)
    _, port = prom.serve("127.0.0.1", 0)
    t = threading.Thread(
        target=p.run_supervised, args=(0.05,), kwargs={"backoff_initial": 0.6}, daemon=True
    )
    try:
        t.start()
        deadline = time.monotonic() + 5
        while p.restarts < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        code, body = _healthz(port)  # in the first backoff (0.6 s)
        assert code == 503 and "No space left on device" in body
        deadline = time.monotonic() + 10
        while sink.calls < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert p.restarts == 2 and src.stats.extra["restarts"] == 2.0
        assert _healthz(port) == (200, "ok\n")
        assert 'railscope_component_restarts{component="source:one"} 2.0' in prom.render()
    finally:
        p.stop()
        t.join(5)
        prom.close()
    assert not t.is_alive()


def test_shutdown_is_bounded_by_its_grace() -> None:
    class Hangs(MemorySink):
        def close(self) -> None:
            time.sleep(30)  # a store that never answers

    p = Pipeline([OneRow()], [Hangs()])
    t0 = time.monotonic()
    assert p.shutdown(0.5) is False
    assert time.monotonic() - t0 < 5
    q = Pipeline([OneRow()], [sink := MemorySink()])
    assert q.shutdown(5) is True
    table = sink.table("component_stat")  # the last collect was published, then closed
    assert sink.closed and table is not None and table.num_rows == 1
