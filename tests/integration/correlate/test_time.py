"""Time as real collection gives it (telemetry/correlate/timebase.py, docs/correlation.md "Time"):
detectors that compare series keep finding what they find when every switch samples at its own
phase and gNMI stamps every port with its own time; a silent source is a collection gap, never a
fault of the device; a batch run costs what its data does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from telemetry.correlate import Correlator
from telemetry.correlate import findings as fstore
from telemetry.correlate.registry import Context, Window
from telemetry.correlate.thresholds import default_thresholds
from telemetry.correlate.timebase import aligned_sql, covered_sql, tick_params
from telemetry.records import FLOW_SAMPLE, NIC_SAMPLE, POD, POD_IP_LEASE, SWITCH_PORT_SAMPLE
from telemetry.store import Store
from tests.integration.correlate.test_detectors import _lldp, found, ms, run, t0


def _phase_ms(switch: str, port: str, step: int, leaf: bool) -> int:
    """Where in the 10 s interval a switch samples (its own phase, 0.3 .. 9.6 s before the grid
    point) and, for gNMI, where each port's leaf lands around it (+-0.5 s, per step)."""
    phase = -(300 + (sum(map(ord, switch)) * 977) % 9300)
    jitter = ((sum(map(ord, port)) * 131 + step * 577) % 1000) - 500 if leaf else 0
    return phase + jitter


def _ports_off_grid(
    store: Store,
    s: datetime,
    util: dict[tuple[str, str, str], float],
    *,
    leaf: bool,
    every_s: int = 10,
) -> None:
    """Switch port samples as a fabric sends them: each switch at its own phase (Redis polls),
    with `leaf`, each port at its own time too (gNMI), every `every_s` seconds. Counters follow
    the utilization."""
    cap = 400e9
    rows = []
    for (sw, role, port), u in util.items():
        for i in range(310 // every_s + 1):
            t = ms(s) + i * every_s * 1000 + _phase_ms(sw, port, i, leaf)
            rows.append(
                {
                    "ts": t,
                    "cluster": "c",
                    "switch": sw,
                    "role": role,
                    "port": port,
                    "up": 1,
                    "speed_bps": cap,
                    "tx_bytes_total": int((t - ms(s) + 60_000) / 1000 * u * cap / 8),
                    "tx_utilization_ratio": u,
                    "tx_bytes_per_second": u * cap / 8,
                }
            )
    store.insert(SWITCH_PORT_SAMPLE, SWITCH_PORT_SAMPLE.to_arrow(rows))


@pytest.mark.parametrize(
    ("leaf", "every_s"),
    [(False, 10), (True, 10), (True, 30)],
    ids=["per-switch-phase", "per-leaf-times", "polled-every-30s"],
)
def test_ecmp_hot_member_found_off_the_grid(store: Store, leaf: bool, every_s: int) -> None:
    s = t0()
    util = {
        ("leaf1", "leaf", f"Ethernet{256 + k * 8}"): u
        for k, u in enumerate([0.85, 0.2, 0.22, 0.18])
    }
    util |= {("leaf2", "leaf", f"Ethernet{256 + k * 8}"): 0.5 for k in range(4)}
    util |= {(f"spine{k}", "spine", "Ethernet0"): 0.3 for k in range(4)}
    _ports_off_grid(store, s, util, leaf=leaf, every_s=every_s)
    _lldp(
        store,
        s,
        [("leaf1", f"Ethernet{256 + k * 8}", f"spine{k}", "Ethernet0") for k in range(4)]
        + [("leaf2", f"Ethernet{256 + k * 8}", f"spine{k}", "Ethernet8") for k in range(4)],
    )
    run(store, s, 5)
    assert found(store) == {("ecmp_imbalance", "leaf1:Ethernet256")}
    (f,) = fstore.read(store, kinds=["ecmp_imbalance"])
    # hot at every grid point of its 70 s window: measured on the grid, not by sample counts
    assert f["evidence"]["seconds"] == 70 and len(f["evidence"]["group"]) == 4


@pytest.mark.parametrize("leaf", [False, True], ids=["per-switch-phase", "per-leaf-times"])
def test_dci_near_capacity_found_off_the_grid(store: Store, leaf: bool) -> None:
    s = t0()
    _ports_off_grid(
        store,
        s,
        {
            ("dci-a", "dci", "Ethernet0"): 0.93,
            ("dci-b", "dci", "Ethernet0"): 0.3,
            ("dci-a", "dci", "Ethernet8"): 0.4,
            ("dci-b", "dci", "Ethernet8"): 0.4,
        },
        leaf=leaf,
    )
    _lldp(
        store,
        s,
        [
            ("dci-a", "Ethernet0", "dci-b", "Ethernet0"),
            ("dci-a", "Ethernet8", "dci-b", "Ethernet8"),
        ],
    )
    run(store, s, 5)
    assert found(store) == {("dci_near_capacity", "dci-a:Ethernet0<->dci-b:Ethernet0")}
    (f,) = fstore.read(store, kinds=["dci_near_capacity"])
    # three samples in its 30 s window, each covering the ~10 s since the one before
    assert 25 <= f["evidence"]["seconds_near_capacity"] <= 35


def test_pfc_storm_seen_at_the_leaf_names_the_nic_not_its_netdev(store: Store) -> None:
    """The leaf port sees the storm before the NIC's own samples show it (the NIC's exporter
    samples 9 s later in the interval): the origin is still the RDMA device, as the NIC's
    exporter names it, never the netdev LLDP shows."""
    s = t0()
    rows = []
    for i in range(31):
        storm = i >= 20
        rows.append(
            {
                "ts": ms(s) + i * 10_000 - 9_000,
                "cluster": "c",
                "node": "n7",
                "device": "mlx5_3",
                "netdev": "eth5",
                "port": 1,
                "up": 1,
                "pfc_tx_pause_total": 0,
            }
        )
        rows[-1]["pfc_tx_pause_total"] = max(0, i - 20) * 200_000 if storm else 0
    store.insert(NIC_SAMPLE, NIC_SAMPLE.to_arrow(rows))
    ports = []
    for i in range(31):
        ports.append(
            {
                "ts": ms(s) + i * 10_000 - 500,
                "cluster": "c",
                "switch": "leaf1",
                "role": "leaf",
                "port": "Ethernet40",
                "up": 1,
                "pfc_rx_pause_total": max(0, i - 19) * 200_000,
            }
        )
    store.insert(SWITCH_PORT_SAMPLE, SWITCH_PORT_SAMPLE.to_arrow(ports))
    _lldp(store, s, [("leaf1", "Ethernet40", "n7", "eth5")])
    run(store, s, 5)
    assert {subj for kind, subj in found(store) if kind == "pfc_storm"} == {"n7/mlx5_3"}


def test_aligned_and_covered_sql_on_series_at_their_own_phases(store: Store) -> None:
    """Three series at phases 1 s, 5 s and 9.5 s before the grid, one missing a poll and one
    silent for 40 s: at each grid point a series has its latest sample's value while it is at
    most 25 s old; coverage is the time since each sample's predecessor."""
    s = t0()
    rows: list[dict[str, Any]] = []
    for name, phase, skip in (("a", 1000, {5}), ("b", 5000, set()), ("c", 9500, {3, 4, 5, 6})):
        for i in range(1, 10):
            if i in skip:
                continue
            rows.append(
                {
                    "ts": ms(s) + i * 10_000 - phase,
                    "cluster": "c",
                    "switch": name,
                    "port": "p",
                    "up": 1,
                    "tx_utilization_ratio": float(i),
                }
            )
    store.insert(SWITCH_PORT_SAMPLE, SWITCH_PORT_SAMPLE.to_arrow(rows))
    ctx = Context(
        store,
        Window(s + timedelta(seconds=20), s + timedelta(seconds=90)),
        default_thresholds(),
        "c",
    )
    got: dict[str, dict[int, float]] = {}
    for r in ctx.rows(
        aligned_sql(ctx, "switch_port_sample", ["switch", "port"], {"u": "tx_utilization_ratio"})
    ):
        g = int((r["g"].replace(tzinfo=UTC) - s).total_seconds())
        got.setdefault(r["switch"], {})[g] = r["u"]
    # grid points 20 .. 80 s; the value at g is the sample taken before g
    assert got["a"] == {20: 2, 30: 3, 40: 4, 50: 4, 60: 6, 70: 7, 80: 8}  # a lost poll: carried
    assert got["b"] == {20: 2, 30: 3, 40: 4, 50: 5, 60: 6, 70: 7, 80: 8}
    # c's sample 2 (at 10.5 s) is 29.5 s old at 40 s: stale; silent until its sample 7
    assert got["c"] == {20: 2, 30: 2, 70: 7, 80: 8}
    cov = {
        r["switch"]: r
        for r in ctx.rows(
            covered_sql(
                ctx, "switch_port_sample", ["switch", "port"], {"hot": "tx_utilization_ratio >= 6"}
            )
        )
    }
    assert cov["b"]["samples"] == 7 and cov["b"]["covered_s"] == 70 and cov["b"]["hot_s"] == 40
    # c: its sample at 60.5 s follows one at 20.5 s: it covers at most 25 s
    assert cov["c"]["hot_s"] == 25 + 10 + 10


def test_aligned_sql_over_ticks_gives_each_tick_its_own_grid(store: Store) -> None:
    """aligned_sql(over=True) answers, per judged tick, what aligned_sql answers over that tick's
    window alone: a series polled every 40 s, then every 10 s (its spacing, and how long a sample
    stands for it, are those of each tick's own rows and lead), one with a duplicated sample, one
    silent for a minute, one whose last sample is read at every later tick."""
    s = t0()
    rows: list[dict[str, Any]] = []
    series = {
        "slow-then-fast": [t for t in range(10, 400, 10) if t > 160 or t % 40 == 0],
        "duplicated": [t for t in range(10, 400, 10) for _ in range(1 + (t == 200))],
        "silent": [t for t in range(10, 400, 10) if not 180 <= t < 240],
        "stops": list(range(10, 260, 10)),
    }
    for name, times in series.items():
        for k, t in enumerate(times):
            rows.append(
                {
                    "ts": ms(s) + t * 1000 - 3700,
                    "cluster": "c",
                    "switch": name,
                    "port": "p",
                    "up": 1,
                    "tx_utilization_ratio": float(k),
                }
            )
    store.insert(SWITCH_PORT_SAMPLE, SWITCH_PORT_SAMPLE.to_arrow(rows))
    ticks = tuple(s + timedelta(seconds=x) for x in range(120, 400, 10))
    lookback = timedelta(seconds=40)
    ctx = Context(
        store, Window(ticks[0] - lookback, ticks[-1]), default_thresholds(), "c", ticks=ticks
    )
    keys, values = ["switch", "port"], {"u": "tx_utilization_ratio"}
    over: dict[int, list[tuple[Any, ...]]] = {}
    for r in ctx.rows(
        aligned_sql(ctx, "switch_port_sample", keys, values, over=True), tick_params(ctx)
    ):
        over.setdefault(r["tick"], []).append((r["switch"], r["g"], r["u"]))
    for t in ticks:
        one = ctx.at(t)
        alone = sorted(
            (r["switch"], r["g"], r["u"])
            for r in one.rows(aligned_sql(one, "switch_port_sample", keys, values))
        )
        assert alone, t  # every tick has something to compare
        assert sorted(over.pop(round(t.timestamp() * 1000), [])) == alone, t
    assert over == {}


def test_a_day_of_inventory_costs_what_its_data_does(store: Store) -> None:
    """Pods created a day before 47 flow samples (what `inventory --from` of `kubectl get` and
    `sflow --from` of a short capture load): the batch run over all of it evaluates the ticks
    around the changes and the flows, not 8,640 ticks."""
    end = t0() + timedelta(hours=1)
    day = end - timedelta(days=1)
    pods = [
        {
            "valid_from": ms(day) + k * 1000,
            "cluster": "c",
            "namespace": ns,
            "pod": f"{ns}-{k}",
            "node": f"n{k}",
            "job": "j",
            "phase": "Running",
            "updated_at": ms(day),
        }
        for k, ns in enumerate(["team-a", "team-b"])
    ]
    store.insert(POD, POD.to_arrow(pods))
    leases = [
        {
            "valid_from": ms(day) + k * 1000,
            "cluster": "c",
            "ip": f"10.0.{k}.1",
            "namespace": ns,
            "pod": f"{ns}-{k}",
            "node": f"n{k}",
            "interface": "net1",
            "primary": False,
            "updated_at": ms(day),
        }
        for k, ns in enumerate(["team-a", "team-b"])
    ]
    store.insert(POD_IP_LEASE, POD_IP_LEASE.to_arrow(leases))
    flows = [
        {
            "ts": ms(end) - 60_000 + i * 1000,
            "cluster": "c",
            "agent": "10.254.0.1",
            "switch": "leaf1",
            "src_ip": "10.0.0.1",
            "dst_ip": "10.0.1.1",
            "src_port": 4000 + i,
            "dst_port": 4791,
            "protocol": 17,
            "vlan": 0,
            "bytes": 4096 * 8000,
            "packets": 8000,
            "frame_bytes": 4096,
            "sampling_rate": 8000,
        }
        for i in range(47)
    ]
    store.insert(FLOW_SAMPLE, FLOW_SAMPLE.to_arrow(flows))
    corr = Correlator(store, cluster="c")
    span = corr.data_span()
    assert span is not None
    res = corr.run(span[0], span[1] + timedelta(milliseconds=1))
    assert res.failed == {}
    ticks = res.windows + res.skipped
    # evaluated: the ticks after the pods appeared while a detector reading pods may still answer
    # differently (its window: gpu_idle_allocated's is 30 min), and the flows' minute
    assert ticks > 8000 and res.windows < 300, (res.windows, res.skipped)
    # the RDMA between the two tenants' pods is found, as of the flows' own time
    assert ("cross_tenant_rdma", "team-a/team-a-0->team-b/team-b-1") in found(store), found(store)


# --- on the simulator ---------------------------------------------------------------------------

# A small fabric with a node exporter and a switch collector that go silent, beside a lost GPU and
# a flapping link elsewhere: each told apart from the other.
GAPS = """
fabric:
  idcs: [{name: idc-a, sus: 2, datanodes: 2}]
  servers_per_su: 4
  uplinks_per_leaf: 2
duration_minutes: 6
jobs:
  - {name: train, tenant: team-a, nodes: 8, mode: soft, highest_tier: 2}
faults:
  - {kind: gpu_lost, start_minute: 1, target: gpu-idc-a-s000-00/gpu3}
  - {kind: collection_gap, start_minute: 1, duration_minutes: 3, target: gpu-idc-a-s000-01}
  - {kind: link_flap, start_minute: 2, duration_minutes: 2, target: "leaf-idc-a-s001-r0:Ethernet32"}
  - {kind: collection_gap, start_minute: 1.5, duration_minutes: 3, target: leaf-idc-a-s000-r1}
"""


def simulate_and_correlate(store: Store, tmp: Any, scenario: Any) -> tuple[Any, Any, Any]:
    """`scenario` through the pipeline into `store` (cluster c), one batch correlation over its
    window; (ground truth, score, incident score)."""
    from telemetry.sim import build
    from telemetry.sim.run import ingest
    from telemetry.sim.score import read_findings, read_incidents, score, score_incidents
    from telemetry.sinks.clickhouse import ClickHouseSink
    from telemetry.transforms import StampCluster

    sim = build(scenario)
    sink = ClickHouseSink(store, spool_dir=str(tmp / "spool"), batch_rows=50_000)
    ingest(sim, [sink], [StampCluster("c")])
    start = datetime.fromtimestamp(sim.start_ms / 1000, UTC)
    res = Correlator(store, cluster="c").run(start, start + timedelta(seconds=sim.steps * sim.dt))
    assert res.failed == {}
    truth = sim.ground_truth()
    sc = score(truth, read_findings(store, "c", truth.start_ms, truth.end_ms))
    inc = score_incidents(truth, read_incidents(store, "c", truth.start_ms, truth.end_ms))
    return truth, sc, inc


def _kinds(sc: Any) -> dict[str, tuple[Any, Any, Any]]:
    return {k.kind: (k.precision, k.recall, k.localization) for k in sc.kinds}


@pytest.mark.slow
@pytest.mark.parametrize("timing", ["realistic", "harsh"])
def test_exporter_down_is_not_a_lost_gpu_and_an_unpolled_switch_is_not_a_flap(
    store: Store, tmp_path: Any, timing: str
) -> None:
    import yaml

    from telemetry.sim.scenario import parse_scenario_yaml

    sc = parse_scenario_yaml(yaml.safe_load(GAPS), "gaps", "gaps").with_overrides(timing=timing)
    truth, got, inc = simulate_and_correlate(store, tmp_path, sc)
    kinds = _kinds(got)
    for k in ("gpu_lost", "link_flap", "collection_gap"):
        assert kinds[k] == (1.0, 1.0, 1.0), (k, kinds)
    assert (
        kinds["collection_gap"] and sum(1 for f in truth.faults if f.kind == "collection_gap") == 2
    )
    lost = {f["subject"] for f in fstore.read(store, kinds=["gpu_lost"])}
    assert lost == {"gpu-idc-a-s000-00/gpu3"}  # the silent node's GPUs are not lost
    flaps = {f["subject"] for f in fstore.read(store, kinds=["link_flap"])}
    assert not any(s.startswith("leaf-idc-a-s000-r1:") for s in flaps), flaps
    gaps = {f["subject"] for f in fstore.read(store, kinds=["collection_gap"])}
    assert gaps == {"gpu-idc-a-s000-01", "leaf-idc-a-s000-r1"}
    assert inc.false == [] and inc.missed == []


# each knob of the simulator's collection timing alone at its harsh value, then all of them
KNOBS: dict[str, dict[str, Any]] = {
    "phase": {"node": {"phase": 1.0}, "switch": {"phase": 1.0}},
    "jitter": {"node": {"jitter_seconds": 2.0}, "switch": {"jitter_seconds": 2.0}},
    "gnmi-leaf": {"switch": {"transport": "gnmi", "leaf_jitter_seconds": 0.5}},
    "snmp-walk": {"switch": {"transport": "snmp", "walk_seconds": 1.0}},
    "skew": {"node": {"skew_seconds": 1.0}, "switch": {"skew_seconds": 1.0}},
    "missed": {"node": {"missed": 0.05}, "switch": {"missed": 0.05}},
    "restarts": {"node": {"restarts_per_hour": 6}, "switch": {"restarts_per_hour": 6}},
    "duplicates": {"duplicates": 0.01},
    "sflow-loss": {"sflow_loss": 0.10},
    "harsh": {"profile": "harsh"},
}


@pytest.mark.slow
@pytest.mark.parametrize("knob", sorted(KNOBS))
def test_small_scores_under_each_timing_knob(store: Store, tmp_path: Any, knob: str) -> None:
    """`small` (every fault kind once) with one timing disturbance at a time, and all at once:
    every kind found and localized with no false finding, an incident per fault at most 1.2,
    no false incident."""
    from telemetry.sim.scenario import load_scenario

    base = load_scenario("small")
    data = base.model_dump()
    data["telemetry"] = {"profile": "ideal", **KNOBS[knob]} if knob != "harsh" else KNOBS[knob]
    sc = type(base).model_validate(data)
    _, got, inc = simulate_and_correlate(store, tmp_path, sc)
    bad = {k: v for k, v in _kinds(got).items() if v != (1.0, 1.0, 1.0)}
    assert bad == {}, bad
    assert inc.false == [] and inc.missed == [], (inc.false, inc.missed)
    assert inc.incidents_per_fault is not None and inc.incidents_per_fault <= 1.2


def _follow(store: Store, clock: Any, corr: Correlator) -> tuple[Any, Any, list[BaseException]]:
    import threading

    from telemetry.correlate.engine import follow

    stop = threading.Event()
    errors: list[BaseException] = []

    def target() -> None:
        try:
            follow(store, None, stop, clock=clock, corr=corr)
        except BaseException as e:  # surfaced by the test: a dead follower fails it
            errors.append(e)

    th = threading.Thread(target=target, daemon=True)
    th.start()
    assert clock.wait_idle()
    return stop, th, errors


@pytest.mark.parametrize("rejudge", [True, False], ids=["rejudged", "without-rejudging"])
def test_a_late_batch_changes_findings_in_follow(store: Store, rejudge: bool) -> None:
    """An XID logged at 15 s reaches the store at 80 s, after every window holding it was judged
    (the rate window is 30 s): the follower judges the 40 s evaluation again and the finding
    opens as of then. Without re-judging (the control) it would never be found."""
    from telemetry.correlate.clock import ManualClock
    from telemetry.records import GPU_EVENT, GPU_SAMPLE

    s = t0()
    # a GPU sampled all along, so the store is not empty and every tick is judged
    store.insert(
        GPU_SAMPLE,
        GPU_SAMPLE.to_arrow(
            [
                {"ts": ms(s) + i * 10_000 - 3000, "cluster": "c", "node": "n1", "gpu": 0, "up": 1}
                for i in range(1, 20)
            ]
        ),
    )
    clock = ManualClock(s)
    corr = Correlator(store, cluster="c")
    if not rejudge:
        from telemetry.correlate.engine import RunResult

        corr.rejudge = lambda now: RunResult()  # type: ignore[method-assign]
    stop, th, errors = _follow(store, clock, corr)
    for _ in range(8):  # to 80 s, judged tick by tick
        clock.advance(10)
        assert clock.wait_idle()
    event = {
        "ts": ms(s) + 15_000,
        "cluster": "c",
        "node": "n1",
        "gpu": 0,
        "event": "xid",
        "xid": 79,
    }
    store.insert(GPU_EVENT, GPU_EVENT.to_arrow([event]))
    for _ in range(3):
        clock.advance(10)
        assert clock.wait_idle()
    stop.set()
    th.join(30)
    assert not errors, errors
    xids = fstore.read(store, kinds=["gpu_xid"])
    if not rejudge:
        assert xids == []
        return
    (f,) = xids
    assert f["subject"] == "n1/gpu0" and corr.rejudged >= 1
    assert f["first_seen"].replace(tzinfo=UTC) - s == timedelta(seconds=40)
