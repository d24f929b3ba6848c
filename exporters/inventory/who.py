""" "Who owned IP X at time T": an ASOF lookup over the time-versioned pod IP leases (pod_ip_leases).

Reads the store only. A lease covers [valid_from, valid_to); outside every lease the answer is
None, never the nearest pod.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from telemetry.records import POD_IP_LEASE
from telemetry.times import as_of, parse_time

_COLS = (
    "namespace",
    "pod",
    "node",
    "interface",
    "network",
    "mac",
    "pci_address",
    "primary",
    "valid_from",
    "valid_to",
)


def parse_at(text: str | None) -> datetime:
    """'now', ms since the epoch, an ISO-8601 time (naive = UTC) or a duration ago."""
    return parse_time(text or "now", what="--at")


def _dt(t: datetime | int) -> datetime:
    return datetime.fromtimestamp(t / 1000, UTC) if isinstance(t, int) else t.astimezone(UTC)


def who_owned_many(
    store: Any, queries: Sequence[tuple[str, datetime | int]], cluster: str | None = None
) -> list[dict[str, Any] | None]:
    """One ASOF JOIN for many (ip, time) pairs: the lease that started last at or before the time,
    kept only when it had not ended by then. Returns one dict (or None) per query, in order."""
    if not queries:
        return []
    ips = [q[0] for q in queries]
    ts = [_dt(q[1]).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] for q in queries]
    cluster_filter = "AND cluster = {cluster:String}" if cluster is not None else ""
    cols = ", ".join(f"l.`{c}`" for c in _COLS)
    sql = f"""
        SELECT q.i, l.ip != '' AS hit, {cols}
        FROM (
            SELECT arrayJoin(arrayEnumerate({{ips:Array(String)}})) AS i,
                   {{ips:Array(String)}}[i] AS ip,
                   toDateTime64({{ts:Array(String)}}[i], 3, 'UTC') AS t
        ) AS q
        ASOF LEFT JOIN (
            SELECT * FROM {store.table(POD_IP_LEASE, final=True)} WHERE 1 {cluster_filter}
        ) AS l ON q.ip = l.ip AND q.t >= l.valid_from
        WHERE hit AND {as_of("q.t", "l")}
        ORDER BY q.i
    """
    params: dict[str, Any] = {"ips": ips, "ts": ts}
    if cluster is not None:
        params["cluster"] = cluster
    out: list[dict[str, Any] | None] = [None] * len(queries)
    for row in store.query_rows(sql, params):
        out[int(row[0]) - 1] = dict(zip(_COLS, row[2:], strict=True))
    return out


def who_owned(
    store: Any, ip: str, at: datetime | int, cluster: str | None = None
) -> dict[str, Any] | None:
    """The pod lease holding `ip` at `at` (datetime or ms), or None."""
    return who_owned_many(store, [(ip, at)], cluster)[0]
