-- nic_samples: link-level (802.3x) pause frames and pause time, received and sent

-- Link-level pause on NICs (exporters/node/nic_counters.csv names the drivers').
ALTER TABLE `nic_samples`
    ADD COLUMN `global_rx_pause_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Link-level (802.3x) pause frames received.' AFTER `pfc_rx_pause_duration_seconds_total`,
    ADD COLUMN `global_tx_pause_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Link-level (802.3x) pause frames sent.' AFTER `global_rx_pause_total`,
    ADD COLUMN `global_rx_pause_duration_seconds_total` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Time the port was paused by received link-level pause frames.' AFTER `global_tx_pause_total`,
    ADD COLUMN `global_tx_pause_duration_seconds_total` Nullable(Float64) CODEC(ZSTD(1)) COMMENT 'Time the port paused its peer with link-level pause frames.' AFTER `global_rx_pause_duration_seconds_total`;
