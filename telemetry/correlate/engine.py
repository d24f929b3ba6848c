"""The correlation engine: evaluates every detector every `sliding.interval_seconds` over its own
trailing window inside ClickHouse, and tracks what they find (open, update, close after the
hysteresis; one id per finding). Detectors are SQL over the stored facts; they never read live
sources. Batch (`run`) and live (`follow`) evaluate the same ticks the same way.

A detector that fails is logged by name and counted; the others still run.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from telemetry.correlate import findings as fstore
from telemetry.correlate.clock import Clock, SystemClock
from telemetry.correlate.findings import Finding
from telemetry.correlate.incidents import IncidentTracker
from telemetry.correlate.registry import Context, Window, detectors
from telemetry.correlate.thresholds import default_thresholds, merge_thresholds
from telemetry.pipeline import ComponentStats
from telemetry.records import KINDS
from telemetry.store import Store
from telemetry.store.schema import LOCAL_SUFFIX

log = logging.getLogger(__name__)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def ticks(start: datetime, end: datetime, seconds: float) -> Iterator[datetime]:
    """Evaluation times in (start, end]: multiples of the interval since the epoch, so a batch
    run and a live follower evaluate at the same instants."""
    step = timedelta(seconds=seconds)
    t = EPOCH + ((start - EPOCH) // step + 1) * step
    while t <= end:
        yield t
        t += step


def last_tick(t: datetime, seconds: float) -> datetime:
    step = timedelta(seconds=seconds)
    return EPOCH + ((t - EPOCH) // step) * step


@dataclass
class RunResult:
    windows: int = 0  # evaluations (ticks)
    findings: list[Finding] = field(default_factory=list)
    failed: dict[str, str] = field(
        default_factory=dict
    )  # stage/detector -> first line of the error
    cpu_seconds: float = 0.0  # process CPU time the evaluations took (the engine's and chdb's)

    def fail(self, what: str, window: Window, e: BaseException) -> None:
        self.failed[what] = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        log.error("%s failed on window %s: %s", what, window.start.isoformat(), self.failed[what])

    def merge(self, other: RunResult) -> None:
        self.windows += other.windows
        self.findings += other.findings
        self.failed.update(other.failed)
        self.cpu_seconds += other.cpu_seconds


class Correlator:
    def __init__(
        self,
        store: Store,
        *,
        cluster: str = "default",
        thresholds: dict[str, Any] | None = None,
        only: list[str] | None = None,
    ) -> None:
        registry = detectors()
        self.store = store
        self.cluster = cluster
        self.thresholds = merge_thresholds(default_thresholds(), thresholds or {})
        unknown = set(only or []) - set(registry)
        if unknown:
            from telemetry.errors import UserError

            raise UserError(
                f"unknown detector(s) {sorted(unknown)} (known: {', '.join(sorted(registry))})"
            )
        self.detectors = [d for d in registry.values() if not only or d.name in only]
        self.stats = {d.name: ComponentStats(f"detector:{d.name}") for d in self.detectors}
        self.attribution_stats = ComponentStats("correlate:attribution")
        sliding = self.thresholds["sliding"]
        self.interval = float(sliding["interval_seconds"])
        self.hysteresis = timedelta(seconds=float(sliding["hysteresis_seconds"]))
        self.lookbacks = {
            d.name: timedelta(seconds=d.lookback_seconds(self.thresholds)) for d in self.detectors
        }
        self.tracker = fstore.Tracker(store, cluster, self.hysteresis)
        self.incidents = IncidentTracker(store, cluster, self.hysteresis)
        self._attributed_until: datetime | None = None
        self._memo: dict[str, tuple[str, Any]] = {}

    def data_span(self) -> tuple[datetime, datetime] | None:
        """First and last sample time over the kinds detectors read (each by its time column)."""
        spans = []
        for kind in sorted({k for d in self.detectors for k in d.needs}):
            col = f"`{KINDS[kind].time_field}`"
            r = self.store.query_rows(
                f"SELECT min({col}), max({col}), count() FROM {self.store.table(kind)}"
            )
            if r and r[0][2]:
                spans.append((r[0][0], r[0][1]))
        if not spans:
            return None
        return min(s[0] for s in spans).replace(tzinfo=UTC), max(s[1] for s in spans).replace(
            tzinfo=UTC
        )

    def run(
        self, start: datetime, end: datetime, progress: Callable[[int, int], None] | None = None
    ) -> RunResult:
        """Batch: evaluate every tick in (start, end + one interval], as a follower would have
        (the last tick judges the data up to `end`). Findings are returned once each, as last
        written."""
        result = RunResult()
        ts = list(
            ticks(
                start,
                end + timedelta(seconds=self.interval) - timedelta(milliseconds=1),
                self.interval,
            )
        )
        latest: dict[str, Finding] = {}
        for i, t in enumerate(ts):
            r = self.evaluate(t)
            for f in r.findings:
                latest[f.finding_id] = f
            r.findings = []
            result.merge(r)
            if progress:
                progress(i + 1, len(ts))
        result.findings = list(latest.values())
        return result

    def evaluate(self, now: datetime) -> RunResult:
        """One tick: attribute the flows that arrived since the last tick, run every detector
        over its trailing window ending at `now`, and open/update/close findings."""
        cpu = time.process_time()
        result = RunResult(windows=1)
        nonempty = self._nonempty_kinds()
        state = Window(
            now - timedelta(seconds=float(self.thresholds["sliding"]["state_seconds"])), now
        )
        shared = self._prepare(
            Context(self.store, state, self.thresholds, self.cluster, {"tick_cache": {}}),
            nonempty,
            result,
        )
        found: list[Finding] = []
        for d in self.detectors:
            if not set(d.needs) & nonempty:
                continue  # nothing of that kind stored: a quiet outcome
            w = Window(now - self.lookbacks[d.name], now)
            ctx = Context(self.store, w, self.thresholds, self.cluster, dict(shared))
            st = self.stats[d.name]
            t = time.perf_counter()
            try:
                got = d.fn(ctx)
            except Exception as e:
                st.last_success = False
                st.error(type(e).__name__)
                result.fail(d.name, w, e)
                continue
            st.last_duration_seconds = time.perf_counter() - t
            st.last_success = True
            st.sent += len(got)
            for f in got:
                f.window_start, f.window_end = w.start, w.end
            found += got
        result.findings = self.tracker.observe(now, found)
        self.incidents.observe(now, result.findings)  # incidents.py: regroup, write what changed
        result.cpu_seconds = time.process_time() - cpu
        return result

    def _prepare(self, ctx: Context, nonempty: set[str], result: RunResult) -> dict[str, Any]:
        """Facts every detector of the tick shares: the HyperNode ancestry and node SU/IDC as
        of now; and the flows that arrived since the last tick, attributed once to
        pods/jobs/tenants (attributed_flow rows) - never re-done per evaluation."""
        from telemetry.correlate.attribution import Ancestry, ancestry, attribute_window, node_facts

        anc = Ancestry({}, {})
        if "hypernode" in nonempty:
            try:
                anc = ancestry(ctx)
            except Exception as e:
                result.fail("ancestry", ctx.window, e)
        su, idc = node_facts(ctx) if "node" in nonempty else ({}, {})
        shared: dict[str, Any] = {
            "ancestry": anc,
            "tier_names": anc.tier_names,
            "su": su,
            "idc": idc,
            "tick_cache": ctx.extra.get("tick_cache", {}),  # one per tick (Context.cached)
            "memo": self._memo,  # across ticks (Context.remembered)
        }
        now = ctx.window.end
        lo = self._attributed_until
        if lo is None or lo >= now or now - lo > max(self.lookbacks.values(), default=timedelta(0)):
            lo = now - max(self.lookbacks.values(), default=timedelta(0))
        if "flow_sample" in nonempty and lo < now:
            st = self.attribution_stats
            t = time.perf_counter()
            actx = Context(self.store, Window(lo, now), self.thresholds, self.cluster, shared)
            try:
                counts = attribute_window(actx, anc)
            except Exception as e:
                st.error(type(e).__name__)
                result.fail("attribution", actx.window, e)
                return shared
            self._attributed_until = now
            st.last_duration_seconds = time.perf_counter() - t
            st.received += int(counts["flows"])
            st.extra["unowned_src"] = st.extra.get("unowned_src", 0) + int(counts["src_unowned"])
            st.extra["unowned_dst"] = st.extra.get("unowned_dst", 0) + int(counts["dst_unowned"])
        return shared

    def _nonempty_kinds(self) -> set[str]:
        """The record kinds with rows stored (read from the tables' row counts)."""
        rows = self.store.query_rows(
            "SELECT name FROM system.tables WHERE database = {db:String} AND total_rows > 0",
            {"db": self.store.database},
        )
        by_table = {k.table: k.name for k in KINDS.values()}
        names = {r[0].removesuffix(LOCAL_SUFFIX) for r in rows}  # replicas in cluster mode
        return {by_table[n] for n in names if n in by_table}


def follow(
    store: Store,
    cfg: Any | None,
    stop: threading.Event,
    *,
    clock: Clock | None = None,
    corr: Correlator | None = None,
    lag_seconds: float = 0.0,
    on_cycle: Callable[[Correlator, datetime, RunResult], None] | None = None,
) -> Correlator:
    """Live: evaluate every tick once `clock` passes it (plus `lag_seconds` for late data), until
    `stop` is set. Ticks missed while busy are evaluated in order, never skipped. Runs in the
    calling thread (`railscope correlate --follow`, or a thread of `railscope serve`);
    `on_cycle(corr, tick, result)` follows each tick. Returns the Correlator (its stats)."""
    clock = clock or SystemClock()
    if corr is None:
        assert cfg is not None, "follow needs a config or a Correlator"
        corr = Correlator(store, cluster=cfg.cluster, thresholds=cfg.correlate.thresholds)
    lag = timedelta(seconds=lag_seconds)
    step = timedelta(seconds=corr.interval)
    done = last_tick(clock.now() - lag, corr.interval) - step
    while not stop.is_set():
        for t in ticks(done, clock.now() - lag, corr.interval):
            if stop.is_set():
                break
            res = corr.evaluate(t)
            done = t
            if res.findings or res.failed:
                log.info(
                    "evaluated %s: %d finding(s) holding%s",
                    t.isoformat(),
                    len(res.findings),
                    f", failed: {sorted(res.failed)}" if res.failed else "",
                )
            if on_cycle is not None:
                on_cycle(corr, t, res)
        if not clock.wait_until(done + step + lag, stop):
            break
    return corr
