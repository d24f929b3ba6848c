"""The correlation engine: runs every detector over fixed time windows inside ClickHouse and
stores what they find. Detectors are SQL over the stored facts; they never read live sources.

A detector that fails is logged by name and counted; the others still run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from telemetry.correlate import findings as fstore
from telemetry.correlate.findings import Finding
from telemetry.correlate.registry import Context, Window, detectors
from telemetry.correlate.thresholds import default_thresholds, merge_thresholds
from telemetry.pipeline import ComponentStats
from telemetry.records import KINDS
from telemetry.store import Store
from telemetry.store.schema import LOCAL_SUFFIX

log = logging.getLogger(__name__)


def windows(start: datetime, end: datetime, seconds: int) -> Iterator[Window]:
    step = timedelta(seconds=seconds)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    t = epoch + ((start - epoch) // step) * step  # align to multiples of the window length
    while t < end:
        yield Window(t, t + step)
        t += step


@dataclass
class RunResult:
    windows: int = 0
    findings: list[Finding] = field(default_factory=list)
    failed: dict[str, str] = field(
        default_factory=dict
    )  # stage/detector -> first line of the error

    def fail(self, what: str, window: Window, e: BaseException) -> None:
        self.failed[what] = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        log.error("%s failed on window %s: %s", what, window.start.isoformat(), self.failed[what])


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
        result = RunResult()
        ws = list(windows(start, end, int(self.thresholds["window_seconds"])))
        gap = timedelta(
            seconds=int(self.thresholds["window_seconds"])
            * int(self.thresholds["merge_gap_windows"])
        )
        nonempty = self._nonempty_kinds()
        for i, w in enumerate(ws):
            ctx = Context(self.store, w, self.thresholds, self.cluster)
            self._prepare(ctx, nonempty, result)
            found: list[Finding] = []
            for d in self.detectors:
                if not set(d.needs) & nonempty:
                    continue  # nothing of that kind stored: a quiet outcome
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
            result.findings += fstore.upsert(self.store, found, cluster=self.cluster, merge_gap=gap)
            result.windows += 1
            if progress:
                progress(i + 1, len(ws))
        return result

    def _prepare(self, ctx: Context, nonempty: set[str], result: RunResult) -> None:
        """Facts every detector of the window shares: the HyperNode ancestry, node SU/IDC, and
        the window's flows attributed to pods/jobs/tenants (written as attributed_flow rows)."""
        from telemetry.correlate.attribution import Ancestry, ancestry, attribute_window, node_facts

        anc = Ancestry({}, {})
        if "hypernode" in nonempty:
            try:
                anc = ancestry(ctx)
            except Exception as e:
                result.fail("ancestry", ctx.window, e)
        su, idc = node_facts(ctx) if "node" in nonempty else ({}, {})
        ctx.extra.update(ancestry=anc, tier_names=anc.tier_names, su=su, idc=idc)
        if "flow_sample" in nonempty:
            st = self.attribution_stats
            t = time.perf_counter()
            try:
                counts = attribute_window(ctx, anc)
            except Exception as e:
                st.error(type(e).__name__)
                result.fail("attribution", ctx.window, e)
                return
            st.last_duration_seconds = time.perf_counter() - t
            st.received += int(counts["flows"])
            st.extra["unowned_src"] = st.extra.get("unowned_src", 0) + int(counts["src_unowned"])
            st.extra["unowned_dst"] = st.extra.get("unowned_dst", 0) + int(counts["dst_unowned"])

    def _nonempty_kinds(self) -> set[str]:
        """The record kinds with rows stored (read from the tables' row counts)."""
        rows = self.store.query_rows(
            "SELECT name FROM system.tables WHERE database = {db:String} AND total_rows > 0",
            {"db": self.store.database},
        )
        by_table = {k.table: k.name for k in KINDS.values()}
        names = {r[0].removesuffix(LOCAL_SUFFIX) for r in rows}  # replicas in cluster mode
        return {by_table[n] for n in names if n in by_table}
