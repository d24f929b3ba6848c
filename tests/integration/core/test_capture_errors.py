"""A capture given with `--from` that cannot be read is said once, in one line that names it: not
logged by the source and printed again by the command (a pipeline that goes on logs it, once)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import rs


@pytest.mark.parametrize(
    ("source", "name", "text", "says"),
    [
        ("inventory", "hn.yaml", "kind: HyperNode\n------\nfoo: [", "not valid JSON/YAML"),
        ("hdfs", "nn.jmx.json", '{"beans": [1, 2', "invalid JSON"),
    ],
)
def test_an_unreadable_capture_is_one_line(
    tmp_path: Path, source: str, name: str, text: str, says: str
) -> None:
    bad = tmp_path / name
    bad.write_text(text)
    printed = rs(source, "--from", str(bad), "--output", "jsonl", "--no-metrics")
    assert printed.returncode == 2, printed.stderr
    assert printed.stdout == ""
    (line,) = printed.stderr.strip().splitlines()
    assert line.startswith(f"railscope: error: {bad}: ") and says in line
    # (in tmp_path: the sink's spool directory is relative, one per process)
    stored = rs(
        source, "--from", str(bad), "--dsn", f"chdb://{tmp_path / 'store'}", "--no-metrics",
        cwd=tmp_path,
    )  # fmt: skip
    assert stored.returncode == 1, stored.stderr
    said = [x for x in stored.stderr.splitlines() if str(bad) in x]
    assert len(said) == 1 and says in said[0] and "collection failed" in said[0], stored.stderr
    assert "Traceback" not in printed.stderr + stored.stderr
