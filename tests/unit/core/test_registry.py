"""The source table (telemetry/registry.py): config validation knows every source without an
exporter imported first, every entry points at a real class and config model, build_source is
the one way to build a source, and problems are counted under bounded reasons."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from telemetry.catalog import SOURCES
from telemetry.config import SourceConfig, load_config
from telemetry.contracts import ComponentStats
from telemetry.errors import ConfigError
from telemetry.problems import Problems, describe
from telemetry.records import KINDS
from telemetry.registry import build_source
from tests.sysfs_fixture import node8

ROOT = Path(__file__).resolve().parents[3]


def test_load_config_validates_every_source_without_importing_exporters(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(
        "sources:\n"
        "  node: {collectors: {gpu: false}, enabled: true}\n"
        "  switch: {switches: [{name: leaf01, address: '127.0.0.1:6379'}]}\n"
        "  sflow: {bind: '127.0.0.1:6343'}\n"
        "  hdfs: {namenodes: ['http://nn:9870'], from: /captures/hdfs}\n"
        "  inventory: {interval_seconds: 30}\n"
    )
    code = textwrap.dedent(
        f"""
        import sys
        from telemetry.config import load_config
        assert not [m for m in sys.modules if m.startswith("exporters")], "imported too early"
        cfg = load_config({str(f)!r}, env={{}})
        print(cfg.source("node").collectors.gpu, cfg.source("hdfs").from_path,
              cfg.source("inventory").interval_seconds, cfg.source("node").enabled)
        """
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "/captures/hdfs", "30.0", "True"]


@pytest.mark.parametrize(
    ("section", "message"),
    [
        # the key path is railscope's; the reason after it is pydantic's, worded by its version
        ("node: {collectors: {gpux: true}}", "sources.node.collectors.gpux: "),
        ("switch: {enabled: maybe}", "sources.switch.enabled: "),
        ("sflow: {interval_seconds: 0}", "sources.sflow.interval_seconds: "),
        (
            "nodes: {}",
            "sources.nodes: unknown source (known: hdfs, inventory, logs, nccl, node, sflow, switch)",
        ),
    ],
)
def test_bad_source_sections_name_the_key(tmp_path: Path, section: str, message: str) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(f"sources:\n  {section}\n")
    with pytest.raises(ConfigError) as e:
        load_config(str(f), env={})
    assert message in str(e.value) and str(f) in str(e.value)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_every_entry_points_at_a_real_source(name: str) -> None:
    e = SOURCES[name]
    cls = e.load()
    assert cls.name == name and cls.Config is e.config_model()
    assert issubclass(cls.Config, SourceConfig)
    assert set(e.kinds) <= set(KINDS), set(e.kinds) - set(KINDS)
    assert cls.reasons and len(set(cls.reasons)) == len(cls.reasons)
    assert cls.unit in ("records", "datagrams", "entries", "objects")
    for hook in ("build", "add_arguments", "fold_args"):
        assert callable(getattr(cls, hook, None)), hook


def test_build_source_replays_from_the_section_like_the_flag(tmp_path: Path) -> None:
    d = str(node8())
    f = tmp_path / "c.yaml"
    f.write_text(f"sources:\n  node: {{from: {d}, node_name: n1, interval_seconds: 5}}\n")
    cfg = load_config(str(f), env={})
    by_key = build_source("node", cfg)
    by_arg = build_source("node", load_config(None, env={}), from_path=d)
    try:
        assert by_key.interval_seconds == 5.0 and by_arg.interval_seconds == 10.0  # type: ignore[attr-defined]
        rows = {b.kind.name: b.num_rows for b in by_key.collect()}
        assert rows == {
            "gpu_sample": 8,
            "gpu_event": 1,
            "nic_sample": 8,
            "nic_priority_sample": 64,
            "gpu_nic_affinity": 8,
        }
        assert {b.kind.name: b.num_rows for b in by_arg.collect()} == rows
        assert by_key.stats.received == 89 and by_key.stats.unit == "records"
    finally:
        by_key.close()  # type: ignore[attr-defined]
        by_arg.close()  # type: ignore[attr-defined]


def test_problems_count_bounded_reasons_and_log_once_per_reason(caplog) -> None:  # type: ignore[no-untyped-def]
    st = ComponentStats("source:t")
    now = [0.0]
    p = Problems(st, "t", ("bad_value", "down"), clock=lambda: now[0])
    with caplog.at_level(logging.WARNING):
        p.add("bad_value", "COUNTERS:oid:1 X", "'12abc'")
        p.add("bad_value", "COUNTERS:oid:2 Y", "'-3'")  # same reason: counted, not logged
        p.add("down", "leaf02", "connection refused")
        p.add("timeout_after_/a/path", "x", "y")  # undeclared: counted as other
        now[0] = 61.0
        p.add("bad_value", "COUNTERS:oid:3 Z", "'?'", n=2)
    assert st.errors == {"bad_value": 4, "down": 1, "other": 1} and st.failed == 6
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "t: bad_value: COUNTERS:oid:1 X: '12abc'",
        "t: down: leaf02: connection refused",
        "t: other: (timeout_after_/a/path) x: y",
        "t: bad_value: COUNTERS:oid:3 Z: '?' (2 at once) (+1 more since the last line)",
    ]


def test_an_unexpected_exception_is_counted_under_one_reason_and_named_in_the_log(caplog) -> None:  # type: ignore[no-untyped-def]
    st = ComponentStats("source:t")
    p = Problems(st, "t", ("bad_value",))
    with caplog.at_level(logging.WARNING):
        p.exception(KeyError("gpu3"), "collect")
        p.exception(ValueError("line one\nline two"), "collect", log=False)
        p.exception(RuntimeError(), "parse")
    assert st.errors == {"exception": 3} and st.failed == 3  # never a class name as a label
    assert [r.getMessage() for r in caplog.records] == ["t: exception: collect: KeyError: 'gpu3'"]
    assert describe(ValueError("line one\nline two")) == "ValueError: line one"
    assert describe(RuntimeError()) == "RuntimeError"


def test_a_command_line_builds_its_own_command_alone() -> None:
    """`railscope demo ...` builds the demo's parser alone, importing no source's module; a
    command whose module is named otherwise (`config`, `findings`) and `railscope --help` get
    every command."""
    code = textwrap.dedent(
        """
        import sys
        from telemetry.cli import build_parser
        p = build_parser(["--log-level", "info", "demo", "--data", "d"])
        sub = next(a for a in p._actions if a.dest == "command")
        print(sorted(sub.choices), p.parse_args(["demo", "--data", "d"]).data)
        print(sorted({m.split(".")[1] for m in sys.modules if m.startswith("exporters.")}))
        for argv in (["config", "check"], ["findings"], ["--help"], []):
            sub = next(a for a in build_parser(argv)._actions if a.dest == "command")
            print(len(sub.choices) > 20, "config" in sub.choices, "node" in sub.choices)
        """
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:2] == ["['demo'] d", "[]"], lines
    assert lines[2:] == ["True True True"] * 4, lines
