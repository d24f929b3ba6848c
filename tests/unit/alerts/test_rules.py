"""Alert rules: rendered from alerts/alerts.yaml, checked and unit-tested by the real promtool
(Debian `prometheus`), every rule with a firing and a non-firing case."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
import yaml

import alerts
from telemetry.cli import main
from telemetry.errors import ConfigError

needs_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool not installed (Debian package prometheus)"
)


def _rules(tmp: Path, cfg: dict) -> tuple[Path, Path]:
    doc = alerts.render(cfg)
    (tmp / alerts.RULES.name).write_text(alerts.render_text(cfg))
    (tmp / alerts.TESTS.name).write_text(alerts.render_tests(doc))
    return tmp / alerts.RULES.name, tmp / alerts.TESTS.name


def test_checked_in_files_are_rendered_from_the_config() -> None:
    assert alerts.RULES.read_text() == alerts.render_text()
    doc = alerts.render(alerts.load())
    assert alerts.TESTS.read_text() == alerts.render_tests(doc)


@needs_promtool
def test_promtool_check_and_test_pass_on_the_checked_in_rules() -> None:
    res = alerts.promtool("check", "rules", alerts.RULES.name, cwd=alerts.RULES.parent)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS: 22 rules found" in res.stdout
    res = alerts.promtool("test", "rules", alerts.TESTS.name, cwd=alerts.TESTS.parent)
    assert res.returncode == 0, res.stdout + res.stderr


def test_every_rule_has_a_firing_and_a_quiet_case() -> None:
    names = alerts.alert_names(alerts.render(alerts.load()))
    cov = alerts.coverage(yaml.safe_load(alerts.CASES.read_text()))
    assert set(cov) == set(names)
    for name in names:
        fire, quiet = cov[name]
        assert fire >= 1 and quiet >= 1, name
    # the list: PFC storm, ECN hot spot, ECMP imbalance, GPU lost/XID, placement,
    # cross-IDC reads, DCI headroom, replica violations, collector down, spool growing
    for needed in (
        "RailscopePfcStorm",
        "RailscopeEcnHotspot",
        "RailscopeEcmpImbalance",
        "RailscopeGpuLost",
        "RailscopeGpuXid",
        "RailscopePlacementViolation",
        "RailscopeCrossIdcReads",
        "RailscopeDciHeadroomLow",
        "RailscopeReplicaViolations",
        "RailscopeCollectorFailing",
        "RailscopeTargetDown",
        "RailscopeSpoolGrowing",
        "RailscopeSwitchPfcUnexpectedPriority",
        "RailscopeNicPfcUnexpectedPriority",
    ):
        assert needed in names


def test_thresholds_come_from_the_correlation_engine_where_shared() -> None:
    corr = yaml.safe_load(alerts.CORRELATE_THRESHOLDS.read_text())
    th = alerts.thresholds(alerts.load())
    assert th["pfc_storm_pauses_per_second"] == corr["pfc"]["storm_pauses_per_second"]
    assert th["dci_near_capacity_ratio"] == corr["dci"]["near_capacity_ratio"]
    rules = {r["alert"]: r for g in alerts.render(alerts.load())["groups"] for r in g["rules"]}
    assert rules["RailscopePfcStorm"]["expr"].endswith(
        f"> {int(corr['pfc']['storm_pauses_per_second'])}"
    )
    assert f"> {corr['dci']['near_capacity_ratio']}" in rules["RailscopeDciHeadroomLow"]["expr"]
    for r in rules.values():  # runbook text in every rule
        assert len(r["annotations"]["runbook"]) > 40 and r["labels"]["severity"]


@needs_promtool
def test_the_unit_tests_catch_a_wrong_threshold(tmp_path: Path) -> None:
    """A test that cannot fail is a defect: with the storm threshold raised far above the test
    data, promtool's firing case for the PFC storm must fail."""
    cfg = copy.deepcopy(alerts.load())
    cfg["thresholds"]["pfc_storm_pauses_per_second"] = 1e9
    _, tests = _rules(tmp_path, cfg)
    res = alerts.promtool("test", "rules", tests.name, cwd=tmp_path)
    assert res.returncode != 0
    assert "RailscopePfcStorm" in res.stdout + res.stderr


def test_lossless_priorities_come_from_the_correlation_thresholds() -> None:
    """The unexpected-priority rules name the engine's lossless priorities, never a literal: a
    list threshold becomes a label regex."""
    corr = yaml.safe_load(alerts.CORRELATE_THRESHOLDS.read_text())
    want = "|".join(str(p) for p in corr["pfc"]["lossless_priorities"])
    rules = {r["alert"]: r for g in alerts.render(alerts.load())["groups"] for r in g["rules"]}
    for name in ("RailscopeSwitchPfcUnexpectedPriority", "RailscopeNicPfcUnexpectedPriority"):
        expr = rules[name]["expr"]
        assert expr.count(f'priority!~"{want}"') == 2, expr
        assert expr.endswith(f">= {corr['pfc']['unexpected_pauses']}")
    cfg = copy.deepcopy(alerts.load())
    cfg["thresholds"]["pfc_lossless_priorities"] = [3, 4]
    rules = {r["alert"]: r for g in alerts.render(cfg)["groups"] for r in g["rules"]}
    for name in ("RailscopeSwitchPfcUnexpectedPriority", "RailscopeNicPfcUnexpectedPriority"):
        assert rules[name]["expr"].count('priority!~"3|4"') == 2
    cfg["thresholds"]["pfc_lossless_priorities"] = [3, "x"]
    with pytest.raises(ConfigError, match="pfc_lossless_priorities: expected a number, a list"):
        alerts.render(cfg)


@needs_promtool
def test_unexpected_priority_cases_fail_with_other_lossless_priorities(tmp_path: Path) -> None:
    """With priority 6 declared lossless, the firing case (pauses on 6) must fail; with priority 3
    not lossless, the quiet case (pauses on 3) must."""
    for lossless in ([3, 6], [0]):
        cfg = copy.deepcopy(alerts.load())
        cfg["thresholds"]["pfc_lossless_priorities"] = lossless
        _, tests = _rules(tmp_path, cfg)
        res = alerts.promtool("test", "rules", tests.name, cwd=tmp_path)
        assert res.returncode != 0, lossless
        assert "RailscopeSwitchPfcUnexpectedPriority" in res.stdout + res.stderr


def test_config_errors_name_the_problem() -> None:
    cfg = alerts.load()
    bad = copy.deepcopy(cfg)
    bad["rules"][0]["expr"] = "rate(x[1m]) > {no_such_threshold}"
    with pytest.raises(ConfigError, match=r"rules\.0: expr uses \{no_such_threshold\}"):
        alerts.render(bad)
    bad = copy.deepcopy(cfg)
    bad["thresholds"]["unused_one"] = 3
    with pytest.raises(ConfigError, match="not used by any rule: unused_one"):
        alerts.render(bad)
    bad = copy.deepcopy(cfg)
    bad["thresholds"]["ecn_marked_ratio"] = {"correlate": "ecn.nope"}
    with pytest.raises(ConfigError, match=r"no key 'ecn\.nope'"):
        alerts.render(bad)
    bad = copy.deepcopy(cfg)
    bad["rules"][1]["severity"] = "page-me"
    with pytest.raises(ConfigError, match="severity must be one of"):
        alerts.render(bad)


def test_rules_name_only_declared_finding_kinds() -> None:
    """A `kind` matcher names kinds telemetry/correlate/kinds.yaml declares (a renamed or dead
    kind would leave a rule that never fires)."""
    cfg = alerts.load()
    rule = next(r for r in cfg["rules"] if 'kind!~"' in r["expr"])
    for expr in (
        'railscope_finding_active{kind="pause_storm"} > 0',
        rule["expr"].replace("collective_timeout", "collective_timeouts"),
    ):
        bad = copy.deepcopy(cfg)
        i = next(i for i, r in enumerate(bad["rules"]) if r["alert"] == rule["alert"])
        bad["rules"][i]["expr"] = expr
        with pytest.raises(ConfigError, match=rf"rules\.{i} \({rule['alert']}\): expr: undeclared"):
            alerts.render(bad)


@needs_promtool
def test_cli_build_and_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["alerts", "build", "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "railscope.rules.yaml").read_text() == alerts.RULES.read_text()
    assert main(["alerts", "check"]) == 0
    out = capsys.readouterr().out
    assert "promtool check rules: ok" in out and "promtool test rules: ok" in out
    assert "22 rules: all checked" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules: [")
    assert main(["alerts", "build", "--out", str(tmp_path / "x"), "--from", str(bad)]) == 2
    assert "not valid YAML" in capsys.readouterr().err


def served_metrics() -> set[str]:
    """Metric names railscope serves: railscope_<subsystem>_<field> of every record kind's
    values, the self-metrics every component exports, the findings metrics."""
    from telemetry.records import KINDS

    names = {f"railscope_{k.subsystem}_{f.name}" for k in KINDS.values() for f in k.values()}
    names |= {
        "railscope_component_received_total",
        "railscope_component_sent_records_total",
        "railscope_component_dropped_records_total",
        "railscope_component_failed_total",
        "railscope_collector_duration_seconds",
        "railscope_collector_success",
        "railscope_component_spool_bytes",  # ClickHouse sink's extra gauge
        "railscope_component_spool_unconfirmed_rows",  # another of its extras
        "railscope_finding_active",
        "railscope_findings",
    }
    return names


def test_rules_use_metrics_railscope_serves() -> None:
    import re

    served = served_metrics()
    for g in alerts.render(alerts.load())["groups"]:
        for r in g["rules"]:
            used = set(re.findall(r"\brailscope_[a-z0-9_]+", r["expr"]))
            assert used or r["alert"] == "RailscopeTargetDown", r["alert"]  # that one uses `up`
            assert used <= served, f"{r['alert']}: not served: {used - served}"
