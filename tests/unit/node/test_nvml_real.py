"""The real NVML backend cannot run here (no GPU, no libnvidia-ml): check that every pynvml name
it uses exists in the installed nvidia-ml-py, and that it reports the missing library the way
NVML does, so a typo cannot hide until the first GPU node."""

from __future__ import annotations

import re
from pathlib import Path

import pynvml
import pytest

from exporters.node import nvml
from exporters.node.gpu import load_fields

SOURCE = Path(nvml.__file__).read_text()


def test_every_pynvml_name_exists() -> None:
    names = set(re.findall(r"\bnv\.([A-Za-z_][A-Za-z0-9_]*)", SOURCE))
    names |= set(re.findall(r"self\._nv\.([A-Za-z_][A-Za-z0-9_]*)", SOURCE))
    assert len(names) > 30
    missing = sorted(n for n in names if not hasattr(pynvml, n))
    assert missing == []


def test_every_field_has_a_reader() -> None:
    assert {f.name for f in load_fields()} == set(nvml._READERS)


def test_error_codes_match_pynvml() -> None:
    assert nvml.UNINITIALIZED == pynvml.NVML_ERROR_UNINITIALIZED
    assert nvml.NOT_SUPPORTED == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert nvml.DRIVER_NOT_LOADED == pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    assert nvml.GPU_IS_LOST == pynvml.NVML_ERROR_GPU_IS_LOST
    assert nvml.TIMEOUT == pynvml.NVML_ERROR_TIMEOUT
    assert nvml.LIBRARY_NOT_FOUND == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    assert nvml.NOT_FOUND == pynvml.NVML_ERROR_NOT_FOUND
    assert nvml.INVALID_ARGUMENT == pynvml.NVML_ERROR_INVALID_ARGUMENT


def test_nvlink_counters_match_pynvml() -> None:
    assert nvml.NVLINK_MAX_LINKS == pynvml.NVML_NVLINK_MAX_LINKS
    assert nvml.NVLINK_ERROR_COUNTERS == {
        "replay_errors_total": pynvml.NVML_NVLINK_ERROR_DL_REPLAY,
        "recovery_errors_total": pynvml.NVML_NVLINK_ERROR_DL_RECOVERY,
        "crc_flit_errors_total": pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT,
        "crc_data_errors_total": pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA,
    }


def test_real_backend_without_driver() -> None:
    b = nvml.RealNvml()
    with pytest.raises(nvml.NvmlError) as e:
        b.device_count()
    assert e.value.code == nvml.UNINITIALIZED
    try:
        b.init()
    except nvml.NvmlError as err:
        assert err.code in (nvml.LIBRARY_NOT_FOUND, nvml.DRIVER_NOT_LOADED)
    else:  # a machine with a GPU: the backend must at least count devices
        assert b.device_count() >= 0
        b.shutdown()


def test_normalise_pci() -> None:
    assert nvml.normalise_pci("00000000:1B:00.0") == "0000:1b:00.0"
    assert nvml.normalise_pci("0000:1b:00.0") == "0000:1b:00.0"
