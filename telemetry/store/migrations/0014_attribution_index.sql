-- attribution_index: the lease segments the attribution looks flows up in, as the engine built
-- them from the inventory, kept between ticks and rebuilt when the inventory changes

-- The attribution's lookup arrays (telemetry/correlate/lease_index.py), one row per
-- build; the newest build of a cluster wins (ReplacingMergeTree by built_at). Default codecs: the
-- row is written and read whole, and LZ4 is the cheapest to do both.
CREATE TABLE `attribution_index`
(
    `cluster` LowCardinality(String) COMMENT 'Cluster name from the config.',
    `built_at` DateTime64(3, 'UTC') COMMENT 'When the engine built it (the newest build wins).',
    `fingerprint` UInt64 COMMENT 'Hash of what it was built from: the pod IP leases and pod versions begun before the window end, the node facts, the NICs and their leaf ports, and the build query itself.',
    `since` DateTime64(3, 'UTC') COMMENT 'Leases over before this time were left out: it serves windows that start at or after it.',
    `segments` UInt32 COMMENT 'Lease segments held.',
    `pods` Array(String) COMMENT 'Per segment (sorted by IP, then start): its pod.',
    `numbers` Array(Array(UInt64)) COMMENT 'Per segment: start (ms), rail + 1, node index, and the keys of its (namespace, job), (node, SU, IDC) and (NIC, leaf port).',
    `namespace_job` Array(Array(String)) COMMENT 'Per (namespace, job) key: the namespaces, then the jobs.',
    `node_su_idc` Array(Array(String)) COMMENT 'Per (node, SU, IDC) key: the nodes, SUs and IDCs.',
    `nic_port` Array(Array(String)) COMMENT 'Per (NIC, leaf port) key: the NICs and leaf ports.',
    `ips` Array(String) COMMENT 'Every IP with a segment, sorted.',
    `ip_segments` Array(UInt64) COMMENT 'Per IP: its first segment << 32 | how many it has.'
)
ENGINE = ReplacingMergeTree(`built_at`)
ORDER BY (`cluster`)
SHARD BY (`cluster`)
COMMENT 'The lease segments the attribution looks flow ends up in (by IP and time), as arrays, built by the correlation engine from the inventory and rebuilt when it changes.';
