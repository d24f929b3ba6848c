"""Real lldpd: two GPU hosts and a leaf in three network namespaces joined by veth pairs; the hosts'
neighbours are read through the real `lldpcli show neighbors -f json`, parsed, turned into the
fabric graph and a generated HyperNode. Skipped when network namespaces are not permitted."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from telemetry.topology.hypernodes import HyperNodeTree
from telemetry.topology.physical import Fabric, generate_specs, parse_lldpcli_json


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=20)


def _neighbours(sock: str) -> str:
    return _run("lldpcli", "-u", sock, "show", "neighbors", "-f", "json").stdout


def _wait_until_heard(
    socks: dict[str, str], procs: list[subprocess.Popen[bytes]], logs: dict[str, Path]
) -> None:
    """Both hosts must hear the leaf (a 1 s tx-interval: within seconds); a failure says what
    each daemon saw, counted and logged."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if all("leaf-su0-r0" in _neighbours(socks[h]) for h in ("h1", "h2")):
            return
        time.sleep(0.5)
    seen = []
    for (key, sock), p in zip(socks.items(), procs, strict=True):
        state = "running" if p.poll() is None else f"exited {p.returncode}"
        ifaces = _run("lldpcli", "-u", sock, "show", "interfaces").stdout.strip()
        stats = _run("lldpcli", "-u", sock, "show", "statistics").stdout.strip()
        log = logs[key].read_text(errors="replace")[-2000:]
        seen.append(
            f"--- {key}: lldpd {state}\nneighbours: {_neighbours(sock).strip()}\n"
            f"interfaces: {ifaces}\nstatistics: {stats}\nlog: {log}"
        )
    pytest.fail("lldpd: a host heard no neighbour within 60 s\n" + "\n".join(seen))


# one fabric for the module: both tests read it
@pytest.fixture(scope="module")
def netns_fabric() -> Iterator[dict[str, str]]:
    if (
        shutil.which("lldpd") is None
        or shutil.which("lldpcli") is None
        or shutil.which("ip") is None
    ):
        pytest.skip("lldpd/lldpcli/iproute2 not installed (apt-get install -y lldpd iproute2)")
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    tag = f"rs{os.getpid() % 100000}"
    names = {"h1": f"{tag}h1", "h2": f"{tag}h2", "leaf": f"{tag}lf"}
    made: list[str] = []
    procs: list[subprocess.Popen[bytes]] = []
    # lldpd drops privileges: its socket directory must be reachable by the _lldpd user, which
    # pytest's private tmp_path (mode 0700) is not
    sock_dir = Path(tempfile.mkdtemp(prefix="railscope-lldp-"))
    sock_dir.chmod(0o755)
    try:
        for ns in names.values():
            r = _run("ip", "netns", "add", ns)
            if r.returncode != 0:
                pytest.skip(f"`ip netns add` is not permitted here: {r.stderr.strip()}")
            made.append(ns)
            _run("ip", "-n", ns, "link", "set", "lo", "up")
        # host NIC names as on a GPU server; leaf ports as on a switch
        for host, leaf_port in (("h1", f"{tag}p1"), ("h2", f"{tag}p2")):
            nic = f"{tag}{host}e1"
            for cmd in (
                ("ip", "link", "add", nic, "type", "veth", "peer", "name", leaf_port),
                ("ip", "link", "set", nic, "netns", names[host]),
                ("ip", "link", "set", leaf_port, "netns", names["leaf"]),
                ("ip", "-n", names[host], "link", "set", nic, "up"),
                ("ip", "-n", names["leaf"], "link", "set", leaf_port, "up"),
            ):
                r = _run(*cmd)
                assert r.returncode == 0, f"{' '.join(cmd)}: {r.stderr}"
        hostnames = {"h1": "gpu-node-1", "h2": "gpu-node-2", "leaf": "leaf-su0-r0"}
        socks = {key: str(sock_dir / f"{key}.sock") for key in names}
        logs = {key: sock_dir / f"{key}.log" for key in names}
        for key, ns in names.items():
            # configured from a file lldpd reads before it starts sending (-O), not by lldpcli
            # once it runs: configuring a starting lldpd stopped its transmit timer on a port in
            # 5 of 24 set-ups here (the port sent one LLDPDU, then nothing; CI: "no neighbour
            # heard within 60 s"), 0 of 40 from the file. TTL = tx-interval x tx-hold: the
            # default hold of 4 would let a neighbour expire while a loaded machine opens a store
            conf = sock_dir / f"{key}.conf"
            conf.write_text(
                f"configure system hostname {hostnames[key]}\n"
                "configure lldp portidsubtype ifname\n"
                "configure lldp tx-interval 1\n"
                "configure lldp tx-hold 120\n"
            )
            with logs[key].open("wb") as log:  # lldpd -d logs to stderr: kept for a failure
                p = subprocess.Popen(
                    [
                        "ip",
                        "netns",
                        "exec",
                        ns,
                        "lldpd",
                        "-d",
                        "-O",
                        str(conf),
                        "-u",
                        socks[key],
                        "-p",
                        str(sock_dir / f"{key}.pid"),
                        "-I",
                        f"{tag}*",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    start_new_session=True,
                )
            procs.append(p)
        _wait_until_heard(socks, procs, logs)
        yield {"h1": socks["h1"], "h2": socks["h2"], "tag": tag}
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=5)
        for ns in made:
            _run("ip", "netns", "del", ns)
        shutil.rmtree(sock_dir, ignore_errors=True)


def test_lldpcli_neighbours_build_the_fabric(netns_fabric: dict[str, str]) -> None:
    tag = netns_fabric["tag"]
    rows = {  # the fixture waited until both hosts heard the leaf
        host: parse_lldpcli_json(_neighbours(netns_fabric[host]), f"gpu-node-{host[1]}")
        for host in ("h1", "h2")
    }
    assert rows["h1"] == [
        {
            "local_device": "gpu-node-1",
            "local_port": f"{tag}h1e1",
            "remote_device": "leaf-su0-r0",
            "remote_port": f"{tag}p1",
            "remote_chassis_id": rows["h1"][0]["remote_chassis_id"],
            "source": "lldpcli",
        }
    ]
    assert rows["h2"][0]["remote_port"] == f"{tag}p2"
    assert rows["h1"][0]["remote_chassis_id"] == rows["h2"][0]["remote_chassis_id"] != ""

    fabric = Fabric(rows["h1"] + rows["h2"])
    tiers, issues = fabric.hierarchy()
    assert issues == [] and len(tiers) == 1
    (su,) = tiers[0]
    assert su.nodes == {"gpu-node-1", "gpu-node-2"} and su.switches == frozenset({"leaf-su0-r0"})
    tree = HyperNodeTree.build(generate_specs(tiers))
    assert tree.lca("gpu-node-1", "gpu-node-2") == (su.name, 1)
    json.dumps(rows)  # rows are plain JSON, as `--output jsonl` would print them


def test_topology_lldp_stores_neighbours_and_hypernodes_come_from_saved_json(
    netns_fabric: dict[str, str],
    store: Any,
    chdb_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    from telemetry.cli import main

    monkeypatch.setenv("RAILSCOPE_DSN", chdb_dsn)
    monkeypatch.setenv("RAILSCOPE__STORE__DATABASE", store.database)
    for host in ("h1", "h2"):
        assert (
            main(
                [
                    "topology",
                    "lldp",
                    "--socket",
                    netns_fabric[host],
                    "--host",
                    f"gpu-node-{host[1]}",
                ]
            )
            == 0
        )
        saved = _neighbours(netns_fabric[host])
        (tmp_path / f"gpu-node-{host[1]}.json").write_text(saved)
    rows = store.query_rows(
        f"SELECT local_device, remote_device, source FROM {store.table('lldp_link')} ORDER BY local_device"
    )
    assert rows == [
        ("gpu-node-1", "leaf-su0-r0", "lldpcli"),
        ("gpu-node-2", "leaf-su0-r0", "lldpcli"),
    ]
    capsys.readouterr()
    # from the store and from the saved lldpcli JSON: the same scalable unit
    assert main(["topology", "units"]) == 0
    from_store = json.loads(capsys.readouterr().out)
    assert main(["topology", "units", "--from", str(tmp_path)]) == 0
    from_files = json.loads(capsys.readouterr().out)
    assert from_store == from_files
    assert from_store["nodes"] == ["gpu-node-1", "gpu-node-2"] and from_store["leaves"] == [
        "leaf-su0-r0"
    ]
