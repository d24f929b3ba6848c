"""`railscope serve`: every enabled source, the correlation engine, /metrics and the ClickHouse HTTP
endpoint in one process over one store (the embedded engine admits one process).

Each source runs in its own thread with its own pipeline, ClickHouse sink and spool directory, and
each component has its own engine handle, so a failing or slow source never stalls another or the
engine. `stop()` stops intake, collects what is buffered, flushes every batch to the store (or the
spool) and only then closes the endpoint.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from telemetry.config import Config
from telemetry.contracts import ComponentStats, Source
from telemetry.pipeline import Pipeline
from telemetry.serve.config import ServeConfig, parse_listen
from telemetry.store import Store
from telemetry.store.client import SERVE_URL_FILE

log = logging.getLogger("railscope.serve")


def own_store(store: Store) -> Store:
    """A Store on its own engine handle (embedded) or connection (server): components sharing one
    client would wait on each other's calls."""
    client = None
    if store.dsn.embedded:
        import clickhouse_connect

        client = clickhouse_connect.get_client(dsn=f"chdb://{store.dsn.path}")
    return Store(
        store.dsn,
        database=store.database,
        cluster=store.cluster,
        ttl_overrides=store.ttl_overrides,
        client=client,
    )


class _Locked:
    """One sink shared by every pipeline (the /metrics latest values): one export at a time."""

    def __init__(self, sink: Any) -> None:
        self.sink, self.name, self.stats = sink, sink.name, sink.stats
        self._lock = threading.Lock()

    def export(self, batch: Any) -> Any:
        with self._lock:
            return self.sink.export(batch)

    def flush(self, force: bool = False) -> None:
        pass

    def close(self) -> None:
        pass  # the service closes the shared sink once, last


@dataclass
class _Component:
    name: str
    pipeline: Pipeline
    thread: threading.Thread | None = None
    failed: list[str] = field(default_factory=list)


class Service:
    """Build with the opened store, the config and the sources to run; `start()`, then `stop()`."""

    def __init__(
        self,
        store: Store,
        cfg: Config,
        serve_cfg: ServeConfig,
        sources: dict[str, Source],
        *,
        query_listen: str | None = None,
        correlate: bool = True,
        correlate_lag_seconds: float = 60.0,
        metrics: bool = True,
    ) -> None:
        self.store, self.cfg, self.serve_cfg = store, cfg, serve_cfg
        self.sources = sources
        self.query_listen = query_listen or serve_cfg.query_listen
        self.correlate = correlate
        self.lag = correlate_lag_seconds
        self.metrics = metrics
        self.components: list[_Component] = []
        self.query_server: Any = None
        self.query_url: str | None = None
        self.metrics_bound: tuple[str, int] | None = None
        self._prom: Any = None
        self._corr: Any = None
        self._alerts: Any = None  # AlertmanagerSink when alertmanager.enabled
        self._extra: list[Any] = []  # sinks from extra_sinks (otlp), shared by every source
        self._corr_thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._url_file: Path | None = None

    # -- start -------------------------------------------------------------------------------
    def start(self) -> None:
        from telemetry.sinks.configured import clickhouse_sink, configured_pipeline, extra_sinks

        if self.metrics and self.cfg.prometheus.enabled:
            from telemetry.sinks.prometheus import PrometheusSink

            self._prom = PrometheusSink(components=self.all_components, health=self.health)
        shared = [_Locked(s) for s in extra_sinks(self.cfg)]  # otlp: one for all sources
        self._extra = [s.sink for s in shared]
        for name, source in self.sources.items():
            sinks: list[Any] = [self._sink(clickhouse_sink, name), *shared]
            if self._prom is not None:
                sinks.append(_Locked(self._prom))
            pipe, _ = configured_pipeline(self.cfg, [source], sinks)
            self.components.append(_Component(name, pipe))
        if self.correlate:
            self._start_correlate()
        if self.store.dsn.embedded:
            self._start_query_endpoint()
        else:
            log.info("query endpoint: off (the store is a ClickHouse server: query it directly)")
        if self._prom is not None:
            mhost, _, mport = self.cfg.prometheus.listen.rpartition(":")
            self.metrics_bound = self._prom.serve(
                mhost, int(mport), **self.cfg.prometheus.server_options()
            )
            log.info("serving /metrics on %s:%s", *self.metrics_bound)
        for c in self.components:
            c.thread = threading.Thread(
                target=self._run_source, args=(c,), name=f"railscope-{c.name}", daemon=True
            )
            c.thread.start()
        log.info(
            "serve: %d source(s) [%s], correlate %s",
            len(self.components),
            ", ".join(c.name for c in self.components) or "none",
            "on" if self.correlate else "off",
        )

    def _sink(self, make: Callable[[Config, Store], Any], name: str) -> Any:
        # one spool directory per source: a sink replays only its own batches
        spool = os.path.join(self.cfg.sink.spool_dir, name)
        cfg = self.cfg.model_copy(
            update={"sink": self.cfg.sink.model_copy(update={"spool_dir": spool})}
        )
        sink = make(cfg, own_store(self.store))
        sink.stats.name = f"sink:clickhouse:{name}"
        return sink

    def _start_query_endpoint(self) -> None:
        from telemetry.serve.engine import Engine
        from telemetry.serve.http import QueryServer

        host, port = parse_listen(self.query_listen)
        assert self.store.dsn.path is not None
        self.query_server = QueryServer(
            Engine(self.store.dsn.path), self.serve_cfg, host=host, port=port
        )
        bound = self.query_server.start()
        shown = "127.0.0.1" if bound[0] in ("0.0.0.0", "::") else bound[0]
        self.query_url = f"http://{shown}:{bound[1]}"
        self._url_file = Path(self.store.dsn.path) / SERVE_URL_FILE
        self._url_file.write_text(self.query_url + "\n")
        log.info("ClickHouse HTTP endpoint on %s:%s (query with --dsn %s)", *bound, self.query_url)

    def _start_correlate(self) -> None:
        from telemetry.correlate import Correlator
        from telemetry.correlate.findings import FindingsCollector

        self._corr = Correlator(
            own_store(self.store),
            cluster=self.cfg.cluster,
            thresholds=self.cfg.correlate.thresholds,
        )
        from telemetry.correlate import alertmanager

        self._alerts = alertmanager.build(self.cfg)
        if self._prom is not None:
            self._prom.registry.register(
                FindingsCollector(self._corr.store, self.cfg.cluster, self._corr.hysteresis)
            )
        self._corr_thread = threading.Thread(
            target=self._follow, name="railscope-correlate", daemon=True
        )
        self._corr_thread.start()

    # -- the threads -------------------------------------------------------------------------
    def _run_source(self, c: _Component) -> None:
        try:
            source = c.pipeline.sources[0]
            # a run that dies is restarted with backoff and counted (the `restarts` gauge)
            c.pipeline.run_supervised(
                getattr(source, "interval_seconds", None) or self.cfg.interval_seconds
            )
        except BaseException as e:  # not restartable: this source stops alone, /healthz says so
            c.failed.append(f"{type(e).__name__}: {e}")
            log.error("source %s stopped: %s", c.name, e)

    def health(self) -> list[str]:
        """What /healthz reports: a component thread that died, a pipeline waiting to restart,
        a source whose own thread died. Empty when healthy (and while stopping)."""
        if self._stop.is_set():
            return []
        out: list[str] = []
        for c in self.components:
            if c.thread is not None and not c.thread.is_alive():
                out.append(f"source {c.name}: thread died: {'; '.join(c.failed) or 'unknown'}")
            out += [f"source {c.name}: {p}" for p in c.pipeline.health()]
        if self._corr_thread is not None and not self._corr_thread.is_alive():
            out.append("correlate: thread died")
        return out

    def _follow(self) -> None:
        """`correlate --follow` in this thread: every tick once the clock passes it plus the lag;
        a failing tick is logged by the engine and the loop goes on."""
        from telemetry.correlate.engine import follow

        while not self._stop.is_set():
            try:
                follow(
                    self._corr.store,
                    None,
                    self._stop,
                    corr=self._corr,
                    lag_seconds=self.lag,
                    on_cycle=self._alerts.on_cycle if self._alerts else None,
                )
            except Exception as e:  # e.g. the store went away: sources and the endpoint go on
                log.error("correlate failed (retrying in 5 s): %s", e)
                self._stop.wait(5.0)

    def all_components(self) -> list[ComponentStats]:
        out: list[ComponentStats] = []
        for c in self.components:
            out += c.pipeline.components()
        if self._corr is not None:
            out += [self._corr.attribution_stats, *self._corr.stats.values()]
            out.append(self._corr.incidents.stats)
        if self._alerts is not None:
            out.append(self._alerts.stats)
        if self.query_server is not None:
            out.append(self.query_server.stats)
        return out

    # -- stop --------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop intake, store what was collected, then close the endpoint and /metrics; the
        flushing is bounded by `sink.shutdown_grace_seconds` (below the pod's termination grace)."""
        self._stop.set()
        grace = self.cfg.sink.shutdown_grace_seconds
        deadline = time.monotonic() + grace
        if self.query_server is not None:  # no new queries; the running ones are cancelled
            self.query_server.begin_stop()
        for c in self.components:
            c.pipeline.stop()
        for c in self.components:
            if c.thread is not None:
                c.thread.join(max(0.0, deadline - time.monotonic()))
        # every pipeline at once: stop intake, publish what arrived since the last cycle (sflow's
        # buffer), flush every batch to the store or the spool
        closers = [
            threading.Thread(
                target=c.pipeline.shutdown,
                args=(max(0.0, deadline - time.monotonic()),),
                name=f"railscope-stop-{c.name}",
                daemon=True,
            )
            for c in self.components
        ]
        for t in closers:
            t.start()
        for t in closers:
            t.join(max(0.0, deadline - time.monotonic()) + 1)
        if self._corr_thread is not None:
            self._corr_thread.join(max(1.0, deadline - time.monotonic()))
        if self._alerts is not None:
            self._alerts.close(max(1.0, deadline - time.monotonic()))
        if self.query_server is not None:
            self.query_server.stop()
            self.query_server.engine.close()
        if self._url_file is not None:
            self._url_file.unlink(missing_ok=True)
        for sink in self._extra:
            sink.close()
        if self._prom is not None:
            self._prom.close()
        log.info("serve: stopped; every collected batch is in the store or the spool")

    def request_stop(self) -> None:
        """Safe from a signal handler: the caller's wait() returns and it calls stop()."""
        self._stop.set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._stop.wait(timeout)
