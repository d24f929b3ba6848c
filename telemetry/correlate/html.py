"""Self-contained HTML report: inline SVG charts, no scripts, no network. A fabric heatmap of link
utilization, each reported job's path with its bottleneck highlighted, and a timeline of
incidents (findings grouped by root cause) with each incident's findings folded under it.
Reads the store; writes one file.
"""

from __future__ import annotations

import html
from datetime import datetime
from typing import Any

from telemetry.correlate import findings as fstore
from telemetry.correlate import incident_store as istore
from telemetry.correlate.report import JobReport
from telemetry.correlate.report_nccl import collective_lines, setting_line
from telemetry.store import Store, time_range

SEVERITY_COLOR = {"critical": "#d62728", "warning": "#ff7f0e", "info": "#1f77b4"}


def _e(s: Any) -> str:
    return html.escape(str(s), quote=True)


def _util_color(u: float) -> str:
    """0 -> pale green, 0.5 -> yellow, 1 -> red."""
    u = max(0.0, min(1.0, u))
    if u < 0.5:
        r, g, b = int(230 * u * 2 + 20), 200, 80
    else:
        r, g, b = 230, int(200 - 170 * (u - 0.5) * 2), 60
    return f"#{r:02x}{g:02x}{b:02x}"


def heatmap_svg(
    store: Store,
    start: datetime,
    end: datetime,
    cluster: str,
    max_ports: int = 40,
    buckets: int = 60,
) -> str:
    step = max(1, int((end - start).total_seconds() // buckets))
    rows = store.query_rows(
        f"""
        WITH ranked AS (
            SELECT switch, port, max(tx_utilization_ratio) AS peak FROM {store.table("switch_port_sample")}
            WHERE cluster = {{c:String}} AND {time_range("switch_port_sample", "s", "e")}
            GROUP BY switch, port ORDER BY peak DESC LIMIT {{n:UInt32}})
        SELECT concat(switch, ':', port) AS name, intDiv(toUnixTimestamp(ts) - toUnixTimestamp({{s:DateTime64(3, 'UTC')}}), {{step:UInt32}}) AS b,
               avg(tx_utilization_ratio) AS u
        FROM {store.table("switch_port_sample")}
        WHERE cluster = {{c:String}} AND {time_range("switch_port_sample", "s", "e")}
          AND (switch, port) GLOBAL IN (SELECT switch, port FROM ranked)  -- the top N of all shards
        GROUP BY name, b ORDER BY name, b""",
        {"c": cluster, "s": start, "e": end, "n": int(max_ports), "step": step},
    )
    if not rows:
        return '<p class="empty">No switch port samples in this range.</p>'
    names = sorted({r[0] for r in rows})
    nb = max(int(r[1]) for r in rows) + 1
    cw, ch, left, top = max(4, 720 // nb), 14, 230, 20
    w, h = left + cw * nb + 20, top + ch * len(names) + 30
    parts = [
        f'<svg class="chart heatmap" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
        f'aria-label="link utilization heatmap">'
    ]
    idx = {n: i for i, n in enumerate(names)}
    for i, n in enumerate(names):
        parts.append(
            f'<text x="{left - 6}" y="{top + i * ch + 11}" text-anchor="end" class="lbl">{_e(n)}</text>'
        )
    for i, (name, b, u) in enumerate(rows):
        x, y = left + int(b) * cw, top + idx[name] * ch
        # a sample stands until the next one of its port (samples can be sparser than buckets)
        nxt = int(rows[i + 1][1]) if i + 1 < len(rows) and rows[i + 1][0] == name else int(b) + 1
        width = cw * max(1, min(nxt - int(b), 4))
        parts.append(
            f'<rect x="{x}" y="{y}" width="{width}" height="{ch - 1}" fill="{_util_color(float(u or 0))}">'
            f"<title>{_e(name)} at +{int(b) * step}s: {float(u or 0):.0%}</title></rect>"
        )
    parts.append(f'<text x="{left}" y="{h - 8}" class="lbl">{start:%H:%M}Z</text>')
    parts.append(
        f'<text x="{left + cw * nb}" y="{h - 8}" text-anchor="end" class="lbl">{end:%H:%M}Z</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def path_svg(rep: JobReport) -> str:
    layers = ["gpu", "nic", "leaf_port", "fabric_port", "placement"]
    cols = {layer: [h for h in rep.hops if h.layer == layer] for layer in layers}
    cols = {k: sorted(v, key=lambda h: -h.score)[:8] for k, v in cols.items() if v}
    if not cols:
        return '<p class="empty">No hops found for this job.</p>'
    top = rep.hops[0] if rep.hops else None
    bw, bh, gap = 180, 26, 28
    w = len(cols) * (bw + gap) + 20
    h = 40 + max(len(v) for v in cols.values()) * (bh + 6) + 10
    parts = [
        f'<svg class="chart path" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
        f'aria-label="job path">'
    ]
    for ci, (layer, hops) in enumerate(cols.items()):
        x = 10 + ci * (bw + gap)
        parts.append(f'<text x="{x}" y="18" class="hdr">{_e(layer)}</text>')
        if ci:
            parts.append(
                f'<line x1="{x - gap + 4}" y1="{30 + bh / 2}" x2="{x - 4}" y2="{30 + bh / 2}" class="arrow"/>'
            )
        for ri, hop in enumerate(hops):
            y = 30 + ri * (bh + 6)
            bottleneck = top is not None and hop is top and hop.score >= 0.5
            stroke = (
                ' stroke="#000" stroke-width="3" class="bottleneck"'
                if bottleneck
                else ' stroke="#888"'
            )
            ev = "; ".join(hop.evidence_for[:3] or hop.evidence_against[:2])
            parts.append(
                f'<rect x="{x}" y="{y}" width="{bw}" height="{bh}" rx="4" fill="{_util_color(hop.score)}"{stroke}>'
                f"<title>{_e(hop.name)} score {hop.score:.2f}: {_e(ev)}</title></rect>"
            )
            parts.append(
                f'<text x="{x + 6}" y="{y + 17}" class="box">{_e(hop.name[:28])} {hop.score:.2f}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def timeline_svg(
    rows: list[dict[str, Any]], start: datetime, end: datetime, what: str = "findings"
) -> str:
    """One bar per row (kind, subject, severity, summary, first_seen, last_seen)."""
    if not rows:
        return f'<p class="empty">No {what} in this range.</p>'
    rows = sorted(rows, key=lambda f: (f["first_seen"], f["kind"]))[:60]
    span = max(1.0, (end - start).total_seconds())
    left, width, rh = 330, 640, 16
    h = 30 + len(rows) * rh
    parts = [
        f'<svg class="chart timeline" xmlns="http://www.w3.org/2000/svg" width="{left + width + 20}" height="{h}" '
        f'role="img" aria-label="{what} timeline">'
    ]
    for i, f in enumerate(rows):
        y = 10 + i * rh
        fs, ls = (
            f["first_seen"].replace(tzinfo=start.tzinfo),
            f["last_seen"].replace(tzinfo=start.tzinfo),
        )
        x0 = left + width * max(0.0, (fs - start).total_seconds()) / span
        x1 = left + width * min(span, (ls - start).total_seconds()) / span
        parts.append(
            f'<text x="{left - 6}" y="{y + 11}" text-anchor="end" class="lbl">{_e(f["kind"])} {_e(f["subject"][:34])}</text>'
        )
        parts.append(
            f'<rect x="{x0:.1f}" y="{y}" width="{max(3.0, x1 - x0):.1f}" height="{rh - 3}" '
            f'fill="{SEVERITY_COLOR.get(f["severity"], "#999")}"><title>{_e(f["summary"])}</title></rect>'
        )
    parts.append(
        f'<text x="{left}" y="{h - 4}" class="lbl">{start:%H:%M}Z</text>'
        f'<text x="{left + width}" y="{h - 4}" text-anchor="end" class="lbl">{end:%H:%M}Z</text></svg>'
    )
    return "".join(parts)


CSS = """
body{font:14px system-ui,sans-serif;margin:24px;color:#222} h1{font-size:22px} h2{font-size:18px;margin-top:28px}
.lbl{font:10px monospace;fill:#333} .hdr{font:12px sans-serif;font-weight:bold} .box{font:10px monospace;fill:#111}
.arrow{stroke:#666;stroke-width:2} table{border-collapse:collapse} td,th{border:1px solid #ccc;padding:3px 6px;font-size:12px}
details.incident{margin:4px 0} details.incident summary{cursor:pointer;font-size:13px}
.critical{color:#d62728;font-weight:bold} .warning{color:#b35900} .info{color:#1f77b4} .empty{color:#777;font-style:italic}
"""


def incidents_html(incs: list[dict[str, Any]], findings: list[dict[str, Any]]) -> str:
    """Each incident as a <details> block: its line, then its findings (root first) folded."""
    by_id = {f["finding_id"]: f for f in findings}
    out = []
    for inc in sorted(incs, key=lambda r: (r["first_seen"], r["incident_id"])):
        sev = _e(inc["severity"])
        jobs = ", ".join(inc["jobs"]) or "no job"
        out.append(
            f'<details class="incident"><summary><span class="{sev}">{sev}</span> {_e(inc["state"])} · '
            f"{inc['first_seen']:%H:%M}..{inc['last_seen']:%H:%M}Z · <b>{_e(inc['root_kind'])}</b> "
            f"{_e(inc['root_subject'])} · {inc['findings']} finding(s) · {_e(jobs)} · "
            f"{inc['gpu_hours']:.1f} GPU-h · {_e(inc['summary'])}</summary>"
            + _what_to_do(inc.get("remediation", ""), inc.get("runbook", ""))
            + "<table><tr><th>role</th><th>severity</th><th>kind</th><th>subject</th><th>first seen</th><th>summary</th></tr>"
        )
        for i, fid in enumerate(inc["finding_ids"]):
            f = by_id.get(fid)
            if f is None:
                continue
            out.append(
                f"<tr><td>{'root' if i == 0 else ''}</td>"
                f'<td class="{_e(f["severity"])}">{_e(f["severity"])}</td><td>{_e(f["kind"])}</td>'
                f"<td>{_e(f['subject'])}</td><td>{f['first_seen']:%H:%M:%S}Z</td><td>{_e(f['summary'])}</td></tr>"
            )
        out.append("</table></details>")
    return "".join(out)


def _what_to_do(text: str, runbook: str) -> str:
    """An incident's (or finding's) remediation, with a link to its kind's runbook."""
    if not text:
        return ""
    link = f' (<a href="{_e(runbook)}">runbook</a>)' if runbook else ""
    return f'<p class="do"><b>What to do:</b> {_e(text)}{link}</p>'


def render_html(
    store: Store, start: datetime, end: datetime, *, cluster: str, jobs: list[JobReport]
) -> str:
    rows = fstore.read(store, cluster=cluster, since=start, until=end, limit=5000)
    incs = istore.read(store, cluster=cluster, since=start, until=end, limit=1000)
    grouped = {fid for i in incs for fid in i["finding_ids"]}
    members = [f for f in rows if f["finding_id"] in grouped]
    missing = grouped - {f["finding_id"] for f in members}
    if missing:  # a member outside the range: read it by id
        members += fstore.read(store, cluster=cluster, ids=sorted(missing), limit=len(missing))
    bars = [
        {
            "kind": f"{i['findings']}x {i['root_kind']}",
            "subject": i["root_subject"],
            "severity": i["severity"],
            "summary": i["summary"],
            "first_seen": i["first_seen"],
            "last_seen": i["last_seen"],
        }
        for i in incs
    ]
    body = [
        f"<h1>railscope report — cluster {_e(cluster)}</h1>",
        f"<p>{start:%Y-%m-%d %H:%M}Z .. {end:%Y-%m-%d %H:%M}Z · {len(incs)} incident(s) from "
        f"{len(rows)} finding(s)</p>",
        "<h2>Fabric: link utilization</h2>",
        heatmap_svg(store, start, end, cluster),
        "<h2>Incidents timeline</h2>",
        timeline_svg(bars, start, end, "incidents"),
        "<h2>Incidents</h2>",
        incidents_html(incs, members) or '<p class="empty">No incidents in this range.</p>',
    ]
    for rep in jobs:
        body += [
            f"<h2>Job {_e(rep.namespace)}/{_e(rep.job)}</h2>",
            f"<p>{_e(rep.verdict)}</p>",
            *(
                ["<h3>Collective bandwidth (NCCL Inspector)</h3><ul>"]
                + [
                    f"<li>{_e(c)}</li>"
                    for c in collective_lines(rep.collectives, rep.communicators)
                ]
                + ["</ul>"]
                if rep.collectives
                else []
            ),
            *(
                [
                    "<h3>Log events</h3>",
                    timeline_svg(
                        [
                            {
                                "kind": e["kind"],
                                "subject": e["place"],
                                "first_seen": e["first"],
                                "last_seen": e["last"],
                                "severity": "critical" if e["trouble"] else "info",
                                "summary": f"{e['n']}x {e['excerpt']}",
                            }
                            for e in rep.log_events
                        ],
                        start,
                        end,
                        "log events",
                    ),
                ]
                if rep.log_events
                else []
            ),
            *(
                [f"<p>NCCL settings of its pods: {_e(setting_line(rep.nccl_settings))}</p>"]
                if rep.nccl_settings
                else []
            ),
            *(
                ["<h3>What to do</h3><ul>"]
                + [
                    f"<li>[{_e(r['kind'])}] {_e(r['remediation'])} "
                    f'(<a href="{_e(r["runbook"])}">runbook</a>)</li>'
                    for r in rep.remediations[:10]
                ]
                + ["</ul>"]
                if rep.remediations
                else []
            ),
            path_svg(rep),
            "<table><tr><th>rank</th><th>score</th><th>layer</th><th>hop</th><th>evidence for</th><th>against</th></tr>",
        ]
        for i, hp in enumerate(rep.hops[:20], 1):
            body.append(
                f"<tr><td>{i}</td><td>{hp.score:.2f}</td><td>{_e(hp.layer)}</td><td>{_e(hp.name)}</td>"
                f"<td>{_e('; '.join(hp.evidence_for))}</td><td>{_e('; '.join(hp.evidence_against))}</td></tr>"
            )
        body.append("</table>")
    loose = [f for f in rows if f["finding_id"] not in grouped]
    if loose:
        body.append(
            "<h2>Findings not in an incident</h2><table><tr><th>severity</th><th>kind</th><th>subject</th>"
            "<th>first seen</th><th>summary</th></tr>"
        )
        for f in loose[:300]:
            body.append(
                f'<tr><td class="{_e(f["severity"])}">{_e(f["severity"])}</td><td>{_e(f["kind"])}</td><td>{_e(f["subject"])}</td>'
                f"<td>{f['first_seen']:%H:%M}Z</td><td>{_e(f['summary'])}</td></tr>"
            )
        body.append("</table>")
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>railscope report</title>"
        f"<style>{CSS}</style></head><body>{''.join(body)}</body></html>"
    )
