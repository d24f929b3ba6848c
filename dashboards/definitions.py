"""The railscope dashboards, by name (`railscope dashboards build`). SQL names tables only through
`tbl(kind)` (the store's one table helper): unqualified in the built JSON (the datasource's default
database is the store's), qualified when `build_all(database=)` renders them to run on a store;
versioned kinds (inventory, findings) are read FINAL. Every query is run on a simulated store by
tests/integration/dashboards. Each dashboard is built in a board_*.py module; what they share is
common.py."""

from __future__ import annotations

from collections.abc import Callable

from grafanalib import core as g

from dashboards.board_fabric import fabric, gpus
from dashboards.board_jobs import job, overview
from dashboards.board_pool import pool_dashboard, self_health
from dashboards.board_storage import hdfs_dci, placement

DASHBOARDS: dict[str, Callable[[], g.Dashboard]] = {
    "overview": overview,
    "job": job,
    "fabric": fabric,
    "gpus": gpus,
    "hdfs-dci": hdfs_dci,
    "placement": placement,
    "pool": pool_dashboard,
    "self": self_health,
}
