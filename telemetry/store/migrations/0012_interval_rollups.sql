-- per-interval rollups kept on insert by materialized views: switch port, queue, NIC and GPU
-- counters (first/last sample time, min/max/nulls per counter) and the (job, switch, port) keys of
-- attributed flows per 10 s, backfilled from what the tables held

-- Per-interval rollups (issue 13 item 2), one row per series per 10 s interval
-- (`bucket`), sorted by interval first so that a trailing window reads its intervals' rows
-- only. Counters keep min, max and how many samples were null, per interval: a series whose
-- counters did not move inside a window (max over its intervals = min, no nulls) rose by exactly
-- 0 there, which is all the engine asks of them (telemetry/correlate/sql.py, moved_series).
-- Per rollup: its table, the view feeding it from then on, then what the source already held
-- (the loader adds that backfill to each view; the view only sees new inserts, and a row inserted
-- between the view and the backfill is counted twice in the sums, never in the min/max/any
-- columns the engine prunes with).
CREATE TABLE `switch_port_intervals`
(
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `switch` LowCardinality(String) COMMENT 'Switch hostname.',
    `port` LowCardinality(String) COMMENT 'Port name as the switch shows it.',
    `bucket` DateTime('UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of the 10 s interval (UTC).',
    `samples` SimpleAggregateFunction(sum, UInt64) COMMENT 'Samples in the interval.',
    `first_ts` SimpleAggregateFunction(min, DateTime64(3, 'UTC')) COMMENT 'First sample time in the interval.',
    `last_ts` SimpleAggregateFunction(max, DateTime64(3, 'UTC')) COMMENT 'Last sample time in the interval.',
    `link_down_events_total_min` SimpleAggregateFunction(min, Nullable(UInt64)) COMMENT 'Least link_down_events_total in the interval.',
    `link_down_events_total_max` SimpleAggregateFunction(max, Nullable(UInt64)) COMMENT 'Greatest link_down_events_total in the interval.',
    `link_down_events_total_nulls` SimpleAggregateFunction(sum, UInt64) COMMENT 'Samples without link_down_events_total.',
    `rx_errors_total_min` SimpleAggregateFunction(min, Nullable(UInt64)) COMMENT 'Least rx_errors_total in the interval.',
    `rx_errors_total_max` SimpleAggregateFunction(max, Nullable(UInt64)) COMMENT 'Greatest rx_errors_total in the interval.',
    `rx_errors_total_nulls` SimpleAggregateFunction(sum, UInt64) COMMENT 'Samples without rx_errors_total.',
    `pfc_rx_pause_total_min` SimpleAggregateFunction(min, Nullable(UInt64)) COMMENT 'Least pfc_rx_pause_total in the interval.',
    `pfc_rx_pause_total_max` SimpleAggregateFunction(max, Nullable(UInt64)) COMMENT 'Greatest pfc_rx_pause_total in the interval.',
    `pfc_rx_pause_total_nulls` SimpleAggregateFunction(sum, UInt64) COMMENT 'Samples without pfc_rx_pause_total.',
    `pfc_tx_pause_total_min` SimpleAggregateFunction(min, Nullable(UInt64)) COMMENT 'Least pfc_tx_pause_total in the interval.',
    `pfc_tx_pause_total_max` SimpleAggregateFunction(max, Nullable(UInt64)) COMMENT 'Greatest pfc_tx_pause_total in the interval.',
    `pfc_tx_pause_total_nulls` SimpleAggregateFunction(sum, UInt64) COMMENT 'Samples without pfc_tx_pause_total.',
    `down_samples` SimpleAggregateFunction(sum, UInt64) COMMENT 'Samples with the port down.'
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMMDD(bucket)
ORDER BY (`cluster`, `bucket`, `switch`, `port`)
TTL toDateTime(`bucket`) + INTERVAL 30 DAY
SHARD BY (`cluster`, `switch`, `port`)
COMMENT 'Per switch port and 10 s interval: samples, down samples, and the link-down, error and PFC pause counters\' least and greatest value (kept on insert by switch_port_intervals_mv).';

CREATE MATERIALIZED VIEW `switch_port_intervals_mv` TO `switch_port_intervals` AS
SELECT `cluster`, `switch`, `port`, toDateTime(toStartOfInterval(`ts`, INTERVAL 10 SECOND), 'UTC') AS `bucket`, count() AS `samples`,
       min(`ts`) AS `first_ts`, max(`ts`) AS `last_ts`, min(`link_down_events_total`) AS `link_down_events_total_min`, max(`link_down_events_total`) AS `link_down_events_total_max`, countIf(isNull(`link_down_events_total`)) AS `link_down_events_total_nulls`, min(`rx_errors_total`) AS `rx_errors_total_min`, max(`rx_errors_total`) AS `rx_errors_total_max`, countIf(isNull(`rx_errors_total`)) AS `rx_errors_total_nulls`, min(`pfc_rx_pause_total`) AS `pfc_rx_pause_total_min`, max(`pfc_rx_pause_total`) AS `pfc_rx_pause_total_max`, countIf(isNull(`pfc_rx_pause_total`)) AS `pfc_rx_pause_total_nulls`, min(`pfc_tx_pause_total`) AS `pfc_tx_pause_total_min`, max(`pfc_tx_pause_total`) AS `pfc_tx_pause_total_max`, countIf(isNull(`pfc_tx_pause_total`)) AS `pfc_tx_pause_total_nulls`, countIf(`up` = 0) AS `down_samples`
FROM `switch_port_samples`
GROUP BY `cluster`, `switch`, `port`, `bucket`;

CREATE TABLE `switch_queue_intervals`
(
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `switch` LowCardinality(String) COMMENT 'Switch hostname.',
    `port` LowCardinality(String) COMMENT 'Port name as the switch shows it.',
    `queue` UInt8 COMMENT 'Egress queue index.',
    `bucket` DateTime('UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of the 10 s interval (UTC).',
    `samples` SimpleAggregateFunction(sum, UInt64) COMMENT 'Samples in the interval.',
    `first_ts` SimpleAggregateFunction(min, DateTime64(3, 'UTC')) COMMENT 'First sample time in the interval.',
    `last_ts` SimpleAggregateFunction(max, DateTime64(3, 'UTC')) COMMENT 'Last sample time in the interval.',
    `ecn_marked_packets_total_min` SimpleAggregateFunction(min, Nullable(UInt64)) COMMENT 'Least ecn_marked_packets_total in the interval.',
    `ecn_marked_packets_total_max` SimpleAggregateFunction(max, Nullable(UInt64)) COMMENT 'Greatest ecn_marked_packets_total in the interval.',
    `ecn_marked_packets_total_nulls` SimpleAggregateFunction(sum, UInt64) COMMENT 'Samples without ecn_marked_packets_total.'
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMMDD(bucket)
ORDER BY (`cluster`, `bucket`, `switch`, `port`, `queue`)
TTL toDateTime(`bucket`) + INTERVAL 30 DAY
SHARD BY (`cluster`, `switch`, `port`, `queue`)
COMMENT 'Per switch queue and 10 s interval: samples and the ECN-marked counter\'s least and greatest value (kept on insert by switch_queue_intervals_mv).';

CREATE MATERIALIZED VIEW `switch_queue_intervals_mv` TO `switch_queue_intervals` AS
SELECT `cluster`, `switch`, `port`, `queue`, toDateTime(toStartOfInterval(`ts`, INTERVAL 10 SECOND), 'UTC') AS `bucket`, count() AS `samples`,
       min(`ts`) AS `first_ts`, max(`ts`) AS `last_ts`, min(`ecn_marked_packets_total`) AS `ecn_marked_packets_total_min`, max(`ecn_marked_packets_total`) AS `ecn_marked_packets_total_max`, countIf(isNull(`ecn_marked_packets_total`)) AS `ecn_marked_packets_total_nulls`
FROM `switch_queue_samples`
GROUP BY `cluster`, `switch`, `port`, `queue`, `bucket`;

CREATE TABLE `nic_intervals`
(
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `node` LowCardinality(String) COMMENT 'Kubernetes node name.',
    `device` LowCardinality(String) COMMENT 'RDMA device (mlx5_0).',
    `port` UInt8 COMMENT 'Port number.',
    `bucket` DateTime('UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of the 10 s interval (UTC).',
    `samples` SimpleAggregateFunction(sum, UInt64) COMMENT 'Samples in the interval.',
    `first_ts` SimpleAggregateFunction(min, DateTime64(3, 'UTC')) COMMENT 'First sample time in the interval.',
    `last_ts` SimpleAggregateFunction(max, DateTime64(3, 'UTC')) COMMENT 'Last sample time in the interval.',
    `pfc_tx_pause_total_min` SimpleAggregateFunction(min, Nullable(UInt64)) COMMENT 'Least pfc_tx_pause_total in the interval.',
    `pfc_tx_pause_total_max` SimpleAggregateFunction(max, Nullable(UInt64)) COMMENT 'Greatest pfc_tx_pause_total in the interval.',
    `pfc_tx_pause_total_nulls` SimpleAggregateFunction(sum, UInt64) COMMENT 'Samples without pfc_tx_pause_total.',
    `cnp_sent_total_min` SimpleAggregateFunction(min, Nullable(UInt64)) COMMENT 'Least cnp_sent_total in the interval.',
    `cnp_sent_total_max` SimpleAggregateFunction(max, Nullable(UInt64)) COMMENT 'Greatest cnp_sent_total in the interval.',
    `cnp_sent_total_nulls` SimpleAggregateFunction(sum, UInt64) COMMENT 'Samples without cnp_sent_total.',
    `cnp_handled_total_min` SimpleAggregateFunction(min, Nullable(UInt64)) COMMENT 'Least cnp_handled_total in the interval.',
    `cnp_handled_total_max` SimpleAggregateFunction(max, Nullable(UInt64)) COMMENT 'Greatest cnp_handled_total in the interval.',
    `cnp_handled_total_nulls` SimpleAggregateFunction(sum, UInt64) COMMENT 'Samples without cnp_handled_total.',
    `pci_stalled_total_min` SimpleAggregateFunction(min, Nullable(UInt64)) COMMENT 'Least pci_stalled_total in the interval.',
    `pci_stalled_total_max` SimpleAggregateFunction(max, Nullable(UInt64)) COMMENT 'Greatest pci_stalled_total in the interval.',
    `pci_stalled_total_nulls` SimpleAggregateFunction(sum, UInt64) COMMENT 'Samples without pci_stalled_total.'
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMMDD(bucket)
ORDER BY (`cluster`, `bucket`, `node`, `device`, `port`)
TTL toDateTime(`bucket`) + INTERVAL 30 DAY
SHARD BY (`cluster`, `node`, `device`, `port`)
COMMENT 'Per NIC port and 10 s interval: samples and the PFC pause, CNP and PCIe stall counters\' least and greatest value (kept on insert by nic_intervals_mv).';

CREATE MATERIALIZED VIEW `nic_intervals_mv` TO `nic_intervals` AS
SELECT `cluster`, `node`, `device`, `port`, toDateTime(toStartOfInterval(`ts`, INTERVAL 10 SECOND), 'UTC') AS `bucket`, count() AS `samples`,
       min(`ts`) AS `first_ts`, max(`ts`) AS `last_ts`, min(`pfc_tx_pause_total`) AS `pfc_tx_pause_total_min`, max(`pfc_tx_pause_total`) AS `pfc_tx_pause_total_max`, countIf(isNull(`pfc_tx_pause_total`)) AS `pfc_tx_pause_total_nulls`, min(`cnp_sent_total`) AS `cnp_sent_total_min`, max(`cnp_sent_total`) AS `cnp_sent_total_max`, countIf(isNull(`cnp_sent_total`)) AS `cnp_sent_total_nulls`, min(`cnp_handled_total`) AS `cnp_handled_total_min`, max(`cnp_handled_total`) AS `cnp_handled_total_max`, countIf(isNull(`cnp_handled_total`)) AS `cnp_handled_total_nulls`, min(`pci_stalled_total`) AS `pci_stalled_total_min`, max(`pci_stalled_total`) AS `pci_stalled_total_max`, countIf(isNull(`pci_stalled_total`)) AS `pci_stalled_total_nulls`
FROM `nic_samples`
GROUP BY `cluster`, `node`, `device`, `port`, `bucket`;

CREATE TABLE `gpu_intervals`
(
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `node` LowCardinality(String) COMMENT 'Kubernetes node name.',
    `gpu` UInt16 COMMENT 'GPU index on the node.',
    `bucket` DateTime('UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of the 10 s interval (UTC).',
    `samples` SimpleAggregateFunction(sum, UInt64) COMMENT 'Samples in the interval.',
    `first_ts` SimpleAggregateFunction(min, DateTime64(3, 'UTC')) COMMENT 'First sample time in the interval.',
    `last_ts` SimpleAggregateFunction(max, DateTime64(3, 'UTC')) COMMENT 'Last sample time in the interval.',
    `power_violation_seconds_total_min` SimpleAggregateFunction(min, Nullable(Float64)) COMMENT 'Least power_violation_seconds_total in the interval.',
    `power_violation_seconds_total_max` SimpleAggregateFunction(max, Nullable(Float64)) COMMENT 'Greatest power_violation_seconds_total in the interval.',
    `power_violation_seconds_total_nulls` SimpleAggregateFunction(sum, UInt64) COMMENT 'Samples without power_violation_seconds_total.',
    `thermal_violation_seconds_total_min` SimpleAggregateFunction(min, Nullable(Float64)) COMMENT 'Least thermal_violation_seconds_total in the interval.',
    `thermal_violation_seconds_total_max` SimpleAggregateFunction(max, Nullable(Float64)) COMMENT 'Greatest thermal_violation_seconds_total in the interval.',
    `thermal_violation_seconds_total_nulls` SimpleAggregateFunction(sum, UInt64) COMMENT 'Samples without thermal_violation_seconds_total.',
    `up_samples` SimpleAggregateFunction(sum, UInt64) COMMENT 'Samples with the GPU up.',
    `clock_event_reasons_or` SimpleAggregateFunction(groupBitOr, UInt64) COMMENT 'Bitwise OR of the clock-event reasons of the up samples.'
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMMDD(bucket)
ORDER BY (`cluster`, `bucket`, `node`, `gpu`)
TTL toDateTime(`bucket`) + INTERVAL 30 DAY
SHARD BY (`cluster`, `node`, `gpu`)
COMMENT 'Per GPU and 10 s interval, over the samples with the GPU up: the power and thermal violation counters\' least and greatest value and the OR of the clock-event reasons (kept on insert by gpu_intervals_mv).';

CREATE MATERIALIZED VIEW `gpu_intervals_mv` TO `gpu_intervals` AS
SELECT `cluster`, `node`, `gpu`, toDateTime(toStartOfInterval(`ts`, INTERVAL 10 SECOND), 'UTC') AS `bucket`, count() AS `samples`,
       min(`ts`) AS `first_ts`, max(`ts`) AS `last_ts`, minIf(`power_violation_seconds_total`, `up` = 1) AS `power_violation_seconds_total_min`, maxIf(`power_violation_seconds_total`, `up` = 1) AS `power_violation_seconds_total_max`, countIf(isNull(`power_violation_seconds_total`) AND `up` = 1) AS `power_violation_seconds_total_nulls`, minIf(`thermal_violation_seconds_total`, `up` = 1) AS `thermal_violation_seconds_total_min`, maxIf(`thermal_violation_seconds_total`, `up` = 1) AS `thermal_violation_seconds_total_max`, countIf(isNull(`thermal_violation_seconds_total`) AND `up` = 1) AS `thermal_violation_seconds_total_nulls`, countIf(`up` = 1) AS `up_samples`, groupBitOrIf(ifNull(`clock_event_reasons`, 0), `up` = 1) AS `clock_event_reasons_or`
FROM `gpu_samples`
GROUP BY `cluster`, `node`, `gpu`, `bucket`;

CREATE TABLE `job_port_intervals`
(
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `src_namespace` LowCardinality(String) COMMENT 'Namespace of the sending pod.',
    `src_job` LowCardinality(String) COMMENT 'Job of the sending pod.',
    `switch` LowCardinality(String) COMMENT 'Switch that sampled the flows.',
    `out_port` LowCardinality(String) COMMENT 'Egress port the flows left by.',
    `bucket` DateTime('UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of the 10 s interval (UTC).',
    `flows` UInt64 COMMENT 'Attributed flow samples.',
    `bytes` UInt64 COMMENT 'Their bytes (a re-attributed interval is subtracted and added again).'
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMMDD(bucket)
ORDER BY (`cluster`, `bucket`, `src_namespace`, `src_job`, `switch`, `out_port`)
TTL toDateTime(`bucket`) + INTERVAL 14 DAY
SHARD BY (`cluster`, `src_namespace`, `src_job`)
COMMENT 'Per sending job, switch egress port and 10 s interval: the attributed flow samples and bytes (kept on insert by job_port_intervals_mv).';

CREATE MATERIALIZED VIEW `job_port_intervals_mv` TO `job_port_intervals` AS
SELECT `cluster`, `src_namespace`, `src_job`, `switch`, `out_port`, toDateTime(toStartOfInterval(`ts`, INTERVAL 10 SECOND), 'UTC') AS `bucket`,
       count() AS `flows`, sum(`bytes`) AS `bytes`
FROM `attributed_flows`
GROUP BY `cluster`, `src_namespace`, `src_job`, `switch`, `out_port`, `bucket`;
