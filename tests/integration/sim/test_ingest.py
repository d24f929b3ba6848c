"""The simulator through the real pipeline (ClickHouse sink with spool) into the embedded store,
and the CLI (`railscope demo`, `railscope sim run/score`) in subprocesses with their own stores."""

from __future__ import annotations

import re
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from telemetry.records import FINDING, KINDS
from telemetry.sim import build
from telemetry.sim.run import fingerprint, ingest
from telemetry.sim.scenario import load_scenario
from telemetry.sim.score import read_findings, render, score
from telemetry.sinks.clickhouse import ClickHouseSink
from telemetry.transforms import StampCluster
from tests.cli import rs


def _recent_start(minutes_ago: int = 60) -> str:
    t = (int(time.time()) // 60 - minutes_ago) * 60
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_small_run_lands_in_the_store_row_for_row(store, tmp_path: Path):
    sim = build(load_scenario("small").with_overrides(minutes=3))
    sink = ClickHouseSink(store, spool_dir=str(tmp_path / "spool"), batch_rows=20_000)
    res = ingest(sim, [sink], [StampCluster("simtest")])
    assert res.rows == sum(res.rows_by_kind.values()) > 50_000
    for name, n in res.rows_by_kind.items():
        k = KINDS[name]
        final = " FINAL" if k.version_field else ""
        got = store.query_rows(
            f"SELECT count() FROM {store.table(k)}{final} WHERE cluster = 'simtest'"
        )[0][0]
        assert got == n, name
    assert sink.stats.sent == res.rows and sink.stats.failed == 0
    assert not list((tmp_path / "spool").glob("*.arrow"))  # everything acknowledged
    # counters arrive intact: the ECMP-collided uplink carries far more than its siblings
    f = next(f for f in sim.faults if f.kind == "ecmp_collision")
    rates = dict(
        store.query_rows(
            f"SELECT concat(switch, ':', port), (max(tx_bytes_total) - min(tx_bytes_total)) / "
            f"(toUnixTimestamp64Milli(max(ts)) - toUnixTimestamp64Milli(min(ts))) * 1000 "
            f"FROM {store.table('switch_port_sample')} WHERE concat(switch, ':', port) IN {{g:Array(String)}} "
            f"AND ts > fromUnixTimestamp64Milli({{a:Int64}}, 'UTC') AND ts < fromUnixTimestamp64Milli({{b:Int64}}, 'UTC') "
            "GROUP BY 1",
            {"g": f.detail["group"], "a": f.start_ms, "b": f.end_ms},
        )
    )
    assert rates[f.subject] > 5 * max(v for p, v in rates.items() if p != f.subject)
    # the fingerprint names the data: the same scenario and seed stored again under another
    # cluster gives the same one; one counter off by one byte gives another
    again = build(load_scenario("small").with_overrides(minutes=3))
    ingest(again, [sink], [StampCluster("simtest2")])
    fp = fingerprint(store, sim, "simtest")
    assert fingerprint(store, again, "simtest2") == fp
    store.client.command(
        f"ALTER TABLE {store.table('nic_sample')} UPDATE rx_bytes_total = rx_bytes_total + 1 "
        "WHERE cluster = 'simtest2' AND device = 'mlx5_0' SETTINGS mutations_sync = 2"
    )
    assert fingerprint(store, again, "simtest2") != fp
    assert fingerprint(store, sim, "other-cluster") != fp
    # no engine has run on this database: the scorer says so instead of inventing numbers
    truth = sim.ground_truth()
    assert read_findings(store, "simtest", truth.start_ms, truth.end_ms) == []
    assert "no findings" in render(score(truth, []), truth)
    # a stored finding is read back and scored
    hot = next(x for x in truth.faults if x.kind == "gpu_throttle")
    now = datetime.now(UTC)
    store.insert(
        FINDING,
        FINDING.to_arrow(
            [
                {
                    "finding_id": "f1",
                    "cluster": "simtest",
                    "kind": "gpu_throttle",
                    "category": "node",
                    "severity": "warning",
                    "subject_type": "gpu",
                    "subject": hot.subject,
                    "summary": "throttled",
                    "evidence": "{}",
                    "window_start": hot.start_ms,
                    "window_end": hot.end_ms,
                    "first_seen": hot.start_ms,
                    "last_seen": hot.end_ms,
                    "updated_at": now,
                }
            ]
        ),
    )
    found = read_findings(store, "simtest", truth.start_ms, truth.end_ms)
    assert [(x.kind, x.subject) for x in found] == [("gpu_throttle", hot.subject)]
    k = {s.kind: s for s in score(truth, found).kinds}
    assert k["gpu_throttle"].recall == 1.0 and k["gpu_throttle"].localization == 1.0
    assert k["gpu_throttle"].precision == 1.0 and k["ecmp_collision"].recall == 0.0


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return rs(*args, env={"RAILSCOPE_CLUSTER": "default"}, cwd=cwd)


def _fp(out: str) -> str:
    m = re.search(r"fingerprint ([0-9a-f]{16})", out)
    assert m, out
    return m.group(1)


def test_demo_and_sim_run_with_the_same_seed_store_identical_data(tmp_path: Path):
    """The fingerprint `demo` prints is the stored data's: `sim run` of the same scenario, seed
    and start into another store (demo's ingest, without the engine) gives the same one;
    another seed gives another."""
    start = _recent_start()
    a = _cli(
        "demo", "--data", str(tmp_path / "a"), "--minutes", "4", "--start", start, cwd=tmp_path
    )
    assert a.returncode == 0, a.stderr
    assert "ground truth" in a.stdout and str(tmp_path / "a" / "ground_truth.json") in a.stdout
    assert "railscope sim score --data" in a.stdout
    assert (tmp_path / "a" / "ground_truth.json").exists()
    run = ("sim", "run", "--scenario", "small", "--minutes", "4", "--start", start)
    same = _cli(*run, "--data", str(tmp_path / "c"), cwd=tmp_path)
    other = _cli(*run, "--data", str(tmp_path / "b"), "--seed", "5", cwd=tmp_path)
    assert same.returncode == 0 and other.returncode == 0, same.stderr + other.stderr
    assert _fp(a.stdout) == _fp(same.stdout)
    assert _fp(other.stdout) != _fp(a.stdout)


def test_sim_run_then_score(tmp_path: Path):
    d = str(tmp_path / "d")
    r = _cli("sim", "run", "--scenario", "rail-2nic", "--minutes", "2", "--data", d, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "records" in r.stdout and (tmp_path / "d" / "ground_truth.json").exists()
    s = _cli("sim", "score", "--data", d, cwd=tmp_path)
    assert s.returncode == 0, s.stderr
    assert "no findings" in s.stdout
    bad = _cli("sim", "score", "--data", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no such file" in bad.stderr


@pytest.mark.slow
def test_sim_run_through_parsers(tmp_path: Path):
    r = _cli(
        "sim", "run", "--scenario", "small", "--minutes", "1", "--through-parsers",
        "--data", str(tmp_path / "d"), cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "step 6/6" in r.stderr and (tmp_path / "d" / "ground_truth.json").exists()
    big = _cli("sim", "run", "--scenario", "large", "--through-parsers", cwd=tmp_path)
    assert big.returncode == 2 and big.stderr.count("\n") == 1
    assert "device path is for small scenarios" in big.stderr
