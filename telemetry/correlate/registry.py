"""What a detector is and sees: the per-window `Context` (the store, the window, thresholds),
the `@detector` decorator, and the registry, filled from an explicit table of detector modules
imported on first use (like an entry-point table): no Correlator needs to exist, and detector
modules import this module, never the engine.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from telemetry.correlate.findings import Finding
    from telemetry.store import Store

# Every module that defines detectors. Adding a detector module is one line here.
DETECTOR_MODULES = (
    "telemetry.correlate.detectors.consequence",
    "telemetry.correlate.detectors.fabric",
    "telemetry.correlate.detectors.node",
    "telemetry.correlate.detectors.pfc",
    "telemetry.correlate.detectors.placement",
    "telemetry.correlate.detectors.storage",
    "telemetry.correlate.detectors.topology",
)


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
    """One window as detectors see it. SQL names tables with `table(kind)` and selects the
    window with `where(kind)`; values go in as query parameters: the window is bound as
    `{ws:…}`/`{we:…}`, the cluster as `{cluster:String}`."""

    store: Store
    window: Window
    thresholds: dict[str, Any]
    cluster: str
    extra: dict[str, Any] = field(default_factory=dict)  # per-window facts shared by detectors

    def t(self, dotted: str) -> Any:
        cur: Any = self.thresholds
        for p in dotted.split("."):
            cur = cur[p]
        return cur

    def table(self, kind: str, *, final: bool = False) -> str:
        return self.store.table(kind, final=final)

    def where(self, kind: str) -> str:
        """Rows of `kind` in this cluster inside the window (by the kind's own time column)."""
        from telemetry.store import time_range

        return f"cluster = {{cluster:String}} AND {time_range(kind)}"

    def params(self, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return {**self.window.params(), "cluster": self.cluster, **(extra or {})}

    def rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        res = self.store.client.query(sql, parameters=self.params(params))
        return [dict(zip(res.column_names, r, strict=True)) for r in res.result_rows]

    def command(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        self.store.client.command(sql, parameters=self.params(params))


Detector = Callable[[Context], "list[Finding]"]


@dataclass(frozen=True)
class DetectorSpec:
    name: str
    category: str
    fn: Detector
    needs: tuple[str, ...]  # record kinds it reads: skipped quietly while none is stored


_DETECTORS: dict[str, DetectorSpec] = {}


def detector(name: str, *, category: str, needs: tuple[str, ...]) -> Callable[[Detector], Detector]:
    def deco(fn: Detector) -> Detector:
        from telemetry.records import KINDS

        unknown = [k for k in needs if k not in KINDS]
        if unknown:
            raise ValueError(f"detector {name}: unknown record kind(s) {unknown}")
        _DETECTORS[name] = DetectorSpec(name, category, fn, needs)
        return fn

    return deco


def detectors() -> dict[str, DetectorSpec]:
    """Every detector, by name (imports the detector modules on first use)."""
    for module in DETECTOR_MODULES:
        importlib.import_module(module)
    return _DETECTORS
