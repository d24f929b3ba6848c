-- attributed flows carry rail, NIC and leaf port of both ends

-- Rail, NIC and leaf port of both ends of an attributed flow.
ALTER TABLE `flows_attributed`
    ADD COLUMN `src_rail` Int64 COMMENT 'Rail of the source IP\'s interface (Multus network railN); -1 unknown.' AFTER `dst_job`,
    ADD COLUMN `src_nic` LowCardinality(String) COMMENT 'Source RDMA device on that rail (mlx5_N).' AFTER `src_rail`,
    ADD COLUMN `src_leaf_port` LowCardinality(String) COMMENT 'Leaf port cabled to that NIC (LLDP), SWITCH:PORT.' AFTER `src_nic`,
    ADD COLUMN `dst_rail` Int64 COMMENT 'Rail of the destination IP\'s interface; -1 unknown.' AFTER `src_leaf_port`,
    ADD COLUMN `dst_nic` LowCardinality(String) COMMENT 'Destination RDMA device on that rail.' AFTER `dst_rail`,
    ADD COLUMN `dst_leaf_port` LowCardinality(String) COMMENT 'Leaf port cabled to the destination NIC (LLDP).' AFTER `dst_nic`;
