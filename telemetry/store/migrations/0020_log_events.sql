-- log_events: the lines of pods' logs and of the kernel log that railscope's grammar recognised

-- The job's and the kernel's own words (issue 45): one row per recognised line, its fields as JSON.
CREATE TABLE `log_events`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `node` LowCardinality(String) COMMENT 'Node whose pod or kernel wrote the line.',
    `namespace` LowCardinality(String) COMMENT 'The pod\'s namespace, from the log file\'s path; \'\' kernel log.',
    `pod` LowCardinality(String) COMMENT 'The pod\'s name, from the log file\'s path; \'\' for the kernel log.',
    `pod_uid` String CODEC(ZSTD(1)) COMMENT 'The pod\'s UID, from the log file\'s path; \'\'.',
    `container` LowCardinality(String) COMMENT 'The container, from the log file\'s path; \'\' kernel log.',
    `source` LowCardinality(String) COMMENT 'Where the line came from: cri | kmsg | text (a file of --from).',
    `kind` LowCardinality(String) COMMENT 'Event kind: ib_completion_error, torch_watchdog_timeout, xid, ...',
    `fields` String CODEC(ZSTD(1)) COMMENT 'JSON object of the kind\'s matched fields, named as docs/logs.md lists them.',
    `excerpt` String CODEC(ZSTD(1)) COMMENT 'The line, bounded, with credentials and tokens redacted.',
    `file` String CODEC(ZSTD(1)) COMMENT 'The file it was read from; \'\' for /dev/kmsg.',
    `line` UInt64 CODEC(T64, ZSTD(1)) COMMENT '1-based line of the file (of the input, with --from) where it starts.'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `node`, `kind`, `ts`)
TTL toDateTime(`ts`) + INTERVAL 30 DAY
SHARD BY (`cluster`, `node`, `kind`)
COMMENT 'A line of a pod\'s log or of the kernel log that railscope\'s grammar recognised (NCCL, PyTorch, NVIDIA driver, NIC driver, PCIe AER): its kind and matched fields. Lines that match nothing are counted by the source, never stored.';

