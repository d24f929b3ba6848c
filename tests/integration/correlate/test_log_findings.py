"""The log-born findings (detectors/logs.py) on the real embedded store: a rank pair named by its
first status-12 completion error with the flush errors after it as evidence only, the rank that
did not arrive at a collective, a Socket fallback only on nodes with RDMA NICs, GDR off and
channels off their rail; incidents rooted at the link flap or the lost GPU the symptoms follow;
and nothing at all from a healthy job's INFO lines.

A two-node job (pods team/job-0 on n1 and team/job-1 on n2, two GPUs each, one NIC per GPU on
rails 0 and 1); rail 0 of n1 sits under leaf0a, of n2 under leaf0b, both leaves up to spine0."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from telemetry.correlate import findings as fstore
from telemetry.correlate.detectors.logs import (
    collective_timeout,
    nccl_gdr_disabled,
    nccl_network_error,
    nccl_nic_off_rail,
    nccl_transport_fallback,
)
from telemetry.correlate.findings import Finding
from telemetry.correlate.registry import Context, Window, detectors
from telemetry.correlate.thresholds import default_thresholds
from telemetry.records import GPU_NIC_AFFINITY, LLDP_LINK, LOG_EVENT, POD, POD_IP_LEASE
from telemetry.store import Store
from tests.integration.correlate.test_incidents import unexplained_numbers

T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=20)
HOUR = timedelta(hours=1)
STEP = timedelta(seconds=10)


def ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def ctx(store: Store, end: datetime, seconds: float = 120) -> Context:
    return Context(store, Window(end - timedelta(seconds=seconds), end), default_thresholds(), "c")


def _inv(store: Store, nodes: tuple[str, ...] = ("n1", "n2"), rdma: bool = True,
         host_network: bool = False) -> None:  # fmt: skip
    """Pods job-0.. on `nodes`, their RDMA IPs, the GPUs' NICs and LLDP (rdma=False: nodes
    without RDMA NICs: no NIC shares a GPU's PCIe switch, no RDMA lease; host_network: the pods
    use their nodes' NICs, whose addresses no lease holds)."""
    t = ms(T0 - HOUR)
    pods, lease, aff, lldp = [], [], [], []
    for k, node in enumerate(nodes):
        pods.append({"cluster": "c", "namespace": "team", "pod": f"job-{k}", "uid": f"u{k}",
                     "node": node, "job": "job", "phase": "Running", "gpus": "[0, 1]",
                     "valid_from": t, "updated_at": t})  # fmt: skip
        for g in range(2):
            aff.append({"ts": t, "cluster": "c", "node": node, "gpu": g, "gpu_pci": f"0000:{g}",
                        "nic": f"mlx5_{g}" if rdma else "", "netdev": f"eth{g}" if rdma else "",
                        "pcie_switch": "", "numa_node": 0, "rail": g if rdma else None,
                        "direct_nic": int(rdma)})  # fmt: skip
            if not rdma:
                continue
            lease.append({"cluster": "c", "ip": f"10.{128 + g}.0.{k + 1}", "namespace": "team",
                          "pod": f"job-{k}", "node": node, "interface": f"net{g + 1}",
                          "network": f"rdma-rail{g}", "mac": "", "pci_address": "",
                          "primary": False, "valid_from": t, "updated_at": t})  # fmt: skip
            leaf = f"leaf{g}{'ab'[k % 2]}"
            lldp.append({"ts": t, "cluster": "c", "local_device": leaf, "local_port": f"Ethernet{k}",
                         "remote_device": node, "remote_port": f"eth{g}", "remote_chassis_id": "",
                         "source": "sim"})  # fmt: skip
    for leaf in ("leaf0a", "leaf0b"):
        lldp.append({"ts": t, "cluster": "c", "local_device": leaf, "local_port": "Ethernet128",
                     "remote_device": "spine0", "remote_port": f"Ethernet6{leaf[-1] == 'b'}",
                     "remote_chassis_id": "", "source": "sim"})  # fmt: skip
    store.insert(POD, POD.to_arrow(pods))
    store.insert(GPU_NIC_AFFINITY, GPU_NIC_AFFINITY.to_arrow(aff))
    if lease:
        if not host_network:
            store.insert(POD_IP_LEASE, POD_IP_LEASE.to_arrow(lease))
        store.insert(LLDP_LINK, LLDP_LINK.to_arrow(lldp))


def ev(t: datetime, pod: int | None, kind: str, node: str = "", **fields: Any) -> dict[str, Any]:
    return {"ts": ms(t), "cluster": "c", "node": node or f"n{(pod or 0) + 1}",
            "namespace": "team" if pod is not None else "", "pod": f"job-{pod}" if pod is not None else "",
            "pod_uid": "", "container": "worker" if pod is not None else "",
            "source": "cri" if pod is not None else "kmsg", "kind": kind,
            "fields": json.dumps(fields), "excerpt": "", "file": "", "line": 0}  # fmt: skip


def init(t: datetime, nodes: int = 2, *, net: str = "IB", gdr: bool = True,
         dev: dict[int, int] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Every rank's NCCL init at `t`: 2 ranks per pod; `dev`: rank -> the NIC index its channel
    uses (default its own GPU's)."""
    out = [ev(t, 0, "nccl_version", nccl_version="2.21.5")]
    n = nodes * 2
    for r in range(n):
        p, g = r // 2, r % 2
        if net == "IB":
            out.append(ev(t, p, "nccl_ib_devices", nics=["mlx5_0", "mlx5_1"]))
            if not gdr:
                out.append(ev(t, p, "nccl_gdr_disabled", nic=f"mlx5_{g}"))
        out.append(ev(t + timedelta(milliseconds=100), p, "nccl_net_selected", net=net))
        d = (dev or {}).get(r, g) if net == "IB" else 0
        out.append(ev(t + timedelta(milliseconds=200), p, "nccl_channel_net", channel=0,
                      src_rank=r, dst_rank=(r + 2) % n, net_dev=d, gdr=gdr and net == "IB",
                      pxn_proxy=None))  # fmt: skip
        out.append(ev(t + timedelta(milliseconds=300), p, "nccl_init_complete", rank=r, nranks=n,
                      comm_id="0xabc"))  # fmt: skip
    return out


def ib(t: datetime, pod: int, cuda: int, peer: str, status: int, local: str) -> dict[str, Any]:
    return ev(t, pod, "ib_completion_error", host=f"job-{pod}", pid=100 + cuda, cuda_dev=cuda,
              peer_ip=peer, peer_port=47112, status=status,
              status_name={12: "IBV_WC_RETRY_EXC_ERR", 5: "IBV_WC_WR_FLUSH_ERR"}[status],
              vendor_err=129 if status == 12 else 249, direction="Recv",
              local_gid=f"::ffff:{local}", remote_gid=f"::ffff:{peer}")  # fmt: skip


def timeouts(t: datetime, seq: dict[int, int]) -> list[dict[str, Any]]:
    return [ev(t + timedelta(milliseconds=20 * r), r // 2, "torch_watchdog_timeout", rank=r, pg=0,
               seq_num=s, op_type="ALLREDUCE", timeout_ms=600000, ran_ms=600027)
            for r, s in seq.items()]  # fmt: skip


def put(store: Store, rows: list[dict[str, Any]]) -> None:
    store.insert(LOG_EVENT, LOG_EVENT.to_arrow(rows))


def test_first_status_12_names_the_pair_and_the_flush_errors_are_its_evidence(store: Store) -> None:
    """rank 0 (job-0, GPU 0) gets status 12 from 10.128.0.2 (job-1's rail-0 IP: rank 2), then
    three flush errors; rank 2 logs two flush errors from rank 0: one finding naming 0<->2 with
    five flush errors. Flush errors alone between ranks 1 and 3 (rail 1) name no pair."""
    _inv(store)
    t = T0 + timedelta(minutes=5)
    rows = init(T0)
    rows.append(ib(t, 0, 0, "10.128.0.2", 12, "10.128.0.1"))
    rows += [
        ib(t + timedelta(milliseconds=40 * k), 0, 0, "10.128.0.2", 5, "10.128.0.1")
        for k in (1, 2, 3)
    ]
    rows += [
        ib(t + timedelta(milliseconds=150 + k), 1, 0, "10.128.0.1", 5, "10.128.0.2") for k in (0, 1)
    ]
    rows += [ib(t + timedelta(milliseconds=k), 0, 1, "10.129.0.2", 5, "10.129.0.1") for k in (0, 1)]
    put(store, rows)
    fs = nccl_network_error(ctx(store, t + timedelta(seconds=30)))
    assert [f.subject for f in fs] == ["team/job/rank0<->rank2"]
    ev_ = fs[0].evidence
    assert (
        ev_["flush_errors"] == 5
        and ev_["errors"] == 6
        and ev_["status_name"] == "IBV_WC_RETRY_EXC_ERR"
    )
    assert ev_["reporter"]["nic"] == "n1/mlx5_0" and ev_["peer"]["gpu"] == "n2/gpu0"
    assert (
        ev_["reporter"]["leaf_port"] == "leaf0a:Ethernet0"
        and ev_["peer"]["leaf_port"] == "leaf0b:Ethernet1"
    )
    # two leaves: the uplinks of both are on the path
    assert {"leaf0a:Ethernet128", "leaf0b:Ethernet128"} <= set(ev_["path"])
    # before the status-12 line, its flush errors alone name nothing
    assert nccl_network_error(ctx(store, t - timedelta(milliseconds=1))) == []


def test_a_host_network_peer_resolves_through_its_own_local_gid(store: Store) -> None:
    """Host-network pods: 10.128.0.2 is n2's mlx5_0's own address, in no lease. Rank 0's status-12
    error names it; rank 2 (job-1, GPU 0) printed it as its local GID in its flush errors, so the
    pair 0<->2 resolves to n2's GPU 0, NIC and leaf port. Without the peer's own line the address
    stays unresolved: no finding, nothing guessed."""
    _inv(store, host_network=True)
    t = T0 + timedelta(minutes=5)
    first = [ib(t, 0, 0, "10.128.0.2", 12, "10.128.0.1")]
    put(store, init(T0) + first)
    assert nccl_network_error(ctx(store, t + timedelta(seconds=30))) == []
    put(store, [ib(t + timedelta(milliseconds=150), 1, 0, "10.128.0.1", 5, "10.128.0.2")])
    (f,) = nccl_network_error(ctx(store, t + timedelta(seconds=30)))
    assert f.subject == "team/job/rank0<->rank2"
    peer = f.evidence["peer"]
    assert (peer["gpu"], peer["nic"], peer["leaf_port"]) == (
        "n2/gpu0",
        "n2/mlx5_0",
        "leaf0b:Ethernet1",
    )
    assert f.evidence["reporter"]["nic"] == "n1/mlx5_0" and f.evidence["flush_errors"] == 1


def test_the_rank_that_never_reports_is_named_and_so_is_one_behind(store: Store) -> None:
    _inv(store)
    t = T0 + timedelta(minutes=5)
    put(store, init(T0) + timeouts(t, {0: 48211, 1: 48211, 3: 48211}))
    (f,) = collective_timeout(ctx(store, t + timedelta(seconds=30)))
    assert (f.subject_type, f.subject) == ("gpu", "n2/gpu0")
    assert f.evidence["missing_ranks"] == [2] and f.evidence["timed_out_ranks"] == 3
    assert f.evidence["missing"] == [{"rank": 2, "pod": "job-1 in team", "gpu": "n2/gpu0"}]
    # not judged until the others had time to report
    assert collective_timeout(ctx(store, t + timedelta(seconds=1))) == []


def test_a_rank_at_an_older_seqnum_did_not_arrive(store: Store) -> None:
    _inv(store)
    t = T0 + timedelta(minutes=5)
    put(store, init(T0) + timeouts(t, {0: 48211, 1: 48210, 2: 48211, 3: 48211}))
    (f,) = collective_timeout(ctx(store, t + timedelta(seconds=30)))
    assert f.subject == "n1/gpu1" and f.evidence["missing_ranks"] == [1]
    assert f.evidence["seq_nums"] == [
        {"seq_num": 48210, "ranks": 1},
        {"seq_num": 48211, "ranks": 3},
    ]
    assert unexplained_numbers(f.summary, f.subject, f.evidence) == []


def test_socket_fallback_only_on_nodes_with_rdma_nics(store: Store) -> None:
    """The same Socket lines: a finding on RDMA nodes; on nodes without RDMA NICs (another
    cluster, same store) TCP is all there is, and nothing is said."""
    _inv(store)
    put(store, init(T0, net="Socket"))
    (f,) = nccl_transport_fallback(ctx(store, T0 + timedelta(minutes=2), 3600))
    assert f.subject == "team/job" and f.evidence["pods"] == ["team/job-0", "team/job-1"]
    assert f.evidence["rdma_nodes"] == 2
    assert unexplained_numbers(f.summary, f.subject, f.evidence) == []
    # restarted on IB: the latest init holds
    put(store, init(T0 + timedelta(minutes=3)))
    assert nccl_transport_fallback(ctx(store, T0 + timedelta(minutes=4), 3600)) == []


def test_socket_on_nodes_without_rdma_nics_is_no_finding(store: Store) -> None:
    _inv(store, rdma=False)
    put(store, init(T0, net="Socket"))
    assert nccl_transport_fallback(ctx(store, T0 + timedelta(minutes=2), 3600)) == []


def test_gdr_disabled_and_a_channel_off_its_rail(store: Store) -> None:
    _inv(store)
    put(store, init(T0, gdr=False, dev={3: 0}))  # rank 3 (job-1, GPU 1) sends through mlx5_0
    c = ctx(store, T0 + timedelta(minutes=2), 3600)
    (g,) = nccl_gdr_disabled(c)
    assert g.subject == "team/job" and g.evidence["hcas"] == ["mlx5_0", "mlx5_1"]
    assert unexplained_numbers(g.summary, g.subject, g.evidence) == []
    (o,) = nccl_nic_off_rail(c)
    assert unexplained_numbers(o.summary, o.subject, o.evidence) == []
    assert o.evidence["off_rail"] == [
        {"rank": 3, "gpu": "n2/gpu1", "nic": "n2/mlx5_0", "rail_nic": "n2/mlx5_1"}
    ]


def test_a_healthy_jobs_info_lines_make_no_finding(store: Store) -> None:
    _inv(store)
    put(store, init(T0))
    c = ctx(store, T0 + timedelta(minutes=2), 3600)
    names = [d for d in detectors().values() if d.needs == ("log_event",)]
    assert {d.name for d in names} == {"nccl_network_error", "collective_timeout",
                                       "nccl_transport_fallback", "nccl_gdr_disabled",
                                       "nccl_nic_off_rail"}  # fmt: skip
    for d in names:
        assert d.fn(Context(c.store, c.window, c.thresholds, "c", detector=d)) == []


def c_seconds(d: Any) -> float:
    th = default_thresholds()
    return sum(float(th["logs"][k.split(".")[1]]) for k in d.lookback)


def test_a_link_flap_a_few_seconds_before_roots_the_incident(store: Store) -> None:
    _inv(store)
    t = T0 + timedelta(minutes=5)
    put(store, init(T0) + [ib(t + timedelta(seconds=3), 0, 0, "10.128.0.2", 12, "10.128.0.1")]
        + [ib(t + timedelta(seconds=3, milliseconds=40 * k), 0, 0, "10.128.0.2", 5, "10.128.0.1")
           for k in (1, 2)])  # fmt: skip
    flap = Finding("link_flap", "fabric", "warning", "port", "leaf0a:Ethernet128",
                   "leaf0a:Ethernet128 went down 1 time(s) in the window",
                   {"link_down_events": 1, "down_samples": 1})  # fmt: skip
    groups = _groups(store, t, t + timedelta(seconds=40), [flap])
    with_err = [g for g in groups if "nccl_network_error" in {m.kind for m in g.members}]
    assert len(with_err) == 1
    g = with_err[0]
    assert (g.root.kind, g.root.subject) == ("link_flap", "leaf0a:Ethernet128")
    assert [m.subject for m in g.members if m.kind == "nccl_network_error"] == [
        "team/job/rank0<->rank2"
    ]


def test_a_lost_gpu_roots_the_other_ranks_watchdog_timeouts(store: Store) -> None:
    """Xid 79 on n2's GPU 0 (rank 2): ranks 0, 1, 3 time out; one incident rooted at gpu_lost."""
    _inv(store)
    t = T0 + timedelta(minutes=5)
    xid = ev(t, None, "xid", node="n2", pci_bus="0000:18:00", xid=79, pid=None, process=None)
    put(store, [*init(T0), xid, *timeouts(t + timedelta(seconds=60), {0: 7, 1: 7, 3: 7})])
    lost = Finding("gpu_lost", "node", "critical", "gpu", "n2/gpu0",
                   "GPU 0 on n2 is lost (fell off the bus / NVML GPU_IS_LOST)",
                   {"down_samples": 3, "samples": 3, "lost_events": 1})  # fmt: skip
    groups = _groups(store, t, t + timedelta(seconds=90), [lost])
    (g,) = [g for g in groups if "collective_timeout" in {m.kind for m in g.members}]
    assert (g.root.kind, g.root.subject) == ("gpu_lost", "n2/gpu0")
    assert (
        g.roles[next(m.finding_id for m in g.members if m.kind == "collective_timeout")]
        == "consequence"
    )


def test_a_timeout_with_no_cause_at_hand_roots_its_own_incident(store: Store) -> None:
    _inv(store)
    t = T0 + timedelta(minutes=5)
    put(store, init(T0) + timeouts(t, {0: 9, 1: 9, 3: 9}))
    (g,) = _groups(store, t, t + timedelta(seconds=30), [])
    assert (g.root.kind, g.root.subject) == ("collective_timeout", "n2/gpu0")


def _groups(store: Store, start: datetime, end: datetime, extra: list[Finding]) -> list[Any]:
    """Tick every 10 s: the log detectors plus `extra` (a cause another detector found), through
    the finding tracker; then the incidents' grouping of every finding seen."""
    from telemetry.correlate.causes import effect_kinds
    from telemetry.correlate.incidents import Member, group

    ft = fstore.Tracker(store, "c", timedelta(seconds=60))
    specs = [d for d in detectors().values() if d.needs == ("log_event",)]
    seen: dict[str, Any] = {}
    t = start
    while t <= end:
        fs = list(extra)
        for d in specs:
            c = ctx(store, t, c_seconds(d))
            c.detector = d
            fs += d.fn(c)
        for f in fs:
            f.window_start, f.window_end = t - STEP, t
        for f in ft.observe(t, fs):
            seen[f.finding_id] = Member.of(f)
        t += STEP
    return group(seen.values(), consequences=set(effect_kinds()), gap=timedelta(seconds=60))


def test_report_job_shows_its_log_events_on_a_timeline(store: Store) -> None:
    """Three ranks' watchdog timeouts and the Xid on its node, one line per kind and place; the
    init lines are counted, not listed; another job's lines stay out."""
    from telemetry.correlate.report import job_report, render_text

    _inv(store)
    t = T0 + timedelta(minutes=5)
    other = ev(t, 0, "torch_watchdog_timeout", rank=0, pg=0, seq_num=1, op_type="ALLREDUCE",
               timeout_ms=1, ran_ms=2) | {"namespace": "other"}  # fmt: skip
    put(store, init(T0) + timeouts(t, {0: 5, 1: 5, 3: 5}) + [other]
        + [ev(t - timedelta(seconds=60), None, "xid", node="n2", pci_bus="0000:18:00", xid=79)])  # fmt: skip
    rep = job_report(store, "team/job", T0 - timedelta(minutes=1), t + timedelta(minutes=1),
                     cluster="c")  # fmt: skip
    trouble = [(e["kind"], e["place"], e["n"]) for e in rep.log_events if e["trouble"]]
    assert trouble == [("xid", "n2", 1), ("torch_watchdog_timeout", "team/job-0", 2),
                       ("torch_watchdog_timeout", "team/job-1", 1)]  # fmt: skip
    text = render_text(rep)
    assert "log events" in text and "torch_watchdog_timeout   team/job-0 x2" in text
    assert "(17 NCCL init line(s)" in text  # 1 version + 4 ranks x 4


def test_ranks_whose_init_is_older_than_read_are_named_by_their_gpus(store: Store) -> None:
    """A job running for longer than logs.state_seconds: its Init COMPLETE lines are out of
    reach, the pair is still named, by its GPUs."""
    _inv(store)
    t = T0 + timedelta(minutes=5)
    put(store, [ib(t, 0, 0, "10.128.0.2", 12, "10.128.0.1")])
    (f,) = nccl_network_error(ctx(store, t + timedelta(seconds=30)))
    assert f.subject == "team/job/n1/gpu0<->n2/gpu0"
    assert (
        f.evidence["reporter_rank"] is None and f.evidence["peer_leaf_port"] == "leaf0b:Ethernet1"
    )


def test_the_hca_an_ib_error_names_is_the_reporters_nic(store: Store) -> None:
    """Host-network pods (no lease for the local address): NCCL 2.2x+ names the HCA the error came
    from, here mlx5_1 on rank 0's node although rank 0 (GPU 0) sits on rail 0 - the NIC NCCL
    used wins over the GPU's rail NIC. The peer resolves through its own line's local GID and
    GPU, whatever HCA name it printed."""
    _inv(store, host_network=True)
    t = T0 + timedelta(minutes=5)
    first = ib(t, 0, 0, "10.128.0.2", 12, "10.128.0.1")
    first["fields"] = json.dumps(json.loads(first["fields"]) | {"hca": "mlx5_1"})
    peer = ib(t + timedelta(milliseconds=150), 1, 0, "10.128.0.1", 5, "10.128.0.2")
    peer["fields"] = json.dumps(json.loads(peer["fields"]) | {"hca": "mlx5_7"})
    put(store, [*init(T0), first, peer])
    (f,) = nccl_network_error(ctx(store, t + timedelta(seconds=30)))
    assert f.evidence["reporter"]["nic"] == "n1/mlx5_1"
    assert f.evidence["reporter"]["leaf_port"] == "leaf1a:Ethernet0"
    assert f.evidence["peer"]["nic"] == "n2/mlx5_0"


def test_timeouts_printed_without_a_seqnum_still_count_as_reported(store: Store) -> None:
    """PyTorch 1.8's WorkNCCL had no SeqNum: ranks 0, 1 and 3 reported, rank 2 did not."""
    _inv(store)
    t = T0 + timedelta(minutes=5)
    rows = [
        ev(t, r // 2, "torch_watchdog_timeout", rank=r, pg=None, seq_num=None, op_type="BROADCAST",
           timeout_ms=1800000, ran_ms=1804406)
        for r in (0, 1, 3)
    ]  # fmt: skip
    put(store, init(T0) + rows)
    (f,) = collective_timeout(ctx(store, t + timedelta(seconds=30)))
    assert f.evidence["missing_ranks"] == [2] and f.evidence["timed_out_ranks"] == 3
    assert f.subject == "n2/gpu0"


def recorded(store: Store) -> list[str]:
    """The statements `store.query` sends from now on (the list fills as they go)."""
    statements: list[str] = []
    query = store.query

    def counted(sql: str, *a: Any, **k: Any) -> Any:
        statements.append(sql)
        return query(sql, *a, **k)

    store.query = counted  # type: ignore[method-assign]
    return statements


def test_a_batch_run_reads_the_log_lines_once_then_only_the_new_ones(store: Store) -> None:
    """In a batch run (the engine's memo and state epochs) the log detectors read the lines back
    `logs.state_seconds` once, then one statement per tick for the lines since the previous
    tick, and answer at every tick what reading everything answers: lines aging out of the
    window, a re-init, errors and timeouts arriving. A new run (epochs above the last run's)
    reads afresh and sees lines stored between the runs."""
    from telemetry.correlate.detectors import logs

    _inv(store)
    th = default_thresholds()
    th["logs"]["state_seconds"] = 600  # the first init ages out during the run
    t1 = T0 + timedelta(minutes=1)
    put(store, init(T0 - timedelta(minutes=10), gdr=False))  # ages out at T0
    put(store, init(T0 + timedelta(seconds=30), dev={1: 0}))  # a re-init: one channel off rail
    put(store, [ib(t1, 0, 0, "10.128.0.2", 12, "10.128.0.1")])
    put(store, [ib(t1 + timedelta(seconds=1), 1, 0, "10.128.0.1", 5, "10.128.0.2")])
    put(store, timeouts(t1 + timedelta(seconds=20), {0: 7, 1: 7, 3: 6}))
    kinds = {"state": (logs.nccl_transport_fallback, logs.nccl_gdr_disabled, logs.nccl_nic_off_rail),
             "window": (logs.nccl_network_error, logs.collective_timeout)}  # fmt: skip
    statements = recorded(store)

    def answers(end: datetime, extra: dict[str, Any] | None) -> list[tuple[Any, ...]]:
        out = []
        shared = {**(extra or {}), "tick_cache": {}} if extra is not None else {}
        for group, fns in kinds.items():
            back = th["logs"]["state_seconds" if group == "state" else "window_seconds"]
            c = Context(store, Window(end - timedelta(seconds=back), end), th, "c", dict(shared))
            out += [(f.kind, f.subject, f.summary, json.dumps(f.evidence)) for fn in fns
                    for f in fn(c)]  # fmt: skip
        return out

    memo: dict[str, Any] = {}
    seen: list[set[str]] = []
    per_tick = []
    for i in range(24):  # T0 - 60 s .. T0 + 170 s: the first init ages out, errors arrive
        end = T0 - timedelta(seconds=60) + i * STEP
        want = answers(end, None)
        del statements[:]
        got = answers(end, {"memo": memo, "state_epochs": {"pod": 1}})
        assert got == want, end
        seen.append({k for k, _, _, _ in got})
        per_tick.append(sum("log_events" in s for s in statements))
    assert seen[0] == seen[5] == {"nccl_gdr_disabled"}  # before T0
    assert seen[7] == set()  # aged out
    assert seen[10] == {"nccl_nic_off_rail"}  # the re-init, read as a new line
    assert seen[16] == {"nccl_nic_off_rail", "nccl_network_error", "collective_timeout"}
    assert per_tick[0] >= 2 and set(per_tick[1:]) == {1}, per_tick
    # a second run: a line stored since, older than the last tick read, is seen
    late = T0 + timedelta(seconds=100)
    put(store, timeouts(late, {0: 9, 1: 9, 2: 9}))
    end = T0 + timedelta(minutes=3)  # after the last tick read (T0 + 170 s)
    got = answers(end, {"memo": memo, "state_epochs": {"pod": 2}})
    assert got == answers(end, None)
    assert any(k == "collective_timeout" and '"last_seq_num": 9' in e for k, _, _, e in got)


def test_a_batch_run_reads_no_log_lines_at_a_tick_where_none_were_stored(store: Store) -> None:
    """With the run's Activity (engine.py: where each kind's rows lie), the log detectors' tail
    sends no statement at a tick where no line was stored since the previous one, and answers
    what reading everything answers."""
    from telemetry.correlate.detectors import logs
    from telemetry.correlate.engine import Correlator

    _inv(store)
    th = default_thresholds()
    t1 = T0 + timedelta(minutes=1)
    put(store, init(T0, gdr=False))
    put(store, [ib(t1, 0, 0, "10.128.0.2", 12, "10.128.0.1")])
    # ticks on the engine's grid (multiples of the interval); the lines fall between two
    grid = STEP // timedelta(milliseconds=1)
    first = datetime.fromtimestamp(ms(T0) // grid * grid / 1000, UTC) - 3 * STEP
    last = first + timedelta(minutes=2)
    act = Correlator(store, cluster="c").activity(first, last)
    assert act.buckets["log_event"]
    statements = recorded(store)
    memo: dict[str, Any] = {}
    fns = (logs.nccl_gdr_disabled, logs.nccl_network_error)
    back = timedelta(seconds=th["logs"]["window_seconds"])
    reads = []
    end = first
    while end <= last:
        want = [f.summary for fn in fns for f in fn(ctx(store, end, back.total_seconds()))]
        shared = {"memo": memo, "state_epochs": {"pod": 1}, "activity": act, "tick_cache": {}}
        c = Context(store, Window(end - back, end), th, "c", shared)
        del statements[:]
        got = [f.summary for fn in fns for f in fn(c)]
        assert got == want, end
        reads.append((end, sum("log_events" in s for s in statements)))
        end += STEP
    # the tick whose window first holds a line: the next grid point after it
    after = sorted(
        {datetime.fromtimestamp((ms(t) // grid + 1) * grid / 1000, UTC) for t in (T0, t1)}
    )
    assert [e for e, n in reads[1:] if n] == after, reads
