"""PFC per priority: pause frames on priorities that should carry none (switch ports and NICs).

Reads switch_priority_samples and nic_priority_samples; which priorities are lossless (and which
carry CNPs) is configuration (`pfc.lossless_priorities`, `pfc.cnp_priorities` in the
thresholds), never a priority written into a column name.
"""

from __future__ import annotations

from typing import Any

from telemetry.correlate.findings import Finding
from telemetry.correlate.registry import Context, detector
from telemetry.correlate.sql import increase_sql

# (kind, key columns, subject type, how a subject is named)
_SOURCES: tuple[tuple[str, list[str], str, Any], ...] = (
    ("switch_priority_sample", ["switch", "port"], "port", lambda r: f"{r['switch']}:{r['port']}"),
    (
        "nic_priority_sample",
        ["node", "netdev", "device"],
        "nic",
        lambda r: f"{r['node']}/{r['device'] or r['netdev']}",
    ),
)


@detector(
    "pfc_unexpected_priority",
    needs=("switch_priority_sample", "nic_priority_sample"),
)
def pfc_unexpected_priority(ctx: Context) -> list[Finding]:
    """A port or NIC that sent or received PFC pause frames on a priority outside the configured
    lossless ones: PFC enabled where it should not be (a DSCP/priority map or a PFC-enable bit out
    of step with the fabric), which pauses traffic the fabric meant to drop or to favour."""
    lossless = {int(p) for p in ctx.t("pfc.lossless_priorities")}
    cnp = {int(p) for p in ctx.t("pfc.cnp_priorities")}
    least = float(ctx.t("pfc.unexpected_pauses"))
    counters = ["rx_pause_total", "tx_pause_total"]
    out = []
    for kind, keys, subject_type, name in _SOURCES:
        per: dict[str, dict[int, dict[str, int]]] = {}
        for r in ctx.rows(increase_sql(ctx, kind, [*keys, "priority"], counters)):
            p = int(r["priority"])
            rx, tx = (int(r[f"inc_{c}"] or 0) for c in counters)
            if p in lossless or rx + tx == 0:
                continue
            per.setdefault(name(r), {})[p] = {"rx_pauses": rx, "tx_pauses": tx}
        for subject, prios in sorted(per.items()):
            total = sum(v["rx_pauses"] + v["tx_pauses"] for v in prios.values())
            if total < least:
                continue
            named = ", ".join(f"{p}{' (CNP)' if p in cnp else ''}" for p in sorted(prios))
            out.append(
                ctx.finding(
                    "critical" if set(prios) & cnp else "warning",
                    subject_type,
                    subject,
                    f"{subject}: {total:,} PFC pause frames on priority {named}, which should "
                    f"carry none (lossless: {', '.join(map(str, sorted(lossless))) or 'none'})",
                    {
                        "priorities": {str(p): v for p, v in sorted(prios.items())},
                        "lossless_priorities": sorted(lossless),
                        "cnp_priorities": sorted(cnp),
                    },
                )
            )
    return out
