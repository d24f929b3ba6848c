"""Every dashboard query (panels and template variables) run on the embedded store filled by the
simulator's `small` scenario and the correlation engine, with the ClickHouse plugin's macros and
the variables expanded: none may fail, every panel whose tables the scenario fills must return
rows, and the panels show the faults the simulator injected."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import dashboards
from dashboards.clickhouse import ALL, expand
from telemetry.cli import main
from telemetry.records import KINDS
from telemetry.sim.score import load_finding_map
from telemetry.store import Store
from tests.conftest import ScenarioRun

CLUSTER = "default"  # the ScenarioRun's
# Panels whose tables the scenario fills but whose rows it does not produce, and why.
NOT_EXERCISED = {
    # the small scenario's 8-NIC servers give every GPU a NIC on its PCIe switch
    "placement / GPUs without a NIC on their PCIe switch",
    # small injects no pool fault (the pool scenario does)
    "pool / Pool findings (idle allocations, fragmentation-blocked gangs, starving queues)",
}

pytestmark = pytest.mark.scenario("small")  # the tests that take scenario_run read small's


@pytest.fixture
def sim(scenario_run: Callable[[str], ScenarioRun]) -> dict[str, Any]:
    """The `small` scenario ingested and correlated once per session (tests/conftest.py)."""
    run = scenario_run("small")
    assert run.cluster == CLUSTER and run.result.failed == {}
    truth = run.sim.ground_truth()
    start = datetime.fromtimestamp(truth.start_ms / 1000, UTC)
    end = datetime.fromtimestamp(truth.end_ms / 1000, UTC)
    return {"store": run.store, "start": start, "end": end, "truth": truth}


def _filled(store: Store) -> set[str]:
    out = set()
    for k in KINDS.values():
        if store.query_rows(f"SELECT count() FROM {store.table(k)} WHERE cluster = '{CLUSTER}'")[0][
            0
        ]:
            out.add(k.table)
    return out


ALL_VARS = {"cluster": CLUSTER, "tenant": ALL, "job": "team-a/llm-a", "node": ALL, "switch": ALL}


def test_every_query_runs_and_exercised_panels_return_rows(sim: dict[str, Any]) -> None:
    store: Store = sim["store"]
    filled = _filled(store)
    known = {k.table for k in KINDS.values()}
    results = dashboards.run(store, sim["start"], sim["end"], ALL_VARS, 60)
    assert len(results) >= 50
    errors = [f"{q.where}: {r}" for q, r in results if isinstance(r, str)]
    assert not errors, "\n".join(errors)
    empty = []
    for q, rows in results:
        tables = dashboards.tables_of(q.text) & known
        assert tables, f"{q.where} reads no store table"
        if tables <= filled and rows == 0 and q.where not in NOT_EXERCISED:
            empty.append(q.where)
    assert not empty, f"panels with data in their tables but no rows: {empty}"
    # the tables the simulator does not write are the exporter-only panels; say which
    assert "switch_port_samples" in filled and "findings" in filled
    assert "ecmp_group_samples" not in filled  # switch exporter only


def test_specific_variable_values_filter(sim: dict[str, Any]) -> None:
    store: Store = sim["store"]
    node = store.query_rows(
        f"SELECT any(node) FROM {store.table('pod', final=True)} WHERE cluster = '{CLUSTER}' "
        "AND namespace = 'team-a' AND job = 'llm-a'"
    )[0][0]
    values = {
        "cluster": CLUSTER,
        "tenant": "team-a",
        "job": "team-a/llm-a",
        "node": node,
        "switch": "leaf-idc-a-s000-r0",
    }
    res = {q.where: r for q, r in dashboards.run(store, sim["start"], sim["end"], values, 60)}
    errors = {w: r for w, r in res.items() if isinstance(r, str)}
    assert not errors
    all_res = {q.where: r for q, r in dashboards.run(store, sim["start"], sim["end"], ALL_VARS, 60)}
    # one node x ten buckets vs the job's 24 nodes (less the minutes a node exporter was silent:
    # small's collection_gap): a filter that did nothing returns more rows
    (pairs,) = store.query_rows(
        f"SELECT uniqExact(node, toStartOfMinute(ts)) FROM {store.table('gpu_sample')} "
        f"WHERE cluster = '{CLUSTER}' AND namespace = 'team-a' AND pod LIKE 'llm-a-%' "
        "AND ts >= {s:DateTime64(3, 'UTC')} AND ts < {e:DateTime64(3, 'UTC')}",
        {"s": sim["start"], "e": sim["end"]},
    )[0]
    assert res["gpus / GPU utilization by node"] == 10
    assert all_res["gpus / GPU utilization by node"] == pairs > 10 * 23
    assert res["fabric / Port tx utilization (busiest port per switch)"] == 10
    assert res["gpus / $job"] == 1  # tenant team-a has one job


def _query(sim: dict[str, Any], dashboard: str, title: str, values: dict[str, str]) -> list[tuple]:
    store: Store = sim["store"]
    models = dashboards.build_all(store.database)
    (q,) = [q for q in dashboards.queries({dashboard: models[dashboard]}) if q.panel == title]
    return store.query_rows(expand(q.text, sim["start"], sim["end"], values, 60))


def test_panels_show_the_injected_faults(sim: dict[str, Any]) -> None:
    store: Store = sim["store"]
    truth = sim["truth"]
    # the job view: 24 pods of llm-a, its soft constraint, its pods in two SUs
    pods = _query(sim, "job", "Pods", ALL_VARS)
    assert len(pods) == 24
    (job,) = _query(sim, "job", "Job and its networkTopology constraint", ALL_VARS)
    assert job[:2] == ("team-a", "llm-a") and job[4] == "soft"
    sus = _query(sim, "job", "Pods per scalable unit and IDC", ALL_VARS)
    assert len(sus) == 2 and sum(r[2] for r in sus) == 24
    # the ECMP collisions: the hottest uplink member of the table is a collided port (small has
    # the injected collision and the collisions its workload makes on its own)
    collided = {f.subject for f in truth.faults if f.kind == "ecmp_collision"}
    spread = _query(
        sim, "fabric", "ECMP member spread: leaf uplinks to spines (from LLDP)", ALL_VARS
    )
    top = spread[0]
    assert f"{top[0]}:{top[4]}" in collided and top[2] > 1.3
    # the job behind the injected collision: the findings on its path are drawn over its time
    # series (bus bandwidth among them) as regions, the collision among them
    behind = {**ALL_VARS, "job": "team-c/rl-c"}
    regions = _query(sim, "job", "annotation: Findings on the job and its path", behind)
    assert all(start <= end for start, end, *_ in regions)
    ecmp_kinds = {k for k, fault in load_finding_map()[0].items() if fault == "ecmp_collision"}
    assert any(
        tags.split(",")[0] in ecmp_kinds and any(f" on {c}: " in text for c in collided)
        for _, _, text, tags in regions
    ), regions
    # a job on other hops does not get rl-c's path findings
    elsewhere = _query(sim, "job", "annotation: Findings on the job and its path", ALL_VARS)
    assert {r[2] for r in elsewhere} != {r[2] for r in regions}
    # cross-tenant RDMA: the injected flow shows between two different tenants
    pairs = _query(sim, "placement", "Traffic between tenants (RDMA)", ALL_VARS)
    assert pairs and all(a != b for a, b, *_ in pairs)
    # critical findings stat == what the findings table says
    (n_crit,) = _query(sim, "overview", "Critical findings", ALL_VARS)[0]
    expect = store.query_rows(
        f"SELECT count() FROM {store.table('finding', final=True)} WHERE cluster = '{CLUSTER}' "
        "AND severity = 'critical'"
    )[0][0]
    assert n_crit == expect > 0
    # the lost GPU
    lost = next(f for f in truth.faults if f.kind == "gpu_lost")
    assert _query(sim, "overview", "GPUs lost", ALL_VARS)[0][0] == 1
    events = _query(sim, "gpus", "GPU events (XID, lost, throttling)", ALL_VARS)
    assert any(f"{r[1]}/gpu{r[2]}" == lost.subject for r in events)
    # replica audit lists the violating blocks; counters as rates are never negative
    assert _query(
        sim, "hdfs-dci", "Replica audit: blocks that break the placement policy", ALL_VARS
    )
    rates = _query(sim, "fabric", "NIC PFC pause frames sent, all priorities (per node)", ALL_VARS)
    assert min(r[2] for r in rates) >= 0
    storm = next(f for f in truth.faults if f.kind == "pfc_storm")
    hottest = max(rates, key=lambda r: r[2])
    assert hottest[1] == storm.subject.split("/")[0]


def test_cli_check_on_the_store(
    sim: dict[str, Any], chdb_dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: Any, tmp_path: Path
) -> None:
    store: Store = sim["store"]
    monkeypatch.setenv("RAILSCOPE__STORE__DATABASE", store.database)
    monkeypatch.setenv("RAILSCOPE_CLUSTER", CLUSTER)
    since = sim["start"].isoformat()
    until = sim["end"].isoformat()
    rc = main(["dashboards", "check", "--dsn", chdb_dsn, "--since", since, "--until", until])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "all queries ran" in out and "FAILED" not in out
    assert main(["dashboards", "check", "--dsn", chdb_dsn, "--var", "nope"]) == 2


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_alert_rules_fire_on_the_engines_findings(sim: dict[str, Any], tmp_path: Path) -> None:
    """The engine's findings of the simulated run, exported as `railscope findings --format prom`
    does, fed to promtool as series: the placement violation the simulator injected (job rl-c)
    and the cross-IDC reads raise their alerts with the labels the rules promise."""
    import yaml
    from prometheus_client.parser import text_string_to_metric_families

    import alerts
    from telemetry.correlate import findings as fstore
    from telemetry.correlate.findings import findings_prometheus

    rows = fstore.read(sim["store"], cluster=CLUSTER, limit=100_000)
    series = []
    for fam in text_string_to_metric_families(findings_prometheus(rows)):
        for s in fam.samples:
            labels = ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(s.labels.items()))
            series.append({"series": f"{s.name}{{{labels}}}", "values": f"{s.value:g}x10"})
    violation = next(f for f in sim["truth"].faults if f.kind == "placement_violation")
    job = violation.subject if "/" in violation.subject else f"team-c/{violation.subject}"
    readers = sum(1 for r in rows if r["kind"] == "hdfs_cross_idc_read")
    assert readers >= 3
    cases = {
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {
                        "eval_time": "8m",
                        "alertname": "RailscopePlacementViolation",
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "severity": "critical",
                                    "team": "railscope",
                                    "cluster": CLUSTER,
                                    "kind": "placement_violation",
                                    "subject": job,
                                },
                                "exp_summary": f"Placement violation: job {job} spans a tier "
                                "above its highestTierAllowed",
                            }
                        ],
                    },
                    {
                        "eval_time": "8m",
                        "alertname": "RailscopeCrossIdcReads",
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "severity": "warning",
                                    "team": "railscope",
                                    "cluster": CLUSTER,
                                },
                                "exp_summary": f"{readers} HDFS clients read across IDCs",
                            }
                        ],
                    },
                ],
            }
        ],
    }
    doc = alerts.render(alerts.load())
    text = alerts.render_tests(doc, cases)
    test = yaml.safe_load(text)
    test["rule_files"] = [str(alerts.RULES)]
    f = tmp_path / "findings.test.yaml"
    f.write_text(yaml.safe_dump(test))
    res = alerts.promtool("test", "rules", str(f))
    assert res.returncode == 0, res.stdout + res.stderr
