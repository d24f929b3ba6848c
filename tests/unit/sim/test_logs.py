"""What the simulated jobs and nodes log (telemetry/sim/logs.py): the fast path's log_event rows
and the rendered CRI and kernel-log text are the same lines; the faults print what they should, in
each version's wording; and the derived ground truth names the pairs the errors name."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from telemetry.sim import build
from telemetry.sim.logs import render_logs
from telemetry.sim.scenario import load_scenario
from tests.unit.sim.conftest import START, sim_tables


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, list[dict], Path]:
    sim = build(load_scenario("small").with_overrides(start=START))
    rows = sim_tables(sim)["log_event"].to_dicts()
    out = tmp_path_factory.mktemp("logs")
    render_logs(sim, sim.broken_flows, out, sim.end_ms)
    return sim, rows, out


def _cri_messages(path: Path) -> list[str]:
    """The messages of a CRI file, partial (P) pieces joined as the log source joins them."""
    msgs, cur = [], ""
    for line in path.read_text().splitlines():
        _, _, tag, msg = line.split(" ", 3)
        cur += msg
        if tag == "F":
            msgs.append(cur)
            cur = ""
    assert cur == "", f"{path}: a partial line never finished"
    return msgs


def test_every_stored_row_is_a_rendered_line_of_its_pod_or_node(run) -> None:
    _, rows, out = run
    assert rows
    pods: dict[str, set[str]] = {}
    for p in (out / "logs" / "pods").glob("*/worker/0.log"):
        pods[p.parent.parent.name] = set(_cri_messages(p))
    kernel = {
        p.parent.name: {x.split(" kernel: ", 1)[1] for x in p.read_text().splitlines()}
        for p in (out / "logs" / "nodes").glob("*/kernel.log")
    }
    for r in rows:
        if r["pod"]:
            assert r["excerpt"] in pods[f"{r['namespace']}_{r['pod']}_{r['pod_uid']}"]
        else:
            assert r["excerpt"] in kernel[r["node"]]
    # chatter is rendered, never stored; long lines are cut into P pieces
    every = [m for ms in pods.values() for m in ms]
    assert len(every) > len([r for r in rows if r["pod"]])
    assert any(" P " in x for p in (out / "logs" / "pods").glob("*/worker/0.log")
               for x in p.read_text().splitlines())  # fmt: skip


def test_faults_log_what_they_should(run) -> None:
    sim, rows, _ = run
    kinds = Counter(r["kind"] for r in rows)
    errors = [json.loads(r["fields"]) for r in rows if r["kind"] == "ib_completion_error"]
    firsts = [e for e in errors if e["status"] == 12]
    assert firsts and len(errors) > len(firsts)  # each first error has its flush burst
    assert {e["status_name"] for e in errors} == {"IBV_WC_RETRY_EXC_ERR", "IBV_WC_WR_FLUSH_ERR"}
    # a lost GPU: its Xid 79 on its node, and its job's other ranks time out
    (xid,) = [r for r in rows if r["kind"] == "xid"]
    assert xid["node"] == "gpu-idc-a-s000-04" and json.loads(xid["fields"])["xid"] == 79
    socket = {r["pod"] for r in rows if r["kind"] == "nccl_net_selected"
              and json.loads(r["fields"])["net"] == "Socket"}  # fmt: skip
    assert socket == {"ar-d-worker-0", "ar-d-worker-1"}
    assert {r["pod"].rsplit("-", 2)[0] for r in rows if r["kind"] == "nccl_gdr_disabled"} == {
        "eval-b"
    }
    hang = [json.loads(r["fields"])["rank"] for r in rows if r["kind"] == "torch_watchdog_timeout"
            and r["pod"].startswith("rl-c")]  # fmt: skip
    assert sorted(hang) == [r for r in range(16) if r != 5]  # rank 5 never arrived
    assert kinds["nccl_init_complete"] >= sum(len(j.pods) * 8 for j in sim.workload.jobs if j.pods)


def test_wording_follows_the_version(run) -> None:
    _, rows, _ = run
    old = [r["excerpt"] for r in rows if "with error 12, opcode 0" in r["excerpt"]]
    new = [r["excerpt"] for r in rows if "with status=12 opcode=0" in r["excerpt"]]
    assert old and new, "the small demo's jobs run both NCCL versions' wording"
    assert all("localGid ::ffff:" in x for x in new)
    watch = [r["excerpt"] for r in rows if r["kind"] == "torch_watchdog_timeout"]
    assert any("[PG ID 0 PG GUID 0(default_pg) Rank" in x for x in watch)
    assert any(x.startswith("[E ProcessGroupNCCL.cpp:475] [Rank ") for x in watch)


def test_derived_truth_names_each_pair_once(run) -> None:
    sim, _, _ = run
    truth = [f for f in sim.ground_truth().faults if f.kind == "nccl_network_error"]
    assert truth and len({f.subject for f in truth}) == len(truth)
    assert all(f.detail["cause_kind"] == "link_flap" and f.origin == "consequence" for f in truth)


def test_the_logs_source_reads_back_every_stored_row(run) -> None:
    """`railscope logs --from` over the rendered CRI and kernel text finds every fast-path row:
    same kind, time and every field the simulator set (issue 45: the grammar and the simulator
    agree). Runs once the logs source is in this checkout (it arrives on another branch)."""
    from datetime import datetime

    from tests.cli import ROOT, rs

    if not (ROOT / "exporters" / "logs" / "source.py").exists():
        pytest.skip("the logs source is not in this checkout yet")

    _, rows, out = run
    parsed: dict[tuple[str, str, int], list[dict]] = {}
    # the whole tree in one run: each file recognised by its content, pods named by their path
    assert [*(out / "logs" / "pods").glob("*/worker/0.log")]
    assert [*(out / "logs" / "nodes").glob("*/kernel.log")]
    res = rs("logs", "--from", str(out / "logs"), "--output", "jsonl")
    assert res.returncode == 0, res.stderr
    for line in res.stdout.splitlines():
        p = json.loads(line)
        ts = int(datetime.fromisoformat(p["ts"].replace("Z", "+00:00")).timestamp() * 1000)
        parsed.setdefault((p.get("pod") or "", p["kind"], ts), []).append(p)
    for r in rows:
        ts = int(r["ts"].timestamp() * 1000)
        want = json.loads(r["fields"])
        got = parsed.get((r["pod"], r["kind"], ts), [])
        assert any(all(p.get(k) == v for k, v in want.items()) for p in got), (r["excerpt"], got)
