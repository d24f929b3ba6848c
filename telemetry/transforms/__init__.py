"""Transforms enrich batches; each has a `name` and `process(batch) -> batch` (verbs: attach_pod,
attach_hypernode, stamp_cluster). The list is built from config, in order."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from telemetry.pipeline import Batch, Transform

if TYPE_CHECKING:
    from telemetry.config import Config


class StampCluster:
    """Fill the `cluster` field of records that left it empty with the configured cluster name."""

    name = "stamp_cluster"

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster

    def process(self, batch: Batch) -> Batch:
        t = batch.table
        if "cluster" not in t.column_names or t.num_rows == 0:
            return batch
        col = t.column("cluster")
        empty = pc.or_(pc.is_null(col), pc.equal(col, ""))
        if not pc.any(empty).as_py():
            return batch
        filled = pc.if_else(empty, pa.scalar(self.cluster), col)
        idx = t.column_names.index("cluster")
        return Batch(batch.kind, t.set_column(idx, t.schema.field(idx), filled))


def build_transforms(cfg: Config) -> list[Transform]:
    return [StampCluster(cfg.cluster)]


__all__ = ["StampCluster", "build_transforms"]
