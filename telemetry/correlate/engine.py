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
from importlib import resources
from typing import Any

import yaml

from telemetry.correlate import findings as fstore
from telemetry.correlate.findings import Finding
from telemetry.pipeline import ComponentStats
from telemetry.store import Store

log = logging.getLogger(__name__)


def default_thresholds() -> dict[str, Any]:
    text = resources.files("telemetry.correlate").joinpath("thresholds.yaml").read_text()
    return dict(yaml.safe_load(text))


def merge_thresholds(
    base: dict[str, Any], over: dict[str, Any], path: str = "correlate.thresholds"
) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if k not in base:
            from telemetry.errors import ConfigError

            raise ConfigError(f"{path}.{k}: unknown threshold (known: {', '.join(sorted(base))})")
        out[k] = (
            merge_thresholds(base[k], v, f"{path}.{k}")
            if isinstance(base[k], dict) and isinstance(v, dict)
            else v
        )
    return out


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

    def rows(self, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run SQL with {db}-qualified table names; `{ws:…}`/`{we:…}` bind the window."""
        res = self.store.client.query(
            sql.replace("$db", f"`{self.store.database}`"),
            parameters={**self.window.params(), "cluster": self.cluster, **(params or {})},
        )
        return [dict(zip(res.column_names, r, strict=True)) for r in res.result_rows]


Detector = Callable[[Context], list[Finding]]


@dataclass(frozen=True)
class DetectorSpec:
    name: str
    category: str
    fn: Detector
    needs: tuple[str, ...]  # tables it reads: skipped quietly while they are empty


DETECTORS: dict[str, DetectorSpec] = {}


def detector(name: str, *, category: str, needs: tuple[str, ...]) -> Callable[[Detector], Detector]:
    def deco(fn: Detector) -> Detector:
        DETECTORS[name] = DetectorSpec(name, category, fn, needs)
        return fn

    return deco


def _load_detectors() -> None:
    from telemetry.correlate.detectors import (  # noqa: F401
        consequence,
        fabric,
        node,
        placement,
        storage,
        topology,
    )


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
        _load_detectors()
        self.store = store
        self.cluster = cluster
        self.thresholds = merge_thresholds(default_thresholds(), thresholds or {})
        unknown = set(only or []) - set(DETECTORS)
        if unknown:
            from telemetry.errors import UserError

            raise UserError(
                f"unknown detector(s) {sorted(unknown)} (known: {', '.join(sorted(DETECTORS))})"
            )
        self.detectors = [d for d in DETECTORS.values() if not only or d.name in only]
        self.stats = {d.name: ComponentStats(f"detector:{d.name}") for d in self.detectors}
        self.attribution_stats = ComponentStats("correlate:attribution")

    def data_span(self) -> tuple[datetime, datetime] | None:
        """First and last sample time over the tables detectors read."""
        spans = []
        for table in sorted({t for d in self.detectors for t in d.needs}):
            time_col = (
                "first_seen"
                if table == "findings"
                else ("valid_from" if table.startswith("inv_") else "ts")
            )
            r = self.store.query_rows(
                f"SELECT min({time_col}), max({time_col}), count() FROM `{self.store.database}`.`{table}`"
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
        nonempty = self._nonempty_tables()
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
        the window's flows attributed to pods/jobs/tenants (written to flows_attributed)."""
        from telemetry.correlate.attribution import Ancestry, ancestry, attribute_window, node_facts

        anc = Ancestry({}, {})
        if "inv_hypernodes" in nonempty:
            try:
                anc = ancestry(ctx)
            except Exception as e:
                result.fail("ancestry", ctx.window, e)
        su, idc = node_facts(ctx) if "inv_nodes" in nonempty else ({}, {})
        ctx.extra.update(ancestry=anc, tier_names=anc.tier_names, su=su, idc=idc)
        if "flow_samples" in nonempty:
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

    def _nonempty_tables(self) -> set[str]:
        rows = self.store.query_rows(
            "SELECT name FROM system.tables WHERE database = {db:String} AND total_rows > 0",
            {"db": self.store.database},
        )
        return {r[0] for r in rows}


# --- SQL helpers shared by detectors ----------------------------------------------------------
def rate(r: dict[str, Any], col: str) -> float:
    """Per-second rate of an increase_sql() column over its row's observed span (0 if none)."""
    span = r.get("span_s") or 0.0
    return float(r.get(col) or 0.0) / span if span > 0 else 0.0


LLDP_LATEST_SQL = """
    SELECT local_device, local_port, argMax(remote_device, ts) AS remote_device, argMax(remote_port, ts) AS remote_port
    FROM $db.lldp_links WHERE cluster = {cluster:String} AND ts < {we:DateTime64(3, 'UTC')}
    GROUP BY local_device, local_port"""


def lldp_links(ctx: Context) -> list[dict[str, Any]]:
    """The latest LLDP neighbour of every local port seen before the window ends."""
    return ctx.rows(LLDP_LATEST_SQL)


def lldp_peers(ctx: Context) -> dict[tuple[str, str], tuple[str, str]]:
    """(device, port) -> (neighbour device, neighbour port), from lldp_links()."""
    return {
        (r["local_device"], r["local_port"]): (r["remote_device"], r["remote_port"])
        for r in lldp_links(ctx)
    }


def increase_cols(alias: str, keys: list[str], counters: list[str]) -> str:
    """The columns of an increase_sql() subquery, unprefixed, for SELECTs that join it."""
    cols = [
        *keys,
        "samples",
        "span_s",
        *(f"inc_{c}" for c in counters),
        *(f"resets_{c}" for c in counters),
    ]
    return ", ".join(f"{alias}.{c} AS {c}" for c in cols)


def increase_sql(table: str, keys: list[str], counters: list[str], where: str = "1") -> str:
    """Per key, how much each counter rose inside the window, resets counted from zero, plus the
    observed span in seconds. Never negative."""
    k = ", ".join(keys)
    deltas = ",\n".join(
        f"toFloat64({c}) - toFloat64(lagInFrame({c}, 1, {c}) OVER w) AS d_{c}, toFloat64({c}) AS v_{c}"
        for c in counters
    )
    sums = ",\n".join(
        f"sum(if(d_{c} >= 0, d_{c}, v_{c})) AS inc_{c}, countIf(d_{c} < 0) AS resets_{c}"
        for c in counters
    )
    return f"""
        SELECT {k}, count() AS samples, dateDiff('millisecond', min(ts), max(ts)) / 1000 AS span_s,
        {sums}
        FROM (
            SELECT {k}, ts,
            {deltas}
            FROM $db.`{table}`
            WHERE cluster = {{cluster:String}} AND ts >= {{ws:DateTime64(3, 'UTC')}} AND ts < {{we:DateTime64(3, 'UTC')}} AND ({where})
            WINDOW w AS (PARTITION BY {k} ORDER BY ts ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)
        )
        GROUP BY {k}
    """
