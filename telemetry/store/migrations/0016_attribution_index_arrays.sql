-- attribution_index: each segment number in an array of its own, in the narrowest type that holds
-- it (a query copied the one flattened array once per use and block)

-- The index's per-segment numbers (lease_index.NUMERIC), one array each. The old
-- `numbers` column goes: an index row is a cache, rebuilt by a railscope whose build query
-- differs (its fingerprint covers the query), so no row that had only `numbers` is read again.
ALTER TABLE `attribution_index`
    ADD COLUMN `starts` Array(UInt64) COMMENT 'Per segment (sorted by IP, then start): its start (ms).' AFTER `pods`,
    ADD COLUMN `rails` Array(UInt32) COMMENT 'Per segment: its rail + 1 (0 unknown).' AFTER `starts`,
    ADD COLUMN `node_index` Array(UInt32) COMMENT 'Per segment: the position of its node among the node facts.' AFTER `rails`,
    ADD COLUMN `path_codes` Array(UInt64) COMMENT 'Per segment: the HyperNode path code of its node (0 none).' AFTER `node_index`,
    ADD COLUMN `namespace_job_keys` Array(UInt32) COMMENT 'Per segment: its (namespace, job) key.' AFTER `path_codes`,
    ADD COLUMN `node_keys` Array(UInt32) COMMENT 'Per segment: its (node, SU, IDC) key.' AFTER `namespace_job_keys`,
    ADD COLUMN `nic_keys` Array(UInt32) COMMENT 'Per segment: its (NIC, leaf port) key.' AFTER `node_keys`;

ALTER TABLE `attribution_index`
    DROP COLUMN `numbers`;
