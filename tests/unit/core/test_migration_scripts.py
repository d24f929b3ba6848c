"""The migration scripts (telemetry/store/migrations/NNNN_*.sql) and their loader: released
migrations run exactly what they ran when released, and a kind's table survives the script
form unchanged."""

import hashlib

import pytest

from telemetry.records import KINDS
from telemetry.store.migrations import MIGRATIONS
from telemetry.store.migrations.loader import Context, parse, table_script
from telemetry.store.schema import TableDef, create_table_sql

# sha256 (first 16 hex digits) of each released migration's description and statements, on a
# single server and on a cluster. A new migration adds its line; an old line never changes
# (nor may a change to telemetry/store/schema.py alter what an old migration runs).
RELEASED = {
    1: "d6c6da79d6e38807",
    2: "454b460cbfb0c57c",
    3: "e8218119da333f56",
    4: "4ef809296056c747",
    5: "c1228e304eee75cc",
    6: "fd0922931d2488dd",
    7: "d9e20d25e5db67de",
    8: "244e76327d572951",
    9: "c2cf67a0b0356ebe",
    10: "4311d46e0c9756d1",
    11: "8532f9c7b931b717",
    12: "4c2ab0076b912d69",
    13: "e92832422cd8fb21",
    14: "6bf5593d293c2f36",
    15: "f0011f4480bf155b",
    16: "eff89d9a7864d587",
    17: "34fe0d9c4529ff63",
    18: "ea2628b050724337",
    19: "005fab108991b65e",
    20: "79cd97ea4a10e199",
    21: "f4aed67ba8adf317",
}


def _digest(version: int) -> str:
    (m,) = [m for m in MIGRATIONS if m.version == version]
    single, cluster = Context("railscope", None, {}), Context("railscope", "prod", {})
    text = "\n".join([m.description, *m.statements(single), *m.statements(cluster)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.mark.parametrize("version", sorted(RELEASED))
def test_a_released_migration_runs_what_it_ran(version: int) -> None:
    assert _digest(version) == RELEASED[version]


def test_every_script_is_numbered_and_pinned() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert set(RELEASED) <= {m.version for m in MIGRATIONS}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_a_kinds_table_survives_the_script_form(name: str) -> None:
    today = TableDef.of(KINDS[name])
    (read,) = parse(99, "-- a kind\n\n" + table_script(today)).tables
    for cluster in (None, "prod"):
        assert create_table_sql(read, "db", cluster) == create_table_sql(today, "db", cluster)


def test_a_script_names_its_rollups_renames_and_shard_keys() -> None:
    script = """-- two lines of
-- description

-- a comment
CREATE TABLE `t`
(
    `ts` DateTime64(3, 'UTC') COMMENT 'Time, \\'quoted\\'.',
    `v` UInt64 COMMENT 'Value.'
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (`ts`)
TTL toDateTime(`ts`) + INTERVAL 3 DAY
COMMENT 'A rollup.';

CREATE MATERIALIZED VIEW `t_mv` TO `t` AS
SELECT `ts`, sum(`v`) AS `v`
FROM `s`
GROUP BY `ts`;
RENAME TABLE `a` TO `b`;
ALTER TABLE `b` SHARD BY (`x`, `y`);
ALTER TABLE `b`
    ADD COLUMN `z` UInt8 COMMENT 'Z.' AFTER `y`,
    ADD COLUMN `w` UInt8;
DROP VIEW `old_mv`;
"""
    m = parse(7, script)
    assert m.description == "two lines of description"
    (t,) = m.tables
    assert (t.name, t.engine, t.ttl, t.comment) == ("t", "SummingMergeTree", ("ts", 3), "A rollup.")
    assert t.columns.splitlines()[0] == "`ts` DateTime64(3, 'UTC') COMMENT 'Time, \\'quoted\\'.'"
    (r,) = m.rollups
    assert (r.source, r.select) == (
        "s",
        "SELECT `ts`, sum(`v`) AS `v`\nFROM {source}\nGROUP BY `ts`",
    )
    assert (m.renames, m.shard_keys) == ({"a": "b"}, {"b": ("x", "y")})
    single = m.statements(Context("db", None, {}))
    assert single[1].startswith("CREATE MATERIALIZED VIEW IF NOT EXISTS `db`.`t_mv` TO `db`.`t`")
    assert (
        single[2]
        == "INSERT INTO `db`.`t`\nSELECT `ts`, sum(`v`) AS `v`\nFROM `db`.`s`\nGROUP BY `ts`"
    )
    assert single[3:] == [
        "RENAME TABLE `db`.`a` TO `db`.`b`",
        "ALTER TABLE `db`.`b` ADD COLUMN IF NOT EXISTS `z` UInt8 COMMENT 'Z.' AFTER `y`, "
        "ADD COLUMN IF NOT EXISTS `w` UInt8",
        "DROP VIEW IF EXISTS `db`.`old_mv`",
    ]  # the sharding key is the cluster's alone
    assert any("cityHash64(`x`, `y`)" in s for s in m.statements(Context("db", "c", {})))


@pytest.mark.parametrize(
    "script",
    [
        "no description\n\nDROP VIEW `v`;\n",
        "-- d\n\nDROP VIEW `v`\n",  # no ';'
        "-- d\n\nTRUNCATE TABLE `t`;\n",
        "-- d\n\nALTER TABLE `t`\n    RENAME COLUMN `a` TO `b`;\n",
    ],
)
def test_a_script_the_loader_cannot_read_is_refused(script: str) -> None:
    with pytest.raises(ValueError):
        parse(1, script)


def test_the_live_rollup_declaration_agrees_with_the_migrations() -> None:
    """telemetry/store/rollups.py (what live code reads) and migration 12's frozen copies name the
    same tables from the same sources, the samples column exists, the interval is the one the
    migration bucketed by, and the engine's SELECT for job_port_intervals is the frozen one."""
    from telemetry.records import KINDS
    from telemetry.store.migrations import MIGRATION_12_ROLLUPS
    from telemetry.store.rollups import JOB_PORT_SELECT, ROLLUP_INTERVAL, ROLLUPS

    frozen = {r.table.name: r for r in MIGRATION_12_ROLLUPS}
    assert {r.table: r.source for r in ROLLUPS} == {n: r.source for n, r in frozen.items()}
    for r in ROLLUPS:
        assert KINDS[r.kind].table == r.source
        assert f"`{r.samples}`" in frozen[r.table].table.columns, r
        assert f"toStartOfInterval(`ts`, {ROLLUP_INTERVAL})" in frozen[r.table].select, r
    (engine,) = [r for r in ROLLUPS if r.by_engine]
    assert " ".join(JOB_PORT_SELECT.split()) == " ".join(frozen[engine.table].select.split())
