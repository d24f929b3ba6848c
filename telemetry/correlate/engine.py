"""The correlation engine: evaluates every detector every `sliding.interval_seconds` over its own
trailing window inside ClickHouse, and tracks what they find (open, update, close after the
hysteresis; one id per finding). Detectors are SQL over the stored facts; they never read live
sources. Batch (`run`) and live (`follow`) evaluate the same ticks the same way.

A detector that fails is logged by name and counted; the others still run.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from telemetry.contracts import ComponentStats
from telemetry.correlate import findings as fstore
from telemetry.correlate.clock import Clock, SystemClock
from telemetry.correlate.findings import Finding
from telemetry.correlate.incidents import IncidentTracker
from telemetry.correlate.late import LateArrivals
from telemetry.correlate.lease_index import INPUTS
from telemetry.correlate.registry import Context, DetectorSpec, Later, Window, detectors
from telemetry.correlate.thresholds import default_thresholds, merge_thresholds
from telemetry.problems import Problems
from telemetry.records import KINDS
from telemetry.store import Store
from telemetry.store.schema import LOCAL_SUFFIX
from telemetry.times import EPOCH

log = logging.getLogger(__name__)

# Kinds a detector reads as state (as of the tick, not only inside its window): inventory with
# valid_from/valid_to, GPU-NIC affinity and LLDP (latest before the tick). A detector needing one
# of them may find something at any tick after their first row; the others need rows in window.
STATE_KINDS = frozenset(
    {k for k, v in KINDS.items() if "valid_to" in v.by_name} | {"gpu_nic_affinity", "lldp_link"}
)

# What an attribution reads as of its window's end, besides the flows: the lease index's inputs
# (lease_index.INPUTS), the node facts and the HyperNodes. Batch runs attribute the windows of
# many ticks in one statement where none of these changed inside them (_attribute_ahead).
ATTRIBUTION_STATE = ("node", "hypernode", *INPUTS)
# Batch runs evaluate this many ticks at a time (an hour of 10 s ticks): what is read ahead for
# them (attributed flows, set-based detector answers) stays bounded over a day.
CHUNK_TICKS = 360


def _ms(t: datetime) -> int:
    return (t - EPOCH) // timedelta(milliseconds=1)


@dataclass
class Activity:
    """Where the data a batch run reads lies, read once per run: per kind the interval buckets
    (epoch ms // interval ms) holding rows - for a sample kind its samples, for a state kind
    (inventory, LLDP, GPU-NIC affinity) the moments it changed (a version began or ended). A
    tick at which no detector's inputs changed within its window gives the answers the previous
    evaluation gave, so a batch run evaluates only where something changed."""

    interval_ms: int
    buckets: dict[str, set[int]]

    def any_in(self, kind: str, lo_ms: int, hi_ms: int) -> bool:
        """Rows (or changes) of `kind` may lie in [lo_ms, hi_ms) (bucket granularity)."""
        got = self.buckets.get(kind)
        if not got:
            return False
        b_lo, b_hi = lo_ms // self.interval_ms, (hi_ms - 1) // self.interval_ms
        if b_hi - b_lo < len(got):
            return any(b in got for b in range(b_lo, b_hi + 1))
        return any(b_lo <= b <= b_hi for b in got)

    def active(self, kinds: tuple[str, ...], t_ms: int, window_ms: int, settle_ms: int) -> bool:
        """A detector reading `kinds` over [t - window, t) may answer differently at t than at
        the tick before: a sample in its window, or a change of a state kind within `settle`."""
        for k in kinds:
            w = settle_ms if k in STATE_KINDS else window_ms
            if self.any_in(k, t_ms - w, t_ms):
                return True
        return False


def _made(answer: list[Finding] | Later, d: DetectorSpec, ctx: Context) -> list[Finding]:
    """A set-based answer at its tick: the findings, or made now from what was read ahead (a
    `Later`, given the tick's Context as the per-tick form would be)."""
    return answer(dataclasses.replace(ctx, detector=d)) if callable(answer) else answer


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
    by_detector: dict[str, list[Finding]] = field(default_factory=dict)  # one evaluation's

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
        per_tick: bool = False,
    ) -> None:
        registry = detectors()
        # the per-tick loop alone (`correlate --per-tick`): every detector's statements at every
        # tick, attribution once per tick; the oracle the set-based path is tested against
        self.per_tick = per_tick
        self.chunk_ticks = CHUNK_TICKS
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
        # an exception counted under the one reason `exception` (result.fail logs it)
        self.problems = {
            st.name: Problems(st, st.name, (), logger=log)
            for st in (*self.stats.values(), self.attribution_stats)
        }
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
        self._activity: Activity | None = None  # the batch run's (run()), for its ticks
        self._judged_until: datetime | None = None  # the latest tick evaluate() judged
        self._late: LateArrivals | None = None  # created by the first rejudge() (follow)
        self.rejudged = 0  # re-judged (detector, tick) pairs, for self-report
        # the last _prepare's ancestry, node SU/IDC and declared HyperNodes (its tick cache's
        # `declared@`), reused by a batch run's next evaluation while they hold (_facts_hold)
        self._facts: tuple[Any, dict[str, str], dict[str, str], Any] | None = None
        self.facts_reads = 0  # _prepare reads of those facts (self-report; batch reuses them)
        self._epochs = itertools.count(1)  # state epochs (run(), Context.as_of_state)
        # _tables() as read once at the start of a batch run (None: read at every tick)
        self._run_tables: tuple[set[str], set[str]] | None = None

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
        self,
        start: datetime,
        end: datetime,
        progress: Callable[[int, int, str], None] | None = None,
    ) -> RunResult:
        """Batch: judge every tick in (start, end + one interval], as a follower would have (the
        last tick judges the data up to `end`); findings are returned once each, as last written.
        Where the data lies and where the inventory changed is read once (`activity`). A detector
        is evaluated at the ticks where its inputs changed within its window (and the tick
        after); elsewhere it would answer as it last did, so its last findings are carried on
        without a query, and a stretch where nothing changes costs nothing but one write of what
        still holds at its end. The findings are those of evaluating every tick.
        `progress(done, total, note)` follows the ticks."""
        self._run_tables = self._tables()  # the stored facts do not change during a batch run
        if not self.per_tick:
            # findings and incidents are written once per chunk of ticks, the last row of each
            # (before a detector reads them: Context.table), not once per tick
            self.tracker.defer()
            self.incidents.defer()
        try:
            return self._run(start, end, progress)
        finally:
            self._run_tables = None
            self.flush_outputs(stop=True)

    def flush_outputs(self, *, stop: bool = False) -> None:
        """Write the findings and incidents a batch run kept back (Tracker.defer,
        IncidentTracker.defer); `stop`: the next evaluations write their own again."""
        self.tracker.flush(stop=stop)
        self.incidents.flush(stop=stop)

    def _run(
        self,
        start: datetime,
        end: datetime,
        progress: Callable[[int, int, str], None] | None,
    ) -> RunResult:
        result = RunResult()
        ts = list(
            ticks(
                start,
                end + timedelta(seconds=self.interval) - timedelta(milliseconds=1),
                self.interval,
            )
        )
        act = self._activity = self.activity(ts[0], ts[-1]) if ts else None
        ms = timedelta(milliseconds=1)
        windows = {d.name: self.lookbacks[d.name] // ms for d in self.detectors}
        settles = {d.name: int(d.settle_seconds(self.thresholds) * 1000) for d in self.detectors}
        # per tick, the detectors to evaluate (None: nothing changed, the tick is skipped)
        plan: list[tuple[datetime, set[str] | None]] = []
        was: set[str] = set()  # detectors active at the previous tick
        for t in ts:
            assert act is not None
            t_ms = _ms(t)
            now_active = {
                d.name
                for d in self.detectors
                if act.active(d.needs, t_ms, windows[d.name], settles[d.name])
            }
            names = now_active | was  # and the tick after: its window just emptied
            was = now_active
            flows = act.any_in("flow_sample", t_ms - act.interval_ms, t_ms)
            plan.append((t, names if names or flows else None))
        latest: dict[str, Finding] = {}
        last: dict[str, list[Finding]] = {}  # each detector's answer at its last evaluation
        quiet_since: datetime | None = None  # the tick before a stretch of skipped ticks
        prev: datetime | None = None
        facts_at: datetime | None = None  # the last evaluated tick (its _prepare facts)
        # per state kind, a number that changes where a row of it (a version's start or end)
        # lies from `sliding.state_seconds` before the last evaluated tick to this one
        # (Context.as_of_state); new numbers for every run: the memo outlives it
        epochs: dict[str, int] | None = None
        state_ms = int(float(self.thresholds["sliding"]["state_seconds"]) * 1000)
        if not self.per_tick and act is not None:
            epochs = {k: next(self._epochs) for k in STATE_KINDS if k in act.buckets}
        for first in range(0, len(plan), self.chunk_ticks):
            chunk = plan[first : first + self.chunk_ticks]
            ahead: dict[str, Mapping[datetime, list[Finding] | Later]] = {}
            if not self.per_tick:
                assert act is not None
                self._attribute_ahead([t for t, n in chunk if n is not None], act, result)
                ahead = self._judge_ahead(chunk, result)
            for i, (t, maybe) in enumerate(chunk, first):
                if maybe is None:
                    quiet_since = quiet_since or prev
                    result.skipped += 1
                else:
                    names = maybe
                    carried = [f for d, fs in last.items() if d not in names for f in fs]
                    assert act is not None
                    same = not self.per_tick and self._facts_hold(act, facts_at, t)
                    if epochs is not None and facts_at is not None:
                        # a change read as of either tick or over its trailing state window
                        lo_ms, hi_ms = _ms(facts_at) - state_ms, _ms(t) + 1
                        for k in epochs:
                            if act.any_in(k, lo_ms, hi_ms):
                                epochs[k] = next(self._epochs)
                    r = self.evaluate(
                        t,
                        only=names,
                        carried=carried,
                        held_since=quiet_since,
                        ahead=ahead,
                        same_facts=same,
                        state_epochs=dict(epochs) if epochs is not None else None,
                    )
                    facts_at = t
                    quiet_since = None
                    for f in r.findings:
                        latest[f.finding_id] = f
                    last.update({d: r.by_detector.get(d, []) for d in names})
                    r.findings = []
                    result.merge(r)
                prev = t
                if progress:
                    progress(i + 1, len(ts), f"{len(latest)} finding(s)")
            self.flush_outputs()  # what this chunk found is in the store before the next
        held = [f for fs in last.values() for f in fs]
        if quiet_since is not None and held and ts:
            # what held when the data ended still holds at the last tick
            found = self.tracker.observe(ts[-1], [], held=held, held_since=quiet_since)
            self.incidents.observe(ts[-1], found)
            for f in found:
                latest[f.finding_id] = f
        result.findings = list(latest.values())
        return result

    def _facts_hold(self, act: Activity, before: datetime | None, now: datetime) -> bool:
        """Batch: the facts _prepare read at tick `before` (HyperNode ancestry and Node labels as
        of the tick, node SU/IDC during the trailing `sliding.state_seconds`) hold at `now` too:
        no node or HyperNode version began or ended from `state_seconds` before `before` to
        `now` (the Activity's buckets: a superset of the changes)."""
        if before is None:
            return False
        state_ms = int(float(self.thresholds["sliding"]["state_seconds"]) * 1000)
        lo, hi = _ms(before) - state_ms, _ms(now) + 1
        return not any(act.any_in(k, lo, hi) for k in ("node", "hypernode"))

    def _attribute_ahead(self, evaluated: list[datetime], act: Activity, result: RunResult) -> None:
        """Batch: attribute the flows the per-tick loop would attribute at the `evaluated` ticks
        (each tick's flows since the previous one, _prepare) in as few statements as give the
        same rows: consecutive windows are attributed together unless the inventory an
        attribution reads as of its window's end (ATTRIBUTION_STATE) changed inside one of them.
        Each flow is attributed as of its own time, so a range's rows are those of its ticks'
        windows. The evaluations then find their flows attributed already."""
        if not evaluated or "flow_sample" not in self._tables()[0]:
            return
        from telemetry.correlate.attribution import ancestry, attribute_window

        longest = max(self.lookbacks.values(), default=timedelta(0))
        spans: list[list[datetime]] = []
        lo = self._attributed_until
        for t in evaluated:
            if lo is not None and lo >= t:
                continue
            if lo is None or t - lo > longest:
                lo = t - longest
            # what is declared as of t holds changes at t itself (valid_from <= t): [lo, t]
            changed = any(act.any_in(k, _ms(lo), _ms(t) + 1) for k in ATTRIBUTION_STATE)
            if spans and spans[-1][1] == lo and not changed:
                spans[-1][1] = t
            else:
                spans.append([lo, t])
            lo = t
        st = self.attribution_stats
        for lo, hi in spans:
            ctx = Context(
                self.store,
                Window(lo, hi),
                self.thresholds,
                self.cluster,
                {"tick_cache": {}, "memo": self._memo},
            )
            began = time.perf_counter()
            try:
                counts = attribute_window(ctx, ancestry(ctx))
            except Exception as e:
                self.problems[st.name].exception(e, log=False)
                result.fail("attribution", ctx.window, e)
                return  # the ticks attribute what is left, one at a time
            self._attributed_until = hi
            st.last_duration_seconds = time.perf_counter() - began
            st.received += int(counts["flows"])
            st.extra["unowned_src"] = st.extra.get("unowned_src", 0) + int(counts["src_unowned"])
            st.extra["unowned_dst"] = st.extra.get("unowned_dst", 0) + int(counts["dst_unowned"])
            if counts["index_built"]:
                st.extra["index_builds"] = st.extra.get("index_builds", 0) + 1

    def _judge_ahead(
        self, chunk: list[tuple[datetime, set[str] | None]], result: RunResult
    ) -> dict[str, Mapping[datetime, list[Finding] | Later]]:
        """Batch: each detector with a set-based form (DetectorSpec.over) judged once over the
        ticks of `chunk` that evaluate it; per detector, its answer at each. A detector whose
        set-based evaluation fails is judged tick by tick instead (and its failure logged)."""
        nonempty, rollups = self._tables()
        out: dict[str, Mapping[datetime, list[Finding] | Later]] = {}
        for d in self.detectors:
            at = tuple(t for t, names in chunk if names is not None and d.name in names)
            if d.over is None or not at or not set(d.needs) & nonempty:
                continue
            got = self._over(d, at, rollups)
            if got is not None:
                out[d.name] = got
        return out

    def _over(
        self, d: DetectorSpec, at: tuple[datetime, ...], rollups: set[str]
    ) -> Mapping[datetime, list[Finding] | Later] | None:
        """`d`'s set-based form over the ticks `at` (None when it failed: judged per tick)."""
        assert d.over is not None
        w = Window(at[0] - self.lookbacks[d.name], at[-1])
        extra = {"rollups": rollups if self.use_rollups else set()}
        ctx = Context(self.store, w, self.thresholds, self.cluster, extra, ticks=at)
        t = time.perf_counter()
        try:
            got = d.over(ctx)
        except Exception as e:
            log.error("%s (set-based) failed over %d tick(s): %s", d.name, len(at), e)
            return None
        self.stats[d.name].last_duration_seconds = (time.perf_counter() - t) / len(at)
        return got

    def activity(self, first_tick: datetime, last_tick: datetime) -> Activity:
        """Where the data the detectors read lies, and when the state they read changed, for
        ticks first_tick..last_tick (one statement for every kind read)."""
        step_ms = int(self.interval * 1000)
        back = max(
            [timedelta(seconds=d.settle_seconds(self.thresholds)) for d in self.detectors]
            + list(self.lookbacks.values()),
            default=timedelta(0),
        )
        lo = first_tick - back
        act = Activity(step_ms, {})
        kinds = {k for d in self.detectors for k in d.needs} | {"flow_sample"}
        if not self.per_tick:
            kinds |= set(ATTRIBUTION_STATE)  # where batch attribution must not join windows
            kinds |= STATE_KINDS  # where facts as of a tick change (Context.as_of_state)
        params = {"c": self.cluster, "ws": lo, "we": last_tick}
        parts = []  # one statement for every kind: (kind, bucket, 0) rows, and (kind, 0, 1) where
        # state was set before the range (a change at its first tick)
        for kind in sorted(kinds):
            k = KINDS[kind]
            table = self.store.table(kind)
            act.buckets[kind] = set()
            for c in [k.time_field] + (["valid_to"] if "valid_to" in k.by_name else []):
                parts.append(
                    f"""SELECT DISTINCT '{kind}', intDiv(toUnixTimestamp64Milli(`{c}`), {step_ms}), 0
                        FROM {table} WHERE cluster = {{c:String}}
                          AND `{c}` >= {{ws:DateTime64(3, 'UTC')}}
                          AND `{c}` <= {{we:DateTime64(3, 'UTC')}}"""
                )
            if kind in STATE_KINDS:
                parts.append(
                    f"""SELECT '{kind}', toInt64(0), 1 FROM (SELECT 1 FROM {table}
                        WHERE cluster = {{c:String}} AND `{k.time_field}` < {{ws:DateTime64(3, 'UTC')}}
                        LIMIT 1)"""
                )
        first = _ms(lo) // step_ms
        for kind, bucket, before in self.store.query_rows(" UNION ALL ".join(parts), params):
            if bucket is not None:
                act.buckets[kind].add(first if before else int(bucket))
        return act

    def rejudge(self, now: datetime) -> RunResult:
        """Live only (follow): before the tick at `now`, look for rows that arrived since the
        last tick with times the engine already judged (late.py), and judge again, with the
        detectors that read them, the latest evaluation whose window holds them; late flows are
        attributed again first. What it finds opens (or extends) findings as of that evaluation.
        Data later than `time.late_seconds` is not looked for."""
        if self._judged_until is None:
            return RunResult()
        if self._late is None:
            kinds = {k for d in self.detectors for k in d.needs} | {"flow_sample"}
            self._late = LateArrivals(
                self.store,
                self.cluster,
                kinds,
                self.interval,
                float(self.thresholds["time"]["late_seconds"]),
            )
        late = self._late.check(self._judged_until, now)
        if not late:
            return RunResult()
        if "flow_sample" in late and self._attributed_until is not None:
            first = last_tick(late["flow_sample"], self.interval)
            self._attributed_until = min(self._attributed_until, first)
        at: dict[datetime, set[str]] = {}
        for d in self.detectors:
            times = [late[k] for k in d.needs if k in late]
            if not times:
                continue
            # the latest judged tick whose window [t - lookback, t) holds the earliest late row
            t = min(
                self._judged_until, last_tick(min(times) + self.lookbacks[d.name], self.interval)
            )
            if t - self.lookbacks[d.name] <= min(times) < t:
                at.setdefault(t, set()).add(d.name)
        result = RunResult()
        for t, names in sorted(at.items()):
            log.info("late data: judging %s again (%s)", t.isoformat(), ", ".join(sorted(names)))
            result.merge(self.evaluate(t, only=names, rejudge=True))
            self.rejudged += len(names)
        return result

    def evaluate(
        self,
        now: datetime,
        only: set[str] | None = None,
        *,
        rejudge: bool = False,
        carried: list[Finding] | None = None,
        held_since: datetime | None = None,
        ahead: dict[str, Mapping[datetime, list[Finding] | Later]] | None = None,
        same_facts: bool = False,
        state_epochs: dict[str, int] | None = None,
    ) -> RunResult:
        """One tick: attribute the flows that arrived since the last tick, run every detector
        (or those named in `only`) over its trailing window ending at `now`, and open/update/
        close findings. `rejudge`: an earlier tick judged again for late data (rejudge()).
        `carried`: findings of detectors not run that still hold (run()), held since
        `held_since` when ticks were skipped in between. `ahead`: detectors' answers at this
        tick judged already by their set-based form (run()); outside the per-tick mode, a
        detector with one and no answer ahead is judged by it over this tick alone.
        `same_facts`: the previous evaluation's ancestry and node facts still hold (run()).
        `state_epochs`: per state kind, where it last changed (run(); Context.as_of_state)."""
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
            same_facts,
        )
        if state_epochs is not None:
            shared["state_epochs"] = state_epochs
            shared["activity"] = self._activity  # where the run's rows lie (log_resolve._Tail)
        shared["flush_outputs"] = self.flush_outputs  # a detector reads findings or incidents
        found: list[Finding] = []
        for d in self.detectors:
            if not set(d.needs) & nonempty or (only is not None and d.name not in only):
                continue  # nothing of that kind stored (or in its window): a quiet outcome
            w = Window(now - self.lookbacks[d.name], now)
            ctx = Context(self.store, w, self.thresholds, self.cluster, dict(shared))
            st = self.stats[d.name]
            t = time.perf_counter()
            try:
                if ahead is not None and d.name in ahead:
                    got = _made(ahead[d.name].get(now, []), d, ctx)
                elif d.over is not None and not self.per_tick:
                    one = self._over(d, (now,), rollups)
                    got = _made(one.get(now, []), d, ctx) if one is not None else d.fn(ctx)
                else:
                    got = d.fn(ctx)
            except Exception as e:
                st.last_success = False
                self.problems[st.name].exception(e, log=False)
                result.fail(d.name, w, e)
                continue
            st.last_duration_seconds = time.perf_counter() - t
            st.last_success = True
            st.sent += len(got)
            for f in got:
                f.window_start, f.window_end = w.start, w.end
            found += got
            result.by_detector[d.name] = got
        result.findings = self.tracker.observe(
            now, found, held=carried or [], held_since=held_since
        )
        self.incidents.observe(now, result.findings)  # incidents.py: regroup, write what changed
        if not rejudge:
            self._judged_until = max(now, self._judged_until or now)
        result.cpu_seconds = time.process_time() - cpu
        return result

    def _prepare(
        self, ctx: Context, nonempty: set[str], result: RunResult, same_facts: bool = False
    ) -> dict[str, Any]:
        """Facts every detector of the tick shares: the HyperNode ancestry and node SU/IDC as
        of now; and the flows that arrived since the last tick, attributed once to
        pods/jobs/tenants (attributed_flow rows) - never re-done per evaluation."""
        from telemetry.correlate.attribution import Ancestry, ancestry, attribute_window, node_facts

        cache = ctx.extra.get("tick_cache", {})
        declared = f"declared@{ctx.window.end.isoformat()}"  # attribution.declared_hypernodes
        if same_facts and self._facts is not None:
            anc, su, idc, specs = self._facts
            if specs is not None:
                cache[declared] = specs  # as of this tick too: no version began or ended
        else:
            self.facts_reads += 1
            failed = False
            anc = Ancestry({}, {})
            if "hypernode" in nonempty:
                try:
                    anc = ancestry(ctx)
                except Exception as e:
                    failed = True
                    result.fail("ancestry", ctx.window, e)
            su, idc = node_facts(ctx) if "node" in nonempty else ({}, {})
            # a failed read is not reused: the next tick tries again, as the per-tick loop does
            self._facts = None if failed else (anc, su, idc, cache.get(declared))
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
        if lo is not None and lo >= now:
            return shared  # judged again for late data: attributed up to a later tick already
        if lo is None or now - lo > max(self.lookbacks.values(), default=timedelta(0)):
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
                self.problems[st.name].exception(e, log=False)
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
        rollup tables the store has (telemetry/store/rollups.py). A batch run reads them once:
        what it reads is stored before it starts, and what it writes (attributed flows, rollups of
        them) only joins kinds already there when there are flows."""
        if self._run_tables is not None:
            return self._run_tables
        from telemetry.store.rollups import TABLES as ROLLUP_TABLES

        rows = self.store.query_rows(
            "SELECT name, total_rows > 0 FROM system.tables WHERE database = {db:String}",
            {"db": self.store.database},
        )
        by_table = {k.table: k.name for k in KINDS.values()}
        rollups = set(ROLLUP_TABLES)
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
            late = corr.rejudge(t)  # windows already judged that late data changed
            res = corr.evaluate(t)
            res.merge(late)
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
