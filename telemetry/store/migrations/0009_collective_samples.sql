-- collective_samples: NCCL Inspector collectives per rank, attributed to pod, job and GPU

-- collective_samples (issue 18, NCCL Inspector), frozen as released.
CREATE TABLE `collective_samples`
(
    `ts` DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)) COMMENT 'Sample time (UTC).',
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `node` LowCardinality(String) COMMENT 'Host that ran the rank (the Inspector\'s hostname).',
    `namespace` LowCardinality(String) COMMENT 'Namespace (= tenant) of the pod; \'\' when not attributed.',
    `pod` LowCardinality(String) COMMENT 'Pod of the process ((hostname, pid) -> cgroup -> pod); \'\' if unknown.',
    `pod_uid` String CODEC(ZSTD(1)) COMMENT 'Pod UID from the process\'s cgroup path.',
    `container_id` String CODEC(ZSTD(1)) COMMENT 'Container id from the process\'s cgroup path.',
    `job` LowCardinality(String) COMMENT 'Volcano job of the pod; \'\' if none or unknown.',
    `comm_id` LowCardinality(String) COMMENT 'NCCL communicator id (header.id).',
    `collective` LowCardinality(String) COMMENT 'AllReduce, AllGather, ReduceScatter, Broadcast, ...',
    `msg_size_bucket` LowCardinality(String) COMMENT 'Message size rounded down to a power of two (1GiB).',
    `rank` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Rank in the communicator.',
    `gpu` LowCardinality(String) COMMENT 'GPU of the rank: the pod\'s GPU assignment, or gpu_device_id.',
    `pid` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Process id on the host.',
    `n_ranks` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Ranks in the communicator.',
    `n_nodes` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Nodes the communicator spans.',
    `coll_sn` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Sequence number of the collective in the communicator.',
    `msg_size_bytes` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Message size.',
    `exec_time_seconds` Float64 CODEC(Gorilla, ZSTD(1)) COMMENT 'Collective execution time.',
    `algo_bandwidth_gbs` Float64 CODEC(Gorilla, ZSTD(1)) COMMENT 'Algorithm bandwidth (size / time), GB/s.',
    `bus_bandwidth_gbs` Float64 CODEC(Gorilla, ZSTD(1)) COMMENT 'Bus bandwidth (algorithm bandwidth scaled by the collective\'s factor), GB/s.',
    `timing_source` LowCardinality(String) COMMENT 'coll_timing_source (kernel_gpu, ...).',
    `format_version` LowCardinality(String) COMMENT 'Inspector format version (v4.0), or \'prom\'.'
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`cluster`, `job`, `comm_id`, `collective`, `ts`)
TTL toDateTime(`ts`) + INTERVAL 30 DAY
SHARD BY (`cluster`, `job`, `comm_id`, `collective`)
COMMENT 'One NCCL collective of one rank (NCCL Inspector JSON line or Prom textfile sample), joined to the pod, job and GPU of the process that ran it.';
