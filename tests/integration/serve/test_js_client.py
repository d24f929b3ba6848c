"""The official ClickHouse JavaScript client (`@clickhouse/client`, from npm, run with node) against
the endpoint: a third-party client, not ours, creates, inserts, queries and sees errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.integration.serve.conftest import Endpoint

_OFFLINE = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ECONNRESET", "network")

SCRIPT = r"""
import { createClient } from '@clickhouse/client'
const [url, database] = process.argv.slice(2)
const out = {}
const admin = createClient({ url, username: 'admin', password: 's3cret', database })
await admin.command({ query: 'CREATE TABLE js (id UInt32, name String) ENGINE = MergeTree ORDER BY id' })
await admin.insert({ table: 'js', values: [{ id: 1, name: 'one' }, { id: 2, name: 'two' }], format: 'JSONEachRow' })
await admin.insert({ table: 'js', values: [[3, 'three']], format: 'JSONCompactEachRow' })
const rs = await admin.query({ query: 'SELECT id, name FROM js ORDER BY id', format: 'JSONEachRow' })
out.rows = await rs.json()
const p = await admin.query({ query: 'SELECT {n:UInt32} * 2 AS x', format: 'JSON', query_params: { n: 21 } })
out.param = (await p.json()).data[0].x
out.ping = (await admin.ping()).success
try { await admin.query({ query: 'SELECT * FROM nope' }) } catch (e) { out.error = { code: e.code, type: e.type, message: e.message } }
const reader = createClient({ url, username: 'reader', password: 'read-only-pw', database })
try { await reader.insert({ table: 'js', values: [{ id: 9, name: 'no' }], format: 'JSONEachRow' }) } catch (e) { out.readonly = { code: e.code, type: e.type } }
const c = await reader.query({ query: 'SELECT count() AS n FROM js', format: 'JSONEachRow' })
out.count = Number((await c.json())[0].n)
const bad = createClient({ url, username: 'admin', password: 'wrong', database })
try { await bad.query({ query: 'SELECT 1' }) } catch (e) { out.auth = { code: e.code, type: e.type } }
await Promise.all([admin.close(), reader.close(), bad.close()])
console.log(JSON.stringify(out))
"""


@pytest.fixture(scope="module")
def js_client_dir() -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node/npm are not installed")
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    d = cache / "railscope-tests" / "clickhouse-js"
    if not (d / "node_modules" / "@clickhouse" / "client" / "package.json").exists():
        d.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(
            ["npm", "install", "--prefix", str(d), "--no-audit", "--no-fund", "@clickhouse/client"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if r.returncode != 0:
            if any(s in r.stderr for s in _OFFLINE):
                pytest.skip(f"npm cannot reach the registry: {r.stderr.strip().splitlines()[-1]}")
            raise AssertionError(f"npm install @clickhouse/client failed:\n{r.stderr}")
    return d


@pytest.mark.slow
def test_official_js_client(endpoint: Endpoint, database: str, js_client_dir: Path) -> None:
    script = js_client_dir / "railscope_check.mjs"
    script.write_text(SCRIPT)
    r = subprocess.run(
        ["node", str(script), endpoint.url, database],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=js_client_dir,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["rows"] == [
        {"id": 1, "name": "one"},
        {"id": 2, "name": "two"},
        {"id": 3, "name": "three"},
    ]
    assert out["param"] == 42 and out["ping"] is True
    assert out["error"]["code"] == "60" and out["error"]["type"] == "UNKNOWN_TABLE"
    assert out["readonly"]["code"] == "164" and out["readonly"]["type"] == "READONLY"
    assert out["count"] == 3  # the read-only user's insert wrote nothing
    assert out["auth"]["code"] == "516" and out["auth"]["type"] == "AUTHENTICATION_FAILED"
