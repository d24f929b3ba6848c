-- incidents and incident_findings: findings grouped by root cause (issue 19)

-- Incidents and their membership (issue 19), frozen as released.
CREATE TABLE `incidents`
(
    `incident_id` String CODEC(ZSTD(1)) COMMENT 'Stable id: hash of the root finding when the incident opened.',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `state` LowCardinality(String) COMMENT 'open | resolved.',
    `severity` LowCardinality(String) COMMENT 'critical | warning | info: the highest of the members, raised by blast radius.',
    `root_finding_id` String CODEC(ZSTD(1)) COMMENT 'The finding the others follow from.',
    `root_kind` LowCardinality(String) COMMENT 'Kind of the root finding.',
    `root_subject_type` LowCardinality(String) COMMENT 'Subject type of the root finding.',
    `root_subject` String CODEC(ZSTD(1)) COMMENT 'Subject of the root finding.',
    `summary` String CODEC(ZSTD(1)) COMMENT 'Summary of the root finding and what else it explains.',
    `findings` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Member findings (root included).',
    `kinds` String CODEC(ZSTD(1)) COMMENT 'JSON list: kinds of the member findings.',
    `jobs` String CODEC(ZSTD(1)) COMMENT 'JSON list of namespace/job affected.',
    `tenants` String CODEC(ZSTD(1)) COMMENT 'JSON list of tenants affected.',
    `gpus` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'GPUs of the affected jobs.',
    `gpu_hours` Float64 CODEC(Gorilla, ZSTD(1)) COMMENT 'GPU-hours of the affected jobs over the span of the incident.',
    `first_seen` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Earliest first_seen of the members.',
    `last_seen` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Latest last_seen of the members.',
    `merged_into` String CODEC(ZSTD(1)) COMMENT 'Set when a later regrouping folded it into that incident.',
    `updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Row version.'
)
ENGINE = ReplacingMergeTree(`updated_at`)
ORDER BY (`cluster`, `incident_id`)
TTL toDateTime(`first_seen`) + INTERVAL 180 DAY
SHARD BY (`cluster`, `incident_id`)
COMMENT 'Findings that share one root cause (telemetry/correlate/incidents.py); an update is a newer version of the same incident_id.';

CREATE TABLE `incident_findings`
(
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `incident_id` String CODEC(ZSTD(1)) COMMENT 'The incident.',
    `finding_id` String CODEC(ZSTD(1)) COMMENT 'A member finding.',
    `role` LowCardinality(String) COMMENT 'root | cause | consequence.',
    `member` UInt8 COMMENT '1 while the finding belongs to the incident.',
    `first_seen` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'first_seen of the finding.',
    `updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Row version.'
)
ENGINE = ReplacingMergeTree(`updated_at`)
ORDER BY (`cluster`, `incident_id`, `finding_id`)
TTL toDateTime(`first_seen`) + INTERVAL 180 DAY
SHARD BY (`cluster`, `incident_id`, `finding_id`)
COMMENT 'Membership: which findings an incident groups (member = 0 once regrouping moved it out).';
