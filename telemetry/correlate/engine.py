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
from telemetry.store import Store, time_range
from telemetry.store.schema import LOCAL_SUFFIX

log = logging.getLogger(__name__)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Kinds a detector reads as state (as of the tick, not only inside its window): inventory with
# valid_from/valid_to, GPU-NIC affinity and LLDP (latest before the tick). A detector needing one
# of them may find something at any tick after their first row; the others need rows in window.
STATE_KINDS = frozenset(
    {k for k, v in KINDS.items() if "valid_to" in v.by_name} | {"gpu_nic_affinity", "lldp_link"}
)


def _ms(t: datetime) -> int:
    return (t - EPOCH) // timedelta(milliseconds=1)


@dataclass
class Activity:
    """Where the data a batch run reads lies: per sample kind the interval buckets (epoch ms //
    interval ms) holding rows, per state kind its first row. Read once per run, so that ticks
    whose detectors would see empty windows are not evaluated (they find nothing)."""

    interval_ms: int
    buckets: dict[str, set[int]]
    first: dict[str, int]  # state kind -> first row (epoch ms)

    def any_in(self, kind: str, lo_ms: int, hi_ms: int) -> bool:
        """Rows of sample kind `kind` may lie in [lo_ms, hi_ms) (bucket granularity)."""
        got = self.buckets.get(kind)
        if not got:
            return False
        b_lo, b_hi = lo_ms // self.interval_ms, (hi_ms - 1) // self.interval_ms
        if b_hi - b_lo < len(got):
            return any(b in got for b in range(b_lo, b_hi + 1))
        return any(b_lo <= b <= b_hi for b in got)

    def active(self, kinds: tuple[str, ...], t_ms: int, lookback_ms: int) -> bool:
        """A detector needing `kinds`, judging [t - lookback, t), may find something at t."""
        for k in kinds:
            if k in STATE_KINDS:
                if k in self.first and self.first[k] < t_ms:
                    return True
            elif self.any_in(k, t_ms - lookback_ms, t_ms):
                return True
        return False


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
    skipped: int = 0  # batch ticks not evaluated: every detector's window was empty
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
        self.skipped += other.skipped
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
        rollups: bool = True,
    ) -> None:
        registry = detectors()
        self.use_rollups = rollups  # read migration 12's per-interval rollups where they answer
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
        written. Where the data lies is read once (`activity`): a tick is evaluated with only
        the detectors whose window holds data they read, and skipped when none does and no flow
        arrived in its interval - those detectors would find nothing, so the findings are the
        same as evaluating every tick, and a range mostly without data costs little."""
        result = RunResult()
        ts = list(
            ticks(
                start,
                end + timedelta(seconds=self.interval) - timedelta(milliseconds=1),
                self.interval,
            )
        )
        act = self.activity(ts[0], ts[-1]) if ts else None
        latest: dict[str, Finding] = {}
        for i, t in enumerate(ts):
            assert act is not None
            t_ms = _ms(t)
            names = {
                d.name
                for d in self.detectors
                if act.active(d.needs, t_ms, self.lookbacks[d.name] // timedelta(milliseconds=1))
            }
            if not names and not act.any_in("flow_sample", t_ms - act.interval_ms, t_ms):
                self.tracker.observe(t, [])  # closes what has not held for the hysteresis
                result.skipped += 1
            else:
                r = self.evaluate(t, only=names)
                for f in r.findings:
                    latest[f.finding_id] = f
                r.findings = []
                result.merge(r)
            if progress:
                progress(i + 1, len(ts))
        result.findings = list(latest.values())
        return result

    def activity(self, first_tick: datetime, last_tick: datetime) -> Activity:
        """Where the data the detectors read lies, for ticks first_tick..last_tick (one query
        per kind)."""
        step_ms = int(self.interval * 1000)
        lo = first_tick - max(self.lookbacks.values(), default=timedelta(0))
        act = Activity(step_ms, {}, {})
        kinds = {k for d in self.detectors for k in d.needs} | {"flow_sample"}
        for kind in sorted(kinds):
            col = f"`{KINDS[kind].time_field}`"
            where = "cluster = {c:String}"
            if kind in STATE_KINDS:
                r = self.store.query_rows(
                    f"SELECT min({col}), count() FROM {self.store.table(kind)} WHERE {where}",
                    {"c": self.cluster},
                )
                if r and r[0][1]:
                    act.first[kind] = _ms(r[0][0].replace(tzinfo=UTC))
                continue
            rows = self.store.query_rows(
                f"""SELECT DISTINCT intDiv(toUnixTimestamp64Milli({col}), {step_ms})
                    FROM {self.store.table(kind)} WHERE {where} AND {time_range(kind)}""",
                {"c": self.cluster, "ws": lo, "we": last_tick},
            )
            act.buckets[kind] = {int(r[0]) for r in rows}
        return act

    def evaluate(self, now: datetime, only: set[str] | None = None) -> RunResult:
        """One tick: attribute the flows that arrived since the last tick, run every detector
        (or those named in `only`) over its trailing window ending at `now`, and open/update/
        close findings."""
        cpu = time.process_time()
        result = RunResult(windows=1)
        nonempty, rollups = self._tables()
        state = Window(
            now - timedelta(seconds=float(self.thresholds["sliding"]["state_seconds"])), now
        )
        rollups = rollups if self.use_rollups else set()
        shared = self._prepare(
            Context(
                self.store,
                state,
                self.thresholds,
                self.cluster,
                {"tick_cache": {}, "rollups": rollups},
            ),
            nonempty,
            result,
        )
        found: list[Finding] = []
        for d in self.detectors:
            if not set(d.needs) & nonempty or (only is not None and d.name not in only):
                continue  # nothing of that kind stored (or in its window): a quiet outcome
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
            "rollups": ctx.extra.get("rollups", set()),  # sql.rollup_table
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
                # the tick's node facts are the attribution's when both read the same window
                same = lo == ctx.window.start
                counts = attribute_window(actx, anc, (su, idc) if same else None)
            except Exception as e:
                st.error(type(e).__name__)
                result.fail("attribution", actx.window, e)
                return shared
            self._attributed_until = now
            st.last_duration_seconds = time.perf_counter() - t
            st.received += int(counts["flows"])
            st.extra["unowned_src"] = st.extra.get("unowned_src", 0) + int(counts["src_unowned"])
            st.extra["unowned_dst"] = st.extra.get("unowned_dst", 0) + int(counts["dst_unowned"])
            if counts["index_built"]:  # the lease index, rebuilt when the inventory changed
                st.extra["index_builds"] = st.extra.get("index_builds", 0) + 1
        return shared

    def _tables(self) -> tuple[set[str], set[str]]:
        """The record kinds with rows stored (read from the tables' row counts), and the
        rollup tables the store has (telemetry/correlate/sql.py ROLLUPS)."""
        from telemetry.correlate.sql import ROLLUPS

        rows = self.store.query_rows(
            "SELECT name, total_rows > 0 FROM system.tables WHERE database = {db:String}",
            {"db": self.store.database},
        )
        by_table = {k.table: k.name for k in KINDS.values()}
        rollups = {t for t, _ in ROLLUPS.values()}
        names = {r[0].removesuffix(LOCAL_SUFFIX) for r in rows if r[1]}  # replicas in cluster mode
        have = {r[0].removesuffix(LOCAL_SUFFIX) for r in rows} & rollups
        return {by_table[n] for n in names if n in by_table}, have


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
