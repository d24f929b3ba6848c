"""The log part of a job's report: what its pods and its nodes' kernels logged in the window
(`log_event`: NCCL init and IB errors, PyTorch watchdog timeouts, Xids), grouped into a timeline
of one entry per kind and place, first and last time and count, so a burst of 200 identical
timeouts is one line. Reads log_events and the pod inventory only; never writes.
"""

from __future__ import annotations

from typing import Any

from telemetry.correlate.registry import Context

# kinds that say something went wrong (the rest is NCCL's init: context, not trouble)
TROUBLE = frozenset(
    {"ib_completion_error", "torch_watchdog_timeout", "torch_nccl_error", "xid",
     "gpu_fallen_off_bus", "nic_link_state", "nic_module_event", "pcie_aer", "nccl_gdr_disabled"}
)  # fmt: skip


def log_events(ctx: Context, ns: str, job: str, nodes: list[str]) -> list[dict[str, Any]]:
    """The job's pods' log events and its nodes' kernel events in the window: per (kind, pod or
    node), the first and last time, how many, and the first one's excerpt; oldest first."""
    rows = ctx.rows(
        f"""
        SELECT kind, if(pod = '', node, concat(namespace, '/', pod)) AS place,
               min(ts) AS first, max(ts) AS last, count() AS n, argMin(excerpt, ts) AS excerpt
        FROM {ctx.table("log_event")}
        WHERE {ctx.where("log_event")}
          -- GLOBAL: on a cluster, log events and pods are sharded by different keys
          AND ((namespace, pod) GLOBAL IN (SELECT namespace, pod FROM {ctx.table("pod", final=True)}
                                    WHERE cluster = {{cluster:String}} AND namespace = {{ns:String}}
                                      AND job = {{job:String}})
               OR (pod = '' AND node IN {{nodes:Array(String)}}))
        GROUP BY kind, place ORDER BY first, kind, place LIMIT 500""",
        {"ns": ns, "job": job, "nodes": nodes},
    )
    return [{**r, "n": int(r["n"]), "trouble": r["kind"] in TROUBLE} for r in rows]


def timeline_lines(events: list[dict[str, Any]], limit: int = 20) -> list[str]:
    """Text lines: trouble first in time order, then a count of the init lines."""
    bad = [e for e in events if e["trouble"]]
    out = [
        f"{e['first']:%H:%M:%S}"
        + (f"..{e['last']:%H:%M:%S}" if e["last"] != e["first"] else "")
        + f"  {e['kind']:<24} {e['place']}"
        + (f" x{e['n']}" if e["n"] > 1 else "")
        + f"  {str(e['excerpt'])[:120]}"
        for e in bad[:limit]
    ]
    if len(bad) > limit:
        out.append(f"... {len(bad) - limit} more")
    init = sum(e["n"] for e in events if not e["trouble"])
    if init:
        out.append(
            f"({init} NCCL init line(s): version, devices, network, channels, Init COMPLETE)"
        )
    return out


__all__ = ["TROUBLE", "log_events", "timeline_lines"]
