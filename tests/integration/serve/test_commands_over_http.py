"""railscope's commands against a running `serve` with `--dsn http://...`: the demo's store is
served, and findings, correlate, db status, dashboards check, sim score and report run through the
endpoint (clickhouse-connect's server code path) while serve holds the store."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.serve.conftest import ENV, free_port, railscope, wait_ping

K8S_DUMP = Path(__file__).parents[2] / "fixtures" / "k8s" / "dump"


@pytest.mark.slow
def test_commands_run_through_the_endpoint(tmp_path: Path) -> None:
    data = tmp_path / "demo"
    r = railscope("demo", "--data", str(data), "--minutes", "5")
    assert r.returncode == 0, r.stderr
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    serve = subprocess.Popen(
        [sys.executable, "-m", "telemetry.cli", "serve", "--dsn", f"chdb://{data / 'store'}",
         "--query-listen", f"127.0.0.1:{port}", "--no-correlate"],
        env=ENV,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        wait_ping(url, serve, lambda: serve.stderr.read() if serve.stderr else "")
        r = railscope("findings", "--dsn", url, "--format", "json")
        assert r.returncode == 0, r.stderr
        kinds = {json.loads(x)["kind"] for x in r.stdout.splitlines()}
        assert {"cross_tenant_rdma", "placement_violation"} <= kinds
        r = railscope("db", "status", "--dsn", url)
        assert r.returncode == 0 and "0 pending" in r.stdout, r.stdout + r.stderr
        # correlate writes findings through the endpoint (long URL parameters, DELETE, INSERT)
        # over the stored data's span (every 10 s tick of it: a 2 h range would be 720 ticks)
        r = railscope("correlate", "--dsn", url)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "placement_violation" in r.stdout
        r = railscope("dashboards", "check", "--dsn", url, "--since", "2h")
        assert r.returncode == 0 and "all queries ran" in r.stdout, r.stdout + r.stderr
        r = railscope(
            "sim", "score", "--dsn", url, "--ground-truth", str(data / "ground_truth.json")
        )
        assert r.returncode == 0, r.stdout + r.stderr
        assert "all " in r.stdout
        html = tmp_path / "report.html"
        r = railscope("report", "--dsn", url, "--html", str(html))
        assert r.returncode == 0 and html.stat().st_size > 10_000, r.stderr
        # a capture bundle replayed through the endpoint: the inventory dump's pods land in serve's
        # store (the sink writes over HTTP with its dedup tokens)
        bundle = tmp_path / "bundle"
        bundle.mkdir()
        (bundle / "inventory").symlink_to(K8S_DUMP)
        spool = tmp_path / "replay-spool"
        r = railscope(
            "replay", str(bundle), "--dsn", url, env={"RAILSCOPE__SINK__SPOOL_DIR": str(spool)}
        )
        assert r.returncode == 0, r.stdout + r.stderr
        r = railscope("inventory", "who", "2.2.2.49", "--at", "now", "--dsn", url)
        assert r.returncode == 0 and "test-pod-sriov" in r.stdout, r.stdout + r.stderr
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(60) == 0
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
