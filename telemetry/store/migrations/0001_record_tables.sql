-- create the record tables

-- The first schema (git 01dd334).
CREATE TABLE `gpu_samples`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `node` LowCardinality(String) COMMENT 'Kubernetes node name.',
    `gpu` UInt16 COMMENT 'GPU index on the node.',
    `uuid` LowCardinality(String) COMMENT 'GPU UUID.',
    `mig` LowCardinality(String) COMMENT 'MIG instance (GPU instance/compute instance), empty for a full GPU.',
    `model` LowCardinality(String) COMMENT 'Product name.',
    `pci_bus_id` LowCardinality(String) COMMENT 'PCI bus id of the GPU.',
    `pod` LowCardinality(String) COMMENT 'Pod using the GPU (from kubelet pod-resources), empty if none.',
    `namespace` LowCardinality(String) COMMENT 'Namespace of that pod.',
    `up` UInt8 COMMENT '1 when the GPU answered NVML, 0 when lost / fallen off the bus.',
    `utilization_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'GPU utilization (0-1).',
    `memory_utilization_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Memory controller utilization (0-1).',
    `memory_used_bytes` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Frame buffer used.',
    `memory_total_bytes` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Frame buffer size.',
    `sm_clock_hertz` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'SM clock.',
    `memory_clock_hertz` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Memory clock.',
    `temperature_celsius` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'GPU die temperature.',
    `memory_temperature_celsius` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'HBM temperature.',
    `power_watts` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Power draw.',
    `power_limit_watts` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Enforced power limit.',
    `energy_joules_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Energy since driver load.',
    `clock_event_reasons` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bitmask of NVML clock-event (throttle) reasons.',
    `power_violation_seconds_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Time throttled by power.',
    `thermal_violation_seconds_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Time throttled by temperature.',
    `ecc_corrected_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Volatile corrected ECC errors.',
    `ecc_uncorrected_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Volatile uncorrected ECC errors.',
    `remapped_rows_pending` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Rows pending remap (1 = reset needed).',
    `remapped_rows_failure_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Row remapping failures.',
    `pcie_tx_bytes_per_second` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'PCIe TX throughput.',
    `pcie_rx_bytes_per_second` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'PCIe RX throughput.',
    `pcie_replay_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PCIe replay counter.',
    `nvlink_tx_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'NVLink bytes sent, all links.',
    `nvlink_rx_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'NVLink bytes received, all links.',
    `nvlink_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'NVLink CRC/replay/recovery errors, all links.',
    `sm_active_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'GPM SM activity (Hopper+).',
    `sm_occupancy_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'GPM SM occupancy (Hopper+).',
    `tensor_active_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'GPM tensor pipe activity (Hopper+).',
    `dram_active_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'GPM DRAM activity (Hopper+).',
    `xid_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'XID errors seen since the exporter started.'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `node`, `gpu`, `ts`)
TTL toDateTime(`ts`) + INTERVAL 30 DAY
COMMENT 'One GPU (or MIG instance) sampled through NVML. Null = not supported / not read.';

CREATE TABLE `gpu_events`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `node` LowCardinality(String) COMMENT 'Kubernetes node name.',
    `gpu` UInt16 COMMENT 'GPU index on the node.',
    `uuid` LowCardinality(String) COMMENT 'GPU UUID.',
    `event` LowCardinality(String) COMMENT 'xid | gpu_lost | throttle_start | throttle_end',
    `xid` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'XID code (0 when not an XID event).',
    `detail` String CODEC(ZSTD(1)) COMMENT 'Free text from the driver/exporter.'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `node`, `ts`)
TTL toDateTime(`ts`) + INTERVAL 365 DAY
COMMENT 'An event on a GPU: XID error, GPU lost, throttling start/end.';

CREATE TABLE `gpu_nic_affinity`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `node` LowCardinality(String) COMMENT 'Kubernetes node name.',
    `gpu` UInt16 COMMENT 'GPU index.',
    `gpu_pci` LowCardinality(String) COMMENT 'GPU PCI address.',
    `nic` LowCardinality(String) COMMENT 'RDMA device (mlx5_0) under the same PCIe switch; empty if none.',
    `netdev` LowCardinality(String) COMMENT 'Netdev of that NIC.',
    `pcie_switch` LowCardinality(String) COMMENT 'PCI address of the shared upstream bridge.',
    `numa_node` Nullable(Int64) CODEC(ZSTD(1)) COMMENT 'NUMA node of the GPU.',
    `rail` Nullable(Int64) CODEC(ZSTD(1)) COMMENT 'Rail (NIC index) the GPU uses.',
    `direct_nic` UInt8 COMMENT '1 when a NIC shares the GPU\'s PCIe switch.'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `node`, `gpu`, `ts`)
TTL toDateTime(`ts`) + INTERVAL 365 DAY
COMMENT 'Per GPU: the NIC under the same PCIe switch (if any), NUMA node and rail.';

CREATE TABLE `nic_samples`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `node` LowCardinality(String) COMMENT 'Kubernetes node name.',
    `device` LowCardinality(String) COMMENT 'RDMA device (mlx5_0).',
    `port` UInt8 COMMENT 'Port number.',
    `netdev` LowCardinality(String) COMMENT 'Netdev (eth0 / ens1f0np0).',
    `link_layer` LowCardinality(String) COMMENT 'Ethernet | InfiniBand.',
    `up` UInt8 COMMENT '1 when the port state is ACTIVE.',
    `rate_bytes_per_second` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Port rate.',
    `rx_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bytes received (port_rcv_data x 4).',
    `tx_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bytes sent (port_xmit_data x 4).',
    `rx_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets received.',
    `tx_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets sent.',
    `rx_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Receive errors.',
    `tx_discards_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Transmit discards.',
    `ecn_marked_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'RoCE packets received with ECN CE (np_ecn_marked_roce_packets).',
    `cnp_sent_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'CNPs sent as notification point (np_cnp_sent).',
    `cnp_handled_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'CNPs handled as reaction point (rp_cnp_handled).',
    `cnp_ignored_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'CNPs ignored (rp_cnp_ignored).',
    `out_of_sequence_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Out-of-sequence packets.',
    `packet_seq_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'NAK sequence errors.',
    `local_ack_timeout_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Local ACK timeouts.',
    `out_of_buffer_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Drops for lack of receive WQEs.',
    `pfc_rx_pause_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC pause frames received, all priorities.',
    `pfc_tx_pause_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC pause frames sent, all priorities.',
    `pfc_rx_pause_prio3_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC pauses received on priority 3 (RoCE default).',
    `pfc_tx_pause_prio3_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC pauses sent on priority 3.',
    `pfc_pause_duration_us_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Time paused (rx), microseconds.',
    `rx_discards_phy_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets discarded by the PHY for lack of buffer.',
    `pause_storm_events_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'tx pause storm warning+error events.',
    `pci_stalled_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Outbound PCIe stalled reads+writes.',
    `resets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Counter resets detected (NIC reset / driver reload).'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `node`, `device`, `port`, `ts`)
TTL toDateTime(`ts`) + INTERVAL 30 DAY
COMMENT 'One RDMA NIC port: traffic, RoCE congestion (ECN/CNP), per-priority PFC, health.';

CREATE TABLE `switch_port_samples`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `switch` LowCardinality(String) COMMENT 'Switch hostname.',
    `asic` LowCardinality(String) COMMENT 'ASIC namespace on multi-ASIC switches; empty otherwise.',
    `port` LowCardinality(String) COMMENT 'Port name as the switch shows it (Ethernet0).',
    `role` LowCardinality(String) COMMENT 'leaf | spine | superspine | dci.',
    `up` Nullable(UInt8) COMMENT '1 when oper status is up.',
    `speed_bps` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Port speed, bits/s.',
    `rx_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Octets received.',
    `tx_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Octets sent.',
    `rx_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Unicast+multicast+broadcast packets received.',
    `tx_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets sent.',
    `rx_discards_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Inbound discards.',
    `tx_discards_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Outbound discards.',
    `rx_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Inbound errors.',
    `tx_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Outbound errors.',
    `pfc_rx_pause_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC frames received, all priorities.',
    `pfc_tx_pause_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC frames sent, all priorities.',
    `pfc_rx_pause_prio3_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC frames received on priority 3.',
    `pfc_tx_pause_prio3_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC frames sent on priority 3.',
    `pfc_rx_pause_duration_us_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Pause duration received, microseconds.',
    `link_down_events_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Link down transitions (flaps).',
    `rx_bytes_per_second` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Rate from RATES:* or derived.',
    `tx_bytes_per_second` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Rate from RATES:* or derived.',
    `tx_utilization_ratio` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'tx rate / speed.'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `switch`, `port`, `ts`)
TTL toDateTime(`ts`) + INTERVAL 30 DAY
COMMENT 'One switch port: traffic, errors, discards, per-priority PFC.';

CREATE TABLE `switch_queue_samples`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `switch` LowCardinality(String) COMMENT 'Switch hostname.',
    `asic` LowCardinality(String) COMMENT 'ASIC namespace; empty otherwise.',
    `port` LowCardinality(String) COMMENT 'Port name.',
    `queue` UInt8 COMMENT 'Queue index (or PG index for priority groups).',
    `queue_type` LowCardinality(String) COMMENT 'unicast | multicast | pg.',
    `tx_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets sent from the queue.',
    `tx_bytes_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Bytes sent from the queue.',
    `dropped_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets dropped.',
    `ecn_marked_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets ECN-marked by WRED.',
    `watermark_bytes` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Peak occupancy in the interval.',
    `pfc_wd_storm_detected` Nullable(UInt8) COMMENT '1 while the PFC watchdog sees a storm.',
    `pfc_wd_storms_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC watchdog storms detected.',
    `pfc_wd_dropped_packets_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Packets dropped by the PFC watchdog.'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `switch`, `port`, `queue`, `ts`)
TTL toDateTime(`ts`) + INTERVAL 30 DAY
COMMENT 'One egress queue or ingress priority group of a switch port.';

CREATE TABLE `flow_samples`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `agent` LowCardinality(String) COMMENT 'sFlow agent address (the switch).',
    `switch` LowCardinality(String) COMMENT 'Switch hostname, when known.',
    `in_port` LowCardinality(String) COMMENT 'Input interface (ifIndex or name).',
    `out_port` LowCardinality(String) COMMENT 'Output interface: the ECMP member for uplinks.',
    `src_ip` String CODEC(ZSTD(1)) COMMENT 'Source IP.',
    `dst_ip` String CODEC(ZSTD(1)) COMMENT 'Destination IP.',
    `src_port` UInt16 COMMENT 'L4 source port (entropy for RoCEv2).',
    `dst_port` UInt16 COMMENT 'L4 destination port (4791 = RoCEv2).',
    `protocol` UInt8 COMMENT 'IP protocol.',
    `vlan` UInt16 COMMENT 'VLAN id, 0 if untagged.',
    `dscp` UInt8 COMMENT 'DSCP.',
    `ecn` UInt8 COMMENT 'ECN bits (3 = CE).',
    `bth_opcode` Nullable(UInt8) COMMENT 'InfiniBand BTH opcode (RoCEv2).',
    `dest_qp` Nullable(UInt32) CODEC(ZSTD(1)) COMMENT 'InfiniBand BTH destination QP (RoCEv2).',
    `psn` Nullable(UInt32) CODEC(ZSTD(1)) COMMENT 'InfiniBand BTH PSN (RoCEv2).',
    `frame_bytes` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Sampled frame length.',
    `sampling_rate` UInt32 CODEC(T64, ZSTD(1)) COMMENT '1-in-N sampling rate.',
    `bytes` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Estimated bytes this sample stands for (frame x rate).',
    `packets` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Estimated packets (rate).'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `ts`, `src_ip`, `dst_ip`)
TTL toDateTime(`ts`) + INTERVAL 14 DAY
COMMENT 'A sampled packet (sFlow) scaled by its sampling rate; RoCEv2 adds BTH fields.';

CREATE TABLE `lldp_links`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `local_device` LowCardinality(String) COMMENT 'Host or switch that saw the neighbour.',
    `local_port` LowCardinality(String) COMMENT 'Local interface.',
    `remote_device` LowCardinality(String) COMMENT 'Neighbour system name.',
    `remote_port` LowCardinality(String) COMMENT 'Neighbour port id / description.',
    `remote_chassis_id` String CODEC(ZSTD(1)) COMMENT 'Neighbour chassis id.',
    `source` LowCardinality(String) COMMENT 'lldpcli | sonic | sim.'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `local_device`, `local_port`, `ts`)
TTL toDateTime(`ts`) + INTERVAL 90 DAY
COMMENT 'An LLDP neighbour seen on a local port (host or switch).';

CREATE TABLE `hdfs_transfers`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `datanode` LowCardinality(String) COMMENT 'DataNode that logged the transfer.',
    `op` LowCardinality(String) COMMENT 'HDFS_READ | HDFS_WRITE | replication.',
    `src` String CODEC(ZSTD(1)) COMMENT 'Source address host:port.',
    `dest` String CODEC(ZSTD(1)) COMMENT 'Destination address host:port.',
    `src_idc` LowCardinality(String) COMMENT 'IDC of the source (\'\' = unknown host).',
    `dest_idc` LowCardinality(String) COMMENT 'IDC of the destination (\'\' = unknown host).',
    `src_rack` LowCardinality(String) COMMENT 'Rack path of the source.',
    `dest_rack` LowCardinality(String) COMMENT 'Rack path of the destination.',
    `bytes` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Bytes transferred.',
    `client_id` String CODEC(ZSTD(1)) COMMENT 'DFSClient id.',
    `block_id` String CODEC(ZSTD(1)) COMMENT 'Block id (BP-...:blk_...).',
    `duration_seconds` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Transfer duration.',
    `cross_idc` Bool COMMENT 'Source and destination in different IDCs.',
    `write_mode` LowCardinality(String) COMMENT 'sync | async | \'\' for reads.'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `src_idc`, `dest_idc`, `ts`)
TTL toDateTime(`ts`) + INTERVAL 30 DAY
COMMENT 'One HDFS block transfer from a DataNode clienttrace line, mapped to IDC/rack.';

CREATE TABLE `hdfs_block_placements`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `path` String CODEC(ZSTD(1)) COMMENT 'File path.',
    `block_id` String CODEC(ZSTD(1)) COMMENT 'Block id.',
    `replicas` UInt16 COMMENT 'Replicas found.',
    `expected_replicas` UInt16 COMMENT 'Replication factor.',
    `replicas_by_idc` String CODEC(ZSTD(1)) COMMENT 'JSON object IDC -> replica count.',
    `locations` String CODEC(ZSTD(1)) COMMENT 'JSON list of host/rack locations.',
    `violation` Bool COMMENT 'Placement breaks the policy.',
    `reason` String CODEC(ZSTD(1)) COMMENT 'Why it breaks the policy (\'\' if it does not).'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `violation`, `path`, `block_id`, `ts`)
TTL toDateTime(`ts`) + INTERVAL 90 DAY
COMMENT 'Replica placement of one block (from fsck or WebHDFS) judged against the policy.';

CREATE TABLE `inv_pods`
(
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `namespace` LowCardinality(String) COMMENT 'Namespace = tenant.',
    `pod` LowCardinality(String) COMMENT 'Pod name.',
    `uid` String CODEC(ZSTD(1)) COMMENT 'Pod UID.',
    `node` LowCardinality(String) COMMENT 'Node the pod ran on.',
    `job` LowCardinality(String) COMMENT 'Volcano job (volcano.sh/job-name), \'\' if none.',
    `phase` LowCardinality(String) COMMENT 'Pod phase.',
    `gpus` String CODEC(ZSTD(1)) COMMENT 'JSON list of GPU indices/UUIDs assigned.',
    `valid_from` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of validity of this fact (UTC).',
    `valid_to` Nullable(DateTime64(3, 'UTC')) CODEC(ZSTD(1)) COMMENT 'End of validity (UTC); null while the fact still holds.',
    `updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Version of this row: the latest wins.'
)
ENGINE = ReplacingMergeTree(`updated_at`)
ORDER BY (`cluster`, `namespace`, `pod`, `valid_from`)
COMMENT 'A pod\'s placement and ownership over time.';

CREATE TABLE `inv_pod_ips`
(
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `ip` String CODEC(ZSTD(1)) COMMENT 'The IP address.',
    `namespace` LowCardinality(String) COMMENT 'Namespace = tenant.',
    `pod` LowCardinality(String) COMMENT 'Pod name.',
    `node` LowCardinality(String) COMMENT 'Node.',
    `interface` LowCardinality(String) COMMENT 'Pod interface (eth0, net1, ...).',
    `network` LowCardinality(String) COMMENT 'Multus network name; \'\' for the primary.',
    `mac` String CODEC(ZSTD(1)) COMMENT 'MAC address.',
    `pci_address` String CODEC(ZSTD(1)) COMMENT 'SR-IOV VF PCI address (device-info).',
    `primary` Bool COMMENT 'The pod\'s primary IP.',
    `valid_from` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of validity of this fact (UTC).',
    `valid_to` Nullable(DateTime64(3, 'UTC')) CODEC(ZSTD(1)) COMMENT 'End of validity (UTC); null while the fact still holds.',
    `updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Version of this row: the latest wins.'
)
ENGINE = ReplacingMergeTree(`updated_at`)
ORDER BY (`cluster`, `ip`, `valid_from`)
COMMENT 'An IP held by a pod over an interval: primary and Multus secondary (RDMA) IPs.';

CREATE TABLE `inv_nodes`
(
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `node` LowCardinality(String) COMMENT 'Node name.',
    `labels` String CODEC(ZSTD(1)) COMMENT 'JSON object of node labels.',
    `idc` LowCardinality(String) COMMENT 'Data center (from labels or topology).',
    `su` LowCardinality(String) COMMENT 'Scalable unit.',
    `gpus` UInt16 COMMENT 'Allocatable GPUs.',
    `valid_from` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of validity of this fact (UTC).',
    `valid_to` Nullable(DateTime64(3, 'UTC')) CODEC(ZSTD(1)) COMMENT 'End of validity (UTC); null while the fact still holds.',
    `updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Version of this row: the latest wins.'
)
ENGINE = ReplacingMergeTree(`updated_at`)
ORDER BY (`cluster`, `node`, `valid_from`)
COMMENT 'A Kubernetes node: labels and where it sits.';

CREATE TABLE `inv_hypernodes`
(
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `hypernode` LowCardinality(String) COMMENT 'HyperNode name.',
    `tier` UInt8 COMMENT 'HyperNode tier (1 = lowest).',
    `tier_name` LowCardinality(String) COMMENT 'Tier name, if given.',
    `member` String CODEC(ZSTD(1)) COMMENT 'Member: node name or child HyperNode name.',
    `member_type` LowCardinality(String) COMMENT 'Node | HyperNode.',
    `selector` LowCardinality(String) COMMENT 'exactMatch | regexMatch | labelMatch.',
    `valid_from` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of validity of this fact (UTC).',
    `valid_to` Nullable(DateTime64(3, 'UTC')) CODEC(ZSTD(1)) COMMENT 'End of validity (UTC); null while the fact still holds.',
    `updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Version of this row: the latest wins.'
)
ENGINE = ReplacingMergeTree(`updated_at`)
ORDER BY (`cluster`, `hypernode`, `member`, `valid_from`)
COMMENT 'A Volcano HyperNode member: one row per (hypernode, member).';

CREATE TABLE `inv_jobs`
(
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `namespace` LowCardinality(String) COMMENT 'Namespace = tenant.',
    `job` LowCardinality(String) COMMENT 'Job name.',
    `queue` LowCardinality(String) COMMENT 'Volcano queue.',
    `replicas` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Total task replicas.',
    `topology_mode` LowCardinality(String) COMMENT 'hard | soft | \'\' (no networkTopology).',
    `highest_tier_allowed` Nullable(UInt8) COMMENT 'spec.networkTopology.highestTierAllowed.',
    `highest_tier_name` LowCardinality(Nullable(String)) COMMENT 'spec.networkTopology.highestTierName.',
    `allocated_hypernode` String CODEC(ZSTD(1)) COMMENT 'PodGroup volcano.sh/job-allocated-hypernode annotation.',
    `valid_from` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of validity of this fact (UTC).',
    `valid_to` Nullable(DateTime64(3, 'UTC')) CODEC(ZSTD(1)) COMMENT 'End of validity (UTC); null while the fact still holds.',
    `updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Version of this row: the latest wins.'
)
ENGINE = ReplacingMergeTree(`updated_at`)
ORDER BY (`cluster`, `namespace`, `job`, `valid_from`)
COMMENT 'A Volcano job and its networkTopology constraint.';

CREATE TABLE `findings`
(
    `finding_id` String CODEC(ZSTD(1)) COMMENT 'Stable id: hash of kind + subject + first window.',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `kind` LowCardinality(String) COMMENT 'Finding kind (placement_violation, ecmp_imbalance, pfc_storm, ...).',
    `category` LowCardinality(String) COMMENT 'placement | fabric | node | storage | topology.',
    `severity` LowCardinality(String) COMMENT 'critical | warning | info.',
    `subject_type` LowCardinality(String) COMMENT 'job | pod | link | port | nic | gpu | block | hypernode ...',
    `subject` String CODEC(ZSTD(1)) COMMENT 'What the finding is about.',
    `summary` String CODEC(ZSTD(1)) COMMENT 'One line a person reads.',
    `evidence` String CODEC(ZSTD(1)) COMMENT 'JSON: the numbers and the rows they came from.',
    `window_start` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of the window that produced it.',
    `window_end` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'End of that window.',
    `first_seen` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'First window it appeared in.',
    `last_seen` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Last window it appeared in.',
    `updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Row version.'
)
ENGINE = ReplacingMergeTree(`updated_at`)
ORDER BY (`cluster`, `kind`, `subject`, `finding_id`)
TTL toDateTime(`first_seen`) + INTERVAL 180 DAY
COMMENT 'A correlated finding; a persisting one is updated (same finding_id), not duplicated.';

CREATE TABLE `component_stats`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `host` LowCardinality(String) COMMENT 'Where the component runs.',
    `component` LowCardinality(String) COMMENT 'Component name (source:node, sink:clickhouse, ...).',
    `received_total` UInt64 CODEC(Delta, ZSTD(1)) COMMENT 'Records received.',
    `sent_total` UInt64 CODEC(Delta, ZSTD(1)) COMMENT 'Records sent on.',
    `dropped_total` UInt64 CODEC(Delta, ZSTD(1)) COMMENT 'Records dropped.',
    `failed_total` UInt64 CODEC(Delta, ZSTD(1)) COMMENT 'Failed operations.',
    `last_duration_seconds` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Duration of the last collect/export.',
    `success` Nullable(UInt8) COMMENT '1 when the last operation succeeded.',
    `spool_bytes` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Bytes waiting in the spool (sinks).'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `component`, `ts`)
TTL toDateTime(`ts`) + INTERVAL 30 DAY
COMMENT 'Self-report of a pipeline component (source, transform, sink) per interval.';
