"""GPU collector on the NVML fake: NVML's error semantics, XID events, MIG, scaling."""

from __future__ import annotations

import json

import pytest

from exporters.node import nvml
from exporters.node.gpu import GpuCollector, load_fields
from telemetry.records import GPU_SAMPLE

from .conftest import NODE8


def spec(n: int = 3, **per_gpu: dict) -> dict:
    gpus = []
    for i in range(n):
        g = {
            "uuid": f"GPU-{i}",
            "pci_bus_id": f"00000000:{i + 1:02X}:00.0",
            "fields": {
                "power_watts": 650_000 + i,
                "energy_joules_total": 1_000_000,
                "utilization_ratio": 94,
                "sm_active_ratio": 85,
                "power_violation_seconds_total": 2_500_000_000,
            },
        }
        g.update(per_gpu.get(str(i), {}))
        gpus.append(g)
    return {"gpus": gpus}


def test_fake_follows_nvml_semantics() -> None:
    f = nvml.FakeNvml.from_dict(spec(1, **{"0": {"unsupported": ["power_watts"]}}))
    with pytest.raises(nvml.NvmlError) as e:
        f.device_count()
    assert e.value.code == nvml.UNINITIALIZED
    f.init()
    assert f.device_count() == 1
    with pytest.raises(nvml.NvmlError) as e:
        f.read(0, "power_watts")
    assert e.value.code == nvml.NOT_SUPPORTED
    with pytest.raises(nvml.NvmlError) as e:
        f.wait_xid(0)
    assert e.value.code == nvml.TIMEOUT
    f.lose(0)
    with pytest.raises(nvml.NvmlError) as e:
        f.identity(0)
    assert e.value.code == nvml.GPU_IS_LOST
    with pytest.raises(nvml.NvmlError) as e:
        nvml.FakeNvml(init_error="driver_not_loaded").init()
    assert e.value.code == nvml.DRIVER_NOT_LOADED and e.value.reason == "driver_not_loaded"


def test_values_scaled_to_base_units(problems) -> None:
    c = GpuCollector(nvml.FakeNvml.from_dict(spec(1)), "n")
    rows, events = c.collect(1, problems)
    r = rows[0]
    assert r["power_watts"] == 650.0
    assert r["energy_joules_total"] == 1000.0
    assert r["utilization_ratio"] == 0.94
    assert r["sm_active_ratio"] == 0.85
    assert r["power_violation_seconds_total"] == 2.5
    assert r["pci_bus_id"] == "0000:01:00.0"  # NVML's 8-digit domain normalised to sysfs form
    assert r["up"] == 1 and events == [] and problems.items == []


def test_not_supported_is_null_and_not_asked_again(problems) -> None:
    f = nvml.FakeNvml.from_dict(spec(1, **{"0": {"unsupported": ["sm_active_ratio"]}}))
    c = GpuCollector(f, "n")
    rows, _ = c.collect(1, problems)
    assert "sm_active_ratio" not in rows[0]  # null in the record, absent from /metrics
    reads = f.gpus[0].reads
    c.collect(2, problems)
    # 2nd cycle reads only the supported fields (4 of them), not the whole table again.
    assert f.gpus[0].reads - reads == 4
    assert problems.items == []  # NOT_SUPPORTED is not a problem


def test_gpu_lost_mid_scrape_rest_keeps_reporting(problems) -> None:
    f = nvml.FakeNvml.from_dict(spec(3, **{"1": {"lost_after_reads": 2}}))
    c = GpuCollector(f, "n")
    rows, events = c.collect(1, problems)
    by = {r["gpu"]: r for r in rows}
    assert by[1]["up"] == 0 and "power_watts" not in by[1]
    assert by[0]["up"] == 1 and by[2]["up"] == 1 and by[2]["power_watts"] == 650.002
    assert [e["event"] for e in events] == ["gpu_lost"] and events[0]["gpu"] == 1
    assert problems.reasons == ["gpu_lost"]
    rows, events = c.collect(2, problems)
    assert {r["gpu"]: r["up"] for r in rows} == {0: 1, 1: 0, 2: 1}
    assert events == []  # the loss is an event once, not every cycle
    assert problems.reasons == ["gpu_lost", "gpu_lost"]


def test_driver_not_loaded_is_counted(problems) -> None:
    c = GpuCollector(nvml.FakeNvml(init_error="driver_not_loaded"), "n", quiet_absent=True)
    assert c.collect(1, problems) == ([], [])
    assert problems.reasons == ["gpu_driver_not_loaded"]


def test_no_nvml_library_is_quiet_in_auto_mode(problems) -> None:
    c = GpuCollector(nvml.FakeNvml(init_error="library_not_found"), "n", quiet_absent=True)
    assert c.collect(1, problems) == ([], [])
    assert c.collect(2, problems) == ([], [])
    assert problems.items == [] and c.absent
    forced = GpuCollector(nvml.FakeNvml(init_error="library_not_found"), "n", quiet_absent=False)
    forced.collect(1, problems)
    assert problems.reasons == ["gpu_library_not_found"]


def test_real_backend_without_library_reports_absent(problems) -> None:
    c = GpuCollector(nvml.RealNvml(), "n", quiet_absent=True)  # no libnvidia-ml on this machine
    assert c.collect(1, problems) == ([], [])
    assert problems.items == []


def test_uninitialized_reinits_next_cycle(problems) -> None:
    f = nvml.FakeNvml.from_dict(spec(1))
    c = GpuCollector(f, "n")
    c.collect(1, problems)
    f.initialised = False  # the library was shut down under us
    assert c.collect(2, problems) == ([], [])
    assert problems.reasons == ["gpu_uninitialized"]
    rows, _ = c.collect(3, problems)
    assert rows[0]["up"] == 1


def test_xid_events_stored_and_counted(problems) -> None:
    f = nvml.FakeNvml.from_dict(spec(2, **{"1": {"xid": [79]}}))
    c = GpuCollector(f, "n")
    rows, events = c.collect(1000, problems)
    assert [(e["gpu"], e["event"], e["xid"], e["ts"]) for e in events] == [(1, "xid", 79, 1000)]
    assert {r["gpu"]: r["xid_errors_total"] for r in rows} == {0: 0, 1: 1}
    f.inject_xid(1, 48)
    f.inject_xid(1, 63)
    rows, events = c.collect(2000, problems)
    assert [e["xid"] for e in events] == [48, 63]
    assert {r["gpu"]: r["xid_errors_total"] for r in rows} == {0: 0, 1: 3}  # a counter, not a gauge


def test_mig_instances_are_labelled(problems) -> None:
    mig = [
        {"label": "1/0", "uuid": "MIG-a", "fields": {"memory_used_bytes": 1024}},
        {"label": "2/0", "uuid": "MIG-b", "fields": {}},
    ]
    c = GpuCollector(nvml.FakeNvml.from_dict(spec(1, **{"0": {"mig": mig}})), "n")
    rows, _ = c.collect(1, problems)
    assert [(r["mig"], r["uuid"]) for r in rows] == [
        ("", "GPU-0"),
        ("1/0", "MIG-a"),
        ("2/0", "MIG-b"),
    ]
    assert rows[1]["memory_used_bytes"] == 1024 and "power_watts" not in rows[1]
    assert "xid_errors_total" not in rows[1]


def test_counter_reset_after_driver_reload_never_negative(problems) -> None:
    f = nvml.FakeNvml.from_dict(spec(1))
    c = GpuCollector(f, "n")
    a = c.collect(1, problems)[0][0]["energy_joules_total"]
    f.set(0, "energy_joules_total", 5_000)  # driver reload restarted the counter
    b = c.collect(2, problems)[0][0]["energy_joules_total"]
    assert b == a + 5.0


def test_field_table_matches_record_kind() -> None:
    fields = load_fields()
    assert len(fields) == 42
    for f in fields:
        kf = GPU_SAMPLE.by_name[f.name]
        assert kf.role == f.type, f.name
    assert all(
        g["fields"].keys() <= {f.name for f in fields}
        for g in json.loads((NODE8 / "nvml.json").read_text())["gpus"]
    )


def test_xid_waiter_thread_stamps_events_on_arrival(problems) -> None:
    import time

    f = nvml.FakeNvml.from_dict(spec(2))
    c = GpuCollector(f, "n", event_thread=True)
    c.collect(1, problems)  # registers events, starts the waiter
    assert c._waiter is not None and c._waiter.is_alive()
    before = int(time.time() * 1000)
    f.inject_xid(1, 119)
    deadline = time.monotonic() + 10
    events: list[dict] = []
    while not events and time.monotonic() < deadline:
        time.sleep(0.3)
        rows, events = c.collect(int(time.time() * 1000), problems)
    collected_at = rows[0]["ts"]
    assert [(e["gpu"], e["xid"]) for e in events] == [(1, 119)]
    assert before <= events[0]["ts"] < collected_at  # stamped when it arrived, not when collected
    assert {r["gpu"]: r["xid_errors_total"] for r in rows} == {0: 0, 1: 1}
    c.close()
    assert c._waiter is None and problems.items == []


def test_fake_follows_nvml_not_supported_per_model() -> None:
    """The fake answers NOT_SUPPORTED per field per GPU model as NVML does (MODEL_UNSUPPORTED),
    even when a spec lists a value: no NVENC on H100/A100, no page retirement on Ampere+, no row
    remapping on Volta, no GPM before Hopper, no NVLink on L40S."""
    from exporters.node.nvml import NOT_SUPPORTED, FakeNvml, NvmlError

    every = {f.name: 1.0 for f in load_fields()}
    models = [
        "NVIDIA H100 80GB HBM3",
        "NVIDIA A100-SXM4-80GB",
        "Tesla V100-SXM2-32GB",
        "NVIDIA L40S",
    ]
    fake = FakeNvml.from_dict(
        {"gpus": [{"uuid": f"GPU-{i}", "model": m, "fields": every} for i, m in enumerate(models)]}
    )
    fake.init()

    def supported(gpu: int) -> set[str]:
        out = set()
        for name in every:
            try:
                fake.read(gpu, name)
                out.add(name)
            except NvmlError as e:
                assert e.code == NOT_SUPPORTED
        return out

    h100, a100, v100, l40s = (supported(i) for i in range(4))
    assert "encoder_utilization_ratio" not in h100 and "decoder_utilization_ratio" in h100
    assert "retired_pages_pending" not in h100 and "remapped_rows_correctable_total" in h100
    assert "graphics_active_ratio" in h100 and "graphics_active_ratio" not in a100
    assert (
        "retired_pages_double_bit_ecc" in v100 and "remapped_rows_uncorrectable_total" not in v100
    )
    assert "nvlink_replay_errors_total" not in l40s and "memory_temperature_celsius" not in l40s
    assert "nvlink_replay_errors_total" in a100 and "encoder_utilization_ratio" in l40s
    assert len(every) - len(h100) == 4
