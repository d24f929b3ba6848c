"""Node detectors: XID errors, lost GPUs, GPU throttling, NIC PCIe stalls."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from telemetry.correlate.findings import Finding
from telemetry.correlate.registry import Context, detector, over_ticks
from telemetry.correlate.sql import among_moved, in_params, increase_sql, moved_series
from telemetry.correlate.timebase import by_tick, tick_join, tick_params

# NVML clock-event reason bits (nvml.h, nvmlClocksEventReason*), named so the SQL reads as the
# driver documents them; which bits count as throttling at all is thresholds.yaml's
# gpu.throttle_reason_mask.
SW_POWER_CAP = 0x4
HW_SLOWDOWN = 0x8
SW_THERMAL_SLOWDOWN = 0x20
HW_THERMAL_SLOWDOWN = 0x40
HW_POWER_BRAKE_SLOWDOWN = 0x80
POWER_REASONS = SW_POWER_CAP | HW_POWER_BRAKE_SLOWDOWN
THERMAL_REASONS = HW_SLOWDOWN | SW_THERMAL_SLOWDOWN | HW_THERMAL_SLOWDOWN


def gpu_subject(node: str, gpu: int) -> str:
    return f"{node}/gpu{gpu}"


def _xid_sql(ctx: Context, over: bool) -> str:
    tick, join = ("tick, ", f"{tick_join(ctx, 'gpu_event')} ") if over else ("", "")
    return f"""
        SELECT {tick}node, gpu, any(uuid) AS uuid, groupUniqArray(xid) AS xids, count() AS events,
               min(ts) AS first, max(ts) AS last
        FROM {ctx.table("gpu_event")} {join}
        WHERE {ctx.where("gpu_event")}
          AND event = 'xid'{" AND tick IN {ticks:Array(Int64)}" if over else ""}
        GROUP BY {tick}node, gpu ORDER BY {tick}node, gpu"""


def _xid_finding(ctx: Context, r: dict[str, Any], critical: set[int]) -> Finding:
    xids = sorted(r["xids"])
    sev = "critical" if critical & set(xids) else "warning"
    return ctx.finding(
        sev,
        "gpu",
        gpu_subject(r["node"], r["gpu"]),
        f"XID {', '.join(map(str, xids))} on {r['node']} GPU {r['gpu']} ({r['events']} event(s))",
        {
            "xids": xids,
            "events": r["events"],
            "uuid": r["uuid"],
            "first": r["first"],
            "last": r["last"],
        },
    )


@detector("gpu_xid", needs=("gpu_event",))
def gpu_xid(ctx: Context) -> list[Finding]:
    critical = set(ctx.t("gpu.critical_xids"))
    return [_xid_finding(ctx, r, critical) for r in ctx.rows(_xid_sql(ctx, over=False))]


@over_ticks("gpu_xid")
def gpu_xid_over(ctx: Context) -> dict[datetime, list[Finding]]:
    critical = set(ctx.t("gpu.critical_xids"))
    at, out = by_tick(ctx), dict[datetime, list[Finding]]()
    for r in ctx.rows(_xid_sql(ctx, over=True), tick_params(ctx)):
        out.setdefault(at[r["tick"]], []).append(_xid_finding(ctx, r, critical))
    return out


def _lost_sql(ctx: Context, over: bool) -> str:
    tick = "tick, " if over else ""
    only = " AND tick IN {ticks:Array(Int64)}" if over else ""
    return f"""
        SELECT {tick}node, gpu, sum(lost_samples) AS lost_samples, sum(samples) AS samples, sum(events) AS events,
               min(first) AS first
        FROM (
            SELECT {tick}node, gpu, countIf(up = 0) AS lost_samples, count() AS samples, 0 AS events,
                   minIf(ts, up = 0) AS first
            FROM {ctx.table("gpu_sample")} {tick_join(ctx, "gpu_sample") if over else ""}
            WHERE {ctx.where("gpu_sample")}{only}
            GROUP BY {tick}node, gpu
            UNION ALL
            SELECT {tick}node, gpu, 0, 0, count(), min(ts)
            FROM {ctx.table("gpu_event")} {tick_join(ctx, "gpu_event") if over else ""}
            WHERE {ctx.where("gpu_event")}
              AND event = 'gpu_lost'{only}
            GROUP BY {tick}node, gpu
        )
        GROUP BY {tick}node, gpu
        HAVING lost_samples > 0 OR events > 0
        ORDER BY {tick}node, gpu"""


def _lost_finding(ctx: Context, r: dict[str, Any]) -> Finding:
    return ctx.finding(
        "critical",
        "gpu",
        gpu_subject(r["node"], r["gpu"]),
        f"GPU {r['gpu']} on {r['node']} is lost (fell off the bus / NVML GPU_IS_LOST)",
        {
            "down_samples": r["lost_samples"],
            "samples": r["samples"],
            "lost_events": r["events"],
        },
    )


@detector("gpu_lost", needs=("gpu_sample", "gpu_event"))
def gpu_lost(ctx: Context) -> list[Finding]:
    return [_lost_finding(ctx, r) for r in ctx.rows(_lost_sql(ctx, over=False))]


@over_ticks("gpu_lost")
def gpu_lost_over(ctx: Context) -> dict[datetime, list[Finding]]:
    at, out = by_tick(ctx), dict[datetime, list[Finding]]()
    for r in ctx.rows(_lost_sql(ctx, over=True), tick_params(ctx)):
        out.setdefault(at[r["tick"]], []).append(_lost_finding(ctx, r))
    return out


def _throttle_rows(ctx: Context, over: bool) -> list[dict[str, Any]]:
    """Per GPU (and judged tick, `over`) its violation counters' increases over up samples and
    its samples' throttle reasons, power, temperature and clock, among the GPUs the rollup shows
    throttled in the window (the range's window when `over`: every tick's among them)."""
    ratio = float(ctx.t("gpu.throttle_ratio"))
    mask = int(ctx.t("gpu.throttle_reason_mask"))
    keys, counters = (
        ["node", "gpu"],
        ["power_violation_seconds_total", "thermal_violation_seconds_total"],
    )
    # throttled for a share of the window: a violation counter moved or an up sample carried a
    # throttle reason; only those GPUs are read from the samples where the rollup says which
    moved = (
        moved_series(
            ctx,
            "gpu_sample",
            keys,
            counters,
            also=f"bitAnd(groupBitOr(clock_event_reasons_or), {mask}) != 0",
        )
        if ratio > 0
        else None
    )
    if moved == []:
        return []
    among, extra = among_moved(keys, moved)
    inc = increase_sql(ctx, "gpu_sample", keys, counters, {"up": "up_only", **among}, over=over)
    only = "".join(f" AND {c}" for c in in_params("gpu_sample", among))
    tick, on, join = ("", "", "")
    if over:
        tick, on = "tick, ", "v.tick = s.tick AND "
        join = tick_join(ctx, "gpu_sample")
        only += " AND tick IN {ticks:Array(Int64)}"
        extra = {**extra, **tick_params(ctx)}
    return ctx.rows(
        f"""
        SELECT {"v.tick AS tick, " if over else ""}v.node AS node, v.gpu AS gpu, v.span_s AS span_s,
               v.inc_power_violation_seconds_total AS power_s, v.inc_thermal_violation_seconds_total AS thermal_s,
               s.reason_fraction AS reason_fraction, s.power AS power, s.temp AS temp, s.sm_clock AS sm_clock,
               s.power_reason AS power_reason, s.thermal_reason AS thermal_reason
        FROM ({inc}) AS v
        INNER JOIN (
            SELECT {tick}node, gpu,
                   countIf(bitAnd(ifNull(clock_event_reasons, 0), {{mask:UInt64}}) != 0) / count() AS reason_fraction,
                   countIf(bitAnd(ifNull(clock_event_reasons, 0), {{power_bits:UInt64}}) != 0) AS power_reason,
                   countIf(bitAnd(ifNull(clock_event_reasons, 0), {{thermal_bits:UInt64}}) != 0) AS thermal_reason,
                   avg(power_watts) AS power, max(temperature_celsius) AS temp, avg(sm_clock_hertz) AS sm_clock
            FROM {ctx.table("gpu_sample")} {join}
            WHERE {ctx.where("gpu_sample")} AND up = 1{only}
            GROUP BY {tick}node, gpu
        ) AS s ON {on}v.node = s.node AND v.gpu = s.gpu
        ORDER BY {tick}node, gpu""",
        {
            "mask": mask,
            "up_only": [1],
            "power_bits": POWER_REASONS,
            "thermal_bits": THERMAL_REASONS,
            **extra,
        },
    )


def _throttle_finding(ctx: Context, r: dict[str, Any], ratio: float) -> Finding | None:
    span = r["span_s"] or 0.0
    violation = ((r["power_s"] or 0.0) + (r["thermal_s"] or 0.0)) / span if span > 0 else 0.0
    frac = max(min(violation, 1.0), r["reason_fraction"] or 0.0)
    if frac < ratio:
        return None
    cause = (
        "thermal"
        if ((r["thermal_s"] or 0) > (r["power_s"] or 0) or r["thermal_reason"] > r["power_reason"])
        else "power"
    )
    return ctx.finding(
        "warning",
        "gpu",
        gpu_subject(r["node"], r["gpu"]),
        f"GPU {r['gpu']} on {r['node']} throttled ({cause}) {frac:.0%} of the window",
        {
            "throttled_fraction": round(frac, 3),
            "cause": cause,
            "power_violation_s": r["power_s"],
            "thermal_violation_s": r["thermal_s"],
            "mean_power_watts": r["power"],
            "max_temperature_c": r["temp"],
            "mean_sm_clock_hz": r["sm_clock"],
        },
    )


@detector("gpu_throttle", needs=("gpu_sample",))
def gpu_throttle(ctx: Context) -> list[Finding]:
    ratio = float(ctx.t("gpu.throttle_ratio"))
    found = (_throttle_finding(ctx, r, ratio) for r in _throttle_rows(ctx, over=False))
    return [f for f in found if f is not None]


@over_ticks("gpu_throttle")
def gpu_throttle_over(ctx: Context) -> dict[datetime, list[Finding]]:
    ratio = float(ctx.t("gpu.throttle_ratio"))
    at, out = by_tick(ctx), dict[datetime, list[Finding]]()
    for r in _throttle_rows(ctx, over=True):
        f = _throttle_finding(ctx, r, ratio)
        if f is not None:
            out.setdefault(at[r["tick"]], []).append(f)
    return out


def _stall_finding(ctx: Context, r: dict[str, Any], limit: float) -> Finding | None:
    span = r["span_s"] or 0.0
    rate = (r["inc_pci_stalled_total"] or 0.0) / span if span > 0 else 0.0
    if rate < limit:
        return None
    return ctx.finding(
        "warning",
        "nic",
        f"{r['node']}/{r['device']}",
        f"NIC {r['device']} on {r['node']}: {rate:,.0f} outbound PCIe stalls/s",
        {
            "stalls_per_second": round(rate, 1),
            "stalls": r["inc_pci_stalled_total"],
            "span_s": span,
        },
    )


def _stall_rows(ctx: Context, over: bool) -> list[dict[str, Any]]:
    """Per NIC (and judged tick, `over`) its stall counter's increase, among the NICs whose
    counter moved in the window (the range's window when `over`: every tick's movers among them)."""
    limit = float(ctx.t("nic.pcie_stalls_per_second"))
    keys = ["node", "device"]
    moved = moved_series(ctx, "nic_sample", keys, ["pci_stalled_total"]) if limit > 0 else None
    if moved == []:
        return []
    among, params = among_moved(keys, moved)
    order = " ORDER BY tick, node, device" if over else " ORDER BY node, device"
    return ctx.rows(
        increase_sql(ctx, "nic_sample", keys, ["pci_stalled_total"], among, over=over) + order,
        {**params, **(tick_params(ctx) if over else {})},
    )


@detector("nic_pcie_stall", needs=("nic_sample",))
def nic_pcie_stall(ctx: Context) -> list[Finding]:
    limit = float(ctx.t("nic.pcie_stalls_per_second"))
    found = (_stall_finding(ctx, r, limit) for r in _stall_rows(ctx, over=False))
    return [f for f in found if f is not None]


@over_ticks("nic_pcie_stall")
def nic_pcie_stall_over(ctx: Context) -> dict[datetime, list[Finding]]:
    limit = float(ctx.t("nic.pcie_stalls_per_second"))
    at, out = by_tick(ctx), dict[datetime, list[Finding]]()
    for r in _stall_rows(ctx, over=True):
        f = _stall_finding(ctx, r, limit)
        if f is not None:
            out.setdefault(at[r["tick"]], []).append(f)
    return out
