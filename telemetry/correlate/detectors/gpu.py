"""GPU health detectors from NVML's counters: degraded HBM (row remaps pending or failed, retired
pages pending, repeated uncorrectable ECC) and PCIe replays from gpu_sample, NVLink errors above
a link's own baseline from nvlink_sample (per link). Xid events are node.py's gpu_xid; a GPU lost
is node.py's gpu_lost.

Reads gpu_sample and nvlink_sample only; counter increases come from sql.increase_sql (a reset
counts from zero, never a negative rate), so samples need not sit on any grid.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

from telemetry.correlate.findings import Finding
from telemetry.correlate.registry import Context, Window, detector, over_ticks
from telemetry.correlate.sql import increase_sql, rate
from telemetry.correlate.timebase import per_tick, tick_join, tick_params

GPU_KEYS = ["node", "gpu"]
LINK_KEYS = ["node", "gpu", "link"]
NVLINK_COUNTERS = {  # nvlink_sample's counters, by the words a finding uses
    "crc_flit_errors_total": "CRC (flit)",
    "crc_data_errors_total": "CRC (data)",
    "replay_errors_total": "replay",
    "recovery_errors_total": "recovery",
}


def _subject(node: str, gpu: int) -> str:
    return f"{node}/gpu{gpu}"


def _memory_rows(ctx: Context, over: bool) -> list[dict[str, Any]]:
    """Per GPU (and judged tick, `over`: its own trailing window, timebase.tick_join) with a
    degraded HBM condition in the window: its latest remap and page-retirement state, its
    greatest failure counts and its uncorrectable ECC errors' increase."""
    inc = increase_sql(ctx, "gpu_sample", GPU_KEYS, ["ecc_uncorrected_errors_total"], over=over)
    tick, on, join, only = "", "", "", ""
    if over:
        tick, on = "tick, ", "s.tick = v.tick AND "
        join, only = tick_join(ctx, "gpu_sample"), " AND tick IN {ticks:Array(Int64)}"
    return ctx.rows(
        f"""
        SELECT {"s.tick AS tick, " if over else ""}s.node AS node, s.gpu AS gpu,
               s.pending AS pending, s.failures AS failures,
               s.pages_pending AS pages_pending, s.remapped_uncorrectable AS remapped_uncorrectable,
               ifNull(v.inc_ecc_uncorrected_errors_total, 0) AS uncorrected
        FROM (
            SELECT {tick}node, gpu,
                   argMax(ifNull(remapped_rows_pending, 0), ts) AS pending,
                   max(ifNull(remapped_rows_failure_total, 0)) AS failures,
                   argMax(ifNull(retired_pages_pending, 0), ts) AS pages_pending,
                   max(ifNull(remapped_rows_uncorrectable_total, 0)) AS remapped_uncorrectable
            FROM {ctx.table("gpu_sample")} {join}
            WHERE {ctx.where("gpu_sample")} AND up = 1{only}
            GROUP BY {tick}node, gpu
        ) AS s
        LEFT JOIN ({inc}) AS v ON {on}s.node = v.node AND s.gpu = v.gpu
        WHERE s.pending > 0 OR s.failures > 0 OR s.pages_pending > 0
           OR ifNull(v.inc_ecc_uncorrected_errors_total, 0) >= {{ecc:UInt64}}
        ORDER BY {tick}node, gpu""",
        {"ecc": int(ctx.t("gpu.uncorrected_ecc_errors")), **(tick_params(ctx) if over else {})},
    )


@detector("gpu_memory_degraded", needs=("gpu_sample",))
def gpu_memory_degraded(ctx: Context) -> list[Finding]:
    """HBM that needs a GPU reset (NVIDIA's row-remapping guidance: a pending remap takes effect
    at the next reset; a pending page retirement likewise) or a replacement (a remap failure: no
    spare rows left), and uncorrectable ECC errors repeating within the window. One
    uncorrectable error is what Xid 48/94/95 report; gpu_xid follows the catalog for it."""
    return _memory_findings(ctx, _memory_rows(ctx, over=False))


@over_ticks("gpu_memory_degraded")
def gpu_memory_degraded_over(ctx: Context) -> dict[datetime, list[Finding]]:
    return per_tick(ctx, _memory_rows(ctx, over=True), _memory_findings)


def _memory_findings(ctx: Context, rows: list[dict[str, Any]]) -> list[Finding]:
    ecc = int(ctx.t("gpu.uncorrected_ecc_errors"))
    out = []
    for r in rows:
        conditions = []
        if r["failures"]:
            conditions.append(f"row remapping failed ({r['failures']}x)")
        if r["pending"]:
            conditions.append("row remap pending")
        if r["pages_pending"]:
            conditions.append("page retirement pending")
        if r["uncorrected"] >= ecc > 0:
            conditions.append(f"{r['uncorrected']:.0f} uncorrectable ECC errors")
        node, gpu = r["node"], int(r["gpu"])
        out.append(
            ctx.finding(
                "critical" if r["failures"] else "warning",
                "gpu",
                _subject(node, gpu),
                f"GPU {gpu} on {node}: HBM degraded: {', '.join(conditions)}",
                {
                    "conditions": conditions,
                    "action": "RESET_GPU",
                    "remap_pending": bool(r["pending"]),
                    "remap_failed": bool(r["failures"]),
                    "pages_pending": bool(r["pages_pending"]),
                    "uncorrected_errors": r["uncorrected"],
                    "rows_remapped_uncorrectable": r["remapped_uncorrectable"],
                },
            )
        )
    return out


@detector(
    "nvlink_errors",
    needs=("nvlink_sample",),
    lookback=("sliding.rate_seconds", "gpu.nvlink_baseline_seconds"),
)
def nvlink_errors(ctx: Context) -> list[Finding]:
    """NVLink CRC, replay or recovery errors per second of one link over the last
    sliding.rate_seconds, above both gpu.nvlink_errors_per_second and gpu.nvlink_baseline_factor
    times the same link's rate over the gpu.nvlink_baseline_seconds before (at least
    gpu.nvlink_baseline_min_seconds of it): a link that always logs a few replays is its own
    normal; one that starts to is not. One finding per GPU, naming the link whose errors rose
    most and every other link that rose too (nvlink_sample: NVML's counters per link)."""
    floor = float(ctx.t("gpu.nvlink_errors_per_second"))
    history = float(ctx.t("gpu.nvlink_baseline_min_seconds"))
    factor = float(ctx.t("gpu.nvlink_baseline_factor"))
    split = ctx.window.end - timedelta(seconds=float(ctx.t("sliding.rate_seconds")))
    recent = dataclasses.replace(ctx, window=Window(split, ctx.window.end))
    before = dataclasses.replace(ctx, window=Window(ctx.window.start, split))
    cols = list(NVLINK_COUNTERS)
    now = {
        (r["node"], int(r["gpu"]), int(r["link"])): r
        for r in recent.rows(increase_sql(recent, "nvlink_sample", LINK_KEYS, cols))
    }
    hot = {k: r for k, r in now.items() if any(rate(r, f"inc_{c}") > floor for c in cols)}
    if not hot:
        return []
    base = {
        (r["node"], int(r["gpu"]), int(r["link"])): r
        for r in before.rows(increase_sql(before, "nvlink_sample", LINK_KEYS, cols))
    }
    # per GPU: (worst rate, link, its counter, that counter's baseline, the link's evidence)
    rose: dict[tuple[str, int], list[tuple[float, int, str, float, dict[str, Any]]]] = {}
    for (node, gpu, link), r in sorted(hot.items()):
        b = base.get((node, gpu, link))
        if b is None or (b["span_s"] or 0.0) < history:
            continue  # no baseline of its own yet
        rates = {c: rate(r, f"inc_{c}") for c in cols}
        baseline = {c: rate(b, f"inc_{c}") for c in cols}
        above = [c for c in cols if rates[c] > floor and rates[c] > factor * baseline[c]]
        if not above:
            continue
        worst = max(above, key=lambda c: rates[c])
        evidence = {
            "link": link,
            "errors": [NVLINK_COUNTERS[c] for c in above],
            "errors_per_second": {NVLINK_COUNTERS[c]: round(rates[c], 2) for c in above},
            "baseline_per_second": {NVLINK_COUNTERS[c]: round(baseline[c], 3) for c in above},
            "span_s": r["span_s"],
        }
        rose.setdefault((node, gpu), []).append(
            (-rates[worst], link, worst, baseline[worst], evidence)
        )
    out = []
    for (node, gpu), links in sorted(rose.items()):
        links.sort(key=lambda x: (x[0], x[1]))
        neg_rate, link, worst, before_rate, top = links[0]
        others = [x[1] for x in links[1:]]
        also = f"; also link{'s' if len(others) > 1 else ''} {', '.join(map(str, others))}"
        out.append(
            ctx.finding(
                "warning",
                "gpu",
                _subject(node, gpu),
                f"GPU {gpu} on {node}: NVLink link {link} {NVLINK_COUNTERS[worst]} errors "
                f"{-neg_rate:.1f}/s (its baseline {before_rate:.2f}/s){also if others else ''}",
                {
                    **top,
                    "links": sorted(x[1] for x in links),
                    "per_link": [x[4] for x in links],
                },
            )
        )
    return out


def _replay_rows(ctx: Context, over: bool) -> list[dict[str, Any]]:
    """Per GPU (and judged tick, `over`) its PCIe replay counter's increase over the window."""
    order = " ORDER BY tick, node, gpu" if over else " ORDER BY node, gpu"
    return ctx.rows(
        increase_sql(ctx, "gpu_sample", GPU_KEYS, ["pcie_replay_total"], over=over) + order,
        tick_params(ctx) if over else None,
    )


@detector("pcie_replays", needs=("gpu_sample",), lookback=("gpu.pcie_replays_window_seconds",))
def pcie_replays(ctx: Context) -> list[Finding]:
    """PCIe replays of a GPU per minute above gpu.pcie_replays_per_minute (DCGM's health check
    flags more than 8 a minute), over the trailing gpu.pcie_replays_window_seconds: a marginal
    link to the GPU, its riser or its switch."""
    return _replay_findings(ctx, _replay_rows(ctx, over=False))


@over_ticks("pcie_replays")
def pcie_replays_over(ctx: Context) -> dict[datetime, list[Finding]]:
    return per_tick(ctx, _replay_rows(ctx, over=True), _replay_findings)


def _replay_findings(ctx: Context, rows: list[dict[str, Any]]) -> list[Finding]:
    limit = float(ctx.t("gpu.pcie_replays_per_minute"))
    # a rate over two samples seconds apart is noise: judge a span of half the window at least
    least = float(ctx.t("gpu.pcie_replays_window_seconds")) / 2
    out = []
    for r in rows:
        per_min = 60 * rate(r, "inc_pcie_replay_total")
        if per_min <= limit or (r["span_s"] or 0.0) < least:
            continue
        node, gpu = r["node"], int(r["gpu"])
        out.append(
            ctx.finding(
                "warning",
                "gpu",
                _subject(node, gpu),
                f"GPU {gpu} on {node}: {per_min:.0f} PCIe replays/min",
                {
                    "replays_per_minute": round(per_min, 1),
                    "replays": r["inc_pcie_replay_total"],
                    "resets": r["resets_pcie_replay_total"],
                    "span_s": r["span_s"],
                },
            )
        )
    return out
