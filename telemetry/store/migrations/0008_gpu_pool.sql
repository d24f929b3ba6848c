-- GPU pool: queues, podgroups, priority_classes, resource_quotas, pod_events; GPU requests,
-- priority class, podgroup and GPU model of pods; GPU capacity and model of nodes

-- GPU pool inventory (queues, podgroups, priority classes, quotas, pod events) and
-- the GPU fields of pods and nodes.
CREATE TABLE `queues`
(
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `queue` LowCardinality(String) COMMENT 'Queue name.',
    `parent` LowCardinality(String) COMMENT 'spec.parent, else the volcano.sh/hierarchy path\'s parent, \'\' none.',
    `state` LowCardinality(String) COMMENT 'status.state (Open, Closed, ...).',
    `weight` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'spec.weight.',
    `reclaimable` Bool COMMENT 'spec.reclaimable (default true).',
    `capability_gpus` Nullable(UInt32) CODEC(ZSTD(1)) COMMENT 'spec.capability nvidia.com/gpu; null = none.',
    `deserved_gpus` Nullable(UInt32) CODEC(ZSTD(1)) COMMENT 'spec.deserved nvidia.com/gpu; null = none.',
    `guarantee_gpus` Nullable(UInt32) CODEC(ZSTD(1)) COMMENT 'spec.guarantee.resource nvidia.com/gpu; null = none.',
    `valid_from` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of validity of this fact (UTC).',
    `valid_to` Nullable(DateTime64(3, 'UTC')) CODEC(ZSTD(1)) COMMENT 'End of validity (UTC); null while the fact still holds.',
    `updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Version of this row: the latest wins.'
)
ENGINE = ReplacingMergeTree(`updated_at`)
ORDER BY (`cluster`, `queue`, `valid_from`)
SHARD BY (`cluster`, `queue`)
COMMENT 'A Volcano Queue and its nvidia.com/gpu quota (capability, deserved, guarantee).';

CREATE TABLE `podgroups`
(
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `namespace` LowCardinality(String) COMMENT 'Namespace = tenant.',
    `podgroup` LowCardinality(String) COMMENT 'PodGroup name.',
    `job` LowCardinality(String) COMMENT 'Owning Volcano Job, \'\' for a standalone PodGroup.',
    `queue` LowCardinality(String) COMMENT 'spec.queue.',
    `priority_class` LowCardinality(String) COMMENT 'spec.priorityClassName.',
    `min_member` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'spec.minMember.',
    `min_gpus` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'spec.minResources nvidia.com/gpu (0 = none stated).',
    `phase` LowCardinality(String) COMMENT 'status.phase (Pending, Inqueue, Running, Unknown, ...).',
    `unschedulable` Bool COMMENT 'An Unschedulable condition with status True.',
    `reason` String CODEC(ZSTD(1)) COMMENT 'That condition\'s reason and message.',
    `valid_from` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of validity of this fact (UTC).',
    `valid_to` Nullable(DateTime64(3, 'UTC')) CODEC(ZSTD(1)) COMMENT 'End of validity (UTC); null while the fact still holds.',
    `updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Version of this row: the latest wins.'
)
ENGINE = ReplacingMergeTree(`updated_at`)
ORDER BY (`cluster`, `namespace`, `podgroup`, `valid_from`)
SHARD BY (`cluster`, `namespace`, `podgroup`)
COMMENT 'A Volcano PodGroup (gang): size, queue, phase and why it is not scheduled.';

CREATE TABLE `priority_classes`
(
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `priority_class` LowCardinality(String) COMMENT 'PriorityClass name.',
    `value` Int64 CODEC(T64, ZSTD(1)) COMMENT 'value.',
    `preemption_policy` LowCardinality(String) COMMENT 'preemptionPolicy (PreemptLowerPriority | Never).',
    `global_default` Bool COMMENT 'globalDefault.',
    `provisioning` LowCardinality(String) COMMENT 'Provisioning type (Reserved, Spot, ...); \'\' unknown.',
    `purpose` LowCardinality(String) COMMENT 'Purpose (Serving, Training, Interactive, ...); \'\' unknown.',
    `valid_from` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of validity of this fact (UTC).',
    `valid_to` Nullable(DateTime64(3, 'UTC')) CODEC(ZSTD(1)) COMMENT 'End of validity (UTC); null while the fact still holds.',
    `updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Version of this row: the latest wins.'
)
ENGINE = ReplacingMergeTree(`updated_at`)
ORDER BY (`cluster`, `priority_class`, `valid_from`)
SHARD BY (`cluster`, `priority_class`)
COMMENT 'A PriorityClass with the provisioning type and purpose its labels/annotations carry.';

CREATE TABLE `resource_quotas`
(
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `namespace` LowCardinality(String) COMMENT 'Namespace = tenant.',
    `quota` LowCardinality(String) COMMENT 'ResourceQuota name.',
    `gpus_hard` Nullable(UInt32) CODEC(ZSTD(1)) COMMENT 'requests.nvidia.com/gpu hard limit; null = none.',
    `gpus_used` Nullable(UInt32) CODEC(ZSTD(1)) COMMENT 'status.used requests.nvidia.com/gpu; null = not reported.',
    `valid_from` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Start of validity of this fact (UTC).',
    `valid_to` Nullable(DateTime64(3, 'UTC')) CODEC(ZSTD(1)) COMMENT 'End of validity (UTC); null while the fact still holds.',
    `updated_at` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Version of this row: the latest wins.'
)
ENGINE = ReplacingMergeTree(`updated_at`)
ORDER BY (`cluster`, `namespace`, `quota`, `valid_from`)
SHARD BY (`cluster`, `namespace`, `quota`)
COMMENT 'A namespace ResourceQuota\'s GPU lines.';

CREATE TABLE `pod_events`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `namespace` LowCardinality(String) COMMENT 'Namespace of the pod.',
    `pod` LowCardinality(String) COMMENT 'Pod name.',
    `uid` String CODEC(ZSTD(1)) COMMENT 'Event UID.',
    `reason` LowCardinality(String) COMMENT 'Preempted | Evict | Evicted | Preempting ...',
    `message` String CODEC(ZSTD(1)) COMMENT 'Event message.',
    `preemptor` String CODEC(ZSTD(1)) COMMENT 'Preempting pod UID where the message names it.',
    `node` LowCardinality(String) COMMENT 'Node the message names, \'\' if none.',
    `source` LowCardinality(String) COMMENT 'Reporting component (default-scheduler, volcano, kubelet).',
    `count` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Event count: the latest version wins.'
)
ENGINE = ReplacingMergeTree(`count`)
ORDER BY (`cluster`, `namespace`, `pod`, `uid`)
TTL toDateTime(`ts`) + INTERVAL 90 DAY
SHARD BY (`cluster`, `namespace`, `pod`, `uid`)
COMMENT 'A pod preempted or evicted (Kubernetes Event); a re-listed event replaces itself.';

ALTER TABLE `pods`
    ADD COLUMN `gpu_requests` Nullable(UInt16) COMMENT 'nvidia.com/gpu requested (sum over containers).' AFTER `gpus`,
    ADD COLUMN `priority_class` LowCardinality(String) COMMENT 'spec.priorityClassName.' AFTER `gpu_requests`,
    ADD COLUMN `podgroup` LowCardinality(String) COMMENT 'Volcano PodGroup (scheduling.k8s.io/group-name annotation).' AFTER `priority_class`,
    ADD COLUMN `gpu_model` LowCardinality(String) COMMENT 'nvidia.com/gpu.product the pod\'s nodeSelector requires, \'\' any.' AFTER `podgroup`;

ALTER TABLE `nodes`
    ADD COLUMN `gpu_capacity` Nullable(UInt16) COMMENT 'nvidia.com/gpu capacity.' AFTER `gpus`,
    ADD COLUMN `gpu_model` LowCardinality(String) COMMENT 'nvidia.com/gpu.product label (GPU Feature Discovery).' AFTER `gpu_capacity`;
