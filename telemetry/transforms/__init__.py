"""Transforms enrich batches with what is known cluster-wide, in the process that ships them; each
has a `name` (a verb) and `process(batch) -> batch`, and the list is built from config, in order.
Today that is `stamp_cluster`.

What is not here, on purpose: the pod holding a GPU or VF is collected on the node by the node
source's `podresources` collector (the kubelet's socket exists only there, so it is a node-local
fact like sysfs), and flow -> pod/job/HyperNode attribution joins stored facts in SQL
(telemetry/correlate/attribution.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from telemetry.contracts import Batch, Transform

if TYPE_CHECKING:
    from telemetry.config import Config


class StampCluster:
    """Fill the `cluster` field of records that left it empty with the configured cluster name."""

    name = "stamp_cluster"

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster

    def process(self, batch: Batch) -> Batch:
        if "cluster" not in batch.kind.by_name or batch.num_rows == 0:
            return batch
        return batch.fill_empty("cluster", self.cluster)


def build_transforms(cfg: Config) -> list[Transform]:
    return [StampCluster(cfg.cluster)]


__all__ = ["StampCluster", "build_transforms"]
