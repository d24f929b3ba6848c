"""A replayed capture whose HyperNodes and Volcano Job are manifests (no creationTimestamp) while
its nodes and pods are `kubectl get` output (dated): the manifests are dated at the capture's own
time (its earliest creationTimestamp), not when they are loaded, so flows between the job's pods
an hour before the replay are attributed across the declared tiers and the placement violation
appears; one warning names the undated objects. Run on the real embedded store and engine."""

from __future__ import annotations

import json
import logging
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from exporters.inventory.source import InventorySource
from telemetry.correlate import Correlator
from telemetry.correlate import findings as fstore
from telemetry.records import FLOW_SAMPLE, HYPERNODE, JOB
from telemetry.store import Store
from telemetry.times import ms_to_iso
from tests.integration.correlate.test_attribution import ROCE_SAMPLE

NOW = datetime.now(UTC).replace(microsecond=0)
CREATED = NOW - timedelta(hours=2)  # the nodes' and pods' creationTimestamp
FLOWS_AT = NOW - timedelta(hours=1)  # the flows: before the replay, after the pods


def _ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


def _capture(d: Path, *, pods_dated: bool = True) -> None:
    created = CREATED.isoformat().replace("+00:00", "Z")
    nodes = [
        {"apiVersion": "v1", "kind": "Node",
         "metadata": {"name": n, "creationTimestamp": created, "labels": {"rack": r}},
         "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
        for n, r in (("n1", "r0"), ("n2", "r0"), ("n3", "r1"), ("n4", "r1"))
    ]  # fmt: skip
    pods = [
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": f"train1-{i}", "namespace": "a", "uid": f"u{i}",
                      **({"creationTimestamp": created} if pods_dated else {}),
                      "labels": {"volcano.sh/job-name": "train1"}},
         "spec": {"nodeName": node},
         "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                    "startTime": created}}
        for i, (node, ip) in enumerate((("n1", "10.0.0.1"), ("n3", "10.0.0.3")))
    ]  # fmt: skip
    (d / "nodes.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}))
    (d / "pods.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))
    # manifests, as written by hand or by a GitOps repository: no creationTimestamp
    (d / "hypernodes.yaml").write_text(
        """\
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: rack-0}
spec:
  tier: 1
  members: [{type: Node, selector: {exactMatch: {name: n1}}}, {type: Node, selector: {exactMatch: {name: n2}}}]
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: rack-1}
spec:
  tier: 1
  members: [{type: Node, selector: {regexMatch: {pattern: "^n[34]$"}}}]
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: spine}
spec:
  tier: 2
  members: [{type: HyperNode, selector: {exactMatch: {name: rack-0}}}, {type: HyperNode, selector: {exactMatch: {name: rack-1}}}]
"""
    )
    (d / "job.yaml").write_text(
        """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train1, namespace: a}
spec:
  minAvailable: 2
  networkTopology: {mode: hard, highestTierAllowed: 1}
  tasks: [{name: worker, replicas: 2}]
"""
    )


def _load(store: Store, d: Path) -> InventorySource:
    src = InventorySource(from_path=str(d), cluster="c", clock=lambda: _ms(NOW))
    for b in src.collect():  # stamped with the cluster, as the pipeline's transform does
        t = b.table
        i = t.column_names.index("cluster")
        store.insert(b.kind, t.set_column(i, "cluster", pa.array(["c"] * t.num_rows)))
    return src


def _flows(store: Store) -> None:
    t = _ms(FLOWS_AT)
    rows = [
        {**ROCE_SAMPLE, "ts": t + i * 1000, "src_ip": "10.0.0.1", "dst_ip": "10.0.0.3",
         "sampling_rate": 1000, "bytes": 4_096_000, "packets": 1000, "dest_qp": 77}
        for i in range(30)
    ]  # fmt: skip
    store.insert(FLOW_SAMPLE, FLOW_SAMPLE.to_arrow(rows))


def test_manifests_are_dated_at_the_capture_and_placement_findings_appear(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _capture(tmp_path)
    caplog.set_level(logging.WARNING)
    _load(store, tmp_path)
    said = [r.getMessage() for r in caplog.records if "creationTimestamp" in r.getMessage()]
    assert len(said) == 1, said
    for name in ("HyperNode rack-0", "HyperNode rack-1", "HyperNode spine", "Job a/train1"):
        assert name in said[0]
    assert "Pod" not in said[0] and ms_to_iso(_ms(CREATED)) in said[0]
    # the manifests' rows start when the capture's first object was created, not at the replay
    for kind in (HYPERNODE, JOB):
        starts = {r[0] for r in store.query_rows(
            f"SELECT toUnixTimestamp64Milli(valid_from) FROM {store.table(kind)}")}  # fmt: skip
        assert starts == {_ms(CREATED)}, (kind.name, starts)
    _flows(store)
    Correlator(store, cluster="c").run(
        FLOWS_AT - timedelta(seconds=10), FLOWS_AT + timedelta(seconds=40)
    )
    v = fstore.read(store, kinds=["placement_violation"])
    assert v and v[0]["subject"] == "a/train1", v
    assert (
        v[0]["evidence"]["spanned_tier"] == 2 and v[0]["evidence"]["bytes_above_allowed_tier"] > 0
    )


def test_a_capture_without_any_timestamp_is_dated_by_its_files(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No object dated at all: the capture files' oldest modification time, named as such."""
    _capture(tmp_path)
    for f in ("nodes.json",):  # leave only manifests and pods without a time
        f_ = tmp_path / f
        data = json.loads(f_.read_text())
        for it in data["items"]:
            it["metadata"].pop("creationTimestamp")
        f_.write_text(json.dumps(data))
    _capture_pods = json.loads((tmp_path / "pods.json").read_text())
    for it in _capture_pods["items"]:
        it["metadata"].pop("creationTimestamp")
    (tmp_path / "pods.json").write_text(json.dumps(_capture_pods))
    old = time.time() - 7200
    for f in tmp_path.iterdir():
        os.utime(f, (old, old))
    caplog.set_level(logging.WARNING)
    _load(store, tmp_path)
    said = [r.getMessage() for r in caplog.records if "creationTimestamp" in r.getMessage()]
    assert len(said) == 1 and "modification time" in said[0], said
    [(start,)] = {tuple(r) for r in store.query_rows(
        f"SELECT toUnixTimestamp64Milli(valid_from) FROM {store.table(HYPERNODE)}")}  # fmt: skip
    assert abs(start - int(old * 1000)) < 2000
