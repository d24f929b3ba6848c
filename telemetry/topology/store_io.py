"""Load topology inputs from the store: declared HyperNodes and Node labels as of a time (from the
time-versioned inventory), and the latest LLDP links and GPU<->NIC affinity.

Reads only; never writes the store.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from telemetry.records import GPU_NIC_AFFINITY, HYPERNODE, LLDP_LINK, NODE
from telemetry.store import time_range
from telemetry.text import split_top_level
from telemetry.times import as_of
from telemetry.topology.hypernodes import INVALID_REGEX, HyperNodeSpec, Member

_EXPR = re.compile(r"^\s*([^\s=]+)\s+(In|NotIn|Exists|DoesNotExist)\s*(?:\(([^)]*)\))?\s*$")


def parse_label_selector(text: str) -> dict[str, Any]:
    """Inverse of `render_label_selector`: 'a=b,c In (x,y),d Exists'."""
    labels: dict[str, str] = {}
    exprs: list[dict[str, Any]] = []
    for p in split_top_level(text, ",", "(", ")"):
        m = _EXPR.match(p)
        if m:
            e: dict[str, Any] = {"key": m[1], "operator": m[2]}
            if m[3] is not None:
                e["values"] = [v.strip() for v in m[3].split(",") if v.strip()]
            exprs.append(e)
        elif "=" in p:
            k, _, v = p.partition("=")
            labels[k.strip()] = v.strip()
    return {"matchLabels": labels, "matchExpressions": exprs}


def _as_of(at: datetime | None) -> tuple[str, dict[str, Any]]:
    if at is None:
        return as_of(None), {}
    t = at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    return (
        as_of("toDateTime64({at:String}, 3, 'UTC')"),
        {"at": t},
    )


def declared_from_store(
    store: Any, cluster: str, at: datetime | None = None
) -> tuple[list[HyperNodeSpec], dict[str, dict[str, str]]]:
    """HyperNode specs and Node labels that held at `at` (default: now)."""
    cond, params = _as_of(at)
    params["c"] = cluster
    rows = store.query_rows(
        f"SELECT hypernode, tier, tier_name, member, member_type, selector FROM {store.table(HYPERNODE, final=True)} "
        f"WHERE cluster = {{c:String}} AND {cond} ORDER BY hypernode, member",
        params,
    )
    by: dict[str, list[Any]] = {}
    for hn, tier, tname, member, mtype, sel in rows:
        value: Any = parse_label_selector(member) if sel == "labelMatch" else member
        sel = "regexMatch" if sel == INVALID_REGEX else sel  # named again by member_issue
        entry = by.setdefault(hn, [int(tier), str(tname or ""), []])
        entry[2].append(Member(str(mtype), str(sel), value))
    specs = [HyperNodeSpec(hn, t, tn, tuple(ms)) for hn, (t, tn, ms) in sorted(by.items())]
    nodes = {
        str(n): json.loads(lbl or "{}")
        for n, lbl in store.query_rows(
            f"SELECT node, labels FROM {store.table(NODE, final=True)} WHERE cluster = {{c:String}} AND {cond}",
            params,
        )
    }
    return specs, nodes


def latest_lldp_sql(store: Any, lo: str | None = "lo", hi: str | None = None) -> str:
    """The one query for LLDP neighbours: per local port, the latest neighbour seen between the
    DateTime64 parameters `lo` and `hi` (either may be None) in cluster `{cluster:String}`."""
    return f"""
        SELECT local_device, local_port, argMax(remote_device, ts) AS remote_device,
               argMax(remote_port, ts) AS remote_port, argMax(remote_chassis_id, ts) AS remote_chassis_id,
               argMax(source, ts) AS source
        FROM {store.table(LLDP_LINK)}
        WHERE cluster = {{cluster:String}} AND {time_range(LLDP_LINK, lo, hi)}
        GROUP BY local_device, local_port"""


def fabric_inputs_from_store(
    store: Any, cluster: str, since_hours: float = 24.0
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The latest LLDP neighbour per local port and the latest affinity per GPU, seen within
    `since_hours` (a neighbour not seen since then is gone)."""
    p = {"cluster": cluster, "lo": datetime.now(UTC) - timedelta(hours=since_hours)}
    res = store.client.query(latest_lldp_sql(store, lo="lo"), parameters=p)
    link_rows = [dict(zip(res.column_names, r, strict=True)) for r in res.result_rows]
    aff = store.query_rows(
        f"SELECT node, gpu, argMax(nic, ts), argMax(netdev, ts), argMax(rail, ts), argMax(direct_nic, ts) "
        f"FROM {store.table(GPU_NIC_AFFINITY)} WHERE cluster = {{cluster:String}} "
        f"AND {time_range(GPU_NIC_AFFINITY, 'lo', None)} GROUP BY node, gpu",
        p,
    )
    aff_rows = [
        dict(zip(("node", "gpu", "nic", "netdev", "rail", "direct_nic"), r, strict=True))
        for r in aff
    ]
    return link_rows, aff_rows
