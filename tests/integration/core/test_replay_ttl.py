"""Replays of captures dated 30 days back, through `railscope SOURCE --from` and `railscope replay`
on the embedded store: rows a table's TTL would drop are refused in one line before anything is
stored, `--keep` stores every row and the store keeps them through its merges, and `db status`
shows each table's time range and TTL. The fixtures are the real formats in tests/fixtures with
their times moved back."""

from __future__ import annotations

import json
import re
import struct
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from telemetry.cli import main
from telemetry.config import Config
from telemetry.records import KINDS
from telemetry.registry import build_source
from telemetry.store import Store
from telemetry.store.retention import ReplayAdmission, Span, expiries, table_ttls

FIX = Path(__file__).resolve().parents[2] / "fixtures"
NOW = datetime.now(UTC)
# "30 days ago", past a 30-day TTL by an hour; 10 s into its minute, so that the captures' few
# seconds of rows print as that minute (at 59.9 s the rows began in the next one)
BACK = (NOW - timedelta(days=30, hours=1)).replace(second=10, microsecond=0)


def _pcap(dst: Path) -> None:
    """tcpdump's sFlow capture, its records moved so that the first is at BACK."""
    b = bytearray((FIX / "sflow" / "tcpdump_sflow-print-v6.pcap").read_bytes())
    off, first = 24, None
    while off < len(b):
        sec, _usec, incl, _orig = struct.unpack_from("<IIII", b, off)
        first = sec if first is None else first
        struct.pack_into("<I", b, off, sec - first + int(BACK.timestamp()))
        off += 16 + incl
    dst.write_bytes(b)


def _clienttrace(dst: Path) -> None:
    """A DataNode's clienttrace log, its lines' dates moved so that the first is at BACK."""
    lines = (FIX / "hdfs" / "datanode_clienttrace_hdfs_read.log").read_text().splitlines()
    fmt = "%Y-%m-%d %H:%M:%S"
    first = datetime.strptime(lines[0][:19], fmt).replace(tzinfo=UTC)
    out = []
    for ln in lines:
        at = datetime.strptime(ln[:19], fmt).replace(tzinfo=UTC) - first + BACK
        out.append(at.strftime(fmt) + ln[19:])
    dst.write_text("\n".join(out) + "\n")


def _inspector(dst: Path) -> None:
    """NCCL Inspector JSON dumps, their dump times moved so that the first is at BACK."""
    dst.mkdir()
    for f in sorted((FIX / "nccl" / "inspector-json").iterdir()):
        docs = [json.loads(x) for x in f.read_text().splitlines()]
        first = docs[0]["metadata"]["dump_timestamp_us"]
        for d in docs:
            d["metadata"]["dump_timestamp_us"] += int(BACK.timestamp() * 1e6) - first
        (dst / f.name).write_text("".join(json.dumps(d) + "\n" for d in docs))


def _k8s(dst: Path, fixture: str = "k8s/dump") -> None:
    """A `kubectl get` dump, every timestamp in it moved back by the capture's age."""
    dst.mkdir()
    stamp = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
    for f in sorted((FIX / fixture).iterdir()):
        if f.suffix not in (".json", ".yaml"):
            continue
        text = stamp.sub(
            lambda m: (
                datetime.strptime(m[0], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
                - timedelta(days=30)
            ).strftime("%Y-%m-%dT%H:%M:%SZ"),
            f.read_text(),
        )
        (dst / f.name).write_text(text)


@pytest.fixture
def cli(store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """`railscope ARGS` in this process, on the test's store, its spool in tmp_path."""
    monkeypatch.setenv("RAILSCOPE_DSN", f"chdb://{store.dsn.path}")
    monkeypatch.setenv("RAILSCOPE__STORE__DATABASE", store.database)
    monkeypatch.setenv("RAILSCOPE__SINK__SPOOL_DIR", str(tmp_path / "spool"))
    return main


def _kind(table: str) -> str:
    return next(k.name for k in KINDS.values() if k.table == table)


def _counts(store: Store, tables: list[str]) -> dict[str, int]:
    return {t: store.count(_kind(t)) for t in tables}


# source, capture builder, the tables its rows go to and how many (all dated 30 days back)
OLD = [
    ("sflow", _pcap, {"flow_samples": 13, "switch_port_samples": 48}, "flow_samples keeps 14 days"),
    ("hdfs", _clienttrace, {"hdfs_transfers": 11}, "hdfs_transfers keeps 30 days"),
    ("nccl", _inspector, {"collective_samples": 7}, "collective_samples keeps 30 days"),
]


@pytest.mark.parametrize(("source", "make", "rows", "says"), OLD, ids=[o[0] for o in OLD])
def test_a_capture_older_than_its_table_ttl_is_refused_then_kept_with_keep(
    cli: Any,
    store: Store,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    source: str,
    make: Any,
    rows: dict[str, int],
    says: str,
) -> None:
    cap = tmp_path / "capture"
    make(cap)
    assert cli([source, "--from", str(cap), "--no-metrics"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert says in line and "--keep" in line and f"{source} --from {cap}" in line, line
    assert BACK.strftime("%Y-%m-%dT%H:%M") in line and "every row" in line, line
    assert _counts(store, list(rows)) == dict.fromkeys(rows, 0)  # refused before any insert

    caplog.set_level("INFO")
    assert cli([source, "--from", str(cap), "--no-metrics", "--keep"]) == 0
    stored = [r.getMessage() for r in caplog.records if "stored" in r.getMessage()]
    assert stored == [f"{source}: stored {sum(rows.values())} records in chdb://{store.dsn.path}"]
    # merged as the store will: a TTL still measured from the rows' time would drop them here
    for t in rows:
        store.client.command(f"OPTIMIZE TABLE {store.table(_kind(t))} FINAL")
    assert _counts(store, list(rows)) == rows
    ttls = table_ttls(store, list(rows))
    for t in rows:  # kept its TTL counted from the load: lengthened by the capture's age, 31 days
        assert ttls[t] == (KINDS[_kind(t)].ttl_days or 0) + 31, (t, ttls)


def test_the_ttl_really_drops_old_rows_without_keep(store: Store, tmp_path: Path) -> None:
    """What the refusal prevents: the same old flows inserted past the check are gone after a
    merge (so the kept count above could have been 0)."""
    _pcap(tmp_path / "old.pcap")
    src = build_source("sflow", Config(), from_path=str(tmp_path / "old.pcap"), once=True)
    batches = src.collect()
    for b in batches:
        store.insert(b.kind, b.table)
    store.client.command(f"OPTIMIZE TABLE {store.table('flow_sample')} FINAL")
    assert store.count("flow_sample") == 0


@pytest.mark.parametrize(
    ("fixture", "tables"),
    [("k8s/dump", ["pods", "pod_ip_leases", "nodes"]), ("pool", ["queues", "pod_events"])],
)
def test_an_inventory_30_days_back_is_within_its_ttls_and_stored_whole(
    cli: Any, store: Store, tmp_path: Path, fixture: str, tables: list[str]
) -> None:
    """Inventory tables keep their rows (no TTL; pod events 90 days): nothing is refused."""
    _k8s(tmp_path / "inv", fixture)
    assert cli(["inventory", "--from", str(tmp_path / "inv"), "--no-metrics"]) == 0
    got = _counts(store, tables)
    assert all(got.values()), got
    lo = store.query_rows(f"SELECT min(valid_from) FROM {store.table(_kind(tables[0]))}")[0][0]
    assert lo.replace(tzinfo=UTC) < NOW - timedelta(days=29)


def test_a_switch_dump_carries_no_time_and_is_stamped_at_the_load(
    cli: Any, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    """A COUNTERS_DB dump has no time of its own: its rows are the load's, never refused."""
    assert cli(["switch", "--from", str(FIX / "sonic" / "counters_db.json"), "--no-metrics"]) == 0
    assert store.count("switch_port_sample") > 0


def test_partly_old_rows_name_the_oldest_kept_and_rollups_are_checked(store: Store) -> None:
    """A span that straddles the TTL: 'the rows before ...'; a flow_samples span also reaches
    the rollups fed from switch port samples only when its own table feeds them."""
    first = NOW - timedelta(days=15)
    span = Span("flow_samples", 10, first, NOW - timedelta(days=10))
    ttls = table_ttls(store, ["flow_samples", "switch_port_samples", "switch_port_intervals"])
    (e,) = expiries({"flow_samples": span}, ttls, NOW)
    assert (e.table, e.days, e.all_rows) == ("flow_samples", 14, False)
    assert (
        "the rows before " + (NOW - timedelta(days=14)).strftime("%Y-%m-%dT%H:%M") in e.describe()
    )
    ports = Span("switch_port_samples", 5, NOW - timedelta(days=100), NOW - timedelta(days=99))
    hit = {x.table for x in expiries({"switch_port_samples": ports}, ttls, NOW)}
    assert hit == {"switch_port_samples", "switch_port_intervals"}
    fresh = Span("flow_samples", 10, NOW - timedelta(hours=1), NOW)
    assert ReplayAdmission(store, what="x").check({"flow_samples": fresh}) == []


def test_keep_never_shortens_a_ttl_and_db_status_shows_range_and_ttl(
    cli: Any, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _pcap(tmp_path / "old.pcap")
    assert cli(["sflow", "--from", str(tmp_path / "old.pcap"), "--keep", "--no-metrics"]) == 0
    assert table_ttls(store, ["flow_samples"]) == {"flow_samples": 45}
    # a newer capture kept afterwards needs less: the longer TTL stays
    span = Span("flow_samples", 1, NOW - timedelta(days=20), NOW - timedelta(days=20))
    ReplayAdmission(store, what="x", keep=True).check({"flow_samples": span})
    assert table_ttls(store, ["flow_samples"]) == {"flow_samples": 45}
    store.migrate()  # no configured TTL for the table: migrate leaves the kept one
    assert table_ttls(store, ["flow_samples"]) == {"flow_samples": 45}
    capsys.readouterr()
    assert cli(["db", "status"]) == 0
    out = capsys.readouterr().out
    (flows,) = [x for x in out.splitlines() if x.strip().startswith("flow_samples ")]
    assert "13 rows" in flows and "TTL 45 days" in flows, flows
    assert BACK.strftime("%Y-%m-%dT%H:%M") in flows, flows
    expire = (BACK + timedelta(days=45)).strftime("%Y-%m-%dT%H:%M")
    assert f"the oldest expire from {expire}" in flows, flows
    (gpu,) = [x for x in out.splitlines() if x.strip().startswith("gpu_samples ")]
    assert " 0 rows" in gpu and "TTL 30 days" in gpu, gpu
    (pods,) = [x for x in out.splitlines() if x.strip().startswith("pods ")]
    assert "no TTL" in pods, pods


def test_a_bundle_with_old_flows_is_refused_whole(
    cli: Any, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`railscope replay`: the flows are too old, so the inventory (which its TTLs would keep)
    is not stored either: a bundle is never half loaded."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    _k8s(bundle / "inventory")
    _pcap(bundle / "sflow.pcap")
    assert cli(["replay", str(bundle)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"railscope: error: replay {bundle}: flow_samples keeps 14 days"), line
    assert _counts(store, ["pods", "flow_samples"]) == {"pods": 0, "flow_samples": 0}
    assert cli(["replay", str(bundle), "--keep"]) == 0
    assert _counts(store, ["pods", "flow_samples"]) == {"pods": 7, "flow_samples": 13}


# --- a replayed bundle end to end -------------------------------------------------------------
FLOWS_AT = (NOW - timedelta(days=30)).replace(microsecond=0)  # the flows: a month ago
CREATED = FLOWS_AT - timedelta(days=1)  # the pods: created a day before their flows


def _inventory(d: Path) -> None:
    """`kubectl get` output (dated, a day before the flows) and Volcano manifests: a job whose
    two pods sit under different racks while the job allows tier 1 only."""
    d.mkdir()
    created = CREATED.strftime("%Y-%m-%dT%H:%M:%SZ")
    nodes = [
        {"apiVersion": "v1", "kind": "Node",
         "metadata": {"name": n, "creationTimestamp": created, "labels": {"rack": r}},
         "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
        for n, r in (("n1", "r0"), ("n2", "r0"), ("n3", "r1"), ("n4", "r1"))
    ]  # fmt: skip
    pods = [
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": f"train1-{i}", "namespace": "a", "uid": f"u{i}",
                      "creationTimestamp": created, "labels": {"volcano.sh/job-name": "train1"}},
         "spec": {"nodeName": node},
         "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "startTime": created}}
        for i, (node, ip) in enumerate((("n1", "10.0.0.1"), ("n3", "10.0.0.3")))
    ]  # fmt: skip
    for name, items in (("nodes.json", nodes), ("pods.json", pods)):
        (d / name).write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    (d / "topology.yaml").write_text(
        """\
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: rack-0}
spec:
  tier: 1
  members: [{type: Node, selector: {regexMatch: {pattern: "^n[12]$"}}}]
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: rack-1}
spec:
  tier: 1
  members: [{type: Node, selector: {regexMatch: {pattern: "^n[34]$"}}}]
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: spine}
spec:
  tier: 2
  members: [{type: HyperNode, selector: {exactMatch: {name: rack-0}}}, {type: HyperNode, selector: {exactMatch: {name: rack-1}}}]
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train1, namespace: a}
spec:
  minAvailable: 2
  networkTopology: {mode: hard, highestTierAllowed: 1}
  tasks: [{name: worker, replicas: 2}]
"""
    )


def _roce_pcap(path: Path, seconds: int = 30) -> int:
    """sFlow v5 datagrams from a leaf, one RoCEv2 flow sample (1:1000) a second from train1-0 to
    train1-1, as a classic pcap; returns the samples."""
    from exporters.sflow import encode
    from exporters.sflow.pcap import write_pcap

    frames = []
    for s in range(seconds):
        frame = encode.rocev2_frame("10.0.0.1", "10.0.0.3", 77, psn=s, payload=4000)
        sample = encode.flow_sample(frame[:128], seq=s + 1, rate=1000, pool=(s + 1) * 1000)
        t = FLOWS_AT.timestamp() + s
        dgram = encode.datagram([sample], agent="10.9.0.1", seq=s + 1, uptime_ms=1000 * s + 1)
        frames.append((t, encode.udp_frame(dgram, src="10.9.0.1", dst="10.254.255.1")))
    write_pcap(path, frames)
    return seconds


def test_a_replayed_bundle_loads_correlates_over_its_default_range_and_reports(
    cli: Any, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Inventory + flows, a month old, pods created a day before the flows: kept with --keep,
    then `correlate` with no range (the stored data's span) attributes the flows to the pods
    (the placement violation carries the bytes that crossed the spine) and `report` shows it."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    _inventory(bundle / "inventory")
    n = _roce_pcap(bundle / "sflow.pcap")
    assert cli(["replay", str(bundle)]) == 2  # flow_samples keeps 14 days: refused whole
    capsys.readouterr()
    assert cli(["replay", str(bundle), "--keep"]) == 0
    assert _counts(store, ["flow_samples", "pods"]) == {"flow_samples": n, "pods": 2}
    assert cli(["correlate"]) == 0
    out = capsys.readouterr().out
    assert "placement_violation" in out, out
    from telemetry.correlate import findings as fstore

    found = fstore.read(store, kinds=["placement_violation"])
    # the default range starts at the pods' creation: the placement alone is a violation there
    # (no bytes yet); the flows' episode carries every sampled byte, attributed to the job's
    # pods as of the flows' time, a day after the pods were created
    at_flows = [f for f in found if f["last_seen"].replace(tzinfo=UTC) >= FLOWS_AT]
    assert len(found) == 2 and len(at_flows) == 1, found
    (v,) = at_flows
    assert v["subject"] == "a/train1" and v["evidence"]["spanned_tier"] == 2, v
    assert v["evidence"]["bytes_above_allowed_tier"] == n * 132 * 1000, v["evidence"]
    attributed = store.query_rows(
        f"SELECT count(), uniqExact(src_pod), uniqExact(dst_pod) FROM {store.table('attributed_flow')}"
        " WHERE src_job = 'train1'"
    )
    assert attributed == [(n, 1, 1)], attributed
    capsys.readouterr()
    assert cli(["report", "--job", "a/train1"]) == 0
    rep = capsys.readouterr().out
    assert "a/train1" in rep and "placement" in rep, rep


def test_keep_by_a_user_that_may_not_alter_is_one_line_and_stores_nothing(store: Store) -> None:
    from clickhouse_connect.driver.exceptions import DatabaseError

    from telemetry.errors import UserError

    class NoAlter:  # the real client, as the writer user sees it: INSERT only
        def __init__(self, real: Any) -> None:
            self.real = real

        def command(self, cmd: str, *a: Any, **kw: Any) -> Any:
            if cmd.startswith("ALTER"):
                raise DatabaseError(
                    "Code: 497. DB::Exception: railscope_writer: Not enough privileges. "
                    "(ACCESS_DENIED)"
                )
            return self.real.command(cmd, *a, **kw)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.real, name)

    writer = Store(store.dsn, database=store.database, client=NoAlter(store.client))
    span = Span("flow_samples", 3, BACK, BACK + timedelta(minutes=1))
    with pytest.raises(UserError) as e:
        ReplayAdmission(writer, what="sflow --from x.pcap", keep=True).check({"flow_samples": span})
    (line,) = str(e.value).splitlines()
    assert line.startswith("sflow --from x.pcap: --keep: cannot set the TTL of ") and (
        "Not enough privileges" in line
    ), line
    assert table_ttls(store, ["flow_samples"]) == {"flow_samples": 14}


@pytest.mark.parametrize("store_transport", ["chdb", "http"], indirect=True)
def test_held_reads_range_and_ttl_over_either_transport(store: Store) -> None:
    from telemetry.records import FLOW_SAMPLE
    from telemetry.store.retention import held
    from tests.integration.correlate.test_attribution import ROCE_SAMPLE

    t0 = int((NOW - timedelta(days=3)).timestamp()) * 1000
    rows = [{**ROCE_SAMPLE, "ts": t0 + i * 60_000, "src_ip": "10.0.0.1", "dst_ip": "10.0.0.3",
             "sampling_rate": 1, "bytes": 1, "packets": 1} for i in range(3)]  # fmt: skip
    store.insert(FLOW_SAMPLE, FLOW_SAMPLE.to_arrow(rows))
    by = {h.table: h for h in held(store)}
    f = by["flow_samples"]
    assert (f.rows, f.days) == (3, 14)
    assert f.first is not None and f.last is not None
    assert (int(f.first.timestamp() * 1000), int(f.last.timestamp() * 1000)) == (t0, t0 + 120_000)
    assert by["pods"].rows == 0 and by["pods"].days is None and by["pods"].first is None
