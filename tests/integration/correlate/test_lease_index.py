"""The lease index (telemetry/correlate/lease_index.py) on the real embedded store: built once,
read back by later ticks while the inventory holds, rebuilt when what it is built from changes
or when a window starts before the leases it kept, never rebuilt for a re-report or a merge of
the same facts, and never read stale. Each test that ticks runs twice: fingerprinting every
tick, and as the engine does, with a memo across ticks that skips the fingerprint while the
input tables' parts and the rows begun before the window's end stay the same."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from telemetry.correlate import Correlator
from telemetry.correlate.attribution import (
    Ancestry,
    attribute_window,
    statement,
)
from telemetry.correlate.registry import Context, Window
from telemetry.correlate.thresholds import default_thresholds
from telemetry.records import FLOW_SAMPLE, GPU_NIC_AFFINITY, LLDP_LINK, POD_IP_LEASE
from telemetry.store import Store
from tests.integration.correlate.test_attribution import ROCE_SAMPLE, flows, inventory
from tests.integration.correlate.test_detectors import ms, t0

LEASE = {"cluster": "c", "primary": False, "interface": "net1", "network": ""}


@pytest.fixture(params=["fingerprint", "memo"])
def memo(request: pytest.FixtureRequest) -> dict[str, Any] | None:
    """None: every tick takes the fingerprint; a dict: the engine's memo across ticks."""
    return {} if request.param == "memo" else None


def _ctx(
    store: Store, s: datetime, lo: int, hi: int, memo: dict[str, Any] | None = None
) -> Context:
    """Cluster c's window [s + lo, s + hi) in seconds (with the engine's memo, if given)."""
    w = Window(s + timedelta(seconds=lo), s + timedelta(seconds=hi))
    return Context(store, w, default_thresholds(), "c", {} if memo is None else {"memo": memo})


def _attribute(
    store: Store, s: datetime, lo: int, hi: int, memo: dict[str, Any] | None = None
) -> bool:
    """Attribute [s + lo, s + hi); whether the index was rebuilt for it."""
    return bool(attribute_window(_ctx(store, s, lo, hi, memo))["index_built"])


def _pods(store: Store, s: datetime) -> list[tuple[int, str, str]]:
    """(seconds after s, source pod, destination pod) of every attributed flow."""
    rows = store.query_rows(
        f"SELECT toUnixTimestamp64Milli(ts) - {ms(s)}, src_pod, dst_pod "
        f"FROM {store.table('attributed_flow')} ORDER BY ts"
    )
    return [(int(t) // 1000, a, b) for t, a, b in rows]


def _lease(
    store: Store,
    ip: str,
    pod: str,
    node: str,
    start: int,
    end: int | None,
    at: int,
    network: str = "",
) -> None:
    store.insert(
        POD_IP_LEASE,
        POD_IP_LEASE.to_arrow(
            [
                {
                    **LEASE,
                    "ip": ip,
                    "namespace": "a" if pod.startswith("train1") else "b",
                    "pod": pod,
                    "node": node,
                    "valid_from": start,
                    "valid_to": end,
                    "updated_at": at,
                    "network": network,
                }
            ]
        ),
    )


def _flow(store: Store, ts: int, src: str, dst: str) -> None:
    row = {**ROCE_SAMPLE, "sampling_rate": 1, "bytes": 4096, "packets": 1}
    store.insert(
        FLOW_SAMPLE, FLOW_SAMPLE.to_arrow([{**row, "ts": ts, "src_ip": src, "dst_ip": dst}])
    )


def test_built_once_while_the_inventory_holds_and_again_when_a_lease_changes(
    store: Store, memo: dict[str, Any] | None
) -> None:
    s = t0()
    t = ms(s)
    inventory(store, t)
    flows(store, t)  # 10.9.0.1 -> 10.9.0.3 at 60, 330 and 420 s; 10.8.8.8 -> 10.9.0.3 at 430 s
    assert _attribute(store, s, 0, 120, memo)
    assert not _attribute(store, s, 120, 350, memo)  # nothing it is built from changed
    assert _attribute(store, s, 350, 425, memo)  # infer-0's lease of 10.9.0.1 begins at 360 s
    # 10.9.0.3 changes hands at 425 s: train1-1's lease ends, infer-1 takes the IP
    _lease(store, "10.9.0.3", "train1-1", "n3", t - 3_600_000, t + 425_000, t + 425_000)
    _lease(store, "10.9.0.3", "infer-1", "n4", t + 425_000, None, t + 425_000)
    assert _attribute(store, s, 425, 600, memo)
    assert _pods(store, s) == [
        (60, "train1-0", "train1-1"),
        (330, "", "train1-1"),
        (420, "infer-0", "train1-1"),
        (430, "", "infer-1"),  # an index read back from before the change would say train1-1
    ]
    (n,) = store.query_rows(f"SELECT count() FROM {store.database}.attribution_index FINAL")[0]
    assert n == 1  # the newest build replaces the older one


def test_a_re_report_or_a_merge_of_the_same_facts_rebuilds_nothing(
    store: Store, memo: dict[str, Any] | None
) -> None:
    """The fingerprint hashes what the index is built from, not the rows that say it: an
    affinity the node exporter re-reports hourly, a lease version written again, a merge."""
    s = t0()
    t = ms(s)
    inventory(store, t)
    affinity = [
        {
            "cluster": "c",
            "node": n,
            "gpu": 0,
            "nic": "mlx5_0",
            "netdev": "eth2",
            "rail": 0,
            "direct_nic": 1,
        }
        for n in ("n1", "n2", "n3", "n4")
    ]
    lldp = {"cluster": "c", "local_port": "eth2", "remote_port": "Ethernet0", "source": "t"}
    store.insert(GPU_NIC_AFFINITY, GPU_NIC_AFFINITY.to_arrow([{**a, "ts": t} for a in affinity]))
    store.insert(
        LLDP_LINK,
        LLDP_LINK.to_arrow(
            [{**lldp, "ts": t, "local_device": n, "remote_device": "leaf1"} for n in ("n1", "n3")]
        ),
    )
    # train1-1 holds 10.9.0.3 on rail 0: its NIC mlx5_0 is cabled to leaf1
    rail0 = ("10.9.0.3", "train1-1", "n3", t - 3_600_000, None)
    _lease(store, *rail0, t, "rdma-rail0")
    for k in range(6):
        _flow(store, t + 10_000 + 20_000 * k, "10.9.0.1", "10.9.0.3")
    assert _attribute(store, s, 0, 20, memo)
    store.insert(
        GPU_NIC_AFFINITY,
        GPU_NIC_AFFINITY.to_arrow([{**a, "ts": t + 25_000} for a in affinity]),
    )
    assert not _attribute(store, s, 20, 40, memo)
    _lease(store, *rail0, t + 45_000, "rdma-rail0")
    assert not _attribute(store, s, 40, 60, memo)
    for kind in (POD_IP_LEASE, GPU_NIC_AFFINITY, LLDP_LINK):
        store.client.command(f"OPTIMIZE TABLE {store.table(kind)} FINAL")
    assert not _attribute(store, s, 60, 80, memo)
    # n3's NIC re-cabled to another leaf port: what the index holds changes
    store.insert(
        LLDP_LINK,
        LLDP_LINK.to_arrow(
            [{**lldp, "ts": t + 85_000, "local_device": "n3", "remote_device": "leaf9"}]
        ),
    )
    assert _attribute(store, s, 80, 120, memo)
    got = store.query_rows(
        f"SELECT toUnixTimestamp64Milli(ts) - {t}, dst_leaf_port FROM {store.table('attributed_flow')} "
        "ORDER BY ts"
    )
    assert [(int(a) // 1000, b) for a, b in got] == [
        (10, "leaf1:Ethernet0"),
        (30, "leaf1:Ethernet0"),
        (50, "leaf1:Ethernet0"),
        (70, "leaf1:Ethernet0"),
        (90, "leaf9:Ethernet0"),
        (110, "leaf9:Ethernet0"),
    ]


def test_a_window_before_the_index_gets_one_of_its_own(
    store: Store, memo: dict[str, Any] | None
) -> None:
    """An index leaves out the leases that were over before its window: an earlier window (a
    batch re-run) over the same inventory must not read it."""
    s = t0()
    t = ms(s)
    inventory(store, t)
    _lease(store, "10.9.0.7", "train2-0", "n2", t - 3_600_000, t + 390_000, t + 390_000)
    _flow(store, t + 375_000, "10.9.0.7", "10.9.0.3")
    _flow(store, t + 450_000, "10.9.0.1", "10.9.0.3")
    assert _attribute(store, s, 400, 600, memo)  # left out 10.9.0.7's lease: over at 390 s
    assert _attribute(store, s, 370, 380, memo)  # same inventory, earlier start: built again
    assert _pods(store, s) == [(375, "train2-0", "train1-1"), (450, "infer-0", "train1-1")]
    assert not _attribute(store, s, 380, 390, memo)  # the newer build serves later windows too


def test_an_index_row_gone_fails_the_attribution_instead_of_attributing_to_nobody(
    store: Store,
) -> None:
    """Another build (another window's) can replace the row between the check and the read:
    the attribution then fails, is logged and retried next tick, and writes nothing."""
    s = t0()
    t = ms(s)
    inventory(store, t)
    flows(store, t)
    ctx = _ctx(store, s, 0, 120)
    sql, params, built = statement(ctx, Ancestry({}, {}), ({}, {}))
    assert built and statement(ctx, Ancestry({}, {}), ({}, {})) == (sql, params, False)
    store.client.command(f"TRUNCATE TABLE {store.database}.attribution_index")
    with pytest.raises(Exception, match="attribution index row was replaced"):
        ctx.command(sql, params)
    assert store.count("attributed_flow") == 0


def test_the_engine_counts_its_rebuilds(store: Store) -> None:
    """Following ticks: one build for the first flows, one when infer-0's lease begins at 360 s
    (a version begun before the tick's end), none for the other ticks with flows."""
    s = t0()
    inventory(store, ms(s))
    flows(store, ms(s))
    c = Correlator(store, cluster="c")
    res = c.run(s, s + timedelta(minutes=10))
    assert res.failed == {}
    assert c.attribution_stats.extra["index_builds"] == 2
    assert c.attribution_stats.received == 4


def test_the_memo_skips_the_fingerprint_only_while_nothing_it_covers_changed(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the engine's memo the inventory is hashed again only when a tick may see other
    inputs: a new part of an input table (an insert, a merge), a row begun between the previous
    tick's end and this one's, other node facts; never for a tick over the same inputs."""
    from telemetry.correlate import lease_index

    taken: list[int] = []
    real = lease_index.fingerprint_sql

    def counted(ctx: Context) -> str:
        taken.append(1)
        return real(ctx)

    monkeypatch.setattr(lease_index, "fingerprint_sql", counted)
    s = t0()
    t = ms(s)
    inventory(store, t)
    flows(store, t)  # 10.9.0.1 -> 10.9.0.3 at 60, 330 and 420 s; 10.8.8.8 -> 10.9.0.3 at 430 s
    for at in (200, 345, 365, 412, 422):
        _flow(store, t + at * 1000, "10.9.0.1", "10.9.0.3")
    memo: dict[str, Any] = {}
    assert _attribute(store, s, 0, 120, memo) and len(taken) == 1
    assert not _attribute(store, s, 120, 250, memo) and len(taken) == 1  # the same inputs
    assert not _attribute(store, s, 250, 340, memo) and len(taken) == 1
    assert not _attribute(store, s, 340, 350, memo) and len(taken) == 1
    # infer-0's lease of 10.9.0.1, stored all along, begins at 360 s: the end moves past it
    assert _attribute(store, s, 350, 370, memo) and len(taken) == 2
    store.client.command(f"OPTIMIZE TABLE {store.table(POD_IP_LEASE)} FINAL")  # a merge
    assert not _attribute(store, s, 370, 415, memo) and len(taken) == 3  # hashed: the same
    assert not _attribute(store, s, 415, 421, memo) and len(taken) == 3
    _lease(store, "10.9.0.3", "train1-1", "n3", t - 3_600_000, t + 425_000, t + 425_000)
    _lease(store, "10.9.0.3", "infer-1", "n4", t + 425_000, None, t + 425_000)
    assert _attribute(store, s, 421, 600, memo) and len(taken) == 4  # an insert
    assert _pods(store, s) == [
        (60, "train1-0", "train1-1"),
        (200, "train1-0", "train1-1"),
        (330, "", "train1-1"),
        (345, "", "train1-1"),
        (365, "infer-0", "train1-1"),
        (412, "infer-0", "train1-1"),
        (420, "infer-0", "train1-1"),
        (422, "infer-0", "train1-1"),
        (430, "", "infer-1"),  # the index read back from before the insert says train1-1
    ]
    # other node facts (the attribution's `nodes` parameter): hashed again
    ctx = _ctx(store, s, 600, 610, memo)
    statement(ctx, Ancestry({}, {}), ({"n1": "su9"}, {}))
    assert len(taken) == 5


def test_with_the_memo_an_index_row_gone_fails_one_tick_and_the_next_rebuilds(
    store: Store,
) -> None:
    """The memo names an index row; when it is gone (truncated here, as a build for another
    window that was then merged away would leave it) the tick fails without writing, forgets
    the memo, and the next tick builds the index again and attributes the same flows."""
    s = t0()
    t = ms(s)
    inventory(store, t)
    flows(store, t)
    memo: dict[str, Any] = {}
    assert _attribute(store, s, 0, 120, memo)
    store.client.command(f"TRUNCATE TABLE {store.database}.attribution_index")
    with pytest.raises(Exception, match="attribution index row was replaced"):
        _attribute(store, s, 120, 350, memo)
    assert "lease_index" not in memo
    assert _attribute(store, s, 120, 350, memo)
    assert _pods(store, s) == [(60, "train1-0", "train1-1"), (330, "", "train1-1")]


def test_with_system_parts_unreadable_the_fingerprint_is_taken_every_tick(
    store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A store that refuses the memo's check (system.parts) attributes as before, taking the
    fingerprint every tick, and says why once."""
    from telemetry.correlate import lease_index

    monkeypatch.setattr(lease_index, "unchanged_sql", lambda ctx: "SELECT * FROM no_such_table")
    s = t0()
    t = ms(s)
    inventory(store, t)
    flows(store, t)
    memo: dict[str, Any] = {}
    with caplog.at_level("WARNING", logger="telemetry.correlate.lease_index"):
        assert _attribute(store, s, 0, 120, memo)
        assert not _attribute(store, s, 120, 350, memo)
        assert _attribute(store, s, 350, 425, memo)  # infer-0's lease begins at 360 s
    assert _pods(store, s) == [
        (60, "train1-0", "train1-1"),
        (330, "", "train1-1"),
        (420, "infer-0", "train1-1"),
    ]
    said = [r.getMessage() for r in caplog.records if "fingerprint is taken" in r.getMessage()]
    assert len(said) == 1 and "no_such_table" in said[0].lower(), said
