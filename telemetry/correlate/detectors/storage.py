"""Storage detectors: HDFS reads that cross IDCs, replica placement that breaks the policy, a
data-center interconnect link near its capacity (with the HDFS share of it)."""

from __future__ import annotations

from telemetry.correlate.detectors.fabric import port_subject, roles_and_neighbours
from telemetry.correlate.findings import Finding
from telemetry.correlate.registry import Context, detector
from telemetry.correlate.timebase import covered_sql
from telemetry.text import human_bytes


def _host(addr: str) -> str:
    host = addr.rsplit(":", 1)[0] if addr.count(":") == 1 else addr
    return host.lstrip("/")


@detector("hdfs_cross_idc_read", needs=("hdfs_transfer",), lookback=("sliding.flow_seconds",))
def cross_idc_read(ctx: Context) -> list[Finding]:
    floor = float(ctx.t("hdfs.cross_idc_read_bytes"))
    out = []
    for r in ctx.rows(f"""
        SELECT dest, src_idc, dest_idc, sum(bytes) AS bytes, count() AS reads,
               groupUniqArray(10)(block_id) AS blocks, groupUniqArray(10)(datanode) AS datanodes,
               groupUniqArray(5)(client_id) AS clients
        FROM {ctx.table("hdfs_transfer")}
        WHERE {ctx.where("hdfs_transfer")}
          AND op = 'HDFS_READ' AND cross_idc
        GROUP BY dest, src_idc, dest_idc
        ORDER BY bytes DESC"""):
        if r["bytes"] < floor:
            continue
        client = _host(r["dest"])
        out.append(
            ctx.finding(
                "warning",
                "host",
                client,
                f"{client} in {r['dest_idc']} read {human_bytes(r['bytes'])} from DataNodes in {r['src_idc']} over the DCI",
                {
                    "bytes": r["bytes"],
                    "reads": r["reads"],
                    "from_idc": r["src_idc"],
                    "to_idc": r["dest_idc"],
                    "blocks": sorted(r["blocks"]),
                    "datanodes": sorted(r["datanodes"]),
                    "clients": sorted(r["clients"]),
                },
            )
        )
    return out


@detector(
    "hdfs_replica_violation", needs=("hdfs_block_placement",), lookback=("sliding.flow_seconds",)
)
def replica_violation(ctx: Context) -> list[Finding]:
    rows = ctx.rows(f"""
        SELECT path, count() AS blocks, groupUniqArray(10)(block_id) AS sample, groupUniqArray(5)(reason) AS reasons,
               groupUniqArray(5)(replicas_by_idc) AS layouts
        FROM (
            SELECT path, block_id, argMax(reason, ts) AS reason, argMax(replicas_by_idc, ts) AS replicas_by_idc,
                   argMax(violation, ts) AS violation
            FROM {ctx.table("hdfs_block_placement")}
            WHERE {ctx.where("hdfs_block_placement")}
            GROUP BY path, block_id
        )
        WHERE violation
        GROUP BY path ORDER BY path""")
    return [
        ctx.finding(
            "warning",
            "file",
            r["path"],
            f"{r['path']}: {r['blocks']} block(s) not placed per policy ({'; '.join(sorted(r['reasons']))})",
            {
                "blocks": r["blocks"],
                "sample_blocks": sorted(r["sample"]),
                "reasons": sorted(r["reasons"]),
                "layouts": sorted(r["layouts"]),
            },
        )
        for r in rows
    ]


@detector(
    "hdfs_replication_backlog", needs=("hdfs_namenode_sample",), lookback=("sliding.trend_seconds",)
)
def replication_backlog(ctx: Context) -> list[Finding]:
    """Blocks waiting for replicas (under-replicated + pending) above a floor and still growing
    through the window: async cross-IDC replication is not keeping up. The evidence adds the DCI
    budget (async replication rate, headroom) when the HDFS source reports it."""
    floor = float(ctx.t("hdfs.replication_backlog_blocks"))
    out = []
    for r in ctx.rows(f"""
        SELECT namenode,
               argMin(ifNull(under_replicated_blocks, 0) + ifNull(pending_replication_blocks, 0), ts) AS first,
               argMax(ifNull(under_replicated_blocks, 0) + ifNull(pending_replication_blocks, 0), ts) AS last,
               argMax(missing_blocks, ts) AS missing, dateDiff('second', min(ts), max(ts)) AS span_s
        FROM {ctx.table("hdfs_namenode_sample")}
        WHERE {ctx.where("hdfs_namenode_sample")} AND up = 1
        GROUP BY namenode ORDER BY namenode"""):
        if r["last"] < floor or r["last"] <= r["first"]:
            continue
        dci = ctx.rows(f"""
            SELECT src_idc, dest_idc, avg(async_replication_bytes_per_second) AS async_bps,
                   min(headroom_bytes_per_second) AS min_headroom_bps, max(utilization_ratio) AS peak_utilization
            FROM {ctx.table("dci_usage")}
            WHERE {ctx.where("dci_usage")}
            GROUP BY src_idc, dest_idc ORDER BY src_idc, dest_idc""")
        growth = (r["last"] - r["first"]) / r["span_s"] * 60 if r["span_s"] else 0.0
        out.append(
            ctx.finding(
                "warning",
                "namenode",
                r["namenode"],
                f"{r['namenode']}: {r['last']:,} blocks waiting for replicas and growing "
                f"({growth:,.0f}/min): replication is not keeping up",
                {
                    "blocks_waiting_first": r["first"],
                    "blocks_waiting_last": r["last"],
                    "growth_blocks_per_minute": round(growth, 1),
                    "missing_blocks": r["missing"],
                    "dci": dci,
                },
            )
        )
    return out


@detector(
    "dci_near_capacity",
    needs=("switch_port_sample",),
    lookback=("dci.min_seconds", "sliding.interval_seconds"),
)
def dci_near_capacity(ctx: Context) -> list[Finding]:
    """A data-center interconnect link (a port whose role is 'dci' and whose LLDP peer is a switch)
    transmitting near capacity for long enough; the evidence splits the HDFS cross-IDC share by
    operation."""
    limit = float(ctx.t("dci.near_capacity_ratio"))
    min_s = float(ctx.t("dci.min_seconds"))
    roles, peers = roles_and_neighbours(ctx)
    out = []
    # how long each DCI port was near capacity: the time its own samples cover (timebase.py)
    for r in ctx.rows(
        covered_sql(
            ctx,
            "switch_port_sample",
            ["switch", "port"],
            {"hot": "tx_utilization_ratio >= {limit:Float64}"},
            {
                "role": "any(role)",
                "util": "avgIf(tx_utilization_ratio, tx_utilization_ratio >= {limit:Float64})",
                "peak": "max(tx_utilization_ratio)",
            },
            where="role = 'dci'",
        )
        + " HAVING hot_s > 0 ORDER BY switch, port",
        {"limit": limit},
    ):
        peer = peers.get((r["switch"], r["port"]))
        seconds = float(r["hot_s"])
        if peer is None or peer[0] not in roles or seconds < min_s:
            continue
        subject = f"{port_subject(r['switch'], r['port'])}<->{port_subject(*peer)}"
        hdfs = ctx.rows(f"""
            SELECT op, write_mode, sum(bytes) AS bytes FROM {ctx.table("hdfs_transfer")}
            WHERE {ctx.where("hdfs_transfer")} AND cross_idc
            GROUP BY op, write_mode ORDER BY bytes DESC""")
        out.append(
            ctx.finding(
                "critical" if (r["peak"] or 0) >= 0.98 else "warning",
                "link",
                subject,
                f"DCI link {subject} above {limit:.0%} of capacity for {seconds:.0f}s (mean {r['util']:.0%} then, peak {r['peak']:.0%})",
                {
                    "capacity_ratio": limit,  # the summary's "above N% of capacity"
                    "seconds_near_capacity": round(seconds),
                    "utilization_when_hot": round(float(r["util"]), 3),
                    "peak": round(float(r["peak"] or 0), 3),
                    "hdfs_cross_idc_bytes_by_op": hdfs,
                },
            )
        )
    return out
