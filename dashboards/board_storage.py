"""HDFS and the DCI links, placement and topology drift. (The dashboards' table: definitions.py.)"""

from __future__ import annotations

from grafanalib import core as g

from dashboards.clickhouse import ALL
from dashboards.common import (
    FINDINGS_IN_RANGE,
    build_dashboard,
    v_tenant,
)
from dashboards.panels import (
    CLUSTER,
    any_of,
    prom,
    stat,
    table,
    tbl,
    ts,
)


# --- HDFS and DCI --------------------------------------------------------------------------------
def hdfs_dci() -> g.Dashboard:
    return build_dashboard(
        "railscope-hdfs-dci",
        "railscope / HDFS and DCI",
        "HDFS traffic per IDC pair, cross-IDC reads, the replica placement audit and DCI headroom.",
        [],
        [
            ts(
                "HDFS traffic per IDC pair",
                f"SELECT $__timeInterval(ts) AS time, concat(src_idc, ' -> ', dest_idc) AS pair, "
                f"sum(bytes) / $__interval_s AS bytes_per_second FROM {tbl('hdfs_transfer')} "
                f"WHERE {CLUSTER} AND $__timeFilter(ts) GROUP BY time, pair ORDER BY time, pair",
                unit="Bps",
            ),
            ts(
                "Cross-IDC HDFS traffic by operation",
                f"SELECT $__timeInterval(ts) AS time, if(write_mode = '', op, concat(op, ' ', write_mode)) "
                f"AS operation, sum(bytes) / $__interval_s AS bytes_per_second FROM {tbl('hdfs_transfer')} "
                f"WHERE {CLUSTER} AND $__timeFilter(ts) AND cross_idc "
                "GROUP BY time, operation ORDER BY time, operation",
                unit="Bps",
            ),
            table(
                "Cross-IDC reads: clients reading from another IDC",
                f"SELECT dest AS client, dest_idc AS client_idc, src_idc AS datanode_idc, "
                f"uniqExact(datanode) AS datanodes, uniqExact(block_id) AS blocks, sum(bytes) AS bytes "
                f"FROM {tbl('hdfs_transfer')} WHERE {CLUSTER} AND $__timeFilter(ts) AND cross_idc "
                "AND op = 'HDFS_READ' GROUP BY client, client_idc, datanode_idc "
                "ORDER BY bytes DESC LIMIT 100",
                w=12,
            ),
            table(
                "Replica audit: blocks that break the placement policy",
                f"SELECT path, block_id, replicas, expected_replicas, replicas_by_idc, reason, "
                f"max(ts) AS audited FROM {tbl('hdfs_block_placement')} "
                f"WHERE {CLUSTER} AND $__timeFilter(ts) AND violation "
                "GROUP BY path, block_id, replicas, expected_replicas, replicas_by_idc, reason "
                "ORDER BY audited DESC LIMIT 200",
                w=12,
            ),
            stat(
                "Blocks audited / in violation",
                f"SELECT uniqExact(block_id) AS audited, uniqExactIf(block_id, violation) AS violations "
                f"FROM {tbl('hdfs_block_placement')} WHERE {CLUSTER} AND $__timeFilter(ts)",
                w=8,
            ),
            ts(
                "DCI links: tx utilization (switch ports of role dci)",
                f"SELECT $__timeInterval(ts) AS time, concat(switch, ':', port) AS link, "
                f"max(tx_utilization_ratio) AS utilization FROM {tbl('switch_port_sample')} "
                f"WHERE {CLUSTER} AND $__timeFilter(ts) AND role = 'dci' "
                "GROUP BY time, link ORDER BY time, link",
                unit="percentunit",
                w=16,
            ),
            ts(
                "DCI budget headroom per direction (HDFS source)",
                f"SELECT $__timeInterval(ts) AS time, concat(src_idc, ' -> ', dest_idc) AS pair, "
                f"min(headroom_bytes_per_second) AS headroom FROM {tbl('dci_usage')} "
                f"WHERE {CLUSTER} AND $__timeFilter(ts) GROUP BY time, pair ORDER BY time, pair",
                unit="Bps",
            ),
            ts(
                "Placement audit totals per prefix",
                f"SELECT $__timeInterval(ts) AS time, prefix, max(violations) AS violations "
                f"FROM {tbl('hdfs_placement_total')} WHERE {CLUSTER} AND $__timeFilter(ts) "
                "GROUP BY time, prefix ORDER BY time, prefix",
            ),
            table(
                "Storage findings",
                f"SELECT severity, kind, subject, summary, first_seen, last_seen "
                f"FROM {tbl('finding', final=True)} WHERE {FINDINGS_IN_RANGE} AND category = 'storage' "
                "ORDER BY last_seen DESC LIMIT 200",
            ),
            prom(
                "DCI utilization of HDFS's budget (exporter)",
                [
                    (
                        'max by (src_idc, dest_idc) (railscope_dci_usage_utilization_ratio{cluster="$cluster"})',
                        "{{src_idc}} -> {{dest_idc}}",
                    )
                ],
                unit="percentunit",
            ),
        ],
    )


# --- placement and topology drift ----------------------------------------------------------------
def placement() -> g.Dashboard:
    return build_dashboard(
        "railscope-placement",
        "railscope / Placement and topology",
        "Where jobs landed against their networkTopology constraints, the tiers their traffic "
        "crossed, GPUs without a direct NIC, and HyperNode drift against LLDP.",
        [v_tenant()],
        [
            table(
                "Placement findings",
                f"SELECT severity, kind, subject, summary, first_seen, last_seen "
                f"FROM {tbl('finding', final=True)} WHERE {FINDINGS_IN_RANGE} AND category = 'placement' "
                f"AND (${{tenant:sqlstring}} = '{ALL}' OR startsWith(subject, concat(${{tenant:sqlstring}}, '/'))) "
                "ORDER BY severity = 'critical' DESC, last_seen DESC LIMIT 200",
            ),
            table(
                "Jobs: constraint and the highest tier their traffic crossed",
                f"SELECT j.namespace AS tenant, j.job AS job, j.topology_mode AS mode, "
                f"j.highest_tier_allowed AS highest_tier_allowed, f.max_tier AS highest_tier_crossed, "
                f"f.bytes AS bytes FROM {tbl('job', final=True, alias='j')} LEFT JOIN ("
                f"SELECT src_namespace, src_job, max(lca_tier) AS max_tier, sum(bytes) AS bytes "
                f"FROM {tbl('attributed_flow')} WHERE {CLUSTER} AND $__timeFilter(ts) AND src_job != '' "
                "GROUP BY src_namespace, src_job) AS f "
                "ON f.src_namespace = j.namespace AND f.src_job = j.job "
                f"WHERE j.{CLUSTER} AND {any_of('tenant', 'j.namespace')} "
                "ORDER BY tenant, job",
                w=12,
            ),
            table(
                "Traffic between tenants (RDMA)",
                f"SELECT src_namespace, dst_namespace, sum(bytes) AS bytes, count() AS samples "
                f"FROM {tbl('attributed_flow')} WHERE {CLUSTER} AND $__timeFilter(ts) AND rdma "
                "AND src_namespace != '' AND dst_namespace != '' AND src_namespace != dst_namespace "
                "GROUP BY src_namespace, dst_namespace ORDER BY bytes DESC",
                w=12,
            ),
            table(
                "Topology drift findings (HyperNodes vs LLDP)",
                f"SELECT severity, kind, subject, summary, first_seen, last_seen "
                f"FROM {tbl('finding', final=True)} WHERE {FINDINGS_IN_RANGE} "
                "AND (category = 'topology' OR kind LIKE '%drift%') ORDER BY last_seen DESC",
                w=12,
            ),
            table(
                "HyperNodes declared (current)",
                f"SELECT hypernode, tier, member_type, selector, count() AS members, "
                f"arrayStringConcat(groupArray(member), ', ') AS member_list FROM {tbl('hypernode', final=True)} "
                f"WHERE {CLUSTER} AND valid_to IS NULL GROUP BY hypernode, tier, member_type, selector "
                "ORDER BY tier DESC, hypernode",
                w=12,
            ),
            table(
                "GPUs without a NIC on their PCIe switch",
                f"SELECT node, groupArray(gpu) AS gpus FROM (SELECT node, gpu, "
                f"argMax(direct_nic, ts) AS direct FROM {tbl('gpu_nic_affinity')} WHERE {CLUSTER} "
                "GROUP BY node, gpu) WHERE direct = 0 GROUP BY node ORDER BY node",
                w=12,
            ),
            table(
                "Bytes per tier crossed, per source tenant",
                f"SELECT src_namespace AS tenant, lca_tier, sum(bytes) AS bytes "
                f"FROM {tbl('attributed_flow')} WHERE {CLUSTER} AND $__timeFilter(ts) "
                f"AND {any_of('tenant', 'src_namespace')} "
                "GROUP BY tenant, lca_tier ORDER BY tenant, lca_tier",
                w=12,
            ),
        ],
    )
