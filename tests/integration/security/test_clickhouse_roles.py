"""The ClickHouse users of deploy/clickhouse/config.yaml, enforced by the real engine.

The embedded engine (clickhouse-local inside chdb) loads a users.xml given with `config-file`,
but always runs as `default` and cannot impersonate. So each role is checked by loading the
deployed role's own definition (profile, quota, grants, row policies, copied verbatim from the
manifest) as `default` in a fresh process on a store that the railscope migrations built: what
the engine allows or refuses there is what the role can do on a server. Passwords and networks
are left out (they are the server's login, not the engine's access checks).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from telemetry.records import KINDS

ROOT = Path(__file__).parents[3]
CONFIG = ROOT / "deploy" / "clickhouse" / "config.yaml"
ENGINE_TABLES = {"findings", "attributed_flows", "incidents", "incident_findings"}
INVENTORY_TABLES = {"pods", "pod_ip_leases", "namespaces", "nodes", "hypernodes", "jobs"}
ACCESS_DENIED, READONLY, SETTING_CONSTRAINT = 497, 164, 452

# run in a subprocess: SETUP builds the store as the unrestricted default user; CHECK runs
# statements as the role and prints {statement: [rows] | error code}
SETUP = textwrap.dedent("""
    import sys
    import clickhouse_connect
    from telemetry.records import KINDS
    from telemetry.store.client import Store
    from telemetry.store.migrations import MIGRATION_12_ROLLUPS
    client = clickhouse_connect.get_client(
        dsn="chdb://" + sys.argv[1], chdb_options={"config-file": sys.argv[2]})
    store = Store("chdb://" + sys.argv[1], database="railscope", client=client)
    store.migrate()
    c = store.client
    # the deployment's migration Job runs as the admin `railscope`, who thereby defines the
    # rollups' views (they run with its rights); here the migration ran as default
    for r in MIGRATION_12_ROLLUPS:
        if r.table.name != "job_port_intervals":  # migration 13: the engine writes that one
            c.command(f"ALTER TABLE railscope.`{r.table.name}_mv` MODIFY SQL SECURITY DEFINER DEFINER = railscope")
    for k in KINDS.values():
        t, ts = f"railscope.`{k.table}`", f"`{k.time_field}`"
        cols = [f.name for f in k.fields]
        if "namespace" in cols:
            c.command(f"INSERT INTO {t} (namespace, {ts}) VALUES ('team-a', now64()), ('team-b', now64() - 1)")
        elif k.table == "attributed_flows":
            c.command(f"INSERT INTO {t} (src_namespace, dst_namespace, {ts}) VALUES "
                      "('team-a', 'team-b', now64()), ('team-b', 'team-a', now64() - 1), ('team-b', 'team-c', now64() - 2)")
        else:
            c.command(f"INSERT INTO {t} ({ts}) VALUES (now64())")
""")
CHECK = textwrap.dedent("""
    import json, re, sys
    import chdb
    conn = chdb.connect(f"file:{sys.argv[1]}?config-file={sys.argv[2]}")
    out = {}
    for q in json.loads(sys.argv[3]):
        cur = conn.cursor()
        try:
            cur.execute(q)
            out[q] = [list(r) for r in cur.fetchall()]
        except Exception as e:
            m = re.search(r"Code: (\\d+)", str(e))
            out[q] = int(m[1]) if m else str(e)
    print(json.dumps(out, default=str))
""")


def users_xml() -> ET.Element:
    doc = next(d for d in yaml.safe_load_all(CONFIG.read_text()) if d["kind"] == "ConfigMap")
    return ET.fromstring(doc["data"]["railscope-users.xml"])


def _local_user(root: ET.Element, role: str, name: str) -> ET.Element:
    """The deployed `role` as user `name` of the engine (its password and networks aside)."""
    user = copy.deepcopy(root.find(f"users/{role}"))
    assert user is not None, role
    for tag in ("password", "networks"):
        for el in user.findall(tag):
            user.remove(el)
    ET.SubElement(user, "password")
    ET.SubElement(ET.SubElement(user, "networks"), "ip").text = "::/0"
    if user.find("profile") is None:
        ET.SubElement(user, "profile").text = "default"
    user.tag = name
    return user


def role_as_default(role: str) -> str:
    """users.xml in which `default` is the deployed `role`, beside the deployed admin
    `railscope`: the definer of the rollups' materialized views, whose rights they run with."""
    root = users_xml()
    user = _local_user(root, role, "default")
    # clickhouse-local does not read the server's access_control_improvements, without which
    # `changeable_in_readonly` does not load: here the grafana profile keeps its `max` only
    for setting in root.findall("profiles/*/constraints/*"):
        for el in setting.findall("changeable_in_readonly"):
            setting.remove(el)
    out = ET.Element("clickhouse")
    for section in ("profiles", "quotas"):
        el = root.find(section)
        assert el is not None
        out.append(el)
    profiles = out.find("profiles")
    assert profiles is not None
    if profiles.find("default") is None:
        ET.SubElement(profiles, "default")
    users = ET.SubElement(out, "users")
    users.append(user)
    if role != "railscope":
        users.append(_local_user(root, "railscope", "railscope"))
    return ET.tostring(out, encoding="unicode")


def setup_users() -> str:
    """users.xml for building the store: `default` unrestricted (it may name another definer)
    and the deployed admin `railscope`."""
    root = users_xml()
    out = ET.Element("clickhouse")
    for section in ("profiles", "quotas"):
        el = root.find(section)
        assert el is not None
        out.append(copy.deepcopy(el))
    profiles = out.find("profiles")
    assert profiles is not None
    if profiles.find("default") is None:
        ET.SubElement(profiles, "default")
    for setting in out.findall("profiles/*/constraints/*"):  # as role_as_default
        for el in setting.findall("changeable_in_readonly"):
            setting.remove(el)
    users = ET.SubElement(out, "users")
    default = ET.SubElement(users, "default")
    ET.SubElement(default, "password")
    ET.SubElement(ET.SubElement(default, "networks"), "ip").text = "::/0"
    ET.SubElement(default, "profile").text = "default"
    ET.SubElement(default, "access_management").text = "1"
    users.append(_local_user(root, "railscope", "railscope"))
    return ET.tostring(out, encoding="unicode")


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("roles") / "store"
    d = path.parent / "setup"
    d.mkdir()
    path.mkdir()
    (d / "users.xml").write_text(setup_users())
    (d / "config.xml").write_text(
        f"<clickhouse><users_config>{d / 'users.xml'}</users_config></clickhouse>"
    )
    res = subprocess.run(
        [sys.executable, "-c", SETUP, str(path), str(d / "config.xml")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return path


def run_as(role: str, store: Path, statements: list[str]) -> dict[str, Any]:
    """Each statement's rows, or its ClickHouse error code, run as the deployed `role`."""
    d = store.parent / role
    d.mkdir(exist_ok=True)
    (d / "users.xml").write_text(role_as_default(role))
    (d / "config.xml").write_text(
        f"<clickhouse><users_config>{d / 'users.xml'}</users_config></clickhouse>"
    )
    res = subprocess.run(
        [sys.executable, "-c", CHECK, str(store), str(d / "config.xml"), json.dumps(statements)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


def collected_tables() -> list[str]:
    return sorted({k.table for k in KINDS.values()} - ENGINE_TABLES)


def test_writer_inserts_into_collected_tables_and_reads_only_what_it_must(
    store_path: Path,
) -> None:
    ins = {t: f"INSERT INTO railscope.`{t}` (`{KINDS_BY_TABLE[t].time_field}`) VALUES (now64())"
           for t in collected_tables()}  # fmt: skip
    probes = {
        "migrations": "SELECT max(version) FROM railscope.schema_migrations",
        "resume": "SELECT count() FROM railscope.pods FINAL WHERE valid_to IS NULL",
        "read_gpu": "SELECT count() FROM railscope.gpu_samples",
        "write_findings": "INSERT INTO railscope.findings (updated_at) VALUES (now64())",
        "drop": "DROP TABLE railscope.gpu_samples",
        "truncate": "TRUNCATE TABLE railscope.flow_samples",
        "alter": "ALTER TABLE railscope.gpu_samples DELETE WHERE 1",
        "create": "CREATE TABLE railscope.x (a UInt8) ENGINE = Memory",
        "sync": "SELECT getSetting('distributed_foreground_insert')",
    }
    out = run_as("railscope_writer", store_path, [*ins.values(), *probes.values()])
    assert {t: out[q] for t, q in ins.items()} == {t: [] for t in ins}
    got = {name: out[q] for name, q in probes.items()}
    assert isinstance(got["migrations"], list) and got["migrations"][0][0] >= 1
    assert got["resume"] == [[3]]
    assert got["sync"] in ([[True]], [[1]])  # Distributed inserts wait for every shard
    for name in ("read_gpu", "write_findings", "drop", "truncate", "alter", "create"):
        assert got[name] == ACCESS_DENIED, (name, got[name])


# the store code a collector runs, through clickhouse-connect on the engine loaded as the role
SINK = textwrap.dedent("""
    import io, json, sys
    import clickhouse_connect, pyarrow as pa
    from telemetry.records import GPU_SAMPLE
    from telemetry.store.client import Store
    from tests.conftest import now_ms
    from tests.integration.core.test_exactly_once import gpu_batch
    client = clickhouse_connect.get_client(
        dsn="chdb://" + sys.argv[1], chdb_options={"config-file": sys.argv[2]})
    store = Store("chdb://" + sys.argv[1], database="railscope", client=client)
    out = {"pending": len(store.pending())}
    t = GPU_SAMPLE.conform(gpu_batch(0, 100, now_ms()).table)
    out["insert"] = [store.insert(GPU_SAMPLE, t, token="t1"), store.insert(GPU_SAMPLE, t, token="t1")]
    buf = io.BytesIO()
    with pa.ipc.new_stream(buf, t.schema) as w:
        w.write_table(t)
    store.insert_arrow_stream(GPU_SAMPLE, buf.getvalue(), token="t2")  # a spool replay
    try:
        store.query_rows("SELECT count() FROM railscope.gpu_samples")
        out["read"] = "allowed"
    except Exception as e:
        out["read"] = str(e).split(".")[0]
    print(json.dumps(out))
""")


def test_writer_runs_the_collectors_store_code(store_path: Path) -> None:
    """Store.pending (the start-up check), Store.insert with a dedup token and the spool's
    ArrowStream replay, as the writer; reading the data back is refused."""
    run_as("railscope_writer", store_path, [])  # writes the role's config files
    d = store_path.parent / "railscope_writer"
    res = subprocess.run(
        [sys.executable, "-c", SINK, str(store_path), str(d / "config.xml")],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out == {"pending": 0, "insert": [100, 100], "read": "Code: 497"}


# What a role may do besides reading every record table: statement -> the outcomes allowed (rows,
# or an error code), run in this order as that role.
ROLE_PROBES: dict[str, dict[str, tuple[Any, ...]]] = {
    # the correlation engine writes findings and incidents and rewrites attributed flows, nothing else
    "railscope_engine": {
        "INSERT INTO railscope.findings (updated_at) VALUES (now64())": ([],),
        "INSERT INTO railscope.incidents (updated_at) VALUES (now64())": ([],),
        "INSERT INTO railscope.incident_findings (updated_at) VALUES (now64())": ([],),
        "DELETE FROM railscope.attributed_flows WHERE src_namespace = 'team-c'": ([],),
        "INSERT INTO railscope.attributed_flows (ts) VALUES (now64())": ([],),
        # re-attributing a window replaces its intervals of the flows' rollup
        "DELETE FROM railscope.job_port_intervals WHERE src_namespace = 'team-c'": ([],),
        "INSERT INTO railscope.job_port_intervals (bucket) VALUES (now())": ([],),
        # the lease index the attribution reads, rebuilt when the inventory changes
        "INSERT INTO railscope.attribution_index (built_at) VALUES (now64())": ([],),
        # and whether that may be needed: the inventory tables' parts (lease_index.unchanged_sql)
        "SELECT count() > 0 FROM system.parts WHERE database = 'railscope' "
        "AND table = 'pod_ip_leases' AND active": ([[1]],),
        "INSERT INTO railscope.switch_port_intervals (bucket) VALUES (now())": (ACCESS_DENIED,),
        "INSERT INTO railscope.gpu_samples (ts) VALUES (now64())": (ACCESS_DENIED,),
        "DROP TABLE railscope.findings": (ACCESS_DENIED,),
    },
    # grafana is readonly=1: no writes, no settings changed, its time limit kept
    "grafana": {
        "INSERT INTO railscope.findings (updated_at) VALUES (now64())": (ACCESS_DENIED, READONLY),
        "SET max_memory_usage = 1": (READONLY,),
        "SELECT 1 SETTINGS max_execution_time = 600": (READONLY, SETTING_CONSTRAINT),
        "DROP TABLE railscope.findings": (ACCESS_DENIED, READONLY),
    },
}


@pytest.mark.parametrize("role", list(ROLE_PROBES))
def test_role_reads_everything_and_does_only_what_it_may(role: str, store_path: Path) -> None:
    probes = ROLE_PROBES[role]
    reads = [f"SELECT count() FROM railscope.`{k.table}`" for k in KINDS.values()]
    out = run_as(role, store_path, [*reads, *probes])
    assert [q for q in reads if not isinstance(out[q], list)] == []
    assert {q: out[q] for q, allowed in probes.items() if out[q] not in allowed} == {}


def test_tenant_viewer_sees_only_its_tenants_rows(store_path: Path) -> None:
    tenant_tables = sorted(t for t, k in KINDS_BY_TABLE.items() if "namespace" in k.columns)
    reads = {t: f"SELECT DISTINCT namespace FROM railscope.`{t}`" for t in tenant_tables}
    flows = "SELECT src_namespace, dst_namespace FROM railscope.attributed_flows ORDER BY 1"
    others = {
        t: f"SELECT count() FROM railscope.`{t}`"
        for t in ("switch_port_samples", "findings", "flow_samples", "nodes")
    }
    out = run_as("tenant_team_a", store_path, [*reads.values(), flows, *others.values()])
    assert {t: out[q] for t, q in reads.items()} == {t: [["team-a"]] for t in reads}
    assert out[flows] == [["team-a", "team-b"], ["team-b", "team-a"]]
    assert {t: out[q] for t, q in others.items()} == {t: ACCESS_DENIED for t in others}
    # the same reads as the unrestricted admin see every tenant: the policy did the filtering
    admin = run_as("railscope", store_path, [*reads.values(), flows])
    assert ["team-b"] in admin[reads["pods"]] and ["team-b", "team-c"] in admin[flows]


KINDS_BY_TABLE = {k.table: k for k in KINDS.values()}


def test_writer_grants_follow_the_record_kinds() -> None:
    """A new record kind needs its INSERT grant (and the tenant tables their row policy)."""
    root = users_xml()
    grants = [q.text or "" for q in root.findall("users/railscope_writer/grants/query")]
    inserted = {
        t.strip().removeprefix("railscope.")
        for g in grants
        if g.startswith("GRANT INSERT ON ")
        for t in g.removeprefix("GRANT INSERT ON ").split(",")
    }
    assert {t for t in inserted if not t.endswith("_local")} == set(collected_tables())
    assert {t.removesuffix("_local") for t in inserted} == set(collected_tables())
    tenant = root.find("users/tenant_team_a/databases/railscope")
    assert tenant is not None
    policies = {p.tag for p in tenant}
    with_ns = {t for t, k in KINDS_BY_TABLE.items() if "namespace" in k.columns}
    assert {p.removesuffix("_local") for p in policies} == with_ns | {"attributed_flows"}
    selects = [q.text or "" for q in root.findall("users/tenant_team_a/grants/query")]
    granted = {
        t.strip().removeprefix("railscope.") for g in selects for t in g.split(" ON ")[1].split(",")
    }
    assert granted == policies  # nothing readable without its row policy
