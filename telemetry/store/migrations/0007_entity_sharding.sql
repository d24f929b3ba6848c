-- cluster mode: Distributed tables sharded by cityHash64 of the entity columns instead of rand(),
-- so a retried batch lands on the same shards

-- Distributed tables sharded by the entity (schema.entity_columns as released), so a
-- retried batch lands on the same shards (frozen: a later kind brings its key in its CREATE TABLE).
-- Cluster mode only: each Distributed table is recreated (it holds no data of its own); nothing
-- on a single server.
ALTER TABLE `attributed_flows` SHARD BY (`cluster`, `src_namespace`, `src_job`);
ALTER TABLE `component_stats` SHARD BY (`cluster`, `component`);
ALTER TABLE `dci_usages` SHARD BY (`cluster`, `src_idc`, `dest_idc`);
ALTER TABLE `ecmp_group_samples` SHARD BY (`cluster`, `switch`, `group`);
ALTER TABLE `findings` SHARD BY (`cluster`, `kind`, `subject`, `finding_id`);
ALTER TABLE `flow_samples` SHARD BY (`cluster`, `src_ip`, `dst_ip`);
ALTER TABLE `gpu_events` SHARD BY (`cluster`, `node`);
ALTER TABLE `gpu_nic_affinities` SHARD BY (`cluster`, `node`, `gpu`);
ALTER TABLE `gpu_samples` SHARD BY (`cluster`, `node`, `gpu`);
ALTER TABLE `hdfs_block_placements` SHARD BY (`cluster`, `violation`, `path`, `block_id`);
ALTER TABLE `hdfs_datanode_samples` SHARD BY (`cluster`, `datanode`);
ALTER TABLE `hdfs_namenode_samples` SHARD BY (`cluster`, `namenode`);
ALTER TABLE `hdfs_placement_totals` SHARD BY (`cluster`, `prefix`);
ALTER TABLE `hdfs_transfers` SHARD BY (`cluster`, `src_idc`, `dest_idc`);
ALTER TABLE `hypernodes` SHARD BY (`cluster`, `hypernode`, `member`);
ALTER TABLE `jobs` SHARD BY (`cluster`, `namespace`, `job`);
ALTER TABLE `lldp_links` SHARD BY (`cluster`, `local_device`, `local_port`);
ALTER TABLE `namespaces` SHARD BY (`cluster`, `namespace`);
ALTER TABLE `nic_priority_samples` SHARD BY (`cluster`, `node`, `netdev`, `priority`);
ALTER TABLE `nic_samples` SHARD BY (`cluster`, `node`, `device`, `port`);
ALTER TABLE `nodes` SHARD BY (`cluster`, `node`);
ALTER TABLE `pod_ip_leases` SHARD BY (`cluster`, `ip`);
ALTER TABLE `pods` SHARD BY (`cluster`, `namespace`, `pod`);
ALTER TABLE `switch_port_samples` SHARD BY (`cluster`, `switch`, `port`);
ALTER TABLE `switch_priority_samples` SHARD BY (`cluster`, `switch`, `port`, `priority`);
ALTER TABLE `switch_queue_samples` SHARD BY (`cluster`, `switch`, `port`, `queue`);
ALTER TABLE `switch_statuses` SHARD BY (`cluster`, `switch`, `asic`);
