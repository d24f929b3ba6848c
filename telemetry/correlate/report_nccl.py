"""The NCCL part of a job's report: what its collectives felt (bus bandwidth per collective, size,
algorithm and protocol, now and before), its communicators, and the NCCL settings of its pods.

Reads collective_samples and nccl_settings only; the report (report.py) places these above the
hops that may explain them. Never writes.
"""

from __future__ import annotations

from typing import Any

from telemetry.correlate.registry import Context
from telemetry.times import valid_during


def collectives(ctx: Context, ns: str, job: str) -> list[dict[str, Any]]:
    """What the job's collectives felt: the median bus bandwidth of each (collective, message
    size, algorithm, protocol) in the window and in the baseline before it, and the change;
    largest drop first. Algorithm and protocol are '' from Inspector captures before v4.2."""
    base_s = float(ctx.t("collective.baseline_seconds"))
    rows = ctx.rows(
        f"""
        SELECT collective, msg_size_bucket AS size, algorithm, protocol,
               quantileExactIf(0.5)(bus_bandwidth_gbs, ts >= {{ws:DateTime64(3, 'UTC')}}) AS now_gbs,
               quantileExactIf(0.5)(bus_bandwidth_gbs, ts < {{ws:DateTime64(3, 'UTC')}}) AS base_gbs,
               countIf(ts >= {{ws:DateTime64(3, 'UTC')}}) AS n
        FROM {ctx.table("collective_sample")}
        WHERE cluster = {{cluster:String}} AND namespace = {{ns:String}} AND job = {{job:String}}
          AND ts >= {{ws:DateTime64(3, 'UTC')}} - toIntervalMillisecond({{base_ms:Int64}})
          AND ts < {{we:DateTime64(3, 'UTC')}}
        GROUP BY collective, size, algorithm, protocol HAVING n > 0""",
        {"ns": ns, "job": job, "base_ms": int(base_s * 1000)},
    )
    out = []
    for r in rows:
        now, base = float(r["now_gbs"]), float(r["base_gbs"] or 0.0)
        change = (now - base) / base if base > 0 else None
        out.append(
            {
                "collective": r["collective"],
                "msg_size": r["size"],
                "algorithm": r["algorithm"],
                "protocol": r["protocol"],
                "bus_bandwidth_gbs": round(now, 2),
                "baseline_gbs": round(base, 2) if base > 0 else None,
                "change_ratio": round(change, 3) if change is not None else None,
                "samples": int(r["n"]),
            }
        )
    return sorted(
        out,
        key=lambda c: (
            c["change_ratio"] if c["change_ratio"] is not None else 0.0,
            c["collective"],
            c["msg_size"],
            c["algorithm"],
        ),
    )


def communicators(ctx: Context, ns: str, job: str) -> list[dict[str, Any]]:
    """The job's communicators (NCCL comm ids) in the window: the size each declares (ranks,
    nodes), how many of its ranks reported, on which nodes, running which collectives."""
    rows = ctx.rows(
        f"""
        SELECT comm_id, max(n_ranks) AS n_ranks, max(n_nodes) AS n_nodes,
               uniqExact(rank) AS ranks_seen, arraySort(groupUniqArray(node)) AS nodes,
               arraySort(groupUniqArray(collective)) AS collectives, count() AS samples
        FROM {ctx.table("collective_sample")}
        WHERE {ctx.where("collective_sample")} AND namespace = {{ns:String}} AND job = {{job:String}}
        GROUP BY comm_id ORDER BY n_ranks DESC, comm_id""",
        {"ns": ns, "job": job},
    )
    return [
        {
            "comm_id": r["comm_id"],
            "n_ranks": int(r["n_ranks"]),
            "n_nodes": int(r["n_nodes"]),
            "ranks_seen": int(r["ranks_seen"]),
            "nodes": list(r["nodes"]),
            "collectives": list(r["collectives"]),
            "samples": int(r["samples"]),
        }
        for r in rows
    ]


def settings(ctx: Context, ns: str, job: str) -> list[dict[str, Any]]:
    """The NCCL settings of the job's pods in the window: each (name, value, source) and how many
    pods carry it."""
    rows = ctx.rows(
        f"""
        SELECT name, value, source, any(ref) AS ref, uniqExact(pod) AS pods
        FROM {ctx.table("nccl_setting", final=True)}
        WHERE cluster = {{cluster:String}} AND namespace = {{ns:String}} AND job = {{job:String}}
          AND {valid_during()}
        GROUP BY name, value, source ORDER BY name, pods DESC, value""",
        {"ns": ns, "job": job},
    )
    return [
        {
            "name": r["name"],
            "value": r["value"],
            "source": r["source"],
            "ref": r["ref"],
            "pods": int(r["pods"]),
        }
        for r in rows
    ]


def setting_line(settings: list[dict[str, Any]]) -> str:
    """The pods' NCCL settings in one line: NCCL_ALGO=Ring (2 pods), NCCL_IB_HCA from configmap
    fabric key hca (not at hand) ..."""
    parts = []
    for s in settings:
        value = (
            s["value"] if s["source"] != "configmap_unresolved" else f"<{s['ref']}, not at hand>"
        )
        parts.append(f"{s['name']}={value} ({s['pods']} pod{'s' if s['pods'] != 1 else ''})")
    return ", ".join(parts)


def collective_lines(
    collectives: list[dict[str, Any]], communicators: list[dict[str, Any]]
) -> list[str]:
    """One sentence per collective, size, algorithm and protocol, then one per communicator, for
    the text and HTML reports (a JobReport's lists)."""
    out = []
    for c in collectives:
        how = f" {c['algorithm']}/{c['protocol']}" if c["algorithm"] else ""
        line = (
            f"{c['collective']} {c['msg_size']}{how}: bus bandwidth "
            f"{c['bus_bandwidth_gbs']:.2f} GB/s"
        )
        if c["change_ratio"] is not None:
            line += f" ({c['change_ratio']:+.0%} vs {c['baseline_gbs']:.2f} GB/s before)"
        out.append(line + f", {c['samples']} samples")
    for m in communicators:
        nodes = ", ".join(m["nodes"][:4]) + (
            f" (+{len(m['nodes']) - 4})" if len(m["nodes"]) > 4 else ""
        )
        out.append(
            f"communicator {m['comm_id']}: {m['ranks_seen']} of {m['n_ranks']} ranks reporting "
            f"on {len(m['nodes'])} of {m['n_nodes']} nodes ({nodes}); {', '.join(m['collectives'])}"
        )
    return out


__all__ = ["collective_lines", "collectives", "communicators", "setting_line", "settings"]
