-- one name per kind: every table is its record kind's plural; flow_samples.ecmp_group removed

-- Tables named by the one rule (`RecordKind.table`, the kind's plural).
RENAME TABLE `gpu_nic_affinity` TO `gpu_nic_affinities`;
RENAME TABLE `switch_status` TO `switch_statuses`;
RENAME TABLE `dci_usage` TO `dci_usages`;
RENAME TABLE `inv_pods` TO `pods`;
RENAME TABLE `inv_pod_ips` TO `pod_ip_leases`;
RENAME TABLE `inv_namespaces` TO `namespaces`;
RENAME TABLE `inv_nodes` TO `nodes`;
RENAME TABLE `inv_hypernodes` TO `hypernodes`;
RENAME TABLE `inv_jobs` TO `jobs`;
RENAME TABLE `flows_attributed` TO `attributed_flows`;

ALTER TABLE `flow_samples`
    DROP COLUMN `ecmp_group`;
