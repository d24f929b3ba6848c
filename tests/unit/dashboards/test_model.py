"""Dashboard JSON: checked against a schema of the Grafana dashboard model (the parts Grafana
needs to load it), the ClickHouse plugin's target shape, the grid, template variables, and the
Prometheus expressions through the real promtool."""

from __future__ import annotations

import json
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

import jsonschema
import pytest
import yaml

import dashboards
from dashboards.clickhouse import ALL, ClickHouseTarget, expand, variables_in
from telemetry.cli import main

DATASOURCE = {
    "type": "object",
    "required": ["type", "uid"],
    "properties": {"type": {"type": "string"}, "uid": {"type": "string", "minLength": 1}},
}
CH_TARGET = {
    "type": "object",
    "required": ["refId", "rawSql", "format", "queryType", "editorType", "datasource"],
    "properties": {
        "format": {"type": "integer", "enum": [0, 1]},
        "queryType": {"enum": ["table", "timeseries"]},
        "editorType": {"const": "sql"},
        "rawSql": {"type": "string", "minLength": 10},
        "refId": {"type": "string", "pattern": "^[A-Z]$"},
        "datasource": DATASOURCE,
    },
}
PROM_TARGET = {
    "type": "object",
    "required": ["refId", "expr"],
    "properties": {"expr": {"type": "string", "minLength": 3}, "refId": {"type": "string"}},
}
PANEL = {
    "type": "object",
    "required": ["id", "type", "title", "gridPos", "targets", "datasource"],
    "properties": {
        "id": {"type": "integer", "minimum": 1},
        "type": {"enum": ["timeseries", "table", "stat"]},
        "title": {"type": "string", "minLength": 3},
        "datasource": DATASOURCE,
        "gridPos": {
            "type": "object",
            "required": ["h", "w", "x", "y"],
            "properties": {
                "h": {"type": "integer", "minimum": 1},
                "w": {"type": "integer", "minimum": 1, "maximum": 24},
                "x": {"type": "integer", "minimum": 0, "maximum": 23},
                "y": {"type": "integer", "minimum": 0},
            },
        },
        "targets": {"type": "array", "minItems": 1},
        "fieldConfig": {"type": "object", "required": ["defaults"]},
    },
}
VARIABLE = {
    "type": "object",
    "required": ["name", "type", "query", "datasource", "refresh"],
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z_]+$"},
        "type": {"const": "query"},
        "refresh": {"enum": [1, 2]},
        "datasource": DATASOURCE,
        "query": {"type": "object", "required": ["rawSql"]},
    },
}
DASHBOARD = {
    "type": "object",
    "required": ["uid", "title", "schemaVersion", "panels", "templating", "time", "tags"],
    "properties": {
        "uid": {"type": "string", "pattern": "^[a-z0-9-]{1,40}$"},
        "title": {"type": "string"},
        "schemaVersion": {"type": "integer", "minimum": 36},
        "panels": {"type": "array", "minItems": 5, "items": PANEL},
        "templating": {
            "type": "object",
            "required": ["list"],
            "properties": {"list": {"type": "array", "items": VARIABLE}},
        },
        "time": {"type": "object", "required": ["from", "to"]},
        "tags": {"type": "array", "contains": {"const": "railscope"}},
    },
}


@pytest.fixture(scope="module")
def models() -> dict[str, dict]:
    return dashboards.build_all()


def test_dashboards_validate_against_the_model_schema(models: dict[str, dict]) -> None:
    assert set(models) == {
        "overview",
        "job",
        "fabric",
        "gpus",
        "hdfs-dci",
        "placement",
        "pool",
        "self",
    }
    uids = set()
    for name, d in models.items():
        jsonschema.validate(d, DASHBOARD)
        uids.add(d["uid"])
        for p in d["panels"]:
            schema = (
                CH_TARGET
                if p["datasource"]["type"] == dashboards.clickhouse.PLUGIN
                else PROM_TARGET
            )
            for t in p["targets"]:
                jsonschema.validate(t, schema)
            refs = [t["refId"] for t in p["targets"]]
            assert len(refs) == len(set(refs)), (name, p["title"])
        ids = [p["id"] for p in d["panels"]]
        assert len(ids) == len(set(ids)), name
    assert len(uids) == len(models)


def test_schema_rejects_what_the_plugin_rejects(models: dict[str, dict]) -> None:
    """grafanalib's SqlTarget writes format as a string: the schema (like the plugin) refuses it."""
    from grafanalib.core import SqlTarget

    t = SqlTarget(rawSql="SELECT 1 AS x FROM system.one", refId="A").to_json_data()
    t.update(datasource={"type": "grafana-clickhouse-datasource", "uid": "x"})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(t, CH_TARGET)
    with pytest.raises(ValueError, match="format must be 0"):
        ClickHouseTarget("SELECT 1", format=3)
    ts = ClickHouseTarget.timeseries("SELECT 1").to_json_data()
    assert ts["format"] == 0 and ts["queryType"] == "timeseries"


def test_panels_do_not_overlap_and_fit_the_grid(models: dict[str, dict]) -> None:
    for name, d in models.items():
        cells: set[tuple[int, int]] = set()
        for p in d["panels"]:
            g = p["gridPos"]
            assert g["x"] + g["w"] <= 24, (name, p["title"])
            mine = {
                (x, y)
                for x in range(g["x"], g["x"] + g["w"])
                for y in range(g["y"], g["y"] + g["h"])
            }
            assert not cells & mine, f"{name}: {p['title']} overlaps another panel"
            cells |= mine


def test_every_variable_used_is_defined_and_datasources_are_provisioned(
    models: dict[str, dict],
) -> None:
    prov = dashboards.provisioning()
    uids = {ds["uid"] for ds in prov["datasources"]["datasources"]}
    for name, d in models.items():
        defined = {v["name"] for v in d["templating"]["list"]}
        for q in dashboards.queries({name: d}):
            used = variables_in(q.text)
            assert used <= defined, f"{q.where}: undefined {used - defined}"
        for p in d["panels"]:
            assert p["datasource"]["uid"] in uids
            for t in p["targets"]:
                assert t.get("datasource", p["datasource"])["uid"] in uids
    job = models["job"]["templating"]["list"]
    assert [v["name"] for v in job] == ["cluster", "tenant", "job"]
    assert job[2]["includeAll"] is False  # the end-to-end view is of one job
    names = {v["name"] for d in models.values() for v in d["templating"]["list"]}
    assert names == {"cluster", "tenant", "job", "node", "switch"}


def test_macro_expansion() -> None:
    s = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
    e = datetime(2026, 11, 21, 11, 0, tzinfo=UTC)
    sql = (
        "SELECT $__timeInterval(ts) AS time FROM t WHERE $__timeFilter(ts) AND x = ${cluster:sqlstring} "
        "AND y > $__fromTime AND z < $__toTime_ms AND w = $__interval_s AND $node = 'a'"
    )
    out = expand(sql, s, e, {"cluster": "c1", "node": "n'1"}, 30)
    f, t = int(s.timestamp()), int(e.timestamp())
    assert "toStartOfInterval(toDateTime(ts), INTERVAL 30 second)" in out
    assert f"(ts >= toDateTime({f}) AND ts <= toDateTime({t}))" in out
    assert f"y > toDateTime({f})" in out and f"fromUnixTimestamp64Milli({t * 1000})" in out
    assert "x = 'c1'" in out and "w = 30" in out and "n\\'1 = 'a'" in out
    with pytest.raises(ValueError, match=r"\$tenant has no value"):
        expand("SELECT ${tenant:sqlstring}", s, e, {})
    with pytest.raises(ValueError, match="unknown macro"):
        expand("SELECT $__unixEpochFilter(ts)", s, e, {})
    assert variables_in(sql) == {"cluster", "node"}


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_prometheus_expressions_parse(models: dict[str, dict], tmp_path: Path) -> None:
    """Each Prometheus panel expression (variables substituted) as a recording rule: promtool
    parses it with the real PromQL parser."""
    import alerts

    exprs = [q for q in dashboards.queries(models) if q.kind == "prometheus"]
    assert len(exprs) >= 10
    rules = [
        {
            "record": f"railscope:dashboard_check_{i}",
            "expr": re.sub(r"\$\{?cluster\}?", "c", q.text),
        }
        for i, q in enumerate(exprs)
    ]
    f = tmp_path / "exprs.yaml"
    f.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    res = alerts.promtool("check", "rules", str(f))
    assert res.returncode == 0, res.stdout + res.stderr
    f.write_text(
        yaml.safe_dump({"groups": [{"name": "x", "rules": [{"record": "a:b", "expr": "sum(("}]}]})
    )
    assert alerts.promtool("check", "rules", str(f)).returncode != 0


def test_cli_build_writes_dashboards_and_provisioning(tmp_path: Path) -> None:
    assert main(["dashboards", "build", "--out", str(tmp_path), "--dashboards-path", "/d"]) == 0
    files = sorted(p.name for p in (tmp_path / "dashboards").glob("*.json"))
    assert files == [
        "railscope-fabric.json",
        "railscope-gpus.json",
        "railscope-hdfs-dci.json",
        "railscope-job.json",
        "railscope-overview.json",
        "railscope-placement.json",
        "railscope-pool.json",
        "railscope-self.json",
    ]
    for f in (tmp_path / "dashboards").glob("*.json"):
        jsonschema.validate(json.loads(f.read_text()), DASHBOARD)
    prov = yaml.safe_load((tmp_path / "provisioning/dashboards/railscope.yaml").read_text())
    assert prov["providers"][0]["options"]["path"] == "/d"
    ds = yaml.safe_load((tmp_path / "provisioning/datasources/railscope.yaml").read_text())
    types = {d["uid"]: d["type"] for d in ds["datasources"]}
    assert types == {
        "railscope-clickhouse": "grafana-clickhouse-datasource",
        "railscope-prometheus": "prometheus",
    }
    assert ALL == "__all"


def test_single_machine_provisioning_points_at_serve(tmp_path: Path) -> None:
    argv = ["dashboards", "build", "--out", str(tmp_path), "--single-machine"]
    assert main([*argv, "--query-listen", "127.0.0.1:18123", "--database", "rs"]) == 0
    ds = yaml.safe_load((tmp_path / "provisioning/datasources/railscope.yaml").read_text())
    by_uid = {d["uid"]: d for d in ds["datasources"]}
    ch = by_uid["railscope-clickhouse"]["jsonData"]
    assert (ch["host"], ch["port"], ch["protocol"], ch["defaultDatabase"]) == (
        "127.0.0.1",
        18123,
        "http",
        "rs",
    )
    assert by_uid["railscope-prometheus"]["url"] == "http://127.0.0.1:9090"
    # credentials are never written into the file, single machine or not
    assert by_uid["railscope-clickhouse"]["secureJsonData"]["password"].startswith("${")
    # the cluster variant keeps reading the address from Grafana's environment
    cluster = dashboards.provisioning()["datasources"]["datasources"][0]["jsonData"]
    assert cluster["host"] == "${RAILSCOPE_CLICKHOUSE_HOST}"


def test_single_machine_bad_listen_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "dashboards",
        "build",
        "--out",
        str(tmp_path),
        "--single-machine",
        "--query-listen",
        "x",
    ]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        "railscope: error: --query-listen 'x': expected HOST:PORT"
    )


def test_single_machine_prometheus_config_is_valid() -> None:
    if not shutil.which("promtool"):
        pytest.skip("promtool not installed (Debian package prometheus)")
    import subprocess

    cfg = Path(__file__).parents[3] / "deploy" / "single-machine" / "prometheus.yml"
    r = subprocess.run(["promtool", "check", "config", str(cfg)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"SUCCESS: [1-9][0-9]* rules found", r.stdout + r.stderr)


def test_prometheus_panels_use_metrics_railscope_serves(models: dict[str, dict]) -> None:
    from tests.unit.alerts.test_rules import served_metrics

    served = served_metrics()
    for q in dashboards.queries(models):
        if q.kind == "prometheus":
            used = set(re.findall(r"\brailscope_[a-z0-9_]+", q.text))
            assert used <= served, f"{q.where}: not served: {used - served}"
