"""Scenario files: built-ins load, bad files get one line naming the key, overrides re-validate."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from telemetry.cli import main
from telemetry.errors import ConfigError
from telemetry.sim.scenario import FAULT_KINDS, builtin_names, load_scenario


def test_builtins_load_and_cover_every_fault_kind():
    assert set(builtin_names()) >= {"small", "rail-2nic", "multi-idc", "large"}
    large = load_scenario("large")
    assert large.total_servers >= 2048 and large.total_servers * 8 >= 16384
    assert large.duration_minutes == 60 and large.resolution_seconds == 10
    small = load_scenario("small")
    pool = load_scenario("pool")
    pool_kinds = {"gpu_idle_allocated", "gang_blocked_by_fragmentation",
                  "queue_over_guarantee_starving"}  # fmt: skip
    # the pool kinds need a pool and 30 min of idleness: the pool scenario, not small's 10 min
    assert {f.kind for f in pool.faults} == pool_kinds and pool.pool is not None
    assert {f.kind for f in small.faults} | {"job_spans_su"} | pool_kinds == set(FAULT_KINDS)
    assert sum(1 for i in small.fabric.idcs if i.sus) >= 1 and len(small.fabric.idcs) == 2
    assert sum(i.sus for i in small.fabric.idcs) >= 2 and small.duration_minutes >= 10


GOOD = """
fabric:
  idcs: [{name: a, sus: 1}]
faults:
  - {kind: gpu_xid, start_minute: 1}
"""


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (GOOD.replace("start_minute", "strat_minute"), "faults.0.strat_minute"),
        (GOOD.replace("gpu_xid", "gpu_melted"), "faults.0.kind"),
        (GOOD.replace("sus: 1", "sus: many"), "fabric.idcs.0.sus"),
        (GOOD + "seeds: 3\n", "seeds"),
        (GOOD.replace("fabric:", "fabrik:"), "fabric"),
        (GOOD + "duration_minutes: -1\n", "duration_minutes"),
        (
            GOOD.replace(
                "idcs: [{name: a, sus: 1}]", "idcs: [{name: a, sus: 1}]\n  server_model: dgx-9000"
            ),
            "fabric.server_model",
        ),
    ],
)
def test_malformed_scenario_names_the_key(tmp_path: Path, text: str, key: str):
    p = tmp_path / "bad.yaml"
    p.write_text(textwrap.dedent(text))
    with pytest.raises(ConfigError) as e:
        load_scenario(str(p))
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"scenario {p}: {key}")


def test_cli_prints_one_line_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    p = tmp_path / "bad.yaml"
    p.write_text(GOOD.replace("start_minute", "strat_minute"))
    assert main(["sim", "show", str(p)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"scenario {p}: faults.0.strat_minute: " in err[0]
    assert main(["sim", "show", "no-such-scenario"]) == 2
    assert "built-ins: " in capsys.readouterr().err
    (tmp_path / "y.yaml").write_text("fabric: [\n")
    assert main(["sim", "show", str(tmp_path / "y.yaml")]) == 2
    assert "not valid YAML" in capsys.readouterr().err


def test_overrides_revalidate_and_resize():
    sc = load_scenario("small")
    big = sc.with_overrides(nodes=64, minutes=3, seed=9)
    assert big.total_servers == 64 and big.seed == 9 and big.steps == 18
    assert all(f.start_minute < 3 for f in big.faults)  # later faults are dropped
    tiny = sc.with_overrides(nodes=8)
    assert tiny.total_servers == 8
    with pytest.raises(ConfigError, match="--nodes"):
        sc.with_overrides(nodes=0)
    with pytest.raises(ConfigError, match="not an ISO time"):
        sc.with_overrides(start="yesterday")


def test_unplaceable_fault_target_is_a_one_line_error(tmp_path: Path):
    from telemetry.sim import build

    p = tmp_path / "s.yaml"
    p.write_text(GOOD + "  - {kind: placement_violation, target: nope}\n")
    with pytest.raises(ConfigError, match=r"faults\.1\.target: no job named 'nope'"):
        build(load_scenario(str(p)))
    p.write_text(GOOD.replace("gpu_xid", "ecmp_collision"))
    with pytest.raises(ConfigError, match="ecmp_collision needs a job spanning SUs"):
        build(load_scenario(str(p)))


@pytest.mark.parametrize("nodes", [8, 16, 64, 256])
def test_demo_node_counts_keep_the_workload_and_faults(nodes: int):
    from telemetry.sim import build

    sc = load_scenario("small").with_overrides(nodes=nodes, start="2026-11-01T00:00:00Z")
    sim = build(sc)
    assert len(sim.fabric.nodes) == nodes
    assert len({n.su_global for n in sim.fabric.nodes}) >= 2
    placed = {j.name: len(j.nodes) for j in sim.workload.jobs if not j.pending}
    assert placed["llm-a"] > sc.fabric.servers_per_su  # still spans SUs
    assert {f.kind for f in sim.faults if f.origin == "injected"} == {f.kind for f in sc.faults}


@pytest.mark.parametrize(
    "edit,msg",
    [  # what tests/unit/sim/test_fuzz_scenario.py found: values that validated and then broke
        # --nodes scaling (OverflowError) or numpy's seeding (ValueError)
        ("jobs:\n  - {name: j, tenant: t, nodes: " + "9" * 400 + "}\n", "jobs.0.nodes"),
        ("random_jobs: {count: " + "9" * 400 + "}\n", "random_jobs.count"),
        ("seed: -1\n", "seed: "),  # after the key, pydantic's own words
        ("seed: &x [*x]\n", "nested deeper than 64 levels"),
    ],
    ids=["huge-job", "huge-count", "negative-seed", "self-anchor"],
)
def test_scenario_values_the_fuzzer_found_are_config_errors(
    tmp_path: Path, edit: str, msg: str
) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(
        "fabric:\n  idcs: [{name: a, sus: 1}]\n  servers_per_su: 2\nduration_minutes: 5\n" + edit
    )
    with pytest.raises(ConfigError) as e:
        load_scenario(str(f))
    assert msg in str(e.value) and "\n" not in str(e.value)
