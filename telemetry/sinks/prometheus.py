"""Prometheus sink: the latest value of every series, served on /metrics (aiohttp) or rendered
as text for `--output prom`. Names: railscope_<subsystem>_<field>; counters end in _total.

Component self-metrics (received/sent/dropped/failed, duration, success) are exported alongside.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import ssl
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from telemetry.contracts import Batch, ComponentStats, InMemorySink
from telemetry.serverthread import ServerThread
from telemetry.sinks.latest import LatestValues

log = logging.getLogger(__name__)


class _Components:
    def __init__(self, sink: PrometheusSink) -> None:
        self.sink = sink

    def collect(self) -> Iterator[Metric]:
        yield from component_metrics(self.sink.components())


def _esc_label(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def latest_text(latest: LatestValues) -> str:
    """The latest values in the Prometheus text format, written directly: the same bytes as
    prometheus_client's generate_latest (labels sorted, Go float formatting, counters named
    *_total) at a fraction of the cost per scrape."""
    out: list[str] = []
    for kind, rows in latest.snapshot():
        names = [f.name for f in kind.labels()]
        order = sorted(range(len(names)), key=lambda i: names[i])
        keys = {
            key: ("{" + ",".join(f'{names[i]}="{_esc_label(key[i])}"' for i in order) + "}")
            if names
            else ""
            for key in rows
        }
        for f in kind.values():
            lines = [
                f"{keys[key]} {floatToGoString(row[f.name])}\n"
                for key, row in rows.items()
                if f.name in row
            ]
            if not lines:
                continue
            metric = f"railscope_{kind.subsystem}_{f.name}"
            counter = f.role == "counter"
            mname = metric if not counter or metric.endswith("_total") else metric + "_total"
            doc = f.doc.replace("\\", r"\\").replace("\n", r"\n")
            out.append(
                f"# HELP {mname} {doc}\n# TYPE {mname} {'counter' if counter else 'gauge'}\n"
            )
            out.extend(mname + line for line in lines)
    return "".join(out)


def component_metrics(components: Iterable[ComponentStats]) -> Iterator[Metric]:
    comps = list(components)
    if not comps:
        return
    received = CounterMetricFamily(
        "railscope_component_received",
        "What a component received, in its unit: datagrams (sflow), objects (inventory), "
        "entries (hdfs), records (the others).",
        labels=["component", "unit"],
    )
    fams = {
        "sent": CounterMetricFamily(
            "railscope_component_sent_records", "Records sent on.", labels=["component"]
        ),
        "dropped": CounterMetricFamily(
            "railscope_component_dropped_records", "Records dropped.", labels=["component"]
        ),
        "failed": CounterMetricFamily(
            "railscope_component_failed",
            "Failed operations, by reason.",
            labels=["component", "reason"],
        ),
    }
    duration = GaugeMetricFamily(
        "railscope_collector_duration_seconds",
        "Duration of the last collect/export (per collector of a source made of collectors).",
        labels=["component"],
    )
    success = GaugeMetricFamily(
        "railscope_collector_success",
        "1 if the last collect/export succeeded (per collector of a source made of collectors).",
        labels=["component"],
    )
    extra: dict[str, GaugeMetricFamily] = {}
    for c in comps:
        snap = c.snapshot()
        received.add_metric([c.name, c.unit], snap["received"])
        for key in ("sent", "dropped"):
            fams[key].add_metric([c.name], snap[key])
        for reason, n in snap["errors"].items():
            fams["failed"].add_metric([c.name, reason], n)
        duration.add_metric([c.name], snap["last_duration_seconds"])
        success.add_metric([c.name], 1.0 if snap["success"] else 0.0)
        for part, (seconds, ok) in sorted(c.collectors.items()):
            # node_exporter's shape: the collector is a label, not part of the metric name
            labels = {"component": c.name, "collector": part}
            duration.samples.append(Sample(duration.name, labels, seconds))
            success.samples.append(Sample(success.name, labels, 1.0 if ok else 0.0))
        for k, v in c.extra.items():
            g = extra.setdefault(
                k,
                GaugeMetricFamily(
                    f"railscope_component_{k}", f"Component gauge {k}.", labels=["component"]
                ),
            )
            g.add_metric([c.name], v)
    yield received
    yield from fams.values()
    yield duration
    yield success
    yield from extra.values()


class PrometheusSink(InMemorySink):
    name = "prometheus"

    def __init__(
        self,
        components: Callable[[], Iterable[ComponentStats]] | None = None,
        health: Callable[[], list[str]] | None = None,
    ) -> None:
        """`health`: what is wrong right now (a dead component thread ...), one line each;
        /healthz answers 503 with those lines while it is not empty."""
        self.stats = ComponentStats("sink:prometheus")
        self.health = health or (lambda: [])
        self.latest = LatestValues()
        self._components = components
        self.registry = CollectorRegistry(auto_describe=False)
        # latest values are rendered directly (latest_text); this registry carries the component
        # self-metrics and whatever else a caller registers (the correlate --follow findings)
        self.registry.register(_Components(self))  # type: ignore[arg-type]
        self._server: _Server | None = None

    def components(self) -> Iterable[ComponentStats]:
        return list(self._components()) if self._components else [self.stats]

    def keep(self, batch: Batch) -> None:
        self.latest.update(batch)

    def render(self) -> str:
        return latest_text(self.latest) + generate_latest(self.registry).decode()

    def serve(
        self,
        host: str = "0.0.0.0",
        port: int = 9580,
        tls: ssl.SSLContext | None = None,
        bearer_token: str | None = None,
    ) -> tuple[str, int]:
        """Serve /metrics from a background thread (HTTPS with `tls`; with `bearer_token`,
        /metrics answers 401 without it). Returns the bound (host, port)."""
        self._server = _Server(self, host, port, tls, bearer_token)
        return self._server.start()

    def close(self) -> None:
        if self._server:
            self._server.stop()
            self._server = None


class _Server:
    def __init__(
        self,
        sink: PrometheusSink,
        host: str,
        port: int,
        tls: ssl.SSLContext | None = None,
        bearer_token: str | None = None,
    ) -> None:
        self.sink, self.host, self.port, self.tls = sink, host, port, tls
        self.authorization = f"Bearer {bearer_token}".encode() if bearer_token else None
        self._thread = ServerThread("railscope-metrics", "/metrics")
        self._runner: Any = None

    def start(self) -> tuple[str, int]:
        return self._thread.start(self._bind, self.host, self.port, wait=10.0)

    async def _bind(self) -> tuple[str, int]:
        from aiohttp import web

        async def metrics(request: web.Request) -> web.Response:
            if self.authorization is not None and not hmac.compare_digest(
                request.headers.get("Authorization", "").encode(), self.authorization
            ):
                return web.Response(
                    status=401,
                    text="bearer token required\n",
                    headers={"WWW-Authenticate": "Bearer"},
                )
            body = await asyncio.get_running_loop().run_in_executor(None, self.sink.render)
            return web.Response(
                text=body,
                content_type="text/plain",
                charset="utf-8",
                headers={"X-Content-Type-Options": "nosniff"},
            )

        async def health(_: web.Request) -> web.Response:
            try:
                problems = self.sink.health()
            except Exception as e:  # a broken check is itself unhealthy
                problems = [f"health check failed: {e}"]
            if problems:
                return web.Response(status=503, text="".join(p + "\n" for p in problems))
            return web.Response(text="ok\n")

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        app.router.add_get("/healthz", health)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.tls)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        return host, port

    def stop(self) -> None:
        async def shutdown() -> None:
            if self._runner:
                await self._runner.cleanup()

        self._thread.stop(shutdown, 5.0)


def render_prometheus(batches: Iterable[Batch], components: Iterable[ComponentStats] = ()) -> str:
    """Prometheus text for a set of batches (for `--output prom`)."""
    comps = list(components)
    sink = PrometheusSink(components=(lambda: comps) if comps else (lambda: []))
    for b in batches:
        sink.export(b)
    return sink.render()
