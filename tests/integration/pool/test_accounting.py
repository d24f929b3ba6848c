"""Pool accounting on the real embedded store against hand-computed cases: a node with 8 GPUs
and 3 pods (one idle), a second node with nothing on it; the ClickHouse and polars versions
agree."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl
import pytest

from telemetry import pool
from telemetry.records import KINDS
from telemetry.store import Store

C = "c"


def t0() -> datetime:
    now = datetime.now(UTC).replace(microsecond=0)
    return now.replace(minute=0, second=0) - timedelta(hours=2)


def ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def inv(kind: Any, start: datetime, **fields: Any) -> dict[str, Any]:
    return {
        "cluster": C,
        "valid_from": ms(start),
        "valid_to": None,
        "updated_at": ms(start),
        **fields,
    }


def pclass(
    start: datetime, name: str, value: int, provisioning: str, purpose: str
) -> dict[str, Any]:
    return inv("priority_class", start, priority_class=name, value=value,
               preemption_policy="PreemptLowerPriority", global_default=False,
               provisioning=provisioning, purpose=purpose)  # fmt: skip


def queue(start: datetime, name: str, deserved: int | None, guarantee: int | None,
          capability: int | None = None) -> dict[str, Any]:  # fmt: skip
    return inv("queue", start, queue=name, parent="", state="Open", weight=1, reclaimable=True,
               capability_gpus=capability, deserved_gpus=deserved, guarantee_gpus=guarantee)  # fmt: skip


def fill(store: Store, s: datetime) -> None:
    """n1: 8 x H100 — train-0 holds 4 (busy), train-1 holds 2 (idle), infer-0 holds 1 (busy),
    GPU 7 unallocated; n2: 8 x A100, empty. Two 60 s intervals of 10 s samples. infer-0 starts at
    the second interval."""
    early = s - timedelta(hours=1)
    rows: dict[Any, list[dict[str, Any]]] = {
        "node": [
            inv("node", early, node="n1", labels="{}", idc="", su="", gpus=8, gpu_capacity=8,
                gpu_model="H100"),
            inv("node", early, node="n2", labels="{}", idc="", su="", gpus=8, gpu_capacity=8,
                gpu_model="A100"),
        ],
        "pod": [
            inv("pod", early, namespace="team-a", pod="train-0", uid="1", node="n1", job="train",
                phase="Running", gpus="", gpu_requests=4, priority_class="reserved-training",
                podgroup="train", gpu_model=""),
            inv("pod", early, namespace="team-a", pod="train-1", uid="2", node="n1", job="train",
                phase="Running", gpus="", gpu_requests=2, priority_class="reserved-training",
                podgroup="train", gpu_model=""),
            inv("pod", s + timedelta(seconds=60), namespace="team-b", pod="infer-0", uid="3",
                node="n1", job="", phase="Running", gpus="", gpu_requests=1,
                priority_class="spot-serving", podgroup="pg-infer", gpu_model=""),
            inv("pod", early, namespace="team-b", pod="cpu-only", uid="4", node="n2", job="",
                phase="Running", gpus="", gpu_requests=None, priority_class="", podgroup="",
                gpu_model=""),
        ],
        "namespace": [
            inv("namespace", early, namespace="team-a", tenant="acme", labels="{}"),
            inv("namespace", early, namespace="team-b", tenant="", labels="{}"),
        ],
        "job": [
            inv("job", early, namespace="team-a", job="train", queue="q-a", replicas=2,
                topology_mode="", highest_tier_allowed=None, highest_tier_name=None,
                allocated_hypernode=""),
        ],
        "podgroup": [
            inv("podgroup", early, namespace="team-b", podgroup="pg-infer", job="", queue="q-b",
                priority_class="spot-serving", min_member=1, min_gpus=1, phase="Running",
                unschedulable=False, reason=""),
        ],
        "queue": [queue(early, "q-a", 8, 4), queue(early, "q-b", 4, None, 16)],
        "priority_class": [
            pclass(early, "reserved-training", 1000, "Reserved", "Training"),
            pclass(early, "spot-serving", 100, "Spot", "Serving"),
        ],
        "hypernode": [
            inv("hypernode", early, hypernode="leaf-0", member="n1", tier=1, tier_name="",
                member_type="Node", selector="exactMatch"),
            inv("hypernode", early, hypernode="leaf-1", member="^n[2-9]$", tier=1, tier_name="",
                member_type="Node", selector="regexMatch"),
            inv("hypernode", early, hypernode="spine", member="leaf-0", tier=2, tier_name="",
                member_type="HyperNode", selector="exactMatch"),
        ],
    }  # fmt: skip
    holder = {0: "train-0", 1: "train-0", 2: "train-0", 3: "train-0", 4: "train-1", 5: "train-1"}
    util = {"train-0": 0.9, "train-1": 0.01, "infer-0": 0.5}
    samples = []
    for i in range(12):
        ts = s + timedelta(seconds=10 * i)
        for node in ("n1", "n2"):
            for g in range(8):
                pod = holder.get(g, "") if node == "n1" else ""
                if node == "n1" and g == 6 and i >= 6:
                    pod = "infer-0"
                ns = {"train-0": "team-a", "train-1": "team-a", "infer-0": "team-b"}.get(pod, "")
                samples.append(
                    {"ts": ms(ts), "cluster": C, "node": node, "gpu": g, "uuid": f"{node}-{g}",
                     "mig": "", "model": "", "pci_bus_id": "", "pod": pod, "namespace": ns,
                     "up": 1, "utilization_ratio": util.get(pod, 0.0)}
                )  # fmt: skip
    rows["gpu_sample"] = samples
    for name, rs in rows.items():
        store.insert(KINDS[name], KINDS[name].to_arrow(rs))


@pytest.fixture
def filled(store: Store) -> tuple[Store, datetime]:
    s = t0()
    fill(store, s)
    return store, s


def acc(store: Store, s: datetime, by: str | None) -> list[dict[str, Any]]:
    df = pool.accounting(store, s, s + timedelta(seconds=120), by=by, step_s=60, cluster=C)
    return df.drop("interval_start").to_dicts()


def test_whole_pool_per_interval(filled: tuple[Store, datetime]) -> None:
    store, s = filled
    got = pool.accounting(store, s, s + timedelta(seconds=120), step_s=60, cluster=C)
    assert got["interval_start"].to_list() == [s, s + timedelta(seconds=60)]
    cols = ["total_gpus", "allocatable_gpus", "allocated_gpus", "busy_gpus",
            "idle_allocated_gpus", "free_gpus"]  # fmt: skip
    assert got.select(cols).rows() == [(16, 16, 6, 4, 2, 10), (16, 16, 7, 5, 2, 9)]
    hours = pool.gpu_hours(got, 60)
    assert hours["allocated_gpu_hours"] == pytest.approx(13 / 60)
    assert hours["idle_allocated_gpu_hours"] == pytest.approx(4 / 60)


def test_by_queue_with_quota(filled: tuple[Store, datetime]) -> None:
    store, s = filled
    got = acc(store, s, "queue")
    pick = [
        (r["key"], r["allocated_gpus"], r["busy_gpus"], r["idle_allocated_gpus"],
         r["deserved_gpus"], r["guarantee_gpus"])
        for r in got
    ]  # fmt: skip
    assert pick == [  # every queue in every interval, holding GPUs or not
        ("q-a", 6, 4, 2, 8, 4),
        ("q-b", 0, 0, 0, 4, None),
        ("q-a", 6, 4, 2, 8, 4),
        ("q-b", 1, 1, 0, 4, None),
    ]
    assert all(r["free_gpus"] is None for r in got)  # free is a node quantity


def test_by_tenant_provisioning_priority(filled: tuple[Store, datetime]) -> None:
    store, s = filled
    second = [r for r in acc(store, s, "tenant")][-2:]
    assert [(r["key"], r["allocated_gpus"], r["busy_gpus"]) for r in second] == [
        ("acme", 6, 4),
        ("team-b", 1, 1),  # no tenant label: the namespace is the tenant
    ]
    prov = acc(store, s, "provisioning")
    assert [(r["key"], r["allocated_gpus"], r["idle_allocated_gpus"]) for r in prov] == [
        ("Reserved", 6, 2),
        ("Reserved", 6, 2),
        ("Spot", 1, 0),
    ]
    assert {r["key"] for r in acc(store, s, "priority")} == {"reserved-training", "spot-serving"}


def test_by_node_dimensions_have_free_gpus(filled: tuple[Store, datetime]) -> None:
    store, s = filled
    model = acc(store, s, "gpu-model")
    assert [(r["key"], r["total_gpus"], r["allocated_gpus"], r["free_gpus"]) for r in model] == [
        ("A100", 8, 0, 8),
        ("H100", 8, 6, 2),
        ("A100", 8, 0, 8),
        ("H100", 8, 7, 1),
    ]
    hn = acc(store, s, "hypernode")
    assert [(r["key"], r["free_gpus"]) for r in hn][:2] == [("leaf-0", 2), ("leaf-1", 8)]


def test_polars_agrees_with_clickhouse(filled: tuple[Store, datetime]) -> None:
    store, s = filled
    e = s + timedelta(seconds=120)
    pods = store.query_df(f"SELECT * FROM {store.table('pod', final=True)}")
    samples = store.query_df(f"SELECT * FROM {store.table('gpu_sample')}")
    key = pl.DataFrame(
        {"namespace": ["team-a", "team-a", "team-b"], "pod": ["train-0", "train-1", "infer-0"],
         "key": ["q-a", "q-a", "q-b"]}
    )  # fmt: skip
    got = pool.accounting_polars(pods, samples, s, e, step_s=60, key=key)
    want = pool.accounting(store, s, e, by="queue", step_s=60, cluster=C)
    want = want.filter(want["allocated_gpus"] > 0)  # polars has no queue table: held GPUs only
    cols = ["key", "allocated_gpus", "busy_gpus", "idle_allocated_gpus"]
    assert got.select(cols).rows() == want.select(cols).rows()


def test_cli_pool_by_queue_json_and_table(
    filled: tuple[Store, datetime],
    chdb_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    from telemetry.cli import main

    store, s = filled
    monkeypatch.setenv("RAILSCOPE_DSN", chdb_dsn)
    monkeypatch.setenv("RAILSCOPE__STORE__DATABASE", store.database)
    monkeypatch.setenv("RAILSCOPE__CLUSTER", C)
    span = ["--since", s.isoformat(), "--until", (s + timedelta(seconds=120)).isoformat()]
    assert main(["pool", "--by", "queue", "--format", "json", "--step", "60", *span]) == 0
    objs = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [
        (o["queue"], o["allocated_gpus"], o["busy_gpus"], o["idle_allocated_gpus"],
         o["deserved_gpus"])
        for o in objs
    ] == [("q-a", 6, 4, 2, 8), ("q-b", 0, 0, 0, 4), ("q-a", 6, 4, 2, 8), ("q-b", 1, 1, 0, 4)]  # fmt: skip
    assert objs[0]["interval_start"].startswith(s.strftime("%Y-%m-%dT%H:%M"))
    assert main(["pool", "--step", "60", *span]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["interval_start", "total", "allocatable", "allocated", "busy",
                              "idle_allocated", "free"]  # fmt: skip
    assert out[2].split()[1:] == ["16", "16", "7", "5", "2", "9"]
    assert "allocated 0.22, busy 0.15, idle-allocated 0.07" in out[-1]  # 13, 9, 4 GPU-min
    assert main(["pool", "--floor", "2", *span]) == 2
    assert "is not a ratio" in capsys.readouterr().err
