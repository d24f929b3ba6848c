"""CLI errors of `railscope inventory` that need no store: one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from telemetry.cli import main
from tests.tls import self_signed

DUMP = Path(__file__).parents[2] / "fixtures" / "k8s" / "dump"


def test_missing_kubeconfig(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["inventory", "--once", "--output", "jsonl", "--kubeconfig", str(tmp_path / "nope")])
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("railscope: error: kubeconfig") and "no such file" in err


def test_bad_at(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inventory", "who", "10.0.0.1", "--at", "yesterday"]) == 2
    assert "--at 'yesterday'" in capsys.readouterr().err


def test_who_needs_one_ip(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inventory", "who"]) == 2
    assert "usage: railscope inventory who IP" in capsys.readouterr().err


def test_dump_to_prometheus_counts_open_facts_and_drops(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inventory", "--from", str(DUMP), "--output", "prom"]) == 0
    out = capsys.readouterr().out
    assert (
        'railscope_component_inventory_open_pod_ip_lease_facts{component="source:inventory"} 7.0'
        in out
    )
    assert 'railscope_component_dropped_records_total{component="source:inventory"} 4.0' in out


def test_dump_to_jsonl(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inventory", "--from", str(DUMP), "--output", "jsonl"]) == 0
    recs = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    kinds = {r["_kind"] for r in recs}
    assert kinds == {"pod", "pod_ip_lease", "node", "hypernode", "job", "podgroup"}
    assert sorted(r["hypernode"] for r in recs if r["_kind"] == "hypernode") == [
        "bad-regex",  # stored as declared; its member matches nothing and is reported
        "rack-0",
        "spine-0",
    ]
    job = next(r for r in recs if r["_kind"] == "job")
    assert (job["allocated_hypernode"], job["highest_tier_allowed"]) == ("rack-0", 1)
    assert all(r["cluster"] == "default" for r in recs)


async def test_in_cluster_auth_reads_the_service_account(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from exporters.inventory.watch import make_api_client

    (tmp_path / "token").write_text("sa-token-123")
    cert, _ = self_signed(tmp_path)
    cert.rename(tmp_path / "ca.crt")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    api = await make_api_client(None, None, True, str(tmp_path))
    try:
        assert api.configuration.host == "https://10.96.0.1:443"
        assert api.configuration.api_key["BearerToken"] == "Bearer sa-token-123"
        assert api.configuration.ssl_ca_cert == str(tmp_path / "ca.crt")
    finally:
        await api.close()


async def test_in_cluster_without_service_account_is_a_user_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from exporters.inventory.watch import make_api_client
    from telemetry.errors import UserError

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(UserError, match="in-cluster service account: cannot load"):
        await make_api_client(None, None, True, str(tmp_path))
