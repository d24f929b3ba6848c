-- incidents: what to do about each (remediation) and the docs page of its root kind

-- Remediation and runbook of incidents (issue 39).
ALTER TABLE `incidents`
    ADD COLUMN `remediation` String CODEC(ZSTD(1)) COMMENT 'What to do about it: the root kind\'s remediation (telemetry/correlate/remediation.yaml) filled with the root finding\'s values.' AFTER `summary`,
    ADD COLUMN `runbook` String CODEC(ZSTD(1)) COMMENT 'The docs page of the root kind (docs/PAGE.md#kind).' AFTER `remediation`;
