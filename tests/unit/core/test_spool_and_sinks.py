from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from telemetry.contracts import Batch, ComponentStats
from telemetry.pipeline import Pipeline
from telemetry.records import GPU_SAMPLE, NIC_SAMPLE
from telemetry.sinks.memory import MemorySink
from telemetry.sinks.prometheus import PrometheusSink, render_prometheus
from telemetry.store.spool import Spool
from telemetry.transforms import StampCluster


def _gpu(n: int, node: str = "n1", base_ts: int = 1_700_000_000_000) -> Batch:
    return Batch.from_rows(
        GPU_SAMPLE,
        [
            {"ts": base_ts + i, "node": node, "gpu": i % 8, "up": 1, "power_watts": float(i)}
            for i in range(n)
        ],
    )


def _gpu_row(gpu: int, *, up: int = 1, ts: int = 1, **values: float) -> dict[str, Any]:
    """One GPU of node n1 in cluster c, with `values` for its fields."""
    return {"ts": ts, "cluster": "c", "node": "n1", "gpu": gpu, "up": up, **values}


def test_spool_round_trip_in_order(tmp_path: Path) -> None:
    sp = Spool(tmp_path)
    a = sp.append("gpu_sample", _gpu(3).table)
    b = sp.append(
        "nic_sample",
        Batch.from_rows(
            NIC_SAMPLE, [{"ts": 1, "node": "n", "device": "mlx5_0", "port": 1, "up": 1}]
        ).table,
    )
    assert [e.seq for e in sp.entries()] == [a.seq, b.seq] and a.seq < b.seq
    assert a.token != b.token and len(a.token) == 32
    assert Spool.read(a).equals(_gpu(3).table)
    # a restarted spool continues the sequence and keeps tokens
    sp.close()  # one owner at a time (the lock)
    sp2 = Spool(tmp_path)
    c = sp2.append("gpu_sample", _gpu(1).table)
    assert c.seq == b.seq + 1
    assert [e.token for e in sp2.entries()][:2] == [a.token, b.token]


def test_spool_drops_oldest_past_limit_and_counts(tmp_path: Path) -> None:
    one = _gpu(20_000).table
    sp = Spool(tmp_path, max_bytes=1)
    first = sp.append("gpu_sample", one)
    size = first.size
    sp.max_bytes = int(size * 2.5)
    sp.append("gpu_sample", one)
    assert sp.dropped_rows == 0
    sp.append("gpu_sample", one)  # third file exceeds 2.5 x: the oldest goes
    assert sp.dropped_rows == 20_000 and sp.dropped_files == 1
    assert first.seq not in [e.seq for e in sp.entries()]
    assert len(sp.entries()) == 2


def test_an_evicted_batch_marked_unconfirmed_is_counted_apart_even_after_a_restart(
    tmp_path: Path,
) -> None:
    """A batch whose insert broke off after it was sent may be in the store: evicted, its rows
    count as unconfirmed, not dropped, also when another process evicts it (the mark is a file
    beside the batch); a mark whose batch is gone is cleaned up, one on a stored batch removed."""
    one = _gpu(20_000).table
    sp = Spool(tmp_path)
    first = sp.append("gpu_sample", one)
    sp.mark_unconfirmed(first)
    second = sp.append("gpu_sample", one)
    sp.close()
    (
        tmp_path
        / "0000000000000099.gpu_sample.5.0123456789abcdef0123456789abcdef.arrow.unconfirmed"
    ).touch()
    sp = Spool(tmp_path, max_bytes=int(first.size * 2.5))
    assert [p.name for p in tmp_path.glob("*.unconfirmed")] == [first.path.name + ".unconfirmed"]
    sp.append("gpu_sample", one)  # over the limit: the oldest, the marked one, goes
    assert (sp.unconfirmed_rows, sp.dropped_rows) == (20_000, 0)
    sp.append("gpu_sample", one)  # the next oldest was never sent: dropped
    assert (sp.unconfirmed_rows, sp.dropped_rows, sp.dropped_files) == (20_000, 20_000, 1)
    assert second.seq not in [e.seq for e in sp.entries()]
    assert not list(tmp_path.glob("*.unconfirmed"))
    third = sp.entries()[0]
    sp.mark_unconfirmed(third)
    rejected = sp.reject(third, "later refused for good")  # the mark goes with it, and back
    assert sp.is_unconfirmed(sp.rejected_entries()[0]) and rejected.parent == sp.rejected_dir
    (third,) = [e for e in sp.replay_rejected() if e.seq == third.seq]
    assert sp.is_unconfirmed(third) and not list(sp.rejected_dir.glob("*.unconfirmed"))
    sp.remove(third)  # replayed and stored after all: no mark left behind
    assert not list(tmp_path.glob("*.unconfirmed"))


def test_spool_ignores_half_written_files(tmp_path: Path) -> None:
    (tmp_path / "0000000000000007.gpu_sample.5.0123456789abcdef0123456789abcdef.tmp").write_bytes(
        b"partial"
    )
    sp = Spool(tmp_path)
    assert sp.entries() == [] and not list(tmp_path.glob("*.tmp"))


def test_stamp_cluster_fills_only_empty() -> None:
    t = _gpu(2).table
    t = t.set_column(t.column_names.index("cluster"), "cluster", pa.array(["", "keep"]))
    out = StampCluster("prod").process(Batch(GPU_SAMPLE, t))
    assert out.table.column("cluster").to_pylist() == ["prod", "keep"]


class _Boom:
    name = "boom"

    def process(self, batch: Batch) -> Batch:
        raise RuntimeError("enricher down")


class _ListSource:
    name = "list"

    def __init__(self, batches: list[Batch], fail: bool = False) -> None:
        self.batches, self.fail = batches, fail
        self.stats = ComponentStats("source:list")

    def collect(self) -> list[Batch]:
        if self.fail:
            raise OSError("device gone")
        return self.batches


def test_failing_transform_is_counted_and_batch_goes_on() -> None:
    sink = MemorySink()
    p = Pipeline(
        [_ListSource([_gpu(5)]), _ListSource([], fail=True)], [sink], [_Boom(), StampCluster("c")]
    )
    assert p.run_once() == 5
    assert p.transform_stats["boom"].errors == {"exception": 1}  # never the class name
    assert sink.table("gpu_sample").column("cluster").to_pylist() == ["c"] * 5
    p.close()
    assert sink.closed


def test_prometheus_text_names_types_and_skips_nulls() -> None:
    b = Batch.from_rows(
        GPU_SAMPLE,
        [_gpu_row(0, power_watts=300.5, energy_joules_total=1000), _gpu_row(1, up=0)],
    )
    text = render_prometheus([b], [ComponentStats("source:node", received=2, sent=2)])
    assert "# TYPE railscope_gpu_power_watts gauge" in text
    assert (
        'railscope_gpu_power_watts{cluster="c",gpu="0",mig="",model="",namespace="",node="n1",pci_bus_id="",pod="",uuid=""} 300.5'
        in text
    )
    assert "# TYPE railscope_gpu_energy_joules_total counter" in text
    assert 'railscope_gpu_up{cluster="c",gpu="1"' in text
    assert 'gpu="1"' not in "".join(
        line for line in text.splitlines() if line.startswith("railscope_gpu_power_watts")
    )
    assert 'railscope_collector_success{component="source:node"} 1.0' in text
    # a value that turns null stops being exported
    sink = PrometheusSink()
    sink.export(b)
    sink.export(Batch.from_rows(GPU_SAMPLE, [_gpu_row(0, ts=2)]))
    assert "railscope_gpu_power_watts{" not in sink.render()


@pytest.mark.skipif(
    not shutil.which("promtool"), reason="promtool (Debian package prometheus) not installed"
)
def test_promtool_accepts_exposition(tmp_path: Path) -> None:
    b = Batch.from_rows(GPU_SAMPLE, [_gpu_row(0, power_watts=1.0, xid_errors_total=2)])
    text = render_prometheus([b], [ComponentStats("sink:clickhouse")])
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


async def test_metrics_served_over_http(free_port: int) -> None:
    import aiohttp

    sink = PrometheusSink()
    sink.export(_gpu(1))
    host, port = sink.serve("127.0.0.1", free_port)
    try:
        async with aiohttp.ClientSession() as s, s.get(f"http://{host}:{port}/metrics") as r:
            body = await r.text()
            assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
        assert 'railscope_gpu_power_watts{cluster="",gpu="0"' in body
    finally:
        sink.close()


def test_otlp_sink_exports_latest_values() -> None:
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from telemetry.sinks.otlp import OtlpSink

    reader = InMemoryMetricReader()
    sink = OtlpSink(reader=reader)
    sink.export(_gpu(2))
    data = reader.get_metrics_data()
    points = {
        m.name: [(dict(p.attributes), p.value) for p in m.data.data_points]
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    vals = sorted(v for attrs, v in points["railscope_gpu_power_watts"])
    assert vals == [0.0, 1.0]
    sink.close()


def test_stale_series_stop_being_exported() -> None:
    from telemetry.sinks.latest import LatestValues

    now = [0.0]
    lv = LatestValues(stale_after_seconds=60, clock=lambda: now[0])
    lv.update(_gpu(2))  # GPUs 0 and 1
    now[0] = 50
    lv.update(
        Batch.from_rows(
            GPU_SAMPLE, [{"ts": 2, "node": "n1", "gpu": 1, "up": 1, "power_watts": 5.0}]
        )
    )
    now[0] = 100  # GPU 0 last seen 100 s ago: gone
    gpus = {s.labels["gpu"] for s in lv.series() if s.field.name == "power_watts"}
    assert gpus == {"1"}


def test_direct_text_matches_prometheus_client_byte_for_byte() -> None:
    """latest_text must write exactly what generate_latest writes for the same series."""
    import math

    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    from telemetry.sinks.latest import LatestValues
    from telemetry.sinks.prometheus import latest_text

    lv = LatestValues()
    tricky = ["plain", 'quote"d', "back\\slash", "new\nline", "ünïcode", ""]
    values = [0.0, 1.0, 0.1, 300.5, 1e20, 123456789.0, 2.0**63, math.inf, 1e-7]
    lv.update(
        Batch.from_rows(
            GPU_SAMPLE,
            [
                {
                    "ts": 1,
                    "cluster": "c",
                    "node": tricky[i % len(tricky)],
                    "gpu": i,
                    "up": 1,
                    "power_watts": values[i % len(values)],
                    "energy_joules_total": i * 1000,
                    "utilization_ratio": None if i % 3 else 0.5,
                }
                for i in range(40)
            ],
        )
    )
    lv.update(
        Batch.from_rows(
            NIC_SAMPLE,
            [
                {
                    "ts": 1,
                    "cluster": "c",
                    "node": "n",
                    "device": f"mlx5_{i}",
                    "port": 1,
                    "up": 1,
                    "rx_bytes_total": 2**40 + i,
                }
                for i in range(4)
            ],
        )
    )

    class Ref:
        def collect(self):  # type: ignore[no-untyped-def]
            fams: dict = {}
            for s in lv.series():
                fam = fams.get(s.metric)
                if fam is None:
                    cls = CounterMetricFamily if s.field.role == "counter" else GaugeMetricFamily
                    fam = fams[s.metric] = cls(s.metric, s.field.doc, labels=list(s.labels))
                fam.add_metric(list(s.labels.values()), s.value)
            yield from fams.values()

    reg = CollectorRegistry(auto_describe=False)
    reg.register(Ref())  # type: ignore[arg-type]
    expected = generate_latest(reg).decode()
    assert latest_text(lv) == expected
    assert (
        'node="quote\\"d"' in expected and "+Inf" in expected
    )  # the tricky cases are really in there


def test_a_configured_pipeline_stamps_the_cluster_and_serves_its_own_components() -> None:
    """configured_pipeline: the config's transforms (the cluster stamp), this host as the
    self-report's host, and with `metrics` a Prometheus sink that reads this pipeline's
    components, the failing source's included."""
    from telemetry.config import Config
    from telemetry.sinks.configured import configured_pipeline

    cfg = Config.model_validate({"cluster": "east"})
    sink = MemorySink()
    bad = _ListSource([], fail=True)
    pipe, prom = configured_pipeline(cfg, [_ListSource([_gpu(3)]), bad], [sink], metrics=True)
    assert prom is not None and prom in pipe.sinks and pipe.report_host
    assert pipe.run_once() == 3
    assert sink.table("gpu_sample").column("cluster").to_pylist() == ["east"] * 3
    text = prom.render()
    assert 'component="source:list"' in text and 'component="transform:stamp_cluster"' in text
    assert configured_pipeline(cfg, [], [sink])[1] is None
    pipe.close()
