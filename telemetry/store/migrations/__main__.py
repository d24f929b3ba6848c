"""`python -m telemetry.store.migrations KIND...`: print each record kind's table as a migration
script's CREATE TABLE (today's definition), to paste into the script of a new migration."""

import sys

from telemetry.records import KINDS
from telemetry.store.migrations.loader import table_script
from telemetry.store.schema import TableDef

for name in sys.argv[1:] or sorted(KINDS):
    print(table_script(TableDef.of(KINDS[name])))
