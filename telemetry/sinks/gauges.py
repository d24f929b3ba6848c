"""Hand-built gauge families as Prometheus text: the state a store holds (open findings, open
incidents) rendered at scrape time, beside the sinks' own metrics."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any


def prometheus_text(*families: Any) -> str:
    """Prometheus text exposition of metric families built by hand (GaugeMetricFamily ...)."""
    from prometheus_client import CollectorRegistry, generate_latest

    class _Families:
        def collect(self) -> Any:
            yield from families

    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Families())  # type: ignore[arg-type]
    return generate_latest(reg).decode()


Family = tuple[str, str, list[str]]  # metric name, help, label names


def state_gauges(
    rows: list[dict[str, Any]],
    each: Family,
    series: Callable[[dict[str, Any]], list[list[str]]],
    count: Family,
    key: Callable[[dict[str, Any]], tuple[str, ...]],
) -> str:
    """Two gauge families as Prometheus text: `each` = 1 for every label set `series(row)` gives
    (a row may give none or several), and `count` = how many rows share each `key(row)`."""
    from prometheus_client.core import GaugeMetricFamily

    ones = GaugeMetricFamily(each[0], each[1], labels=each[2])
    per = GaugeMetricFamily(count[0], count[1], labels=count[2])
    for r in rows:
        for labels in series(r):
            ones.add_metric(labels, 1)
    for k, n in sorted(Counter(key(r) for r in rows).items()):
        per.add_metric(list(k), n)
    return prometheus_text(ones, per)
