-- collective_samples: the NCCL algorithm, protocol, channels and communicator name of each
-- collective (Inspector v4.2 coll_algo / coll_proto)

-- How each collective ran (issue 39), NCCL Inspector v4.2.
ALTER TABLE `collective_samples`
    ADD COLUMN `algorithm` LowCardinality(String) COMMENT 'NCCL algorithm it ran with (coll_algo: RING, TREE, NVLS, NVLS_TREE, PAT, COLLNET_DIRECT, COLLNET_CHAIN); \'\' when the Inspector does not say (before v4.2).' AFTER `format_version`,
    ADD COLUMN `protocol` LowCardinality(String) COMMENT 'NCCL protocol it ran with (coll_proto: LL, LL128, SIMPLE); \'\'.' AFTER `algorithm`,
    ADD COLUMN `channels` Nullable(UInt16) CODEC(ZSTD(1)) COMMENT 'Channels it ran on (coll_n_channels, else the verbose trace\'s distinct channels); null when not known.' AFTER `protocol`,
    ADD COLUMN `comm_name` LowCardinality(String) COMMENT 'Communicator name (header.comm_name, v4.2); \'\' unknown.' AFTER `channels`;
