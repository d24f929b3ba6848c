-- PFC per priority on switch ports (switch_priority_samples); the priority-3 columns of
-- nic_samples and switch_port_samples removed (lossless priorities come from config)

-- Switch PFC per priority; priority 3 is no longer a column.
CREATE TABLE `switch_priority_samples`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `switch` LowCardinality(String) COMMENT 'Switch hostname.',
    `asic` LowCardinality(String) COMMENT 'ASIC namespace on multi-ASIC switches; empty otherwise.',
    `port` LowCardinality(String) COMMENT 'Port name as the switch shows it (Ethernet0).',
    `priority` UInt8 COMMENT '802.1p priority (0-7).',
    `rx_pause_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC frames received for this priority.',
    `tx_pause_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'PFC frames sent for this priority.',
    `rx_pause_duration_seconds_total` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Time paused by received PFC on this priority (where the switch counts it).',
    `tx_pause_duration_seconds_total` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Time this port paused its peer on this priority (where the switch counts it).'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `switch`, `port`, `priority`, `ts`)
TTL toDateTime(`ts`) + INTERVAL 30 DAY
COMMENT 'One 802.1p priority of a switch port: PFC pause frames and pause time.';

ALTER TABLE `nic_samples`
    DROP COLUMN `pfc_rx_pause_prio3_total`,
    DROP COLUMN `pfc_tx_pause_prio3_total`;

ALTER TABLE `switch_port_samples`
    DROP COLUMN `pfc_rx_pause_prio3_total`,
    DROP COLUMN `pfc_tx_pause_prio3_total`;
