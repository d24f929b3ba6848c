-- nccl_settings: the NCCL_* environment variables of each pod's containers, as the inventory reads
-- them from the pod spec, time-versioned

-- The pods' NCCL settings (issue 39), time-versioned like the rest of the inventory.
CREATE TABLE `nccl_settings`
(
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `namespace` LowCardinality(String) COMMENT 'Namespace = tenant.',
    `pod` LowCardinality(String) COMMENT 'Pod name.',
    `container` LowCardinality(String) COMMENT 'Container of the pod (init containers included).',
    `name` LowCardinality(String) COMMENT 'Variable name (NCCL_ALGO, NCCL_IB_QPS_PER_CONNECTION, ...).',
    `value` String CODEC(ZSTD(1)) COMMENT 'Its value; \'\' when it comes from an object not at hand (see source).',
    `source` LowCardinality(String) COMMENT 'value | configmap | configmap_unresolved | field | resource.',
    `ref` String CODEC(ZSTD(1)) COMMENT 'Where a value not written in the spec comes from (configmap NAME key KEY, fieldRef PATH, resourceFieldRef RESOURCE); \'\' for a literal.',
    `job` LowCardinality(String) COMMENT 'Volcano job of the pod (volcano.sh/job-name), \'\' none.',
    `valid_from` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of validity of this fact (UTC).',
    `valid_to` Nullable(DateTime64(3, 'UTC')) CODEC(ZSTD(1)) COMMENT 'End of validity (UTC); null while the fact still holds.',
    `updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Version of this row: the latest wins.'
)
ENGINE = ReplacingMergeTree(`updated_at`)
ORDER BY (`cluster`, `namespace`, `pod`, `container`, `name`, `valid_from`)
SHARD BY (`cluster`, `namespace`, `pod`, `container`, `name`)
COMMENT 'An NCCL setting (an NCCL_* environment variable) of a pod\'s container over time, as its spec gives it; secrets are never stored.';
