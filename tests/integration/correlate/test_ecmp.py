"""ecmp_imbalance on the embedded store, with samples as a fabric sends them (each switch at its
own phase, sFlow samples at their own times): a member that turns hot because a job's new flows
hashed onto it is found within `ecmp.min_seconds_with_flows`; a member that turns hot without
such flows (a burst, or flows that sat on it all along) only after `ecmp.min_seconds`. Each case
by the per-tick loop and by the set-based form alike."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest

from telemetry.correlate import findings as fstore
from telemetry.correlate.engine import Correlator
from telemetry.correlate.thresholds import default_thresholds
from telemetry.records import FLOW_SAMPLE, LLDP_LINK, POD, POD_IP_LEASE, SWITCH_PORT_SAMPLE
from telemetry.store import Store
from tests.integration.correlate.test_detectors import found, ms, run, t0

TH = default_thresholds()["ecmp"]
STEP_S = 10
ONSET_S = 120  # when the member turns hot (the new job starts), seconds after the data's start
SPAN_S = 300
MEMBERS = [f"Ethernet{256 + k * 8}" for k in range(4)]  # leaf1's uplinks, one per spine
HOT = MEMBERS[0]
FRAME_BYTES = 4154 * 8_000_000  # one sFlow sample at 1:8,000,000


def _fabric(store: Store, s: datetime, silent: tuple[str, float, float] | None = None) -> None:
    """leaf1's four uplinks and leaf2's (balanced), each switch sampling at its own phase; from
    ONSET_S leaf1's first member runs at 0.85 against its siblings' 0.2. `silent`: (switch, from
    second, to second) when that switch sends nothing."""
    ports: dict[tuple[str, str, str], tuple[float, float]] = {
        ("leaf1", "leaf", p): ((0.3, 0.85) if p == HOT else (0.3, 0.2)) for p in MEMBERS
    }
    ports |= {("leaf2", "leaf", p): (0.5, 0.5) for p in MEMBERS}
    ports |= {(f"spine{k}", "spine", "Ethernet0"): (0.3, 0.3) for k in range(4)}
    rows = []
    for (sw, role, port), (before, after) in ports.items():
        phase = -(300 + (sum(map(ord, sw)) * 977) % 9300)  # 0.3 .. 9.6 s before the grid
        for i in range(SPAN_S // STEP_S + 2):
            t = ms(s) + i * STEP_S * 1000 + phase
            u = after if t >= ms(s) + ONSET_S * 1000 else before
            if silent and sw == silent[0] and silent[1] <= (t - ms(s)) / 1000 < silent[2]:
                continue
            rows.append(
                {
                    "ts": t,
                    "cluster": "c",
                    "switch": sw,
                    "role": role,
                    "port": port,
                    "up": 1,
                    "speed_bps": 400e9,
                    "tx_utilization_ratio": u,
                    "tx_bytes_per_second": u * 400e9 / 8,
                }
            )
    store.insert(SWITCH_PORT_SAMPLE, SWITCH_PORT_SAMPLE.to_arrow(rows))
    links = []
    for k, p in enumerate(MEMBERS):
        for a, ap, b, bp in [
            ("leaf1", p, f"spine{k}", "Ethernet0"),
            ("leaf2", p, f"spine{k}", "Ethernet8"),
        ]:
            for x in ((a, ap, b, bp), (b, bp, a, ap)):
                links.append(
                    dict(
                        zip(
                            ("local_device", "local_port", "remote_device", "remote_port"),
                            x,
                            strict=True,
                        )
                    )
                )
    store.insert(
        LLDP_LINK,
        LLDP_LINK.to_arrow([{"ts": ms(s), "cluster": "c", "source": "t", **x} for x in links]),
    )


def _jobs(store: Store, s: datetime, eval_start_s: float) -> None:
    """Two jobs of two servers each: team-a/llm on n1 -> n2 since long before, team-b/eval on
    n3 -> n4 from `eval_start_s`; one IP per pod."""
    pods, leases = [], []
    for ns, job, start, nodes in [
        ("team-a", "llm", ms(s) - 3_600_000, ("n1", "n2")),
        ("team-b", "eval", ms(s) + int(eval_start_s * 1000), ("n3", "n4")),
    ]:
        for k, node in enumerate(nodes):
            pod = f"{job}-{k}"
            common = {"valid_from": start, "cluster": "c", "namespace": ns, "pod": pod}
            pods.append(
                {**common, "node": node, "job": job, "phase": "Running", "updated_at": start}
            )
            leases.append(
                {
                    **common,
                    "ip": f"10.0.{node[1:]}.1",
                    "node": node,
                    "interface": "net1",
                    "primary": False,
                    "updated_at": start,
                }
            )
    store.insert(POD, POD.to_arrow(pods))
    store.insert(POD_IP_LEASE, POD_IP_LEASE.to_arrow(leases))


def _flows(store: Store, s: datetime, flows: list[tuple[Any, ...]]) -> None:
    """sFlow samples leaf1 takes of each flow (source IP, destination IP, destination QP, the
    member it leaves by, from second[, to second]), one about every 3.3 s at the flow's own
    phase, to the data's end unless it says."""
    rows: list[dict[str, Any]] = []
    for src, dst, qp, port, since, *until in flows:
        phase = (qp * 7919) % 3300
        t = ms(s) + since * 1000 + phase
        while t < ms(s) + (until[0] if until else SPAN_S) * 1000:
            rows.append(
                {
                    "ts": t,
                    "cluster": "c",
                    "agent": "10.254.0.1",
                    "switch": "leaf1",
                    "out_port": port,
                    "src_ip": src,
                    "dst_ip": dst,
                    "src_port": 49152 + qp % 1000,
                    "dst_port": 4791,
                    "protocol": 17,
                    "vlan": 0,
                    "dest_qp": qp,
                    "bytes": FRAME_BYTES,
                    "packets": 8_000_000,
                    "frame_bytes": 4154,
                    "sampling_rate": 8_000_000,
                }
            )
            t += 3300
    store.insert(FLOW_SAMPLE, FLOW_SAMPLE.to_arrow(rows))


LLM, EVAL = ("10.0.1.1", "10.0.2.1"), ("10.0.3.1", "10.0.4.1")
# llm's eight QPs, two on each member, since the start
SPREAD = [(*LLM, 0x100 + q, MEMBERS[q % 4], 0) for q in range(8)]


PILED = SPREAD + [(*EVAL, 0x200 + q, HOT, ONSET_S) for q in range(2)]
STARTS = ONSET_S - 5  # eval's pods begin just before its flows


@pytest.mark.parametrize(
    ("flows", "eval_start_s", "early"),
    [
        # eval starts at ONSET_S and both of its QPs hash onto the member that turns hot
        (PILED, STARTS, True),
        # the member turns hot with no new flows on it: a burst is judged over ecmp.min_seconds
        (SPREAD, STARTS, False),
        # eval's two QPs sat on the member all along (it ran cool, then busier): not new there
        (SPREAD + [(*EVAL, 0x200 + q, HOT, 0) for q in range(2)], STARTS, False),
        # eval starts at ONSET_S with its four QPs spread over the group: nothing piled
        (SPREAD + [(*EVAL, 0x200 + q, MEMBERS[q], ONSET_S) for q in range(4)], STARTS, False),
        # eval's pods ran for an hour, its flows silent (a hang) until ONSET_S: new on the
        # member, but the job did not start
        (PILED, -3600, False),
        # eval's pods ran for an hour, its two QPs on two other members until ONSET_S, then
        # rehashed onto the member that turns hot (a link of their path went down): they moved
        # there, named in the evidence, but judged over ecmp.min_seconds like any burst (the
        # shapes scenario's remote link flap rehashed flows for 30 s: no collision)
        (
            SPREAD
            + [(*EVAL, 0x200 + q, MEMBERS[1 + q], 0, ONSET_S) for q in range(2)]
            + PILED[len(SPREAD) :],
            -3600,
            False,
        ),
    ],
    ids=[
        "new-flows-piled",
        "burst",
        "flows-there-all-along",
        "new-flows-spread",
        "after-a-hang",
        "rehashed",
    ],
)
@pytest.mark.parametrize("per_tick", [True, False], ids=["loop", "set-based"])
def test_piled_flows_shorten_the_time_a_hot_member_needs(
    store: Store, flows: list[tuple[Any, ...]], eval_start_s: float, early: bool, per_tick: bool
) -> None:
    s = t0()
    _fabric(store, s)
    _jobs(store, s, eval_start_s)
    _flows(store, s, flows)
    run(store, s, 5, only=["ecmp_imbalance"], per_tick=per_tick)
    assert found(store) == {("ecmp_imbalance", f"leaf1:{HOT}")}
    (f,) = fstore.read(store, kinds=["ecmp_imbalance"])
    after = (f["first_seen"].timestamp() * 1000 - ms(s)) / 1000 - ONSET_S
    piled = f["evidence"]["piled_jobs"]
    if early:
        # two grid points hot (ecmp.min_seconds_with_flows), the first up to one interval after
        # the onset (the switch's phase)
        assert after <= TH["min_seconds_with_flows"] + STEP_S, after
    else:
        assert after >= TH["min_seconds"], after
    # the evidence as last written (the window's end): the job whose flows sit piled there,
    # whether or not they are new by then
    if flows[-1][3] == HOT:
        assert [(j["job"], j["flows_per_member"]) for j in piled] == [("team-b/eval", [2, 0, 0, 0])]
        assert "team-b/eval hashed 2 of its 2 flows through the group onto it" in f["summary"]
    else:
        assert piled == []


def test_members_that_change_are_judged_per_tick_by_both_forms(chdb_dsn: str) -> None:
    """The uplink group changes under the hot member: spine2 sends nothing for 110 s (the ticks
    whose window holds none of its samples know no role for it: leaf1's and leaf2's links to it
    are no members there), and from 200 s LLDP shows leaf1's last uplink facing a host. The
    set-based form compares each tick's own members, as the loop does: the same findings."""
    s = t0()
    rows: dict[bool, list[tuple[Any, ...]]] = {}
    for per_tick in (True, False):
        store = Store(chdb_dsn, database=f"ecmp_{uuid.uuid4().hex[:8]}")
        store.migrate()
        try:
            _fabric(store, s, silent=("spine2", 150, 260))
            moved = {"ts": ms(s) + 200_000, "cluster": "c", "source": "t", "local_device": "leaf1",
                     "local_port": MEMBERS[3], "remote_device": "n9", "remote_port": "eth0"}  # fmt: skip
            store.insert(LLDP_LINK, LLDP_LINK.to_arrow([moved]))
            _jobs(store, s, STARTS)
            _flows(store, s, PILED)
            res = Correlator(store, cluster="c", only=["ecmp_imbalance"], per_tick=per_tick).run(
                s, s + timedelta(minutes=5)
            )
            assert not res.failed
            assert found(store) == {("ecmp_imbalance", f"leaf1:{HOT}")}
            (f,) = fstore.read(store, kinds=["ecmp_imbalance"])
            # as last written: leaf1's last uplink faces a host, spine2 is heard again
            assert f["evidence"]["group"] == [f"leaf1:{p}" for p in MEMBERS[:3]]
            rows[per_tick] = store.query_rows(
                f"SELECT * EXCEPT (updated_at) FROM {store.table('finding')} ORDER BY ALL"
            )
        finally:
            store.client.command(f"DROP DATABASE IF EXISTS `{store.database}`")
    assert rows[False] == rows[True]
