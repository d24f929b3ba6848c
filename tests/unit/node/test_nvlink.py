"""Per-link NVLink collection on the NVML fake: nvmlDeviceGetNvLinkState and
nvmlDeviceGetNvLinkErrorCounter per link, with NVML's errors for a link the GPU does not have
(INVALID_ARGUMENT), a GPU without NVLink and a counter a link cannot report (NOT_SUPPORTED), and
counters that never go backwards."""

from __future__ import annotations

import pytest

from exporters.node import nvml
from exporters.node.gpu import GpuCollector
from telemetry.contracts import Batch
from telemetry.records import NVLINK_SAMPLE

COUNTERS = list(nvml.NVLINK_ERROR_COUNTERS)


def _links(n: int, **over: dict) -> list[dict]:
    return [{"active": True, **dict.fromkeys(COUNTERS, 10 * k), **over.get(str(k), {})}
            for k in range(n)]  # fmt: skip


def _fake(*gpus: dict) -> nvml.FakeNvml:
    return nvml.FakeNvml.from_dict(
        {
            "gpus": [
                {"uuid": f"GPU-{i}", "fields": {"power_watts": 1}, **g} for i, g in enumerate(gpus)
            ]
        }
    )


def test_fake_answers_per_link_as_nvml_does() -> None:
    f = _fake(
        {"nvlinks": _links(4, **{"2": {"active": False}, "3": {"crc_flit_errors_total": None}})},
        {},  # no NVLink listed
        {"model": "NVIDIA L40S", "nvlinks": _links(2)},  # PCIe board: no NVLink at all
    )
    f.gpus[0].nvlinks[3].pop("crc_flit_errors_total")
    f.init()
    assert [f.nvlink_state(0, k) for k in range(4)] == [True, True, False, True]
    assert f.nvlink_error_counter(0, 1, "replay_errors_total") == 10
    for gpu, link, counter, code in [
        (0, 4, "replay_errors_total", nvml.INVALID_ARGUMENT),  # past its last link
        (0, nvml.NVLINK_MAX_LINKS, "replay_errors_total", nvml.INVALID_ARGUMENT),
        (0, -1, "replay_errors_total", nvml.INVALID_ARGUMENT),
        (0, 0, "ecc_lane_errors", nvml.INVALID_ARGUMENT),  # not an nvmlNvLinkErrorCounter_t
        (0, 3, "crc_flit_errors_total", nvml.NOT_SUPPORTED),  # this link cannot report it
        (1, 0, "replay_errors_total", nvml.NOT_SUPPORTED),
        (2, 0, "replay_errors_total", nvml.NOT_SUPPORTED),
    ]:
        with pytest.raises(nvml.NvmlError) as e:
            f.nvlink_error_counter(gpu, link, counter)
        assert e.value.code == code, (gpu, link, counter)
    with pytest.raises(nvml.NvmlError) as e:
        f.nvlink_state(0, 4)
    assert e.value.code == nvml.INVALID_ARGUMENT
    f.lose(0)
    with pytest.raises(nvml.NvmlError) as e:
        f.nvlink_state(0, 0)
    assert e.value.code == nvml.GPU_IS_LOST
    f.shutdown()
    with pytest.raises(nvml.NvmlError) as e:
        f.nvlink_state(1, 0)
    assert e.value.code == nvml.UNINITIALIZED


def test_one_row_per_link_named_and_typed(problems) -> None:
    f = _fake({"nvlinks": _links(18, **{"5": {"active": False}})}, {"model": "NVIDIA L40S"})
    c = GpuCollector(f, "n")
    c.collect(1_000, problems)
    rows = c.nvlinks(1_000, problems)
    assert [(r["gpu"], r["link"]) for r in rows] == [(0, k) for k in range(18)]
    assert rows[5]["up"] == 0 and rows[4]["up"] == 1
    assert rows[7]["replay_errors_total"] == 70 and rows[7]["uuid"] == "GPU-0"
    assert problems.items == []  # no NVLink on GPU 1, links past 17: quiet outcomes
    table = Batch.from_rows("nvlink_sample", rows).table
    assert table.schema == NVLINK_SAMPLE.arrow_schema and table.num_rows == 18


def test_links_probed_once_unsupported_counter_not_asked_again(problems) -> None:
    f = _fake({"nvlinks": _links(2)})
    f.gpus[0].nvlinks[1].pop("crc_data_errors_total")
    c = GpuCollector(f, "n")
    c.collect(1, problems)
    first = c.nvlinks(1, problems)
    assert "crc_data_errors_total" not in first[1] and first[0]["crc_data_errors_total"] == 0
    calls = f.calls
    c.nvlinks(2, problems)
    # per link: its state, then its counters (4 on link 0, 3 on link 1); no probe of link 2
    assert f.calls - calls == 2 + 4 + 3
    assert problems.items == []


def test_counters_never_go_backwards_and_a_lost_gpu_is_skipped(problems) -> None:
    f = _fake({"nvlinks": _links(2)}, {"nvlinks": _links(2)})
    c = GpuCollector(f, "n")
    c.collect(1, problems)
    c.nvlinks(1, problems)
    f.set_nvlink(0, 1, "replay_errors_total", 25)  # 10 -> 25
    c.collect(2, problems)
    assert c.nvlinks(2, problems)[1]["replay_errors_total"] == 25
    f.set_nvlink(0, 1, "replay_errors_total", 3)  # driver reload: restarts from zero
    c.collect(3, problems)
    rows = c.nvlinks(3, problems)
    assert rows[1]["replay_errors_total"] == 28  # 10 + 15 + 3, never below 25
    f.lose(1)
    c.collect(4, problems)
    assert {r["gpu"] for r in c.nvlinks(4, problems)} == {0}
    assert problems.reasons == ["gpu_lost"]  # from the GPU's own rows, once


class _Stalling(nvml.FakeNvml):
    """A driver whose error counters stop answering (NVML_ERROR_TIMEOUT) after the first cycle."""

    stalled = False

    def nvlink_error_counter(self, gpu: int, link: int, counter: str) -> int:
        if self.stalled:
            raise nvml.NvmlError(nvml.TIMEOUT)
        return super().nvlink_error_counter(gpu, link, counter)


def test_a_failing_link_read_is_a_problem_not_a_crash(problems) -> None:
    f = _Stalling.from_dict({"gpus": [{"uuid": "GPU-0", "fields": {}, "nvlinks": _links(2)}]})
    c = GpuCollector(f, "n")
    c.collect(1, problems)
    assert c.nvlinks(1, problems)[1]["replay_errors_total"] == 10
    f.stalled = True
    rows = c.nvlinks(2, problems)
    assert [r["link"] for r in rows] == [0, 1] and all("replay_errors_total" not in r for r in rows)
    assert problems.reasons == ["gpu_timeout"] * 8  # asked again next cycle: not NOT_SUPPORTED
