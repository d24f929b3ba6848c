"""Per-job end-to-end view: the path a job's traffic takes (GPU -> NIC -> leaf port -> uplinks ->
spine ...) and, per hop, the evidence for and against it being the bottleneck, ranked.

Reads stored facts and findings only. Scores are 0..1 "how saturated / impaired is this hop";
the thresholds that turn a number into a sentence come from thresholds.yaml.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from telemetry.correlate import findings as fstore
from telemetry.correlate.registry import Context, Window
from telemetry.correlate.remediation import remediation, runbook
from telemetry.correlate.report_logs import log_events, timeline_lines
from telemetry.correlate.report_nccl import (
    collective_lines,
    collectives,
    communicators,
    setting_line,
    settings,
)
from telemetry.correlate.sql import increase_cols, increase_sql, lldp_peers, rate
from telemetry.correlate.thresholds import default_thresholds
from telemetry.errors import UserError
from telemetry.store import Store
from telemetry.text import human_bytes
from telemetry.times import valid_during


@dataclass
class Hop:
    layer: str  # gpu | nic | leaf_port | fabric_port | placement
    name: str
    score: float
    evidence_for: list[str] = field(default_factory=list)
    evidence_against: list[str] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass
class JobReport:
    namespace: str
    job: str
    start: datetime
    end: datetime
    pods: list[dict[str, str]]
    hops: list[Hop]
    findings: list[dict[str, Any]]
    bytes_sent: int
    verdict: str
    # NCCL Inspector: bus bandwidth per collective and message size, this window vs the baseline
    # before it (collective.baseline_seconds); empty when the job's ranks write no Inspector dumps
    collectives: list[dict[str, Any]] = field(default_factory=list)
    # the job's NCCL communicators seen in the window (comm id, ranks, nodes, collectives)
    communicators: list[dict[str, Any]] = field(default_factory=list)
    # the NCCL settings of its pods in the window (name, value, pods); nccl_settings
    nccl_settings: list[dict[str, Any]] = field(default_factory=list)
    # what to do: one line per finding on the job and its path (kinds.yaml `do`), worst first
    remediations: list[dict[str, Any]] = field(default_factory=list)
    # what its pods and nodes logged, per kind and place (report_logs.py), oldest first
    log_events: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["start"], d["end"] = self.start.isoformat(), self.end.isoformat()
        for f in d["findings"]:
            for k in ("window_start", "window_end", "first_seen", "last_seen", "updated_at"):
                if isinstance(f.get(k), datetime):
                    f[k] = f[k].isoformat()
        for e in d["log_events"]:
            e["first"], e["last"] = e["first"].isoformat(), e["last"].isoformat()
        return d


def job_report(
    store: Store,
    job: str,
    start: datetime,
    end: datetime,
    *,
    cluster: str = "default",
    thresholds: dict[str, Any] | None = None,
) -> JobReport:
    if "/" not in job:
        raise UserError(f"job {job!r}: give NAMESPACE/NAME")
    ns, name = job.split("/", 1)
    ctx = Context(store, Window(start, end), thresholds or default_thresholds(), cluster)
    path = job_path(ctx, job)
    sent = (
        ctx.rows(
            f"""
        SELECT sum(bytes) AS b FROM {ctx.table("attributed_flow")}
        WHERE {ctx.where("attributed_flow")}
          AND src_namespace = {{ns:String}} AND src_job = {{job:String}}""",
            {"ns": ns, "job": name},
        )[0]["b"]
        or 0
    )
    hops = path.hops
    top = hops[0] if hops else None
    verdict = (
        (
            f"most likely bottleneck: {top.layer} {top.name} (score {top.score:.2f}): "
            + (top.evidence_for[0] if top.evidence_for else "highest load on the path")
        )
        if top and top.score >= 0.5
        else "no hop on the path looks saturated or impaired"
    )
    return JobReport(
        ns,
        name,
        start,
        end,
        path.pods,
        hops,
        path.related,
        int(sent),
        verdict,
        collectives(ctx, ns, name),
        communicators(ctx, ns, name),
        settings(ctx, ns, name),
        _remediations(path.related, job),
        log_events(ctx, ns, name, path.nodes),
    )


@dataclass
class JobPath:
    """A job's pods and nodes over `ctx`'s window, its path's hops ranked (highest score first)
    and the findings on the job and its path (job_path)."""

    pods: list[dict[str, Any]]
    nodes: list[str]
    hops: list[Hop]
    related: list[dict[str, Any]]


def job_path(ctx: Context, job: str) -> JobPath:
    """The part of job_report that ranks the path: the job's pods, its GPU, NIC, leaf and fabric
    port hops scored by their samples over the window, and by the findings stored on them (a
    placement hop, the PFC pause sources). What collective_slowdown names as causes; the report
    adds the bytes sent, NCCL collectives and settings, remediations and log lines."""
    ns, name = job.split("/", 1)
    p = {"ns": ns, "job": name}
    pods = ctx.rows(
        f"""
        SELECT pod, argMax(node, valid_from) AS node FROM {ctx.table("pod", final=True)}
        WHERE cluster = {{cluster:String}} AND namespace = {{ns:String}} AND job = {{job:String}}
          AND {valid_during()}
        GROUP BY pod ORDER BY pod""",
        p,
    )
    start, end = ctx.window.start, ctx.window.end
    if not pods:
        raise UserError(
            f"job {job}: no pods of it in the store between {start:%Y-%m-%d %H:%M}Z and {end:%Y-%m-%d %H:%M}Z"
        )
    nodes = sorted({r["node"] for r in pods if r["node"]})
    hops: list[Hop] = []
    hops += _gpu_hops(ctx, nodes)
    nic_hops, nic_ports = _nic_hops(ctx, nodes)
    hops += nic_hops
    used = ctx.rows(
        f"""
        SELECT switch, out_port AS port, sum(bytes) AS bytes FROM {ctx.table("attributed_flow")}
        WHERE {ctx.where("attributed_flow")}
          AND src_namespace = {{ns:String}} AND src_job = {{job:String}} AND out_port != ''
        GROUP BY switch, out_port ORDER BY bytes DESC LIMIT 32""",
        p,
    )
    leaf_set = {(s, pt) for s, pt in nic_ports}
    leaf_hops, fabric_hops = _port_hops(
        ctx,
        nic_ports,
        [(u["switch"], u["port"]) for u in used if (u["switch"], u["port"]) not in leaf_set],
        {(u["switch"], u["port"]): int(u["bytes"]) for u in used},
    )
    hops += leaf_hops + fabric_hops
    hop_names = {h.name for h in hops}

    def touches(f: dict[str, Any]) -> bool:
        """A finding about the job, one of its nodes (GPU/NIC subjects are NODE/...) or a hop."""
        s = f["subject"]
        return s == job or s.startswith(job + "/") or s in hop_names or s.split("/")[0] in nodes

    ctx.outputs_written()
    window = fstore.read(ctx.store, cluster=ctx.cluster, since=start, until=end, limit=5000)
    related = [f for f in window if touches(f)]
    placement = [f for f in related if f["category"] == "placement" and f["subject"] == job]
    if placement:  # one hop for the job's placement, whatever number of findings say so
        crit = any(f["severity"] == "critical" for f in placement)
        hops.append(
            Hop(
                "placement",
                job,
                0.6 if crit else 0.4,
                [],
                [],
                {"findings": sorted({f["kind"] for f in placement})},
            )
        )
    from telemetry.correlate.incidents import consequence_kinds

    effects = consequence_kinds()
    for h in hops:  # findings on a hop are evidence for it
        for f in related:
            if f["subject"] == h.name and f["summary"] not in h.evidence_for:
                h.evidence_for.append(f"[{f['kind']}] {f['summary']}")
                # a hop a cause's finding names ranks above hops that only show symptoms
                # (paused, rate-limited: 0.8 at most), so the top cause a slowed job's summary
                # names is the one its incident groups it under
                crit = f["severity"] == "critical"
                cause = f["kind"] not in effects
                h.score = max(
                    h.score, (0.95 if crit else 0.85) if cause else (0.9 if crit else 0.7)
                )
    hops += _pause_sources(hops, window, related)
    hops.sort(key=lambda h: -h.score)
    return JobPath(pods, nodes, hops, related)


def _remediations(findings: list[dict[str, Any]], job: str) -> list[dict[str, Any]]:
    """What to do about each finding on the job and its path: critical first, then the job's
    own (its settings, its placement) before its path's; one line per distinct remediation."""
    rank = {"critical": 0, "warning": 1, "info": 2}

    def order(f: dict[str, Any]) -> tuple[Any, ...]:
        own = f["subject"] == job or f["subject"].startswith(job + "/")
        return (rank.get(f["severity"], 3), not own, f["kind"], f["subject"])

    out: dict[str, dict[str, Any]] = {}
    for f in sorted(findings, key=order):
        text = remediation(f["kind"], f["subject_type"], f["subject"], f["evidence"] or {})
        if text and text not in out:
            out[text] = {"kind": f["kind"], "subject": f["subject"], "severity": f["severity"],
                         "action": (f["evidence"] or {}).get("action"),
                         "remediation": text, "runbook": runbook(f["kind"])}  # fmt: skip
    return list(out.values())


def _pause_sources(
    hops: list[Hop], window: list[dict[str, Any]], related: list[dict[str, Any]]
) -> list[Hop]:
    """PFC spreads congestion backwards: a leaf port that pauses the job's NIC may carry none of
    the congested traffic itself; the congestion sits on another port of the same switch (a
    collided uplink, a storming neighbour) whose queue filled the shared buffer. Each finding on
    another port of a switch that paused the job becomes a hop of its own, ranked just above the
    paused hop it explains (a cause above an effect), its evidence naming the pause it causes."""
    paused = {
        h.name.split(":")[0]: h
        for h in sorted(hops, key=lambda h: h.score)
        if h.layer == "leaf_port" and any(e.startswith("PFC pauses") for e in h.evidence_for)
    }
    from telemetry.correlate.incidents import consequence_kinds

    effects = consequence_kinds()  # an effect (ECN marks) ranks below a cause (a collision)
    names = {h.name for h in hops}
    out: dict[str, Hop] = {}
    for f in window:
        switch, sep, _ = f["subject"].partition(":")
        victim = paused.get(switch) if sep else None
        if victim is None or f["subject"] in names:
            continue
        h = out.setdefault(f["subject"], Hop("fabric_port", f["subject"], 0.0))
        lead = 0.02 if f["kind"] in effects else 0.05
        h.score = max(h.score, min(1.0, victim.score + lead))
        h.evidence_for.append(f"[{f['kind']}] {f['summary']}")
        if not any(e.startswith("congestion on the switch") for e in h.evidence_for):
            h.evidence_for.append(
                f"congestion on the switch that pauses the job at {victim.name} (PFC)"
            )
        related.append(f)
    return list(out.values())


def _gpu_hops(ctx: Context, nodes: list[str]) -> list[Hop]:
    mask = int(ctx.t("gpu.throttle_reason_mask"))
    out = []
    for r in ctx.rows(
        f"""
        SELECT node, avg(utilization_ratio) AS util, min(utilization_ratio) AS min_util, countIf(up = 0) AS down,
               countIf(bitAnd(ifNull(clock_event_reasons, 0), {{mask:UInt64}}) != 0) / count() AS throttled, count() AS n
        FROM {ctx.table("gpu_sample")}
        WHERE {ctx.where("gpu_sample")}
          AND node IN {{nodes:Array(String)}}
        GROUP BY node ORDER BY node""",
        {"nodes": nodes, "mask": mask},
    ):
        util = float(r["util"] or 0.0)
        h = Hop(
            "gpu",
            f"{r['node']}/gpus",
            0.0,
            metrics={
                "mean_utilization": round(util, 3),
                "throttled_fraction": round(float(r["throttled"] or 0), 3),
            },
        )
        if r["down"]:
            h.score = 1.0
            h.evidence_for.append(f"{r['down']} sample(s) with a GPU lost")
        if (r["throttled"] or 0) >= ctx.t("gpu.throttle_ratio"):
            h.score = max(h.score, 0.7)
            h.evidence_for.append(f"GPUs throttled {r['throttled']:.0%} of the time")
        if util < 0.5:
            h.evidence_against.append(f"GPUs only {util:.0%} busy: they wait for something else")
        else:
            h.evidence_for.append(f"GPUs {util:.0%} busy")
            h.score = max(h.score, 0.3 * util)
        out.append(h)
    return out


def _nic_hops(ctx: Context, nodes: list[str]) -> tuple[list[Hop], list[tuple[str, str]]]:
    keys, counters = (
        ["node", "device", "netdev"],
        ["tx_bytes_total", "pfc_rx_pause_total", "cnp_handled_total", "pci_stalled_total"],
    )
    inc = increase_sql(ctx, "nic_sample", keys, counters, {"node": "nodes"})
    rates = {
        (r["node"], r["device"]): r
        for r in ctx.rows(
            f"""
        SELECT {increase_cols("i", keys, counters)}, c.cap AS cap FROM ({inc}) AS i
        LEFT JOIN (SELECT node, device, max(rate_bytes_per_second) AS cap FROM {ctx.table("nic_sample")}
                   WHERE {ctx.where("nic_sample")}
                   GROUP BY node, device) AS c USING (node, device)""",
            {"nodes": nodes},
        )
    }
    peers = lldp_peers(ctx)  # the nodes' NICs are looked up by (node, device or netdev)
    hops, ports = [], []
    storm = float(ctx.t("pfc.storm_pauses_per_second"))
    for (node, dev), r in sorted(rates.items()):
        cap = float(r["cap"] or 0.0)
        tx = rate(r, "inc_tx_bytes_total")
        util = tx / cap if cap else 0.0
        h = Hop(
            "nic",
            f"{node}/{dev}",
            min(1.0, util),
            metrics={
                "tx_bytes_per_second": round(tx),
                "utilization": round(util, 3),
                "pfc_rx_pauses_per_second": round(rate(r, "inc_pfc_rx_pause_total")),
                "cnp_handled_per_second": round(rate(r, "inc_cnp_handled_total")),
            },
        )
        (h.evidence_for if util >= 0.8 else h.evidence_against).append(
            f"transmit at {util:.0%} of line rate"
        )
        if rate(r, "inc_pfc_rx_pause_total") >= storm / 10:
            h.score = max(h.score, 0.8)
            h.evidence_for.append(
                f"paused by the switch {rate(r, 'inc_pfc_rx_pause_total'):,.0f} times/s"
            )
        if rate(r, "inc_cnp_handled_total") >= ctx.t("ecn.cnp_per_second"):
            h.score = max(h.score, 0.6)
            h.evidence_for.append(
                f"rate-limited by congestion control ({rate(r, 'inc_cnp_handled_total'):,.0f} CNPs/s handled)"
            )
        if rate(r, "inc_pci_stalled_total") >= ctx.t("nic.pcie_stalls_per_second"):
            h.score = max(h.score, 0.8)
            h.evidence_for.append(f"PCIe stalls {rate(r, 'inc_pci_stalled_total'):,.0f}/s")
        hops.append(h)
        peer = peers.get((node, dev)) or peers.get((node, r["netdev"]))
        if peer:
            ports.append(peer)
    return hops, ports


def _port_hops(
    ctx: Context,
    leaf: list[tuple[str, str]],
    fabric: list[tuple[str, str]],
    job_bytes: dict[tuple[str, str], int],
) -> tuple[list[Hop], list[Hop]]:
    """The leaf ports under the job's NICs and the fabric ports its flows left by (`job_bytes`
    each), scored by their samples: one statement for both (each port's counters and
    utilization are its own, whatever other ports are read with it)."""
    ports = set(leaf) | set(fabric)
    if not ports:
        return [], []
    counters = ["pfc_rx_pause_total", "pfc_tx_pause_total", "tx_discards_total"]
    inc = increase_sql(
        ctx,
        "switch_port_sample",
        ["switch", "port"],
        counters,
        {("switch", "port"): "ports"},
    )
    q = increase_sql(
        ctx,
        "switch_queue_sample",
        ["switch", "port"],
        ["ecn_marked_packets_total", "tx_packets_total"],
        {("switch", "port"): "ports"},
    )
    rows = ctx.rows(
        f"""
        SELECT {increase_cols("i", ["switch", "port"], counters)}, u.util AS util,
               e.inc_ecn_marked_packets_total AS marked, e.inc_tx_packets_total AS pkts
        FROM ({inc}) AS i
        LEFT JOIN (SELECT switch, port, avg(tx_utilization_ratio) AS util FROM {ctx.table("switch_port_sample")}
                   WHERE {ctx.where("switch_port_sample")}
                   GROUP BY switch, port) AS u USING (switch, port)
        LEFT JOIN ({q}) AS e USING (switch, port)""",
        {"ports": sorted(ports)},
    )
    leaf_hops: list[Hop] = []
    fabric_hops: list[Hop] = []
    leaf_set = set(leaf)
    storm = float(ctx.t("pfc.storm_pauses_per_second"))
    for r in sorted(rows, key=lambda r: (r["switch"], r["port"])):
        util = float(r["util"] or 0.0)
        name = f"{r['switch']}:{r['port']}"
        at_leaf = (r["switch"], r["port"]) in leaf_set
        layer = "leaf_port" if at_leaf else "fabric_port"
        h = Hop(layer, name, min(1.0, util), metrics={"utilization": round(util, 3)})
        if not at_leaf and job_bytes:
            h.metrics["job_bytes"] = job_bytes.get((r["switch"], r["port"]), 0)
        (h.evidence_for if util >= 0.8 else h.evidence_against).append(f"{util:.0%} utilized")
        pauses = rate(r, "inc_pfc_rx_pause_total") + rate(r, "inc_pfc_tx_pause_total")
        if pauses >= storm / 10:
            h.score = max(h.score, 0.8)
            h.evidence_for.append(f"PFC pauses {pauses:,.0f}/s")
        if r["pkts"] and (r["marked"] or 0) / r["pkts"] >= ctx.t("ecn.marked_ratio"):
            h.score = max(h.score, 0.6)
            h.evidence_for.append(f"{(r['marked'] or 0) / r['pkts']:.0%} of packets ECN-marked")
        if (r["inc_tx_discards_total"] or 0) > 0:
            h.score = max(h.score, 0.5)
            h.evidence_for.append(f"{r['inc_tx_discards_total']:,.0f} packets discarded")
        (leaf_hops if at_leaf else fabric_hops).append(h)
    return leaf_hops, fabric_hops


def render_text(rep: JobReport) -> str:
    lines = [
        f"job {rep.namespace}/{rep.job}  {rep.start:%Y-%m-%d %H:%M}Z .. {rep.end:%Y-%m-%d %H:%M}Z",
        f"  pods: {len(rep.pods)} on {len({p['node'] for p in rep.pods})} node(s); sent {human_bytes(rep.bytes_sent)} (sampled flows)",
        f"  {rep.verdict}",
    ]
    if rep.collectives:  # what the job felt, above the hops that may explain it
        lines += ["", "  collectives (NCCL Inspector):"] + [
            f"    {c}" for c in collective_lines(rep.collectives, rep.communicators)
        ]
    if rep.nccl_settings:
        lines += ["", "  NCCL settings of its pods: " + setting_line(rep.nccl_settings)]
    lines += ["", "  rank  score  layer        hop                                   evidence"]
    for i, h in enumerate(rep.hops[:25], 1):
        ev = "; ".join(h.evidence_for[:2]) or (
            "(against) " + "; ".join(h.evidence_against[:1]) if h.evidence_against else ""
        )
        lines.append(f"  {i:>4}  {h.score:5.2f}  {h.layer:<11}  {h.name:<36}  {ev}")
    if rep.findings:
        lines += ["", "  findings on this job's path:"]
        lines += [
            f"    {f['severity']:<8} {f['kind']:<22} {f['subject']}: {f['summary']}"
            for f in rep.findings[:20]
        ]
    if rep.log_events:
        lines += ["", "  log events (pods' and nodes' logs, timeline):"]
        lines += [f"    {x}" for x in timeline_lines(rep.log_events)]
    if rep.remediations:
        lines += ["", "  what to do:"]
        lines += [
            f"    [{r['kind']}{' ' + r['action'] if r.get('action') else ''}] {r['remediation']}"
            for r in rep.remediations[:10]
        ]
    return "\n".join(lines) + "\n"
