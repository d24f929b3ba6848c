"""`railscope node` user errors: one line, exit 2, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from telemetry.cli import main
from tests.cli import rs

from .conftest import NODE8, PROCFS


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--from", "/nonexistent/capture"], "not a directory"),
        (["--from", "{empty}"], "no sysfs snapshot"),
        (["--from", str(PROCFS), "--gpu-backend", "fake"], "needs --gpu-fake"),
        (
            ["--from", str(PROCFS), "--gpu-backend", "fake", "--gpu-fake", "{badjson}"],
            "not valid JSON",
        ),
    ],
)
def test_user_errors_are_one_line(argv: list[str], message: str, tmp_path: Path, capsys) -> None:
    (tmp_path / "bad.json").write_text("{nope")
    argv = [
        a.replace("{empty}", str(tmp_path)).replace("{badjson}", str(tmp_path / "bad.json"))
        for a in argv
    ]
    assert main(["node", *argv, "--output", "prom"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("railscope: error:") and message in err[0]


def test_jsonl_output_has_every_kind() -> None:
    # A subprocess: write_output binds sys.stdout at import, which pytest's capture replaces.
    r = rs("node", "--from", str(NODE8), "--output", "jsonl", "--node-name", "n1")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    rows = [json.loads(line) for line in out.splitlines()]
    kinds = {r["_kind"] for r in rows}
    assert kinds == {
        "gpu_sample",
        "gpu_event",
        "nic_sample",
        "nic_priority_sample",
        "gpu_nic_affinity",
    }
    xid = [r for r in rows if r["_kind"] == "gpu_event"]
    assert [(r["gpu"], r["event"], r["xid"]) for r in xid] == [(2, "xid", 94)]
    g7 = next(r for r in rows if r["_kind"] == "gpu_sample" and r["gpu"] == 7)
    assert g7["memory_temperature_celsius"] is None  # unsupported on GPU 7: null, not a sentinel
    assert all(r["node"] == "n1" and r["cluster"] == "default" for r in rows)


def test_capture_into_non_empty_dir_is_refused(tmp_path: Path, capsys) -> None:
    (tmp_path / "keep").write_text("x")
    rc = main(
        [
            "node",
            "--sysfs-root",
            str(PROCFS / "sys"),
            "--gpu-backend",
            "none",
            "--capture",
            str(tmp_path),
        ]
    )
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"railscope: error: --capture {tmp_path}: directory is not empty"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"gpus": [{"fields": {"power_wats": 1}}]}, "gpus[0].fields.power_wats: not a GPU field"),
        (
            {"gpus": [{"fields": {"power_watts": "hot"}}]},
            "gpus[0].fields.power_watts: 'hot' is not a number",
        ),
        ({"gpus": {}}, "needs a list under 'gpus'"),
    ],
)
def test_bad_fake_spec_is_named(spec: dict, message: str, tmp_path: Path, capsys) -> None:
    f = tmp_path / "gpus.json"
    f.write_text(json.dumps(spec))
    rc = main(
        [
            "node",
            "--from",
            str(PROCFS),
            "--gpu-backend",
            "fake",
            "--gpu-fake",
            str(f),
            "--output",
            "prom",
        ]
    )
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"railscope: error: {f}: ") and message in err


def test_live_interval_must_be_1_to_60_seconds(tmp_path: Path) -> None:
    # a subprocess with a timeout: if the check were missing, the exporter would run forever
    r = rs("node", "--sysfs-root", str(PROCFS / "sys"), "--gpu-backend", "none", "--interval",
           "120", "--no-metrics", "--dsn", f"chdb://{tmp_path}/s", timeout=60)  # fmt: skip
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1] == (
        "railscope: error: interval_seconds: the node exporter collects every 1-60 s, got 120"
    )
