-- gpu_processes: GPU memory per process (NVML) and the process's pod from its cgroup

-- Per-process GPU memory and the process's pod (issue 15), frozen as released.
CREATE TABLE `gpu_processes`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `node` LowCardinality(String) COMMENT 'Kubernetes node name.',
    `gpu` UInt16 COMMENT 'GPU index on the node.',
    `uuid` LowCardinality(String) COMMENT 'GPU UUID.',
    `mig` LowCardinality(String) COMMENT 'MIG instance (GPU instance/compute instance) the process runs in, empty for a full GPU.',
    `pid` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Process id, in the host\'s pid namespace (NVML\'s).',
    `type` LowCardinality(String) COMMENT 'compute | graphics (a process with both contexts has a row each).',
    `pod_uid` String CODEC(ZSTD(1)) COMMENT 'Pod UID from the process\'s cgroup path; \'\' when not in a pod.',
    `container_id` String CODEC(ZSTD(1)) COMMENT 'Container id from the process\'s cgroup path.',
    `used_memory_bytes` Nullable(UInt64) CODEC(ZSTD(1)) COMMENT 'GPU memory used by the process; null when NVML reports it not available (Windows/WSL WDDM, and MIG without the privilege to read it).'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `node`, `gpu`, `pid`, `ts`)
TTL toDateTime(`ts`) + INTERVAL 30 DAY
SHARD BY (`cluster`, `node`, `gpu`, `pid`)
COMMENT 'A process holding a context on a GPU (NVML\'s running compute and graphics processes): the GPU memory it uses, and its pod from /proc/PID/cgroup.';
