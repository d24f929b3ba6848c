-- nvlink_samples: each NVLink of each GPU, its state and its error counters

-- NVLink errors named by link (issue 46): gpu_samples sums NVML's counters over a GPU's links, so a
-- finding could name the GPU but not the link; nvmlDeviceGetNvLinkErrorCounter reads them per link.
CREATE TABLE `nvlink_samples`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `node` LowCardinality(String) COMMENT 'Kubernetes node name.',
    `gpu` UInt16 COMMENT 'GPU index on the node.',
    `uuid` LowCardinality(String) COMMENT 'GPU UUID.',
    `link` UInt16 COMMENT 'NVLink index on the GPU (0 .. the GPU\'s link count - 1).',
    `up` UInt8 COMMENT '1 when the link is active (nvmlDeviceGetNvLinkState), 0 when it is down.',
    `crc_flit_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Data-link flow-control CRC errors (DL_CRC_FLIT).',
    `crc_data_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Data-link data CRC errors (DL_CRC_DATA).',
    `replay_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Data-link replays, retransmissions (DL_REPLAY).',
    `recovery_errors_total` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'Data-link recoveries, link retrains (DL_RECOVERY).'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `node`, `gpu`, `link`, `ts`)
TTL toDateTime(`ts`) + INTERVAL 30 DAY
SHARD BY (`cluster`, `node`, `gpu`, `link`)
COMMENT 'One NVLink of one GPU, sampled through NVML (nvmlDeviceGetNvLinkErrorCounter per link): its state and its data-link error counters. Null = the link cannot report it (NVML_ERROR_NOT_SUPPORTED).';

