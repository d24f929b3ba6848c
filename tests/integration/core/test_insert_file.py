"""`Store.insert_arrow_file`, the spool's way into the store: the embedded engine reads the file
in place, a server is sent its bytes; either way a retry with the batch's token stores it once,
and a different token stores it again (the token, not the content, decides)."""

from __future__ import annotations

from pathlib import Path

import pytest

from telemetry.store import Store
from telemetry.store.spool import Spool
from tests.conftest import now_ms
from tests.integration.core.test_exactly_once import gpu_batch


@pytest.mark.parametrize("store_transport", ["chdb", "http"], indirect=True)
@pytest.mark.parametrize("rows", [5_000, 300_000])
def test_a_spool_file_is_stored_once_per_token(store: Store, tmp_path: Path, rows: int) -> None:
    entry = Spool(str(tmp_path / "spool"), None).append(
        "gpu_sample", gpu_batch(0, rows, now_ms()).table
    )
    store.insert_arrow_file("gpu_sample", entry.path, token=entry.token)
    store.insert_arrow_file("gpu_sample", entry.path, token=entry.token)  # a retry
    assert store.count("gpu_sample") == rows
    assert store.query_rows(
        f"SELECT uniqExact(node, gpu, ts), min(gpu), max(gpu) FROM {store.table('gpu_sample')}"
    ) == [(rows, 0, 7)]
    store.insert_arrow_file("gpu_sample", entry.path, token="0" * 32)  # another batch
    assert store.count("gpu_sample") == 2 * rows
