"""polars API for notebooks: attributed flows, findings and per-job paths as DataFrames.

    from telemetry.store import Store, time_range
from telemetry.times import as_utc, parse_time
    from telemetry import analysis
    store = Store("chdb://./demo-data/store")
    flows = analysis.attributed_flows(store, since="1h")
    flows.group_by("src_job").agg(pl.col("bytes").sum()).sort("bytes", descending=True)
    analysis.findings(store, kinds=["pfc_storm"])
    analysis.job_path(store, "tenant-a/train-7", since="30m")

Read-only: nothing here writes to the store.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import polars as pl

from telemetry.correlate import findings as fstore
from telemetry.correlate.report import job_report
from telemetry.records import ATTRIBUTED_FLOW, FINDING
from telemetry.store import Store, time_range
from telemetry.times import as_utc, parse_time


def _t(v: datetime | str | None, default: datetime | None = None) -> datetime | None:
    if v is None:
        return default
    if isinstance(v, datetime):
        return as_utc(v)
    return parse_time(v)


def attributed_flows(
    store: Store,
    *,
    since: datetime | str | None = None,
    until: datetime | str | None = None,
    job: str | None = None,
    tenant: str | None = None,
    limit: int | None = None,
) -> pl.DataFrame:
    """Flow samples with both ends' pod/tenant/job/node/SU/IDC and their lowest common HyperNode
    (written by `railscope correlate`). `job` is NAMESPACE/NAME; `tenant` a namespace."""
    params: dict[str, Any] = {"s": _t(since), "u": _t(until)}
    where = [
        time_range(
            ATTRIBUTED_FLOW,
            "s" if params["s"] is not None else None,
            "u" if params["u"] is not None else None,
        )
    ]
    params = {k: v for k, v in params.items() if v is not None}
    if job:
        ns, _, name = job.partition("/")
        where.append(
            "((src_namespace = {ns:String} AND src_job = {j:String}) OR (dst_namespace = {ns:String} AND dst_job = {j:String}))"
        )
        params |= {"ns": ns, "j": name}
    if tenant:
        where.append("(src_namespace = {t:String} OR dst_namespace = {t:String})")
        params["t"] = tenant
    if limit:
        params["limit"] = int(limit)
    lim = " LIMIT {limit:UInt64}" if limit else ""
    return store.query_df(
        f"SELECT * FROM {store.table(ATTRIBUTED_FLOW)} WHERE {' AND '.join(where)} ORDER BY ts{lim}",
        params,
    )


def findings(
    store: Store,
    *,
    kinds: list[str] | None = None,
    since: datetime | str | None = None,
    limit: int = 10_000,
) -> pl.DataFrame:
    """Current findings (latest version of each); `evidence` stays a JSON string column."""
    rows = fstore.read(store, kinds=kinds, since=_t(since), limit=limit)
    if not rows:
        return pl.DataFrame(schema={c: pl.Utf8 for c in FINDING.columns})
    import json

    return pl.DataFrame([{**r, "evidence": json.dumps(r["evidence"], default=str)} for r in rows])


def job_path(
    store: Store,
    job: str,
    *,
    since: datetime | str,
    until: datetime | str | None = None,
    cluster: str = "default",
) -> pl.DataFrame:
    """The job's hops ranked by bottleneck score: layer, name, score, evidence for/against."""
    start = _t(since)
    end = _t(until, datetime.now(UTC))
    assert start is not None and end is not None
    rep = job_report(store, job, start, end, cluster=cluster)
    rows: list[dict[str, Any]] = [
        {
            "rank": i,
            "layer": h.layer,
            "hop": h.name,
            "score": h.score,
            "evidence_for": "; ".join(h.evidence_for),
            "evidence_against": "; ".join(h.evidence_against),
        }
        for i, h in enumerate(rep.hops, 1)
    ]
    return pl.DataFrame(rows)


__all__ = ["attributed_flows", "findings", "job_path"]
