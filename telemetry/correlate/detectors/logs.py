"""Findings from what a job and its nodes logged (`log_event`): RDMA completion errors between two
ranks (named by the first status-12 error, the flush errors after it its evidence), collective
watchdog timeouts (naming the rank that did not arrive), a job that fell back to TCP sockets on
RDMA nodes, GPU Direct RDMA off, and channels on a NIC off the GPU's rail.

A peer is resolved through the inventory as of the line's time (log_resolve.py) to its pod, node,
NIC and leaf port, so the finding names both ends' paths and incidents can group it under the
fabric or GPU fault it follows (kinds.yaml). It never judges a line it cannot resolve by guessing.
Thresholds: `logs.*`.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

from telemetry.correlate.detectors.log_resolve import (
    Nics,
    Pods,
    Ranks,
    events,
    ip_of_gid,
    lease_at,
    leases,
    own_addresses,
    rail_of,
    rows_version,
)
from telemetry.correlate.findings import Finding
from telemetry.correlate.registry import Context, detector
from telemetry.times import as_of

_ERR = "ib_completion_error"


@detector(
    "nccl_network_error",
    needs=("log_event",),
    lookback=("logs.window_seconds",),
)
def nccl_network_error(ctx: Context) -> list[Finding]:
    """A pair of ranks whose RDMA connection failed: the first completion error of status
    `logs.pair_status` (12, IBV_WC_RETRY_EXC_ERR: the QP ran out of retries) a rank logged names
    it (the rank and the peer its IP or GID resolves to); the other errors between the same two
    ranks in the window (status 5, IBV_WC_WR_FLUSH_ERR: the QP's queued work flushed) are its
    evidence. Both ends' pod, GPU, NIC and leaf port, and the leaves' uplinks when they differ."""
    rows = events(ctx, (_ERR,))
    if not rows:
        return []
    status = int(ctx.t("logs.pair_status"))
    ips = {str(r["fields"].get("peer_ip") or "") for r in rows}
    ips |= {ip for r in rows if (ip := ip_of_gid(r["fields"].get("local_gid")))}
    by_ip = leases(ctx, ips)
    held = {(v["namespace"], v["pod"]) for vs in by_ip.values() for v in vs}
    pods = Pods.of(ctx, {(r["namespace"], r["pod"]) for r in rows} | held)
    nics, ranks, own = Nics.of(ctx), Ranks.of(ctx), own_addresses(rows)
    pairs: dict[tuple[str, str, frozenset[str]], dict[str, Any]] = {}
    for r in rows:
        f = r["fields"]
        me = _local_end(r, f, pods, ranks, nics, by_ip)
        peer = _peer_end(r, f, by_ip, pods, ranks, nics) or _own_end(r, f, own, pods, ranks, nics)
        if me is None or peer is None or me["job"] != peer["job"]:
            continue
        key = (r["namespace"], me["job"], frozenset((_name(me), _name(peer))))
        p = pairs.get(key)
        st = _int(f.get("status"))
        if p is None:
            if st != status:
                continue  # a flush or other error before any status-12 names no pair
            pairs[key] = p = {"first": r, "ends": (me, peer), "statuses": Counter()}
        p["statuses"][st] += 1
    return [_pair_finding(ctx, ns, job, p, nics) for (ns, job, _), p in sorted(
        pairs.items(), key=lambda kv: (kv[1]["first"]["ts"], kv[0][0], kv[0][1]))]  # fmt: skip


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _end(node: str, ns: str, pod: str, job: str, rank: int | None, gpu: int, rail: int | None,
         nics: Nics, ip: str) -> dict[str, Any]:  # fmt: skip
    nic, port = nics.rail.get((node, rail), ("", "")) if rail is not None else ("", "")
    # no pod, job or IP among the names: incidents group an effect by the names its evidence
    # shares with a cause, and a job-wide finding names the same pods; the GPU, NIC and port are
    # what a cause of a broken connection is found on
    return {"job": job, "rank": rank, "pod_name": f"{ns} {pod}", "gpu": f"{node}/gpu{gpu}",
            "nic": f"{node}/{nic}" if nic else "", "address": f"IP {ip}" if ip else "",
            "leaf_port": port}  # fmt: skip


def _local_end(r: dict[str, Any], f: dict[str, Any], pods: Pods, ranks: Ranks, nics: Nics,
               by_ip: dict[str, list[dict[str, Any]]]) -> dict[str, Any] | None:  # fmt: skip
    """The reporting rank: its pod (the line's), its GPU (the line's CUDA device), its rank, and
    the NIC its local GID's IP was leased on (else the `hca` the line names, where the node's
    inventory knows it, else its GPU's rail NIC)."""
    v = pods.at(r["namespace"], r["pod"], r["ts"])
    gpu = _int(f.get("cuda_dev"))
    if v is None or gpu is None:
        return None
    rank = ranks.rank(r["namespace"], r["pod"], gpu)  # None: its init is older than we read
    ip = ip_of_gid(f.get("local_gid")) or ""
    lease = lease_at(by_ip, ip, r["ts"]) if ip else None
    hca = f.get("hca")
    rail = (
        rail_of(lease["network"]) if lease else (nics.rail_of_nic(v["node"], hca) if hca else None)
    )
    if rail is None and not lease:
        rail = nics.gpu.get((v["node"], gpu), (None, ""))[0]
    return _end(v["node"], r["namespace"], r["pod"], v["job"], rank, gpu, rail, nics, ip)


def _peer_end(r: dict[str, Any], f: dict[str, Any], by_ip: dict[str, list[dict[str, Any]]],
              pods: Pods, ranks: Ranks, nics: Nics) -> dict[str, Any] | None:  # fmt: skip
    """The peer: the pod that held its IP at the line's time, the rail of that lease, the GPU on
    that rail and so its rank."""
    ip = str(f.get("peer_ip") or "")
    lease = lease_at(by_ip, ip, r["ts"])
    if lease is None:
        return None
    rail = rail_of(lease["network"])
    gpu = nics.gpu_of_rail(lease["node"], rail) if rail is not None else None
    if gpu is None:
        return None
    rank = ranks.rank(lease["namespace"], lease["pod"], gpu)
    v = pods.at(lease["namespace"], lease["pod"], r["ts"])
    job = v["job"] if v else ""
    return _end(lease["node"], lease["namespace"], lease["pod"], job, rank, gpu, rail, nics, ip)


def _own_end(r: dict[str, Any], f: dict[str, Any], own: dict[str, list[dict[str, Any]]],
             pods: Pods, ranks: Ranks, nics: Nics) -> dict[str, Any] | None:  # fmt: skip
    """The peer of an address no lease holds (a host-network pod's: its node's NIC's): the rank
    that printed it as its own local GID in the window, its pod running at the line's time. An
    address two pods printed as their own is left unresolved."""
    ip = str(f.get("peer_ip") or "")
    cands = {(o["namespace"], o["pod"], o["node"], _int(o["fields"].get("cuda_dev")))
             for o in own.get(ip, []) if pods.at(o["namespace"], o["pod"], r["ts"])}  # fmt: skip
    if len(cands) != 1:
        return None
    ((ns, pod, node, gpu),) = cands
    v = pods.at(ns, pod, r["ts"])
    if v is None or gpu is None or v["node"] != node:
        return None
    rail = nics.gpu.get((node, gpu), (None, ""))[0]
    return _end(node, ns, pod, v["job"], ranks.rank(ns, pod, gpu), gpu, rail, nics, ip)


def _name(end: dict[str, Any]) -> str:
    """rankN, or the rank's GPU where its Init COMPLETE line is older than `logs.state_seconds`."""
    return f"rank{end['rank']}" if end["rank"] is not None else str(end["gpu"])


def _pod(end: dict[str, Any]) -> str:
    return str(end["pod_name"]).replace(" ", "/", 1)


def _pair_finding(ctx: Context, ns: str, job: str, p: dict[str, Any], nics: Nics) -> Finding:
    first, (me, peer) = p["first"], p["ends"]
    f = first["fields"]
    lo, hi = sorted((me, peer), key=lambda e: (e["rank"] is None, e["rank"] or 0, e["gpu"]))
    subject = f"{ns}/{job}/{_name(lo)}<->{_name(hi)}"
    leaves = [e["leaf_port"].split(":", 1)[0] for e in (me, peer) if e["leaf_port"]]
    path = [me["leaf_port"], peer["leaf_port"]]
    if len(set(leaves)) == 2:  # under two leaves: the pair crosses one of their uplinks
        path += [u for leaf in leaves for u in nics.uplinks.get(leaf, [])]
    flush = sum(n for st, n in p["statuses"].items() if st != f.get("status"))
    name = f.get("status_name") or f"status {f.get('status')}"
    return ctx.finding(
        "critical",
        "rank_pair",
        subject,
        f"{ns}/{job}: {_name(me)} ({_pod(me)}, {me['nic'] or 'NIC unknown'}) lost its RDMA "
        f"connection to {_name(peer)} ({_pod(peer)}, {peer['nic'] or 'NIC unknown'}): "
        f"{name} from {f.get('peer_ip')}" + (f", then {flush} flush error(s)" if flush else ""),
        {
            "reporter": me,
            "peer": peer,
            **{
                f"{who}_{k}": e[k]
                for who, e in (("reporter", me), ("peer", peer))
                for k in ("rank", "nic", "leaf_port")
            },
            "status": f.get("status"),
            "status_name": f.get("status_name"),
            "vendor_err": f.get("vendor_err"),
            "direction": f.get("direction"),
            "first_error": first["ts"].isoformat(),
            "errors": sum(p["statuses"].values()),
            "flush_errors": flush,
            "path": [x for x in path if x],
        },
    )


@detector(
    "collective_timeout",
    needs=("log_event",),
    lookback=("logs.window_seconds",),
)
def collective_timeout(ctx: Context) -> list[Finding]:
    """PyTorch watchdog timeouts of one communicator: which ranks timed out at which SeqNum, and
    the rank(s) that did not arrive - the communicator's ranks (from their Init COMPLETE lines)
    that never reported, and those that report an older SeqNum than the rest. Judged once the
    first timeout is `logs.timeout_settle_seconds` old (the others report within seconds)."""
    rows = events(ctx, ("torch_watchdog_timeout",))
    if not rows:
        return []
    settle = timedelta(seconds=float(ctx.t("logs.timeout_settle_seconds")))
    ranks = Ranks.of(ctx)
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        comm, _ = ranks.comm_of.get((r["namespace"], r["pod"]), ("", 0))
        pg = "" if r["fields"].get("pg") is None else str(r["fields"]["pg"])
        groups.setdefault((r["namespace"], comm, pg), []).append(r)
    pods = Pods.of(ctx, {(r["namespace"], r["pod"]) for r in rows})
    out = []
    for (ns, comm, pg), rs in sorted(groups.items()):
        if rs[0]["ts"] > ctx.window.end - settle:
            continue
        out.append(_timeout_finding(ctx, ns, comm, pg, rs, ranks, pods))
    return out


def _timeout_finding(ctx: Context, ns: str, comm: str, pg: str, rs: list[dict[str, Any]],
                     ranks: Ranks, pods: Pods) -> Finding:  # fmt: skip
    seq: dict[int, int] = {}
    reported: set[int] = set()  # PyTorch 1.8 printed no SeqNum: such a rank has still reported
    for r in rs:
        rank, s = _int(r["fields"].get("rank")), _int(r["fields"].get("seq_num"))
        if rank is not None:
            reported.add(rank)
        if rank is not None and s is not None:
            seq[rank] = max(seq.get(rank, s), s)
    nranks = ranks.comm_of.get((ns, rs[0]["pod"]), ("", 0))[1]
    last = max(seq.values(), default=0)
    never = sorted(set(range(nranks)) - reported) if nranks else []
    behind = sorted(k for k, s in seq.items() if s < last)
    missing = never + behind
    v = pods.at(ns, rs[0]["pod"], rs[0]["ts"])
    job = v["job"] if v and v["job"] else rs[0]["pod"]
    where: list[dict[str, Any]] = []
    for k in missing[:16]:
        node, pod = ranks.pod_of.get((ns, comm, k), ("", ""))
        local = ranks.local(ns, pod, k) if pod else None
        # the pod as a phrase, not a name incidents group by (see _end)
        where.append({"rank": k, "pod": f"{pod} in {ns}" if pod else "",
                      "gpu": f"{node}/gpu{local}" if node and local is not None else ""})  # fmt: skip
    gpus = sorted({str(w["gpu"]) for w in where if w["gpu"]})
    subject, stype = (gpus[0], "gpu") if len(gpus) == 1 else (f"{ns}/{job}", "job")
    f0 = rs[0]["fields"]
    said = ", ".join(f"SeqNum {s}: {n} rank(s)" for s, n in sorted(Counter(seq.values()).items()))
    late = (
        f"; rank(s) {', '.join(map(str, missing[:8]))} did not arrive"
        + (f" (rank {where[0]['rank']} on {where[0]['gpu']})" if len(where) == 1 and where[0]["gpu"] else "")
        if missing
        else "; every rank reported the same SeqNum (the collective itself hung)"
    )  # fmt: skip
    return ctx.finding(
        "critical",
        stype,
        subject,
        f"{ns}/{job}: {len(reported)} rank(s) of {nranks or '?'} hit the NCCL watchdog "
        f"({f0.get('op_type')}, timeout {f0.get('timeout_ms')} ms; {said}){late}",
        {
            "comm_id": comm,
            "pg": pg,
            "nranks": nranks,
            "timed_out_ranks": len(reported),
            "seq_nums": [
                {"seq_num": s, "ranks": n} for s, n in sorted(Counter(seq.values()).items())
            ],
            "last_seq_num": last,
            "op_type": f0.get("op_type"),
            "timeout_ms": f0.get("timeout_ms"),
            "missing_ranks": missing,
            "missing": where,
            "first_timeout": rs[0]["ts"].isoformat(),
        },
    )


def _sessions(ctx: Context) -> dict[tuple[str, str], dict[str, Any]]:
    """`_read_sessions`, once per tick (three detectors read it over the same window)."""
    return ctx.cached(f"logs.sessions.{ctx.window.start.isoformat()}", lambda: _read_sessions(ctx))  # type: ignore[no-any-return]


_SESSION_KINDS = ("nccl_net_selected", "nccl_ib_devices", "nccl_gdr_disabled", "nccl_channel_net")


def _read_sessions(ctx: Context) -> dict[tuple[str, str], dict[str, Any]]:
    """Per pod, what its latest NCCL init logged (the lines from `logs.session_slack_seconds`
    before its latest `Using network` line on): the network, the IB devices, GDR-disabled HCAs,
    channels. The pod must still be running at the window's end. In a batch run built again
    only where those lines or the pods' versions changed (rows_version, the `pod` state epoch:
    a pod version beginning or ending since the previous evaluated tick)."""
    rows = events(ctx, _SESSION_KINDS)
    version = rows_version(ctx, _SESSION_KINDS)
    if version is None:
        return _sessions_of(ctx, rows)
    pods = ctx.extra.get("state_epochs", {}).get("pod")
    return ctx.remembered("logs.sessions", (version, pods), lambda: _sessions_of(ctx, rows))  # type: ignore[no-any-return]


def _sessions_of(ctx: Context, rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    latest: dict[tuple[str, str], Any] = {}
    for r in rows:
        if r["kind"] == "nccl_net_selected":
            latest[(r["namespace"], r["pod"])] = r["ts"]
    slack = timedelta(seconds=float(ctx.t("logs.session_slack_seconds")))
    pods = Pods.of(ctx, set(latest))
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        key = (r["namespace"], r["pod"])
        if key not in latest or r["ts"] < latest[key] - slack:
            continue
        v = pods.at(*key, ctx.window.end - timedelta(milliseconds=1))
        if v is None:
            continue  # the pod is gone: what it logged no longer holds
        s = out.setdefault(key, {"node": v["node"], "job": v["job"], "net": "", "nics": [],
                                 "gdr_off": set(), "channels": []})  # fmt: skip
        f = r["fields"]
        if r["kind"] == "nccl_net_selected" and r["ts"] == latest[key]:
            s["net"] = str(f.get("net") or "")
        elif r["kind"] == "nccl_ib_devices":
            s["nics"] = [str(n).split(":", 1)[0] for n in f.get("nics") or []]
        elif r["kind"] == "nccl_gdr_disabled":
            s["gdr_off"].add(str(f.get("nic") or ""))
        elif r["kind"] == "nccl_channel_net":
            s["channels"].append(f)
    return out


def _by_job(sessions: dict[tuple[str, str], dict[str, Any]], want: Any) -> dict[tuple[str, str], list[tuple[str, dict[str, Any]]]]:  # fmt: skip
    jobs: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = {}
    for (ns, pod), s in sorted(sessions.items()):
        if want(s):
            jobs.setdefault((ns, s["job"] or pod), []).append((pod, s))
    return jobs


@detector(
    "nccl_transport_fallback",
    needs=("log_event",),
    lookback=("logs.state_seconds",),
)
def nccl_transport_fallback(ctx: Context) -> list[Finding]:
    """A job whose pods' latest NCCL init chose the Socket transport (TCP over the pod network)
    on nodes that have RDMA NICs (the node exporter's GPU<->NIC affinity names one): its
    collectives run at a fraction of the fabric's rate. Usually NCCL_IB_HCA names no device the
    pod has, or the RDMA device plugin gave it none. One finding per job."""
    nics = Nics.of(ctx)
    rdma = {n for (n, _), (_, nic) in nics.gpu.items() if nic}
    jobs = _by_job(_sessions(ctx), lambda s: s["net"] == "Socket" and s["node"] in rdma)
    out = []
    for (ns, job), members in sorted(jobs.items()):
        setting = _ib_hca(ctx, ns, job)
        nodes = sorted({s["node"] for _, s in members})
        out.append(ctx.finding(
            "warning",
            "job",
            f"{ns}/{job}",
            f"{ns}/{job}: NCCL runs over TCP sockets (Using network Socket) in {len(members)} "
            f"pod(s) on {len(nodes)} node(s) with RDMA NICs"
            + (f"; NCCL_IB_HCA={setting}" if setting else ""),
            {"job": f"{ns}/{job}", "pods": [f"{ns}/{p}" for p, _ in members], "net": "Socket",
             "nccl_ib_hca": setting, "rdma_nodes": len(nodes)},
        ))  # fmt: skip
    return out


def _ib_hca(ctx: Context, ns: str, job: str) -> str:
    rows = ctx.rows(
        f"""
        SELECT topK(1)(value)[1] AS v FROM {ctx.table("nccl_setting", final=True)}
        WHERE cluster = {{cluster:String}} AND namespace = {{ns:String}} AND job = {{job:String}}
          AND name = 'NCCL_IB_HCA' AND {as_of(None)}""",
        {"ns": ns, "job": job},
    )
    return str(rows[0]["v"] or "") if rows else ""


@detector(
    "nccl_gdr_disabled",
    needs=("log_event",),
    lookback=("logs.state_seconds",),
)
def nccl_gdr_disabled(ctx: Context) -> list[Finding]:
    """A job whose pods' latest NCCL init logged `GPU Direct RDMA Disabled` for their HCAs: its
    RDMA traffic is staged through host memory (the nvidia-peermem module or dma-buf missing,
    NCCL_NET_GDR_LEVEL too low). One finding per job."""
    jobs = _by_job(_sessions(ctx), lambda s: bool(s["gdr_off"] - {""}))
    out = []
    for (ns, job), members in sorted(jobs.items()):
        hcas = sorted({h for _, s in members for h in s["gdr_off"] if h})
        out.append(ctx.finding(
            "warning",
            "job",
            f"{ns}/{job}",
            f"{ns}/{job}: GPU Direct RDMA is disabled in {len(members)} pod(s) "
            f"(HCAs {', '.join(hcas[:8])}): RDMA goes through host memory",
            {"job": f"{ns}/{job}", "pods": [f"{ns}/{p}" for p, _ in members], "hcas": hcas},
        ))  # fmt: skip
    return out


@detector(
    "nccl_nic_off_rail",
    needs=("log_event",),
    lookback=("logs.state_seconds",),
)
def nccl_nic_off_rail(ctx: Context) -> list[Finding]:
    """A job whose ranks' channels (latest NCCL init, IB) send through a NIC that is neither
    their GPU's rail NIC (gpu_nic_affinity) nor that of the PXN proxy rank named in the channel:
    traffic crosses PCIe/NUMA and lands on another rail's leaf. One finding per job."""
    nics, ranks = Nics.of(ctx), Ranks.of(ctx)
    off: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for (ns, pod), s in sorted(_sessions(ctx).items()):
        if s["net"] != "IB" or not s["nics"]:
            continue
        for c in s["channels"]:
            src, dev = _int(c.get("src_rank")), _int(c.get("net_dev"))
            if src is None or dev is None or not 0 <= dev < len(s["nics"]):
                continue
            used = s["nics"][dev]
            allowed = set()
            for k in (src, _int(c.get("pxn_proxy"))):
                local = ranks.local(ns, pod, k) if k is not None else None
                if local is not None:
                    allowed.add(nics.gpu.get((s["node"], local), (None, ""))[1])
            allowed.discard("")
            if allowed and used not in allowed:
                off.setdefault((ns, s["job"] or pod), []).append(
                    {"rank": src, "gpu": f"{s['node']}/gpu{ranks.local(ns, pod, src)}",
                     "nic": f"{s['node']}/{used}", "rail_nic": f"{s['node']}/{sorted(allowed)[0]}"})  # fmt: skip
    out = []
    for (ns, job), bad in sorted(off.items()):
        uniq = {(b["rank"], b["nic"]): b for b in bad}
        out.append(
            ctx.finding(
                "warning",
                "job",
                f"{ns}/{job}",
                f"{ns}/{job}: {len(uniq)} rank channel(s) send through a NIC off their GPU's rail "
                f"(rank {bad[0]['rank']} via {bad[0]['nic']}, its rail NIC {bad[0]['rail_nic']})",
                {
                    "job": f"{ns}/{job}",
                    "off_rail": list(uniq.values())[:32],
                    "channels": len(bad),
                    "nics": sorted({b["nic"] for b in bad}),
                },
            )
        )
    return out
