"""What a detector is and sees: the per-evaluation `Context` (the store, the trailing window,
thresholds), the `@detector` decorator with the window each detector judges, and the registry, filled from an explicit table of detector modules
imported on first use (like an entry-point table): no Correlator needs to exist, and detector
modules import this module, never the engine.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from telemetry.correlate.findings import Finding
    from telemetry.store import Store

# Every module that defines detectors. Adding a detector module is one line here.
DETECTOR_MODULES = (
    "telemetry.correlate.detectors.collection",
    "telemetry.correlate.detectors.collective",
    "telemetry.correlate.detectors.consequence",
    "telemetry.correlate.detectors.fabric",
    "telemetry.correlate.detectors.gpu",
    "telemetry.correlate.detectors.logs",
    "telemetry.correlate.detectors.nccl",
    "telemetry.correlate.detectors.node",
    "telemetry.correlate.detectors.pfc",
    "telemetry.correlate.detectors.placement",
    "telemetry.correlate.detectors.pool",
    "telemetry.correlate.detectors.storage",
    "telemetry.correlate.detectors.topology",
)

# the kinds the engine itself writes (findings.py, incidents.py): a detector reading one sees what
# earlier ticks wrote (Context.table)
ENGINE_OUTPUTS = frozenset({"finding", "incident", "incident_finding"})


@dataclass
class Window:
    start: datetime
    end: datetime

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()

    def params(self) -> dict[str, Any]:
        return {"ws": self.start, "we": self.end}


@dataclass
class Context:
    """One detector's trailing window at one evaluation, as it sees it. SQL names tables with `table(kind)` and selects the
    window with `where(kind)`; values go in as query parameters: the window is bound as
    `{ws:…}`/`{we:…}`, the cluster as `{cluster:String}`."""

    store: Store
    window: Window
    thresholds: dict[str, Any]
    cluster: str
    extra: dict[str, Any] = field(default_factory=dict)  # per-window facts shared by detectors
    detector: DetectorSpec | None = None  # the one being evaluated (set by its registration)
    # set-based evaluation (DetectorSpec.over): the ticks judged at once, each over its own
    # trailing window; `window` then spans them all, from the first's start to the last tick
    ticks: tuple[datetime, ...] = ()

    def at(self, tick: datetime) -> Context:
        """Set-based: this context as the per-tick form sees judged tick `tick` alone (its own
        trailing window, of the lookback from the window's start to the first tick)."""
        w = self.window
        lookback = (self.ticks[0] if self.ticks else w.end) - w.start
        return dataclasses.replace(self, window=Window(tick - lookback, tick), ticks=())

    def t(self, dotted: str) -> Any:
        cur: Any = self.thresholds
        for p in dotted.split("."):
            cur = cur[p]
        return cur

    def table(self, kind: str, *, final: bool = False) -> str:
        """The table of `kind`. Where a detector reads the engine's own output (findings,
        incidents), what a batch run has kept back is written first (extra `flush_outputs`)."""
        if kind in ENGINE_OUTPUTS:
            self.outputs_written()
        return self.store.table(kind, final=final)

    def outputs_written(self) -> None:
        """Before reading the engine's own output (findings, incidents), by `table` or by a
        reader of its own (findings.read): what a batch run kept back is written first (extra
        `flush_outputs`; engine.Correlator.run)."""
        flush = self.extra.get("flush_outputs")
        if flush is not None:
            flush()

    def where(self, kind: str) -> str:
        """Rows of `kind` in this cluster inside the window (by the kind's own time column)."""
        from telemetry.store import time_range

        return f"cluster = {{cluster:String}} AND {time_range(kind)}"

    def params(self, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return {**self.window.params(), "cluster": self.cluster, **(extra or {})}

    def rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        res = self.store.query(sql, self.params(params))
        return [dict(zip(res.column_names, r, strict=True)) for r in res.result_rows]

    def cached(self, key: str, make: Callable[[], Any]) -> Any:
        """`make()` once per evaluation tick for facts every detector of the tick shares (the
        latest LLDP neighbours, the declared HyperNodes as of the tick): the engine gives all
        contexts of one tick the same `extra["tick_cache"]`; without one, `make()` each time."""
        cache = self.extra.get("tick_cache")
        if cache is None:
            return make()
        if key not in cache:
            cache[key] = make()
        return cache[key]

    def as_of_state(
        self, name: str, kinds: tuple[str, ...], make: Callable[[], Any], *, span: float = 0.0
    ) -> Any:
        """`make()` once per tick (as `cached`) for facts that are the state of `kinds` (record
        kinds with versions or latest rows: inventory, LLDP, GPU-NIC affinity) as of the tick,
        or over the `span` seconds before it (at most `sliding.state_seconds`); in a batch run
        again only where a row of one of them lies between `sliding.state_seconds` before the
        previous evaluation and this tick (the engine's `extra["state_epochs"]`, per kind, from
        the run's Activity). Without epochs (live ticks, the per-tick loop), `make()` every
        tick."""
        epochs = self.extra.get("state_epochs")
        key = f"{name}@{self.window.end.isoformat()}/{span}"
        if (
            epochs is None
            or any(k not in epochs for k in kinds)
            or span > float(self.t("sliding.state_seconds"))
        ):
            return self.cached(key, make)
        at = tuple(epochs[k] for k in kinds)
        return self.cached(key, lambda: self.remembered(f"{name}/{span}", at, make))

    def remembered(self, name: str, inputs: Any, make: Callable[[], Any]) -> Any:
        """`make()` again only when `inputs` differ from the previous tick's (the engine keeps
        `extra["memo"]` across ticks): a HyperNode tree or its drift against LLDP changes when
        the inventory does, not every 10 s. Without a memo, `make()` each time."""
        memo = self.extra.get("memo")
        if memo is None:
            return make()
        key = repr(inputs)
        hit = memo.get(name)
        if hit is not None and hit[0] == key:
            return hit[1]
        value = make()
        memo[name] = (key, value)
        return value

    def finding(
        self,
        severity: str,
        subject_type: str,
        subject: str,
        summary: str,
        evidence: dict[str, Any],
        *,
        kind: str = "",
    ) -> Finding:
        """A finding of the detector being evaluated: its name as the kind (or `kind`, for a
        detector that reports more than one) and its category."""
        from telemetry.correlate.findings import Finding

        if self.detector is None:
            raise RuntimeError("Context.finding() outside a registered detector")
        d = self.detector
        return Finding(
            kind or d.name, d.category, severity, subject_type, subject, summary, evidence
        )

    def command(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        self.store.command(sql, self.params(params))


Detector = Callable[[Context], "list[Finding]"]
# a detector's set-based form: its answer at each of `ctx.ticks` (a tick absent: nothing found)
# or, at a tick, a `Later`: what the tick's answer needs of the findings of the ticks before it
# (written by the engine tick by tick) is made when the engine reaches that tick, from what the
# set-based statement read ahead, with the tick's own Context (as the per-tick form gets it)
Later = Callable[[Context], "list[Finding]"]
RangeDetector = Callable[[Context], "Mapping[datetime, list[Finding] | Later]"]


@dataclass(frozen=True)
class DetectorSpec:
    name: str
    category: str
    fn: Detector
    needs: tuple[str, ...]  # record kinds it reads: skipped quietly while none is stored
    # the trailing window it judges: the sum of these thresholds (seconds), e.g.
    # ("ecmp.min_seconds", "sliding.interval_seconds") for a condition sustained min_seconds
    lookback: tuple[str, ...] = ("sliding.rate_seconds",)
    # how long after a change of the state it reads (inventory) its answer may still change by
    # time alone, past its lookback: e.g. ("pool.gang_pending_seconds",) for "pending that long"
    settle: tuple[str, ...] = ()
    # other finding kinds it reports besides its own name (link_flap also reports link_errors)
    also: tuple[str, ...] = ()
    # its set-based form (`@over_ticks`): one evaluation judges many ticks; None: per tick only
    over: RangeDetector | None = None

    @property
    def kinds(self) -> tuple[str, ...]:
        return (self.name, *self.also)

    def lookback_seconds(self, thresholds: Mapping[str, Any]) -> float:
        return _sum_thresholds(thresholds, self.lookback)

    def settle_seconds(self, thresholds: Mapping[str, Any]) -> float:
        """Lookback plus settle: after a change of a state kind it reads, the detector's answer
        is the same at every tick once this long has passed without another (engine.run)."""
        return self.lookback_seconds(thresholds) + _sum_thresholds(thresholds, self.settle)


def _sum_thresholds(thresholds: Mapping[str, Any], paths: tuple[str, ...]) -> float:
    total = 0.0
    for dotted in paths:
        cur: Any = thresholds
        for p in dotted.split("."):
            cur = cur[p]
        total += float(cur)
    return total


_DETECTORS: dict[str, DetectorSpec] = {}


def detector(
    name: str,
    *,
    needs: tuple[str, ...],
    lookback: tuple[str, ...] = ("sliding.rate_seconds",),
    settle: tuple[str, ...] = (),
    also: tuple[str, ...] = (),
) -> Callable[[Detector], Detector]:
    """Register `fn` as detector `name`. It is evaluated every `sliding.interval_seconds` over
    the trailing window `lookback` names (threshold paths, summed). Its category is the area of
    its module (`detectors/storage.py` -> storage), which is what kinds.yaml declares for each of
    its kinds (`detectors()` checks). The registered function sees a Context whose `finding()`
    fills in this name and category."""

    def deco(fn: Detector) -> Detector:
        from telemetry.correlate.thresholds import default_thresholds
        from telemetry.records import KINDS

        unknown = [k for k in needs if k not in KINDS]
        if unknown:
            raise ValueError(f"detector {name}: unknown record kind(s) {unknown}")

        @functools.wraps(fn)
        def run(ctx: Context) -> list[Finding]:
            return fn(dataclasses.replace(ctx, detector=spec))

        spec = DetectorSpec(
            name, fn.__module__.rpartition(".")[2], run, needs, lookback, settle, also
        )
        spec.settle_seconds(default_thresholds())  # a misspelt threshold fails at import
        _DETECTORS[name] = spec
        return run

    return deco


def over_ticks(name: str) -> Callable[[RangeDetector], RangeDetector]:
    """Register `fn` as the set-based form of detector `name` (declared before it with
    `@detector`): given a Context whose `ticks` are the ticks to judge and whose `window` spans
    their trailing windows, it answers, per tick, what `name` answers at that tick alone (the
    per-tick form stays, as the oracle and for `correlate --per-tick`). A detector without one
    is evaluated tick by tick."""

    def deco(fn: RangeDetector) -> RangeDetector:
        spec = _DETECTORS[name]

        @functools.wraps(fn)
        def run(ctx: Context) -> Mapping[datetime, list[Finding] | Later]:
            return fn(dataclasses.replace(ctx, detector=_DETECTORS[name]))

        _DETECTORS[name] = dataclasses.replace(spec, over=run)
        return run

    return deco


def finding_kinds() -> list[str]:
    """Every finding kind the detectors report (each detector's name and its `also` kinds)."""
    return sorted({k for d in detectors().values() for k in d.kinds})


def detectors() -> dict[str, DetectorSpec]:
    """Every detector, by name (imports the detector modules on first use, and checks them
    against kinds.yaml once: each kind a detector module reports is declared there with the
    module as its category, and each declared kind has a detector)."""
    global _checked
    for module in DETECTOR_MODULES:
        importlib.import_module(module)
    if not _checked:
        check_declarations(_DETECTORS.values())
        _checked = True
    return _DETECTORS


_checked = False


def check_declarations(specs: Iterable[DetectorSpec]) -> None:
    """Raise KindError where the detectors of DETECTOR_MODULES and kinds.yaml disagree."""
    from telemetry.correlate.kinds import KindError, kinds

    declared = kinds()
    found: dict[str, DetectorSpec] = {}
    for s in specs:
        if s.fn.__module__ not in DETECTOR_MODULES:
            continue  # registered by a test, not shipped
        for k in s.kinds:
            found[k] = s
            d = declared.get(k)
            if d is None:
                raise KindError(f"{s.fn.__module__}: {k} is not declared in kinds.yaml")
            if d.category != s.category:
                raise KindError(
                    f"kinds.yaml: {k}: category {d.category} but its detector is in "
                    f"detectors/{s.category}.py"
                )
    orphans = sorted(set(declared) - set(found))
    if orphans:
        raise KindError(f"kinds.yaml: {', '.join(orphans)} declared but no detector reports it")
