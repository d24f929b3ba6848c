"""The CLI as an operator uses it: real processes, real embedded store in a temp directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import ROOT, rs  # noqa: F401  (ROOT: for modules that imported it from here)


def test_help_lists_every_command() -> None:
    from telemetry.catalog import SOURCES

    r = rs("--help")
    assert r.returncode == 0
    expected = [*SOURCES, "demo", "topology", "dashboards", "alerts", "sim", "db", "config"]
    for cmd in expected:
        assert f"    {cmd} " in r.stdout or f"    {cmd}\n" in r.stdout, cmd
    assert "not built yet" not in r.stdout


def test_db_migrate_twice_then_status(tmp_path: Path) -> None:
    dsn = f"chdb://{tmp_path / 'store'}"
    first = rs("db", "migrate", "--dsn", dsn)
    assert first.returncode == 0, first.stderr
    assert "applied    1" in first.stdout
    second = rs("db", "migrate", "--dsn", dsn)
    assert second.returncode == 0 and "up to date, nothing to apply" in second.stdout
    status = rs("db", "status", "--dsn", dsn)
    assert status.returncode == 0
    from telemetry.store.migrations import MIGRATIONS

    assert (
        "applied    1" in status.stdout and f"{len(MIGRATIONS)} applied, 0 pending" in status.stdout
    )


def test_db_ddl_renders_cluster_schema() -> None:
    r = rs("db", "ddl", "--cluster", "prod")
    assert r.returncode == 0
    assert (
        "ReplicatedMergeTree('/clickhouse/tables/{shard}/railscope/gpu_samples_local', '{replica}')"
        in r.stdout
    )
    assert "ENGINE = Distributed(`prod`, `railscope`, `gpu_samples_local`, rand())" in r.stdout
    # ...which migration 7 replaces by the stable entity key
    assert (
        "ENGINE = Distributed(`prod`, `railscope`, `gpu_samples_local`, "
        "cityHash64(`cluster`, `node`, `gpu`))" in r.stdout
    )


@pytest.mark.parametrize(
    "args,msg",
    [
        (["db", "status", "--dsn", "mongodb://x"], "unknown scheme 'mongodb'"),
        (["db", "status", "--dsn", "http://127.0.0.1:1/railscope"], "unreachable"),
        (["config", "check", "/nonexistent.yaml"], "no such file"),
    ],
)
def test_user_errors_are_one_line_exit_2(args: list[str], msg: str) -> None:
    r = rs(*args)
    assert r.returncode == 2, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("railscope: error:") and msg in lines[0], (
        r.stderr
    )
    assert "Traceback" not in r.stderr


def test_config_check(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("cluster: prod\nsink:\n  batch_rows: 1000\n")
    r = rs("config", "check", str(good))
    assert r.returncode == 0 and "ok" in r.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("sink:\n  batch_seconds: -1\n")
    r = rs("config", "check", str(bad))
    assert r.returncode == 2 and "sink.batch_seconds" in r.stderr


@pytest.mark.slow
def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    r = rs("demo", "--data", str(tmp_path / "demo"))
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert "correlation:" in r.stdout and "precision" in r.stdout
    assert (tmp_path / "demo" / "ground_truth.json").exists()


def test_correlate_and_findings_on_an_empty_store(tmp_path: Path) -> None:
    dsn = f"chdb://{tmp_path / 'store'}"
    # a read-only command on a path where no store exists (a mistyped --dsn) says so and leaves
    # nothing behind, instead of creating an empty store and answering "no findings"
    for cmd in (("findings",), ("correlate",), ("db", "status"), ("incidents",)):
        r = rs(*cmd, "--dsn", dsn)
        assert r.returncode == 2 and r.stderr.strip() == (
            f"railscope: error: no embedded store at {tmp_path / 'store'}: nothing was collected "
            "there (name the store with --dsn or RAILSCOPE_DSN; `railscope demo`, `railscope "
            "serve` and the sources create one)"
        ), (cmd, r.stderr)
    assert not (tmp_path / "store").exists()
    assert rs("db", "migrate", "--dsn", dsn).returncode == 0  # an empty store
    r = rs("correlate", "--dsn", dsn)
    assert r.returncode == 0 and "nothing to do" in r.stdout, r.stderr
    r = rs("findings", "--dsn", dsn)
    assert r.returncode == 0 and r.stdout.strip() == "no findings"
    r = rs("report", "--dsn", dsn, "--job", "a/b")
    assert r.returncode == 2 and "no data" in r.stderr
