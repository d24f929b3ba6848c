"""Topology detector: HyperNodes declared to the scheduler that disagree with the wiring (LLDP).
Uses telemetry.topology's diff of the declared tree against the graph the LLDP links draw."""

from __future__ import annotations

from typing import Any

from telemetry.correlate.findings import Finding
from telemetry.correlate.registry import Context, detector
from telemetry.correlate.sql import lldp_links


@detector("hypernode_drift", needs=("hypernode", "lldp_link"), lookback=("sliding.state_seconds",))
def hypernode_drift(ctx: Context) -> list[Finding]:
    from telemetry.correlate.attribution import declared_hypernodes
    from telemetry.topology.hypernodes import HyperNodeTree
    from telemetry.topology.physical import Fabric, diff

    specs, labels = declared_hypernodes(ctx)
    links = lldp_links(ctx)
    if not specs or not links:
        return []
    wiring = sorted(
        (r["local_device"], r["local_port"], r["remote_device"], r["remote_port"]) for r in links
    )

    def differences() -> list[Any]:
        tree = HyperNodeTree.build(specs, labels or None)
        return list(diff(tree, Fabric(links, servers=list(labels) or None)))

    out = []
    # the declarations and the wiring change with the inventory, not every tick
    for d in ctx.remembered("hypernode_drift", (specs, labels, wiring), differences):
        if d.kind == "problem":
            continue  # malformed declarations are the inventory's report, not drift
        subject = d.declared or d.subject
        out.append(
            ctx.finding(
                "warning",
                "hypernode" if d.declared else "node",
                subject,
                d.message,
                {
                    "difference": d.kind,
                    "node_or_hypernode": d.subject,
                    "tier": d.tier,
                    "declared": d.declared,
                    "observed": d.observed,
                },
            )
        )
    return out
