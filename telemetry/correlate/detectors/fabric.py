"""Fabric detectors: link flaps and errors, PFC storms and where they started, ECN/CNP hot spots,
ECMP uplink imbalance (hash collisions; the flows piled on a member: ecmp_flows.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from telemetry.correlate.detectors.ecmp_flows import fresh, piled_jobs, piled_jobs_at
from telemetry.correlate.findings import Finding
from telemetry.correlate.registry import Context, detector, over_ticks
from telemetry.correlate.sql import (
    among_moved,
    in_params,
    increase_cols,
    increase_sql,
    lldp_peers,
    lldp_peers_at,
    moved_series,
    rate,
    rollup_values,
    rollup_values_at,
)
from telemetry.correlate.timebase import (
    aligned_sql,
    by_tick,
    per_tick,
    rows_at,
    tick_join,
    tick_params,
)


def port_subject(switch: str, port: str) -> str:
    """Switch ports are named SWITCH:PORT (leaf3:Ethernet12), as the switch itself shows them."""
    return f"{switch}:{port}"


def _num(d: dict[str, Any], key: str) -> float:
    return float(d[key])


def _flap_rows(ctx: Context, over: bool) -> list[dict[str, Any]]:
    """Per port (and judged tick, `over`) its link-down, receive error and packet increases and
    down samples, among the ports the rollup shows may qualify in the window (the range's
    window when `over`: every tick's among them)."""
    flaps = int(ctx.t("link.flaps"))
    err_ratio = float(ctx.t("link.error_ratio"))
    min_errors = float(ctx.t("link.min_errors"))
    counters = ["link_down_events_total", "rx_errors_total", "rx_packets_total"]
    keys = ["switch", "port"]
    # a finding needs a link-down event, a down sample or receive errors (unless the thresholds
    # let a quiet port qualify): only ports whose rollup shows one are read from the samples
    quiet_can = flaps <= 0 or (err_ratio <= 0 and min_errors <= 0)
    moved = None
    if not quiet_can:
        moved = moved_series(
            ctx,
            "switch_port_sample",
            keys,
            ["link_down_events_total", "rx_errors_total"],
            also="sum(down_samples) > 0",
        )
        if moved == []:
            return []
    among, params = among_moved(keys, moved)
    inc = increase_sql(ctx, "switch_port_sample", keys, counters, among, over=over)
    only = "".join(f" AND {c}" for c in in_params("switch_port_sample", among))
    tick, using, join = "", "", ""
    if over:
        tick, using = "tick, ", "tick, "
        join = tick_join(ctx, "switch_port_sample")
        only += " AND tick IN {ticks:Array(Int64)}"
        params = {**params, **tick_params(ctx)}
    return ctx.rows(
        f"""
        SELECT {"i.tick AS tick, " if over else ""}{increase_cols("i", keys, counters)}, d.down_samples AS down_samples FROM ({inc}) AS i
        LEFT JOIN (
            SELECT {tick}switch, port, countIf(up = 0) AS down_samples FROM {ctx.table("switch_port_sample")} {join}
            WHERE {ctx.where("switch_port_sample")}{only}
            GROUP BY {tick}switch, port
        ) AS d USING ({using}switch, port)
        ORDER BY {tick}switch, port""",
        params,
    )


def _flap_findings(ctx: Context, r: dict[str, Any]) -> list[Finding]:
    flaps = int(ctx.t("link.flaps"))
    err_ratio = float(ctx.t("link.error_ratio"))
    min_errors = float(ctx.t("link.min_errors"))
    out = []
    subject = port_subject(r["switch"], r["port"])
    downs = int(r["inc_link_down_events_total"] or 0)
    if downs >= flaps or (r["down_samples"] or 0) > 0:
        out.append(
            ctx.finding(
                "warning",
                "port",
                subject,
                f"{subject} went down {max(downs, 1)} time(s) in the window",
                {"link_down_events": downs, "down_samples": r["down_samples"]},
            )
        )
    pkts = r["inc_rx_packets_total"] or 0.0
    errs = r["inc_rx_errors_total"] or 0.0
    if pkts > 0 and errs / pkts >= err_ratio and errs >= min_errors:
        out.append(
            ctx.finding(
                "warning",
                "port",
                subject,
                f"{subject}: {errs:,.0f} receive errors ({errs / pkts:.2e} per packet)",
                {"rx_errors": errs, "rx_packets": pkts, "error_ratio": errs / pkts},
                kind="link_errors",
            )
        )
    return out


@detector("link_flap", needs=("switch_port_sample",), also=("link_errors",))
def link_flap(ctx: Context) -> list[Finding]:
    return [f for r in _flap_rows(ctx, over=False) for f in _flap_findings(ctx, r)]


@over_ticks("link_flap")
def link_flap_over(ctx: Context) -> dict[datetime, list[Finding]]:
    rows = _flap_rows(ctx, over=True)
    return per_tick(ctx, rows, lambda c, rs: [f for r in rs for f in _flap_findings(c, r)])


def _pfc_rows(
    ctx: Context, over: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool] | None:
    """The NICs sending pauses at the storm rate and every (moved) switch port's pause
    increases, per judged tick too when `over` (a `tick` column); whether the ports were
    restricted to movers (then the polled switches come from the rollup). None: nothing moved.
    Only series whose pause counters moved in the window are read (the range's window when
    `over`: a superset of each tick's; a series that did not move in a tick's window has no
    rate there, and both an origin and a propagation path need a positive one)."""
    storm = float(ctx.t("pfc.storm_pauses_per_second"))
    frac = float(ctx.t("pfc.propagation_fraction"))
    nic_keys, port_keys = ["node", "device"], ["switch", "port"]
    port_counters = ["pfc_rx_pause_total", "pfc_tx_pause_total"]
    moved_nics = (
        moved_series(ctx, "nic_sample", nic_keys, ["pfc_tx_pause_total"]) if storm > 0 else None
    )
    moved_ports = (
        moved_series(ctx, "switch_port_sample", port_keys, port_counters)
        if storm > 0 and frac > 0
        else None
    )
    if moved_nics == [] and moved_ports == []:
        return None
    ticks = tick_params(ctx) if over else {}
    first = "tick, " if over else ""
    among, params = among_moved(nic_keys, moved_nics)
    inc = increase_sql(ctx, "nic_sample", nic_keys, ["pfc_tx_pause_total"], among, over=over)
    nics = [
        r
        for r in ctx.rows(f"{inc} ORDER BY {first}node, device", {**params, **ticks})
        if rate(r, "inc_pfc_tx_pause_total") >= storm
    ]
    among, params = among_moved(port_keys, moved_ports)
    inc = increase_sql(ctx, "switch_port_sample", port_keys, port_counters, among, over=over)
    ports = ctx.rows(f"{inc} ORDER BY {first}switch, port", {**params, **ticks})
    return nics, ports, moved_ports is not None


def _pfc_findings(
    ctx: Context,
    nics: list[dict[str, Any]],
    ports: list[dict[str, Any]],
    facing: dict[tuple[str, str], tuple[str, str]],
    polled: set[Any] | None,
) -> list[Finding]:
    """What pfc_storm finds in one tick's window (`ctx`), from _pfc_rows' rows of that tick, the
    LLDP neighbours as of the tick and the switches polled in its window (None: unknown)."""
    storm = float(ctx.t("pfc.storm_pauses_per_second"))
    frac = float(ctx.t("pfc.propagation_fraction"))
    # host-facing ports: LLDP says the neighbour is not one of the switches we poll
    switches = polled if polled is not None else {p["switch"] for p in ports}
    origins: dict[str, dict] = {}
    for n in nics:
        subject = f"{n['node']}/{n['device']}"
        origins[subject] = {"rate": rate(n, "inc_pfc_tx_pause_total"), "seen_at": "nic"}
    rdma = None
    for p in ports:
        rx = rate(p, "inc_pfc_rx_pause_total")
        peer = facing.get((p["switch"], p["port"]))
        if rx < storm or peer is None or peer[0] in switches:
            continue
        # the host NIC behind this leaf port, named as its exporter names it (the RDMA device of
        # the netdev LLDP shows); its own exporter may be missing, or its samples not yet in
        if rdma is None:
            rdma = _rdma_devices(ctx)
        dev = rdma.get(peer) or peer[1]
        subject = next(
            (s for s in origins if s == f"{peer[0]}/{dev}"),
            next((s for s in origins if s.split("/")[0] == peer[0]), f"{peer[0]}/{dev}"),
        )
        o = origins.setdefault(subject, {"rate": rx, "seen_at": "switch"})
        o["leaf_port"] = port_subject(p["switch"], p["port"])
    out = []
    for subject, o in sorted(origins.items(), key=lambda kv: -kv[1]["rate"]):
        path = sorted(
            (
                {
                    "port": port_subject(p["switch"], p["port"]),
                    "tx_pauses_per_s": round(rate(p, "inc_pfc_tx_pause_total")),
                    "rx_pauses_per_s": round(rate(p, "inc_pfc_rx_pause_total")),
                }
                for p in ports
                if max(rate(p, "inc_pfc_tx_pause_total"), rate(p, "inc_pfc_rx_pause_total"))
                >= frac * o["rate"]
            ),
            key=lambda x: -(_num(x, "tx_pauses_per_s") + _num(x, "rx_pauses_per_s")),
        )[:20]
        out.append(
            ctx.finding(
                "critical",
                "nic",
                subject,
                f"PFC storm from {subject}: {o['rate']:,.0f} pauses/s; {len(path)} switch port(s) on the propagation path",
                {
                    "origin_pauses_per_second": round(o["rate"]),
                    "seen_at": o["seen_at"],
                    "leaf_port": o.get("leaf_port"),
                    "propagation": path,
                },
            )
        )
    return out


@detector("pfc_storm", needs=("nic_sample", "switch_port_sample"))
def pfc_storm(ctx: Context) -> list[Finding]:
    """A storm starts where pauses are *sent* at a storm rate by an end point (a NIC), or where a
    host-facing switch port receives them; the ports pausing upstream at a fraction of that rate
    are the propagation path."""
    got = _pfc_rows(ctx, over=False)
    if got is None:
        return []
    nics, ports, restricted = got
    polled = rollup_values(ctx, "switch_port_sample", "switch") if restricted else None
    return _pfc_findings(ctx, nics, ports, lldp_peers(ctx), polled)


@over_ticks("pfc_storm")
def pfc_storm_over(ctx: Context) -> dict[datetime, list[Finding]]:
    got = _pfc_rows(ctx, over=True)
    if got is None:
        return {}
    nics, ports, restricted = got
    per_n, per_p = rows_at(ctx, nics), rows_at(ctx, ports)
    if not nics and not any(
        rate(p, "inc_pfc_rx_pause_total") >= float(ctx.t("pfc.storm_pauses_per_second"))
        for p in ports
    ):
        return {}  # no origin at any tick: nothing else to read
    polled = rollup_values_at(ctx, "switch_port_sample", "switch") if restricted else None
    peers = lldp_peers_at(ctx)
    out = {}
    for t in ctx.ticks:
        polled_t = polled[t] if polled is not None else None
        if found := _pfc_findings(ctx.at(t), per_n[t], per_p[t], peers[t], polled_t):
            out[t] = found
    return out


def _rdma_devices(ctx: Context) -> dict[tuple[str, str], str]:
    """(node, netdev) -> the RDMA device on it, as the node exporters report them (the latest
    pairing within the trailing baseline: a NIC renamed by a driver reload is named as now)."""
    return ctx.cached(
        f"rdma_devices@{ctx.window.end.isoformat()}",
        lambda: {
            (r["node"], r["netdev"]): r["device"]
            for r in ctx.rows(
                f"""SELECT node, netdev, argMax(device, ts) AS device FROM {ctx.table("nic_sample")}
                    WHERE cluster = {{cluster:String}} AND netdev != ''
                      AND ts >= {{we:DateTime64(3, 'UTC')}} - toIntervalSecond({{base:UInt32}})
                      AND ts < {{we:DateTime64(3, 'UTC')}}
                    GROUP BY node, netdev""",
                {"base": int(float(ctx.t("time.gap_baseline_seconds")))},
            )
        },
    )


def _ecn_rows(ctx: Context, over: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The queues marking over `ecn.marked_ratio` of their packets, and (when any does) the
    NICs' CNP increases: per judged tick too when `over` (a `tick` column). Only series whose
    counters moved in the window are read (the range's window when `over`: a superset of each
    tick's, and a series that did not move in a tick's window is under both floors there)."""
    ratio = float(ctx.t("ecn.marked_ratio"))
    cnp = float(ctx.t("ecn.cnp_per_second"))
    ticks = tick_params(ctx) if over else {}
    first = "tick, " if over else ""
    qkeys = ["switch", "port", "queue"]
    moved = (
        moved_series(ctx, "switch_queue_sample", qkeys, ["ecn_marked_packets_total"])
        if ratio > 0
        else None
    )
    if moved == []:
        return [], []
    among, params = among_moved(qkeys, moved)
    inc = increase_sql(
        ctx,
        "switch_queue_sample",
        qkeys,
        ["ecn_marked_packets_total", "tx_packets_total"],
        among,
        over=over,
    )
    queues = [
        q
        for q in ctx.rows(f"{inc} ORDER BY {first}switch, port, queue", {**params, **ticks})
        if (q["inc_tx_packets_total"] or 0) > 0
        and (q["inc_ecn_marked_packets_total"] or 0) / q["inc_tx_packets_total"] >= ratio
    ]
    if not queues:
        return [], []
    nic_keys, cnps = ["node", "device"], ["cnp_sent_total", "cnp_handled_total"]
    moved_nics = moved_series(ctx, "nic_sample", nic_keys, cnps) if cnp > 0 else None
    among, params = among_moved(nic_keys, moved_nics)
    inc = increase_sql(ctx, "nic_sample", nic_keys, cnps, among, over=over)
    nic_rows = (
        ctx.rows(f"{inc} ORDER BY {first}node, device", {**params, **ticks})
        if moved_nics != []
        else []
    )
    return queues, nic_rows


def _ecn_findings(
    ctx: Context, queues: list[dict[str, Any]], nic_rows: list[dict[str, Any]]
) -> list[Finding]:
    if not queues:
        return []
    cnp = float(ctx.t("ecn.cnp_per_second"))
    receivers = _busiest_nics(nic_rows, "cnp_sent", cnp)
    senders = _busiest_nics(nic_rows, "cnp_handled", cnp)
    by_port: dict[str, list[dict]] = {}
    for q in queues:
        by_port.setdefault(port_subject(q["switch"], q["port"]), []).append(q)
    out = []
    for subject, qs in sorted(by_port.items()):
        marked = sum(q["inc_ecn_marked_packets_total"] or 0 for q in qs)
        pkts = sum(q["inc_tx_packets_total"] or 0 for q in qs)
        confirmed = bool(receivers and senders)
        out.append(
            ctx.finding(
                "warning" if confirmed else "info",
                "port",
                subject,
                f"{subject}: {marked / pkts:.0%} of packets ECN-marked"
                + (
                    "; receivers answer with CNPs and senders slow down"
                    if confirmed
                    else "; no CNP reaction seen at the NICs"
                ),
                {
                    "marked_packets": marked,
                    "tx_packets": pkts,
                    "marked_ratio": round(marked / pkts, 3),  # the summary's percentage
                    "queues": sorted(int(q["queue"]) for q in qs),
                    "cnp_receivers": receivers[:10],
                    "cnp_senders": senders[:10],
                },
            )
        )
    return out


@detector("ecn_hotspot", needs=("switch_queue_sample",))
def ecn_hotspot(ctx: Context) -> list[Finding]:
    """A queue marking a large share of its packets with ECN CE; the evidence pairs it with the
    receivers sending CNPs (notification points) and the senders handling them (reaction points)."""
    return _ecn_findings(ctx, *_ecn_rows(ctx, over=False))


@over_ticks("ecn_hotspot")
def ecn_hotspot_over(ctx: Context) -> dict[datetime, list[Finding]]:
    queues, nic_rows = _ecn_rows(ctx, over=True)
    per_n = rows_at(ctx, nic_rows)
    return per_tick(ctx, queues, lambda c, qs: _ecn_findings(c, qs, per_n[c.window.end]))


def _busiest_nics(rows: list[dict[str, Any]], counter: str, floor: float) -> list[dict[str, Any]]:
    """NICs whose `<counter>_total` rose at `floor`/s or more, busiest first, as
    {"nic": NODE/DEVICE, "<counter>_per_s": rate}."""
    col, key = f"inc_{counter}_total", f"{counter}_per_s"
    busy = [
        {"nic": f"{r['node']}/{r['device']}", key: round(rate(r, col))}
        for r in rows
        if rate(r, col) >= floor
    ]
    return sorted(busy, key=lambda x: -_num(x, key))


def roles_and_neighbours(
    ctx: Context,
) -> tuple[dict[str, str], dict[tuple[str, str], tuple[str, str]]]:
    """Switch role (the role most of its ports carry: a super-spine with a few DCI ports is a
    super-spine) and the latest LLDP neighbour of every port."""
    roles = {
        r["switch"]: r["role"]
        for r in ctx.rows(f"""
        SELECT switch, topK(1)(role)[1] AS role FROM {ctx.table("switch_port_sample")}
        WHERE {ctx.where("switch_port_sample")}
        GROUP BY switch""")
    }
    peers = lldp_peers(ctx)
    return roles, peers


def roles_and_neighbours_at(
    ctx: Context,
) -> dict[datetime, tuple[dict[str, str], dict[tuple[str, str], tuple[str, str]]]]:
    """Set-based (Context.ticks): per judged tick, what roles_and_neighbours() gives at it alone
    (the roles over that tick's window, the neighbours as of the tick), from one read of the
    range's port samples and lldp_peers_at()."""
    at = by_tick(ctx)
    roles: dict[datetime, dict[str, str]] = {t: {} for t in ctx.ticks}
    for r in ctx.rows(
        f"""SELECT tick, switch, topK(1)(role)[1] AS role
            FROM {ctx.table("switch_port_sample")} {tick_join(ctx, "switch_port_sample")}
            WHERE {ctx.where("switch_port_sample")} AND tick IN {{ticks:Array(Int64)}}
            GROUP BY tick, switch""",
        tick_params(ctx),
    ):
        roles[at[r["tick"]]][r["switch"]] = r["role"]
    peers = lldp_peers_at(ctx)
    return {t: (roles[t], peers[t]) for t in ctx.ticks}


_UPLINK = {"leaf": "spine", "spine": "superspine"}


def _uplinks(
    roles: dict[str, str], peers: dict[tuple[str, str], tuple[str, str]]
) -> list[tuple[str, str]]:
    """The ECMP uplink group members (switch, port): a leaf's ports to spines, a spine's to
    super-spines (by LLDP)."""
    return sorted(
        (dev, port)
        for (dev, port), (rdev, _) in peers.items()
        if _UPLINK.get(roles.get(dev, "")) == roles.get(rdev)
    )


def _hot_sql(ctx: Context, *, over: bool = False, per_tick_members: bool = False) -> str:
    """Per switch and grid point (and judged tick, `over`: each on its own window, aligned_sql)
    its hottest uplink member where it runs `ratio` x the members' mean and at least `util`
    busy, bound as {members} (with {tick_members}, (tick, switch, port), where the ticks'
    members differ: `per_tick_members`). Each member is on the evaluation grid (its latest
    sample at each grid point, timebase.py), then the members are compared at the same grid
    point: never at equal timestamps. Ties (two members saturated alike) go to the last port by
    name: the same data names the same port."""
    where = "up = 1 AND (switch, port) IN {members:Array(Tuple(String, String))}"
    if per_tick_members:
        where += " AND (tick, switch, port) IN {tick_members:Array(Tuple(Int64, String, String))}"
    aligned = aligned_sql(
        ctx,
        "switch_port_sample",
        ["switch", "port"],
        {"u": "ifNull(tx_utilization_ratio, 0)"},
        where,
        over=over,
    )
    tick = "tick, " if over else ""
    return f"""
        SELECT {tick}switch, g, argMax(port, (u, port)) AS hot, max(u) AS hot_u, avg(u) AS mean_u,
               stddevPop(u) AS sd, count() AS n
        FROM ({aligned})
        GROUP BY {tick}switch, g HAVING n >= 2 AND mean_u > 0
          AND hot_u / mean_u >= {{ratio:Float64}} AND hot_u >= {{util:Float64}}
        ORDER BY {tick}switch, g"""


def _hot_params(ctx: Context, members: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "members": members,
        "ratio": float(ctx.t("ecmp.max_over_mean")),
        "util": float(ctx.t("ecmp.min_hot_utilization")),
    }


@detector(
    "ecmp_imbalance",
    needs=("switch_port_sample",),
    lookback=("ecmp.min_seconds", "sliding.interval_seconds"),
)
def ecmp_imbalance(ctx: Context) -> list[Finding]:
    """Uplink groups (a leaf's ports to spines, a spine's to super-spines, from LLDP): judged per
    sample, one member running far above the group mean while busy, for long enough, is a hash
    collision. Long enough is `ecmp.min_seconds` (a burst is not a collision), or only
    `ecmp.min_seconds_with_flows` where the sampled flows show the hashing itself: the flows of
    a job that started in the window piled onto that member
    (`ecmp_flows.piled_jobs`), where they stay while they last. The flows on that member are the
    evidence."""
    members = _uplinks(*roles_and_neighbours(ctx))
    if not members:
        return []
    hot = _hot(ctx, ctx.rows(_hot_sql(ctx), _hot_params(ctx, members)))
    groups = _groups(hot, members)
    piled = piled_jobs(ctx, groups) if hot else {}
    out = []
    for (dev, port), h in sorted(hot.items()):
        jobs = piled.get((dev, port), [])
        if _long_enough(ctx, h, jobs):
            flows = ctx.rows(_flows_sql(ctx, over=False), {"sw": dev, "port": port})
            out.append(_ecmp_finding(ctx, dev, port, h, jobs, flows, members))
    return out


@over_ticks("ecmp_imbalance")
def ecmp_imbalance_over(ctx: Context) -> dict[datetime, list[Finding]]:
    """Its per-tick form's statements, each once over the range where a tick reads it (each
    tick's rows apart: a `tick` column): the roles and neighbours, the hot members, then, at
    the ticks with a member hot long enough, the jobs piled there and the flows on it."""
    members = {t: _uplinks(*got) for t, got in roles_and_neighbours_at(ctx).items()}
    every = sorted({m for ms in members.values() for m in ms})
    if not every:
        return {}
    # each tick compares its own members (a member gone from LLDP, a switch silent in a tick's
    # window): restricted per tick only where they differ
    differ = any(ms != every for ms in members.values())
    params = {**_hot_params(ctx, every), **tick_params(ctx)}
    if differ:
        params["tick_members"] = [(k, *m) for k, t in by_tick(ctx).items() for m in members[t]]
    rows = rows_at(ctx, ctx.rows(_hot_sql(ctx, over=True, per_tick_members=differ), params))
    hot = {t: h for t, rs in rows.items() if rs and (h := _hot(ctx, rs))}
    piled = piled_jobs_at(ctx, {t: _groups(h, members[t]) for t, h in hot.items()})
    judged = {
        t: [(k, h, piled[t].get(k, [])) for k, h in sorted(hs.items())] for t, hs in hot.items()
    }
    judged = {t: [j for j in js if _long_enough(ctx, j[1], j[2])] for t, js in judged.items()}
    flows = _flows_at(ctx, {t: [k for k, _, _ in js] for t, js in judged.items() if js})
    return {
        t: [
            _ecmp_finding(ctx.at(t), dev, port, h, jobs, flows[t][(dev, port)], members[t])
            for (dev, port), h, jobs in js
        ]
        for t, js in judged.items()
        if js
    }


def _hot(ctx: Context, rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """(switch, member) -> how it ran while hot, from _hot_sql()'s rows of one tick: those hot
    at grid points covering `ecmp.min_seconds_with_flows` at least."""
    step = float(ctx.t("sliding.interval_seconds"))
    flows_s = min(float(ctx.t("ecmp.min_seconds")), float(ctx.t("ecmp.min_seconds_with_flows")))
    hot: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        h = hot.setdefault(
            (r["switch"], r["hot"]), {"samples": 0, "ratio": [], "util": [], "cv": [], "n": r["n"]}
        )
        h["samples"] += 1  # grid points at which it was the hot member
        h["ratio"].append(r["hot_u"] / r["mean_u"])
        h["util"].append(r["hot_u"])
        h["cv"].append(r["sd"] / r["mean_u"])
    return {k: h for k, h in hot.items() if h["samples"] * step >= flows_s}


def _groups(
    hot: dict[tuple[str, str], dict[str, Any]], members: list[tuple[str, str]]
) -> dict[str, list[str]]:
    """The uplink groups (switch -> its members) with a hot member."""
    return {dev: [p for d, p in members if d == dev] for dev, _ in hot}


def _long_enough(ctx: Context, h: dict[str, Any], jobs: list[dict[str, Any]]) -> bool:
    """Hot for `ecmp.min_seconds`, or (as _hot() kept it) for the shorter time a job's fresh
    flows piled there need."""
    seconds = h["samples"] * float(ctx.t("sliding.interval_seconds"))
    return seconds >= float(ctx.t("ecmp.min_seconds")) or any(fresh(j) for j in jobs)


def _flows_sql(ctx: Context, *, over: bool) -> str:
    """The evidence: the ten flows carrying most bytes out of a member in the window ({sw},
    {port}); `over`: per judged tick, of each (tick, switch, port) of {tick_ports}."""
    by, pick, only, join = "", "", "switch = {sw:String} AND out_port = {port:String}", ""
    if over:
        by, pick = "tick, switch, out_port, ", " LIMIT 10 BY tick, switch, out_port"
        only = "(tick, switch, out_port) IN {tick_ports:Array(Tuple(Int64, String, String))}"
        join = tick_join(ctx, "attributed_flow")
    return f"""
        SELECT {by}src_job, dst_job, src_ip, dst_ip, dest_qp, sum(bytes) AS bytes
        FROM {ctx.table("attributed_flow")} {join}
        WHERE {ctx.where("attributed_flow")} AND {only}
        GROUP BY {by}src_job, dst_job, src_ip, dst_ip, dest_qp
        ORDER BY {by}bytes DESC, src_job, dst_job, src_ip, dst_ip, dest_qp
        {pick or "LIMIT 10"}"""


def _flows_at(
    ctx: Context, ports: dict[datetime, list[tuple[str, str]]]
) -> dict[datetime, dict[tuple[str, str], list[dict[str, Any]]]]:
    """Set-based: _flows_sql() at each tick of `ports` for each of its (switch, member) `ports`,
    from one statement, each row as the per-tick statement gives it."""
    out: dict[datetime, dict[tuple[str, str], list[dict[str, Any]]]] = {
        t: {k: [] for k in ks} for t, ks in ports.items()
    }
    if not ports:
        return out
    at = by_tick(ctx)
    ms = {t: k for k, t in at.items()}
    asked = [(ms[t], sw, p) for t, ks in ports.items() for sw, p in ks]
    for r in ctx.rows(_flows_sql(ctx, over=True), {**tick_params(ctx), "tick_ports": asked}):
        t, sw, p = at[r.pop("tick")], r.pop("switch"), r.pop("out_port")
        out[t][(sw, p)].append(r)
    return out


def _ecmp_finding(
    ctx: Context,
    dev: str,
    port: str,
    h: dict[str, Any],
    jobs: list[dict[str, Any]],
    flows: list[dict[str, Any]],
    members: list[tuple[str, str]],
) -> Finding:
    seconds = h["samples"] * float(ctx.t("sliding.interval_seconds"))
    subject = port_subject(dev, port)
    ratio = sum(h["ratio"]) / len(h["ratio"])
    util = sum(h["util"]) / len(h["util"])
    return ctx.finding(
        "warning",
        "port",
        subject,
        f"ECMP uplink {subject} ran at {ratio:.1f}x its group's mean ({util:.0%} busy) for {seconds:.0f}s "
        f"of the window; {h['n']} members"
        + (
            f"; {jobs[0]['job']} hashed {jobs[0]['flows_on_member']} of its "
            f"{jobs[0]['flows_in_group']} flows through the group onto it"
            if jobs
            else ""
        ),
        {
            "max_over_mean": round(ratio, 3),
            "hot_utilization": round(util, 3),
            "cv": round(sum(h["cv"]) / len(h["cv"]), 3),
            "seconds": round(seconds),
            "group": sorted(port_subject(d, p) for d, p in members if d == dev),
            "flows_on_hot_member": flows,
            "piled_jobs": jobs[:5],
        },
    )
