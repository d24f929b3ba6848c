"""Node detectors: XID errors, lost GPUs, GPU throttling, NIC PCIe stalls."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from telemetry import xid
from telemetry.correlate.findings import Finding
from telemetry.correlate.registry import Context, detector, over_ticks
from telemetry.correlate.sql import among_moved, in_params, increase_sql, moved_series, rate
from telemetry.correlate.timebase import per_tick, tick_join, tick_params

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


def _bus_sql(ctx: Context, *, over: bool = False) -> str:
    """(node, gpu, uuid, bus) of the GPUs sampled in the window, `bus` as the kernel's NVRM lines
    print it (logs grammar: '0000:5d:00'), from NVML's bus id ('0000:5d:00.0', or the
    '00000000:5D:00.0' of nvmlPciInfo_t.busIdLegacy). `over`: per judged tick (a `tick` column,
    timebase.tick_join), of the nodes in parameter `bus_nodes`."""
    p = "splitByChar(':', pci_bus_id)"
    tick, join, only = "", "", ""
    if over:
        tick, join = "tick, ", tick_join(ctx, "gpu_sample")
        only = " AND tick IN {ticks:Array(Int64)} AND node IN {bus_nodes:Array(String)}"
    return f"""
        SELECT {tick}node, gpu, any(uuid) AS uuid,
               lower(concat(substring({p}[1], -4), ':', {p}[2], ':', substring({p}[3], 1, 2))) AS bus
        FROM {ctx.table("gpu_sample")} {join}
        WHERE {ctx.where("gpu_sample")} AND length({p}) = 3{only}
        GROUP BY {tick}node, gpu, bus"""


def _xid_sql(ctx: Context, *, over: bool = False) -> str:
    """Per GPU and code, the window's Xids in one statement: NVML's events (`gpu_event`, `bus`
    '') and the kernel log's Xid lines (`log_event` `xid` from /dev/kmsg or a captured kernel
    log; `gpu` -1, `bus` the PCI address the line prints). Their text carries what NVML's
    events do not: Xid 154's recovery action and 'caused by previous Xid N'. `over`: per
    judged tick (a `tick` column, timebase.tick_join). NVML's rows first, then the kernel's,
    each in key order: the order gpu_xid merges them in."""
    t = "tick, " if over else ""
    only = " AND tick IN {ticks:Array(Int64)}" if over else ""
    ev = tick_join(ctx, "gpu_event") if over else ""
    lg = tick_join(ctx, "log_event") if over else ""
    return f"""
        SELECT * FROM (
        SELECT {t}0 AS kernel, node, toInt32(gpu) AS gpu, '' AS bus, xid, any(uuid) AS uuid,
               count() AS events, min(ts) AS first, max(ts) AS last,
               groupUniqArray(8)(detail) AS details
        FROM {ctx.table("gpu_event")} {ev}
        WHERE {ctx.where("gpu_event")} AND event = 'xid'{only}
        GROUP BY {t}node, gpu, xid
        UNION ALL
        SELECT {t}1, node, toInt32(-1), JSONExtractString(fields, 'pci_bus') AS bus,
               toUInt32(JSONExtractUInt(fields, 'xid')) AS xid, '', count(), min(ts), max(ts),
               groupUniqArray(8)(JSONExtractString(fields, 'message'))
        FROM {ctx.table("log_event")} {lg}
        WHERE {ctx.where("log_event")} AND kind = 'xid' AND pod = ''{only}
        GROUP BY {t}node, bus, xid)
        ORDER BY {t}kernel, node, gpu, bus, xid"""


@detector("gpu_xid", needs=("gpu_event", "log_event"))
def gpu_xid(ctx: Context) -> list[Finding]:
    """Xid events of each GPU, from NVML's events and the kernel log's Xid lines (a line on the
    GPU sampled at its PCI address, never guessed at; one Xid seen by both counts once), judged
    by NVIDIA's Xid catalog (telemetry/xid.py): the GPU's action is the strongest of its Xids'
    immediate actions (Xid 154's reported recovery, or the previous Xid's action for a line
    'caused by previous Xid N'). A GPU whose Xids are all IGNORE is a quiet finding (no
    incident) until they repeat past gpu.xid_ignore_repeats."""
    got = ctx.rows(_xid_sql(ctx))
    gpus = None
    if any(r["bus"] for r in got):  # kernel lines: their GPUs by PCI address
        gpus = {(g["node"], g["bus"]): g for g in ctx.rows(_bus_sql(ctx))}
    return _xids(ctx, got, gpus)


@over_ticks("gpu_xid")
def gpu_xid_over(ctx: Context) -> dict[datetime, list[Finding]]:
    """Set-based: every judged tick's Xids in one statement, and the GPUs at the PCI addresses
    of its kernel lines in one more (where there are any)."""
    params = tick_params(ctx)
    got = ctx.rows(_xid_sql(ctx, over=True), params)
    nodes = sorted({r["node"] for r in got if r["bus"]})
    buses: dict[int, dict[tuple[str, str], dict[str, Any]]] = {}
    if nodes:
        for g in ctx.rows(_bus_sql(ctx, over=True), {**params, "bus_nodes": nodes}):
            buses.setdefault(g["tick"], {})[(g["node"], g["bus"])] = g

    def make(c: Context, rows: list[dict[str, Any]]) -> list[Finding]:
        kernel = any(r["bus"] for r in rows)
        return _xids(c, rows, buses.get(rows[0]["tick"], {}) if kernel else None)

    return per_tick(ctx, got, make)


def _xids(
    ctx: Context,
    got: list[dict[str, Any]],
    gpus: dict[tuple[str, str], dict[str, Any]] | None,
) -> list[Finding]:
    """gpu_xid's findings at one tick from its Xid rows (_xid_sql) and, where they hold kernel
    lines, the GPUs sampled at their PCI addresses (_bus_sql)."""
    repeats = int(ctx.t("gpu.xid_ignore_repeats"))
    if gpus is not None:
        for r in got:
            if r["bus"] and (g := gpus.get((r["node"], r["bus"]))) is not None:
                r["gpu"], r["uuid"] = int(g["gpu"]), g["uuid"]
    seen: dict[tuple[str, int, int], dict[str, Any]] = {}
    for r in got:
        if int(r["gpu"]) < 0:
            continue  # a kernel line for a GPU not sampled in the window
        key = (r["node"], int(r["gpu"]), int(r["xid"]))
        had = seen.get(key)
        if had is None:
            seen[key] = dict(r)
            continue
        # NVML's event and the kernel's line of one Xid: the larger count, both texts
        had["events"] = max(int(had["events"]), int(r["events"]))
        had["first"], had["last"] = min(had["first"], r["first"]), max(had["last"], r["last"])
        had["details"] = [*had["details"], *r["details"]]
        had["uuid"] = had["uuid"] or r["uuid"]
    per_gpu: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for (node, gpu, _), r in sorted(seen.items()):
        per_gpu.setdefault((node, gpu), []).append(r)
    out = []
    for (node, gpu), rows in per_gpu.items():
        judged = [_judge(int(r["xid"]), r["details"]) for r in rows]
        action = xid.strongest(a for a, _ in judged)
        top = next(i for i, (a, _) in enumerate(judged) if a == action)
        info = xid.lookup(int(rows[top]["xid"]))
        codes = sorted(int(r["xid"]) for r in rows)
        events = sum(int(r["events"]) for r in rows)
        bucket = xid.buckets().get(action) if action else None
        repeated = action == "IGNORE" and events >= repeats > 0
        if bucket is not None and bucket.fatal:
            sev = "critical"
        elif action == "IGNORE" and not repeated:
            sev = "info"
        else:
            sev = "warning"
        evidence: dict[str, Any] = {
            "xids": codes,
            "events": events,
            "uuid": rows[0]["uuid"],
            "first": min(r["first"] for r in rows),
            "last": max(r["last"] for r in rows),
            "action": action,
            "action_from": judged[top][1],
            "xid_label": info.label,
            "mnemonics": [xid.lookup(c).label for c in codes],
            "investigatory": info.investigatory,
            "action_means": bucket.means if bucket else None,
            "catalog": xid.CATALOG_URL,
        }
        if action == "IGNORE":
            evidence["repeated"] = repeated
            # IGNORE pages no one: the finding is kept, no incident opens for it
            evidence["quiet"] = not repeated
        if action == "WORKFLOW_XID_48":
            evidence["workflow_step"] = "DRAIN_AND_RESET" if {63, 64} & set(codes) else "RESET_GPU"
        out.append(
            ctx.finding(
                sev,
                "gpu",
                gpu_subject(node, gpu),
                f"{', '.join(evidence['mnemonics'])} on {node} GPU {gpu} ({events} event(s)): "
                f"{action or 'action unknown'}",
                evidence,
            )
        )
    return out


def _judge(code: int, details: list[str]) -> tuple[str | None, str]:
    """One Xid code's action on a GPU, and where it came from: Xid 154's reported recovery, the
    previous Xid a derivative line names, or the catalog's row."""
    for d in details:
        if code == xid.XID_154 and (rec := xid.recovery_action(d)) is not None:
            return xid.effective_action(code, recovery=rec), f"Xid 154: {rec.text or rec.code}"
        if (cause := xid.caused_by(d)) is not None and cause != code:
            return xid.effective_action(code, cause=cause), f"caused by previous Xid {cause}"
    return xid.effective_action(code), "catalog"


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
            UNION ALL
            SELECT {tick}k.node, m.gpu, 0, 0, count(), min(k.ts)
            FROM (
                SELECT {tick}node, ts, JSONExtractString(fields, 'pci_bus') AS bus
                FROM {ctx.table("log_event")} {tick_join(ctx, "log_event") if over else ""}
                WHERE {ctx.where("log_event")}
                  AND kind = 'gpu_fallen_off_bus' AND pod = ''{only}
            ) AS k
            INNER JOIN ({_bus_sql(ctx)}) AS m ON k.node = m.node AND k.bus = m.bus
            GROUP BY {tick}k.node, m.gpu
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
            # NVIDIA's Xid catalog's action for a GPU fallen off the bus (Xid 79), with or
            # without the Xid line
            "action": xid.lookup(79).action,
        },
    )


@detector("gpu_lost", needs=("gpu_sample", "gpu_event", "log_event"))
def gpu_lost(ctx: Context) -> list[Finding]:
    return [_lost_finding(ctx, r) for r in ctx.rows(_lost_sql(ctx, over=False))]


@over_ticks("gpu_lost")
def gpu_lost_over(ctx: Context) -> dict[datetime, list[Finding]]:
    rows = ctx.rows(_lost_sql(ctx, over=True), tick_params(ctx))
    return per_tick(ctx, rows, lambda c, rs: [_lost_finding(c, r) for r in rs])


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
    return _found(ctx, _throttle_rows(ctx, over=False), _throttle_finding, ratio)


@over_ticks("gpu_throttle")
def gpu_throttle_over(ctx: Context) -> dict[datetime, list[Finding]]:
    ratio = float(ctx.t("gpu.throttle_ratio"))
    return per_tick(
        ctx, _throttle_rows(ctx, over=True), lambda c, rs: _found(c, rs, _throttle_finding, ratio)
    )


def _stall_finding(ctx: Context, r: dict[str, Any], limit: float) -> Finding | None:
    span = r["span_s"] or 0.0
    per_s = rate(r, "inc_pci_stalled_total")
    if per_s < limit:
        return None
    return ctx.finding(
        "warning",
        "nic",
        f"{r['node']}/{r['device']}",
        f"NIC {r['device']} on {r['node']}: {per_s:,.0f} outbound PCIe stalls/s",
        {
            "stalls_per_second": round(per_s, 1),
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
    return _found(ctx, _stall_rows(ctx, over=False), _stall_finding, limit)


@over_ticks("nic_pcie_stall")
def nic_pcie_stall_over(ctx: Context) -> dict[datetime, list[Finding]]:
    limit = float(ctx.t("nic.pcie_stalls_per_second"))
    return per_tick(
        ctx, _stall_rows(ctx, over=True), lambda c, rs: _found(c, rs, _stall_finding, limit)
    )


def _found(
    ctx: Context,
    rows: list[dict[str, Any]],
    judge: Callable[[Context, dict[str, Any], float], Finding | None],
    limit: float,
) -> list[Finding]:
    return [f for r in rows if (f := judge(ctx, r, limit)) is not None]
