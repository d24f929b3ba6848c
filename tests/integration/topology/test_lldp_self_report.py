"""`topology lldp` reports on itself like every running component: each run stores one
`component_stat` row (component `source:lldp`), so a host whose lldpcli output is refused shows up
as a failed run in the store, next to the one line it prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.cli import ROOT, rs

FIX = Path(__file__).parents[2] / "fixtures" / "lldp"


def _runs(dsn: str) -> list[list[Any]]:
    """The stored self-reports, read in a process of their own: the embedded engine admits one
    data path per process, and the tests' own store is another."""
    code = (
        "import json, sys; from telemetry.store import Store; s = Store(sys.argv[1]); "
        "print(json.dumps(s.query_rows('SELECT host, received_total, sent_total, failed_total, "
        "success FROM ' + s.table('component_stat') + \" WHERE component = 'source:lldp' "
        'ORDER BY ts")))'
    )
    r = subprocess.run(
        [sys.executable, "-c", code, dsn], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return json.loads(r.stdout)


def test_each_run_stores_its_outcome_and_a_refusal_counts_as_failed(tmp_path: Path) -> None:
    dsn = f"chdb://{tmp_path / 'store'}"
    good = rs(
        "topology",
        "lldp",
        "--host",
        "gpu-a",
        "--from",
        str(FIX / "lldpcli_neighbors_two_ports.json"),
        env={"RAILSCOPE_DSN": dsn},
    )
    assert good.returncode == 0, good.stderr
    bad_file = tmp_path / "bad.json"
    bad_file.write_text('{"not lldp": 1}')
    bad = rs(
        "topology", "lldp", "--host", "gpu-b", "--from", str(bad_file), env={"RAILSCOPE_DSN": dsn}
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        f"railscope: error: {bad_file}: no top-level 'lldp' object (is this `lldpcli show neighbors -f json`?)"
    ]
    stored = int(good.stderr.split("stored ")[1].split()[0])
    assert stored >= 2
    assert _runs(dsn) == [["gpu-a", stored, stored, 0, 1], ["gpu-b", 0, 0, 1, 0]]
