-- exporter and correlation kinds and fields

-- Stores created from the first schema: the exporters' and the engine's kinds and fields.
-- Tables of the exporters' and the engine's kinds.
CREATE TABLE `nic_priority_samples`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `node` LowCardinality(String) COMMENT 'Kubernetes node name.',
    `netdev` LowCardinality(String) COMMENT 'Netdev the ethtool statistics belong to.',
    `device` LowCardinality(String) COMMENT 'RDMA device of that netdev (mlx5_0); empty if none.',
    `priority` UInt8 COMMENT '802.1p priority (0-7).',
    `rx_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bytes received on this priority (rx_prio{p}_bytes).',
    `tx_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bytes sent on this priority (tx_prio{p}_bytes).',
    `rx_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets received (rx_prio{p}_packets).',
    `tx_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets sent (tx_prio{p}_packets).',
    `rx_pause_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC pause frames received (rx_prio{p}_pause).',
    `tx_pause_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC pause frames sent (tx_prio{p}_pause).',
    `rx_pause_duration_seconds_total` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Time paused by received PFC (rx_prio{p}_pause_duration, us).',
    `tx_pause_duration_seconds_total` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Time this NIC paused its peer (tx_prio{p}_pause_duration, us).',
    `rx_pause_transitions_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'XOFF->XON transitions received (rx_prio{p}_pause_transition).',
    `rx_discards_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets discarded for lack of buffer on this priority (rx_prio{p}_discards).',
    `resets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Counter resets detected on this netdev\'s ethtool statistics.'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `node`, `netdev`, `priority`, `ts`)
TTL toDateTime(`ts`) + INTERVAL 30 DAY
COMMENT 'One 802.1p priority of a NIC (ethtool statistics): traffic, PFC pauses, discards.';

CREATE TABLE `switch_status`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `switch` LowCardinality(String) COMMENT 'Switch hostname.',
    `asic` LowCardinality(String) COMMENT 'ASIC namespace on multi-ASIC switches; empty otherwise.',
    `up` UInt8 COMMENT '1 when the switch\'s Redis answered the poll, 0 when not.',
    `poll_duration_seconds` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Duration of the poll.',
    `ports` Nullable(UInt32) CODEC(ZSTD(1)) COMMENT 'Ports read.',
    `queues` Nullable(UInt32) CODEC(ZSTD(1)) COMMENT 'Queues and priority groups read.',
    `error` String CODEC(ZSTD(1)) COMMENT 'Why the poll failed (\'\' when up).'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `switch`, `asic`, `ts`)
TTL toDateTime(`ts`) + INTERVAL 30 DAY
COMMENT 'One poll of one switch (or one ASIC\'s COUNTERS_DB): did it answer, how long it took.';

CREATE TABLE `ecmp_group_samples`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `switch` LowCardinality(String) COMMENT 'Switch hostname.',
    `group` LowCardinality(String) COMMENT 'ECMP group name (from config or \'uplinks\' from LLDP).',
    `members` String CODEC(ZSTD(1)) COMMENT 'Member ports, comma-separated.',
    `member_count` Nullable(UInt16) COMMENT 'Members with a rate this interval.',
    `mean_utilization_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Mean member tx utilization.',
    `max_utilization_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Highest member tx utilization.',
    `max_mean_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'max / mean member tx rate (1 = perfectly even).',
    `cv_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Coefficient of variation of member tx rates (stddev / mean).',
    `hottest_member` LowCardinality(String) COMMENT 'Member with the highest tx rate.',
    `tx_bytes_per_second` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Sum of member tx rates.'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `switch`, `group`, `ts`)
TTL toDateTime(`ts`) + INTERVAL 30 DAY
COMMENT 'Spread of tx utilization over the members of one ECMP uplink group in one interval.';

CREATE TABLE `hdfs_placement_totals`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `prefix` LowCardinality(String) COMMENT 'Path prefix the totals cover (\'/\' = everything audited).',
    `blocks` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Blocks audited under the prefix.',
    `violations` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Blocks whose placement breaks the policy.',
    `under_replicated` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Blocks with fewer replicas than the policy wants.',
    `unknown_hosts` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Replicas on hosts the topology does not know.'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `prefix`, `ts`)
TTL toDateTime(`ts`) + INTERVAL 90 DAY
COMMENT 'Replica placement audit totals per path prefix (one fsck / WebHDFS report).';

CREATE TABLE `hdfs_namenode_samples`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `namenode` LowCardinality(String) COMMENT 'NameNode JMX endpoint (host:port).',
    `ha_state` LowCardinality(String) COMMENT 'active | standby | \'\' when not reported.',
    `up` UInt8 COMMENT '1 when the scrape succeeded, 0 when it failed (see error).',
    `error` String CODEC(ZSTD(1)) COMMENT 'Why the scrape failed (\'\' when it did not).',
    `live_datanodes` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Live DataNodes.',
    `dead_datanodes` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Dead DataNodes.',
    `stale_datanodes` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Stale DataNodes.',
    `blocks` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Blocks in the namespace.',
    `files` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Files in the namespace.',
    `under_replicated_blocks` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Blocks below their replication factor.',
    `missing_blocks` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Blocks with no live replica.',
    `corrupt_blocks` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Blocks with corrupt replicas.',
    `pending_replication_blocks` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Blocks waiting for replication (async backlog).',
    `pending_deletion_blocks` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Blocks waiting for deletion.',
    `capacity_total_bytes` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Configured capacity.',
    `capacity_used_bytes` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'DFS used.',
    `capacity_remaining_bytes` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Capacity remaining.'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `namenode`, `ts`)
TTL toDateTime(`ts`) + INTERVAL 30 DAY
COMMENT 'One NameNode /jmx scrape (FSNamesystem, FSNamesystemState, NameNodeInfo).';

CREATE TABLE `hdfs_datanode_samples`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `datanode` LowCardinality(String) COMMENT 'DataNode JMX endpoint (host:port).',
    `idc` LowCardinality(String) COMMENT 'IDC of the DataNode (\'\' = not in the topology).',
    `up` UInt8 COMMENT '1 when the scrape succeeded, 0 when it failed (see error).',
    `error` String CODEC(ZSTD(1)) COMMENT 'Why the scrape failed (\'\' when it did not).',
    `read_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bytes read from this DataNode.',
    `written_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bytes written to this DataNode.',
    `remote_read_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bytes read by non-local clients (RemoteBytesRead).',
    `remote_written_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bytes written by non-local clients.',
    `blocks_read_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Blocks read.',
    `blocks_written_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Blocks written.',
    `blocks_replicated_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Blocks replicated to other DataNodes.',
    `local_client_reads_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Reads from a client on the same host.',
    `remote_client_reads_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Reads from a client on another host.',
    `local_client_writes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Writes from a client on the same host.',
    `remote_client_writes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Writes from a client on another host.',
    `packet_ack_round_trips_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Write-pipeline packet acks measured.',
    `packet_ack_round_trip_seconds` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Mean packet-ack round trip (metrics window).',
    `network_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'DataNode network errors.',
    `volume_failures_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Volume failures.',
    `capacity_bytes` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Storage capacity.',
    `dfs_used_bytes` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'DFS used.',
    `remaining_bytes` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Storage remaining.',
    `failed_volumes` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Failed volumes now.',
    `xceivers` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Active data transfer threads.'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `datanode`, `ts`)
TTL toDateTime(`ts`) + INTERVAL 30 DAY
COMMENT 'One DataNode /jmx scrape (DataNodeActivity-*, FSDatasetState, DataNodeInfo).';

CREATE TABLE `dci_usage`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `src_idc` LowCardinality(String) COMMENT 'IDC the data left.',
    `dest_idc` LowCardinality(String) COMMENT 'IDC the data entered.',
    `interval_seconds` Float64 CODEC(Gorilla, ZSTD(1)) COMMENT 'Length of the interval starting at ts.',
    `read_bytes_per_second` Float64 CODEC(Gorilla, ZSTD(1)) COMMENT 'Cross-IDC HDFS reads.',
    `sync_write_bytes_per_second` Float64 CODEC(Gorilla, ZSTD(1)) COMMENT 'Cross-IDC write-pipeline traffic.',
    `async_replication_bytes_per_second` Float64 CODEC(Gorilla, ZSTD(1)) COMMENT 'Cross-IDC background replication.',
    `total_bytes_per_second` Float64 CODEC(Gorilla, ZSTD(1)) COMMENT 'All HDFS traffic on the pair.',
    `capacity_bytes_per_second` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Configured budget for the pair (null = none).',
    `headroom_bytes_per_second` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Budget minus total (negative = over budget).',
    `utilization_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Total / budget.'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `src_idc`, `dest_idc`, `ts`)
TTL toDateTime(`ts`) + INTERVAL 90 DAY
COMMENT 'HDFS bytes/s on the DCI per direction (src IDC -> dest IDC) per interval, against the budget.';

CREATE TABLE `flows_attributed`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `switch` LowCardinality(String) COMMENT 'Switch that sampled it.',
    `out_port` LowCardinality(String) COMMENT 'Egress port (the ECMP member for uplinks).',
    `src_ip` String CODEC(ZSTD(1)) COMMENT 'Source IP.',
    `dst_ip` String CODEC(ZSTD(1)) COMMENT 'Destination IP.',
    `dst_port` UInt16 COMMENT 'L4 destination port.',
    `dest_qp` Nullable(UInt32) CODEC(ZSTD(1)) COMMENT 'RoCEv2 destination QP.',
    `rdma` Bool COMMENT 'RoCEv2 (UDP 4791).',
    `bytes` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Estimated bytes.',
    `src_namespace` LowCardinality(String) COMMENT 'Tenant of the source pod (\'\' = IP owned by nobody then).',
    `src_pod` String CODEC(ZSTD(1)) COMMENT 'Source pod.',
    `src_node` LowCardinality(String) COMMENT 'Source node.',
    `src_job` LowCardinality(String) COMMENT 'Source Volcano job.',
    `dst_namespace` LowCardinality(String) COMMENT 'Tenant of the destination pod.',
    `dst_pod` String CODEC(ZSTD(1)) COMMENT 'Destination pod.',
    `dst_node` LowCardinality(String) COMMENT 'Destination node.',
    `dst_job` LowCardinality(String) COMMENT 'Destination Volcano job.',
    `src_su` LowCardinality(String) COMMENT 'Scalable unit of the source node.',
    `dst_su` LowCardinality(String) COMMENT 'Scalable unit of the destination node.',
    `src_idc` LowCardinality(String) COMMENT 'IDC of the source node.',
    `dst_idc` LowCardinality(String) COMMENT 'IDC of the destination node.',
    `lca_hypernode` LowCardinality(String) COMMENT 'Lowest common HyperNode of the two nodes (\'\' = none).',
    `lca_tier` UInt8 COMMENT 'Its tier (0 = no common HyperNode / unknown).'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `ts`, `src_namespace`, `src_job`)
TTL toDateTime(`ts`) + INTERVAL 14 DAY
COMMENT 'A flow sample joined, as of its own time, to the pods/jobs/tenants/nodes at both ends and the lowest common HyperNode they share. Written per window by the correlation engine.';

CREATE TABLE `inv_namespaces`
(
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `namespace` LowCardinality(String) COMMENT 'Namespace name.',
    `tenant` LowCardinality(String) COMMENT 'Tenant: the railscope.io/tenant label, else the namespace name.',
    `labels` String CODEC(ZSTD(1)) COMMENT 'JSON object of namespace labels.',
    `valid_from` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of validity of this fact (UTC).',
    `valid_to` Nullable(DateTime64(3, 'UTC')) CODEC(ZSTD(1)) COMMENT 'End of validity (UTC); null while the fact still holds.',
    `updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Version of this row: the latest wins.'
)
ENGINE = ReplacingMergeTree(`updated_at`)
ORDER BY (`cluster`, `namespace`, `valid_from`)
COMMENT 'A namespace (= tenant) and its labels over time.';

-- Columns added to (or retyped in) first-schema tables.
ALTER TABLE `nic_samples`
    ADD COLUMN `pod` LowCardinality(Nullable(String)) COMMENT 'Pod holding this NIC/VF (kubelet pod-resources), empty if none.' AFTER `link_layer`,
    ADD COLUMN `namespace` LowCardinality(Nullable(String)) COMMENT 'Namespace of that pod.' AFTER `pod`,
    ADD COLUMN `container` LowCardinality(Nullable(String)) COMMENT 'Container of that pod.' AFTER `namespace`,
    ADD COLUMN `pfc_rx_pause_duration_seconds_total` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Time paused by received PFC, all priorities.' AFTER `pfc_pause_duration_us_total`,
    ADD COLUMN `link_downed_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Times the link went down (counters/link_downed).' AFTER `pci_stalled_total`,
    ADD COLUMN `symbol_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Physical symbol errors (counters/symbol_error).' AFTER `link_downed_total`,
    ADD COLUMN `xmit_wait_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Ticks the port had data but could not send (counters/port_xmit_wait).' AFTER `symbol_errors_total`,
    ADD COLUMN `rx_dropped_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets dropped by the netdev (statistics/rx_dropped).' AFTER `xmit_wait_total`;

ALTER TABLE `switch_queue_samples`
    ADD COLUMN `ecn_marked_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bytes ECN-marked by WRED.' AFTER `ecn_marked_packets_total`,
    ADD COLUMN `dropped_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bytes dropped.' AFTER `ecn_marked_bytes_total`,
    ADD COLUMN `headroom_watermark_bytes` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'PG headroom (xoff room) peak occupancy.' AFTER `watermark_bytes`;

ALTER TABLE `flow_samples`
    ADD COLUMN `ecmp_group` LowCardinality(String) COMMENT 'ECMP group of out_port (\'\' when not an ECMP member).' AFTER `out_port`;

ALTER TABLE `gpu_samples`
    MODIFY COLUMN `power_violation_seconds_total` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Time throttled by power.',
    MODIFY COLUMN `thermal_violation_seconds_total` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Time throttled by temperature.';

ALTER TABLE `flow_samples`
    MODIFY COLUMN `src_port` Nullable(UInt16) COMMENT 'L4 source port (entropy for RoCEv2); null if not TCP/UDP.',
    MODIFY COLUMN `dst_port` Nullable(UInt16) COMMENT 'L4 destination port (4791 = RoCEv2); null if not TCP/UDP.',
    MODIFY COLUMN `protocol` Nullable(UInt8) COMMENT 'IP protocol; null if the sampled header is not IP.',
    MODIFY COLUMN `dscp` Nullable(UInt8) COMMENT 'DSCP; null if not IP.',
    MODIFY COLUMN `ecn` Nullable(UInt8) COMMENT 'ECN bits (3 = CE); null if not IP.';
