"""One poll of 64 SONiC switches x 64 ports x 8 queues (+ 8 PGs per port) from a real
redis-server: wall time and CPU time of `railscope switch`'s poll, against, in the same run, the
same poll done one switch at a time and a naive one-HGETALL-per-key loop. Last line: JSON.

    python bench/switch.py [--switches 64] [--ports 64] [--queues 8] [--repeat 3]
    python bench/switch.py --gnmi [--switches 256] [--interval 10] [--seconds 60] [--sonic-paths fields] [--phases spread]
    python bench/switch.py --snmp [--switches 64]

--gnmi: that many gNMI targets (SONiC telemetry paths, the same synthetic switches, served by
one child process, each answer rendered once so that they keep up, each stream waiting for its
next sample without polling) stream SAMPLE at --interval into one collector in another child
process for --seconds, all switches' samples together or (--phases spread) spread evenly over
the interval; the collector measures its own CPU
(getrusage, every thread) and reports it per interval, split by thread (polls, streams, gRPC),
with port/queue counter sets per second per CPU-second, next to the Redis poll's ports per
CPU-second measured in the same run on 64 switches, also in a process of its own and by
getrusage (best of --repeat; or given with --redis-ports-per-cpu-s). The Redis poll reads more
per port than the gNMI subscription carries (RATES, priority groups, watermarks).
--snmp: that many SNMP switches, all walked against one local snmpd (this machine's
interfaces): CPU per poll.

All switches live in one redis-server (switch i = COUNTERS_DB/APPL_DB number i), so the server
side is one single-threaded process; real switches are separate servers, which only helps.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis

from exporters.switch.sonic import targets_from_config
from exporters.switch.source import SwitchSource
from tests.redis_server import redis_server

FIX = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "sonic"


def switch_db(ports: int, queues: int, sw: int) -> dict[str, dict[str, str]]:
    """A COUNTERS_DB + APPL_DB of one switch with the counter sets of the real dump."""
    real = json.loads((FIX / "counters_db.json").read_text())
    port_fields = list(real[f"COUNTERS:{real['COUNTERS_PORT_NAME_MAP']['Ethernet0']}"])
    q_fields = list(real["COUNTERS:oid:0x15000000000357"])
    db: dict[str, dict[str, str]] = {}
    pmap, qmap, qtype, qidx, pgmap, pgidx = {}, {}, {}, {}, {}, {}
    for p in range(ports):
        name, poid = f"Ethernet{p * 4}", f"oid:0x1{sw:03x}{p:04x}"
        pmap[name] = poid
        db[f"COUNTERS:{poid}"] = {f: str((p + 1) * (i + 7)) for i, f in enumerate(port_fields)}
        db[f"RATES:{poid}"] = {
            "RX_BPS": "1.2e9",
            "TX_BPS": str(1e9 + p * 1e6),
            "RX_PPS": "1e5",
            "TX_PPS": "1e5",
        }
        db[f"PORT_TABLE:{name}"] = {"oper_status": "up", "speed": "400000", "admin_status": "up"}
        db[f"LLDP_ENTRY_TABLE:{name}"] = {"lldp_rem_sys_name": f"spine{p % 8}", "lldp_rem_port_id": f"Ethernet{sw * 4}",
                                          "lldp_rem_port_id_subtype": "5", "lldp_rem_chassis_id": "00:11:22:33:44:55"}  # fmt: skip
        for q in range(queues):
            qoid, pgoid = f"oid:0x15{sw:03x}{p:03x}{q:02x}", f"oid:0x1a{sw:03x}{p:03x}{q:02x}"
            qmap[f"{name}:{q}"], qtype[qoid], qidx[qoid] = qoid, "SAI_QUEUE_TYPE_UNICAST", str(q)
            db[f"COUNTERS:{qoid}"] = {f: str(q * 11 + i) for i, f in enumerate(q_fields)}
            db[f"USER_WATERMARKS:{qoid}"] = {"SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES": str(q * 1000)}
            pgmap[f"{name}:{q}"], pgidx[pgoid] = pgoid, str(q)
            db[f"COUNTERS:{pgoid}"] = {"SAI_INGRESS_PRIORITY_GROUP_STAT_DROPPED_PACKETS": str(q)}
            db[f"USER_WATERMARKS:{pgoid}"] = {
                "SAI_INGRESS_PRIORITY_GROUP_STAT_SHARED_WATERMARK_BYTES": str(q * 100),
                "SAI_INGRESS_PRIORITY_GROUP_STAT_XOFF_ROOM_WATERMARK_BYTES": str(q * 10),
            }
    db["COUNTERS_PORT_NAME_MAP"], db["COUNTERS_QUEUE_NAME_MAP"] = pmap, qmap
    db["COUNTERS_QUEUE_TYPE_MAP"], db["COUNTERS_QUEUE_INDEX_MAP"] = qtype, qidx
    db["COUNTERS_PG_NAME_MAP"], db["COUNTERS_PG_INDEX_MAP"] = pgmap, pgidx
    return db


def naive_poll(port: int, switches: int) -> None:
    """The baseline: every key read with its own round trip, one switch after another."""
    for i in range(switches):
        c: Any = redis.Redis(port=port, db=i, decode_responses=True)
        pmap = c.hgetall("COUNTERS_PORT_NAME_MAP")
        c.hgetall("COUNTERS_QUEUE_TYPE_MAP")
        c.hgetall("COUNTERS_QUEUE_INDEX_MAP")
        qmap = c.hgetall("COUNTERS_QUEUE_NAME_MAP")
        pgmap = c.hgetall("COUNTERS_PG_NAME_MAP")
        for name, oid in pmap.items():
            c.hgetall(f"COUNTERS:{oid}")
            c.hgetall(f"RATES:{oid}")
            c.hgetall(f"PORT_TABLE:{name}")
        for oid in [*qmap.values(), *pgmap.values()]:
            c.hgetall(f"COUNTERS:{oid}")
            c.hgetall(f"USER_WATERMARKS:{oid}")
        c.close()


def cpu_s() -> float:
    """This process's CPU time, every thread, user + system (getrusage)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def thread_cpu_s() -> dict[int, float]:
    """CPU time of each thread of this process by native id (Linux /proc; empty elsewhere)."""
    out = {}
    tick = os.sysconf("SC_CLK_TCK")
    with contextlib.suppress(OSError):
        for tid in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError), open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
                out[int(tid)] = (int(fields[11]) + int(fields[12])) / tick
    return out


def timed(fn: Any, repeat: int) -> tuple[float, float, Any]:
    best_wall = best_cpu = float("inf")
    out = None
    for _ in range(repeat):
        t, c = time.perf_counter(), cpu_s()
        out = fn()
        best_wall = min(best_wall, time.perf_counter() - t)
        best_cpu = min(best_cpu, cpu_s() - c)
    return best_wall, best_cpu, out


def serve_gnmi(a: argparse.Namespace) -> None:
    """Child process: one gNMI target per switch (the test fixture's target on synthetic data)."""
    from telemetry.sim.gnmi_target import Target, serve

    ports, servers = [], []  # servers kept referenced: a collected grpc server stops
    for i in range(a.switches):
        db = switch_db(a.ports, a.queues, i)
        appl = {k: v for k, v in db.items() if k.startswith(("PORT_TABLE:", "LLDP_ENTRY_TABLE:"))}
        counters = {k: v for k, v in db.items() if k not in appl}
        # rendered once per state: the targets keep up with 256 switches on a small machine
        phase = a.interval * i / a.switches if a.phases == "spread" else 0.0
        server, port = serve(Target(counters, appl, {}, rendered=True, phase_s=phase), workers=3)
        servers.append(server)
        ports.append(port)
    print(json.dumps(ports), flush=True)
    sys.stdin.read()  # until the parent closes it


def bench_gnmi(a: argparse.Namespace, redis_ports_per_cpu_s: float | None) -> dict[str, Any]:
    """Targets in one child process, the collector in another (its own CPU, measured there)."""
    size = ["--switches", str(a.switches), "--ports", str(a.ports), "--queues", str(a.queues)]
    targets = subprocess.Popen([sys.executable, __file__, "--serve-gnmi", *size,
                                "--interval", str(a.interval), "--phases", a.phases],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert targets.stdout is not None
        ports = targets.stdout.readline()
        collector = subprocess.run(
            [sys.executable, __file__, "--collect-gnmi", *size, "--interval", str(a.interval),
             "--seconds", str(a.seconds), "--sonic-paths", a.sonic_paths, "--phases", a.phases],
            input=ports, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if collector.returncode:
            sys.exit(f"gNMI collector failed: {collector.stderr.strip()[-2000:]}")
        out: dict[str, Any] = json.loads(collector.stdout.strip().splitlines()[-1])
    finally:
        assert targets.stdin is not None
        targets.stdin.close()
        targets.wait(30)
    if redis_ports_per_cpu_s:
        out["redis_ports_per_cpu_s"] = round(redis_ports_per_cpu_s)
        out["gnmi_vs_redis_ports_per_cpu_s"] = round(
            out["gnmi_ports_per_cpu_s"] / redis_ports_per_cpu_s, 1
        )
    return out


def collect_gnmi(a: argparse.Namespace) -> dict[str, Any]:
    """Child process: the collector. One SwitchSource streams from the targets (ports on stdin)
    and is polled every interval; this process's CPU (getrusage: every thread, the gRPC
    library's included) over the window, and by thread: the polls (main thread), the streams
    (the asyncio loop: receive, decode, cache) and the rest (gRPC's own threads)."""
    from exporters.switch.config import GnmiConfig, SwitchConfig, SwitchSourceConfig

    ports = json.loads(sys.stdin.readline())
    sws = [SwitchConfig(name=f"leaf{i:03d}", role="leaf",
                        gnmi=GnmiConfig(address=f"127.0.0.1:{p}", sonic_paths=a.sonic_paths))
           for i, p in enumerate(ports)]  # fmt: skip
    cfg = SwitchSourceConfig(switches=sws, timeout_seconds=max(30.0, a.interval * 3))
    src = SwitchSource([], cfg, gnmi=sws, interval=a.interval)
    try:
        first = src.collect()  # waits for every switch's first full sample
        up = sum(int(x) for b in first if b.kind.name == "switch_status"
                 for x in b.table.column("up").to_pylist())  # fmt: skip
        if a.phases == "spread":  # every switch past its delayed second sample: steady phases
            time.sleep(a.interval * 1.5)
            src.collect()
        v0 = sum(st.values for st in src._streams)
        th0, c0, t0 = thread_cpu_s(), cpu_s(), time.perf_counter()
        polls = 0
        while time.perf_counter() - t0 < a.seconds:
            time.sleep(max(0.0, a.interval - (time.perf_counter() - t0) % a.interval))
            batches = src.collect()
            polls += 1
        cpu, wall, th1 = cpu_s() - c0, time.perf_counter() - t0, thread_cpu_s()
        values = sum(st.values for st in src._streams) - v0
        rows = {b.kind.name: b.num_rows for b in batches}
        loop = src._gnmi_loop.thread.native_id
    finally:
        src.close()
    intervals = wall / a.interval
    by = {k: th1.get(k, 0.0) - th0.get(k, 0.0) for k in th1}
    main = by.pop(threading.main_thread().native_id or 0, 0.0)
    streams = by.pop(loop, 0.0)
    port_sets = values * a.ports / (a.ports + a.ports * a.queues)  # ports' share of the sets
    return {
        "gnmi_switches": a.switches, "gnmi_sonic_paths": a.sonic_paths, "gnmi_phases": a.phases, "gnmi_switches_up": up, "gnmi_interval_s": a.interval,
        "gnmi_seconds": round(wall, 1), "gnmi_polls": polls, "gnmi_rows_last_poll": rows,
        "gnmi_cpu_s": round(cpu, 2), "gnmi_cpu_per_interval_s": round(cpu / intervals, 3),
        "gnmi_cpu_per_interval_by_thread_s": {
            "polls": round(main / intervals, 3), "streams": round(streams / intervals, 3),
            "grpc_and_other": round(sum(by.values()) / intervals, 3),
        } if th1 else None,
        "gnmi_counter_sets_per_s": round(values / wall),
        "gnmi_counter_sets_expected_per_s": round(a.switches * (a.ports + a.ports * a.queues) / a.interval),
        "gnmi_counter_sets_per_s_per_core": round(values / cpu) if cpu else None,
        "gnmi_ports_per_cpu_s": round(port_sets / cpu) if cpu else None,
    }  # fmt: skip


def bench_snmp(a: argparse.Namespace) -> dict[str, Any]:
    """SNMP switches walked against one local snmpd (v2c): CPU and wall per poll."""
    from exporters.switch.config import SnmpConfig, SwitchConfig, SwitchSourceConfig

    exe = shutil.which("snmpd") or "/usr/sbin/snmpd"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        conf = Path(tmp) / "snmpd.conf"
        conf.write_text(f"persistentDir {tmp}\nagentAddress udp:127.0.0.1:{port}\n"
                        "rocommunity public 127.0.0.1\n")  # fmt: skip
        proc = subprocess.Popen([exe, "-f", "-Lf", f"{tmp}/log", "-C", "-c", str(conf), "-M", tmp, "-m", ""],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            time.sleep(1.0)
            sws = [SwitchConfig(name=f"sw{i:03d}", snmp=SnmpConfig(address=f"127.0.0.1:{port}"))
                   for i in range(a.switches)]  # fmt: skip
            src = SwitchSource([], SwitchSourceConfig(switches=sws, timeout_seconds=5, workers=32),
                               snmp=sws)  # fmt: skip
            try:
                src.collect()
                wall, cpu, batches = timed(src.collect, a.repeat)
            finally:
                src.close()
        finally:
            proc.terminate()
            proc.wait(10)
    rows = {b.kind.name: b.num_rows for b in batches}
    up = sum(int(x) for b in batches if b.kind.name == "switch_status"
             for x in b.table.column("up").to_pylist())  # fmt: skip
    ports = rows.get("switch_port_sample", 0)
    return {
        "snmp_switches": a.switches, "snmp_switches_up": up, "snmp_ports": ports,
        "snmp_poll_wall_s": round(wall, 3), "snmp_poll_cpu_s": round(cpu, 3),
        "snmp_ports_per_cpu_s": round(ports / cpu) if cpu else None,
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--switches", type=int, default=64)
    ap.add_argument("--ports", type=int, default=64)
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--gnmi", action="store_true", help="the gNMI streaming path")
    ap.add_argument("--snmp", action="store_true", help="the SNMP walk")
    ap.add_argument("--interval", type=float, default=10.0, help="gNMI SAMPLE interval")
    ap.add_argument("--seconds", type=float, default=60.0, help="gNMI measurement window")
    ap.add_argument("--sonic-paths", choices=("whole", "fields"), default="whole",
                    help="gNMI: COUNTERS/Ethernet*/<counter> per mapped counter, or the whole "
                    "COUNTERS/Ethernet* (gnmi.sonic_paths)")  # fmt: skip
    ap.add_argument("--phases", choices=("aligned", "spread"), default="aligned",
                    help="gNMI: every switch samples at the moment it was subscribed (a collector "
                    "subscribing to all at once gets them together), or the switches' samples "
                    "spread evenly over the interval (each arrives alone)")  # fmt: skip
    ap.add_argument("--redis-ports-per-cpu-s", type=float, default=None,
                    help="--gnmi: the Redis poll's figure to compare with (else measured)")  # fmt: skip
    ap.add_argument("--serve-gnmi", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--collect-gnmi", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--poll-only", action="store_true",
                    help="the Redis poll alone (no sequential/naive baselines)")  # fmt: skip
    a = ap.parse_args()
    if a.serve_gnmi:
        serve_gnmi(a)
        return
    if a.collect_gnmi:
        print(json.dumps(collect_gnmi(a)))
        return
    if a.snmp:
        print(json.dumps({"bench": "switch-snmp", **bench_snmp(a)}))
        return
    if a.gnmi:
        redis_rate = a.redis_ports_per_cpu_s
        redis: dict[str, Any] = {}
        if redis_rate is None:  # the Redis poll in the same run, on the 64 switches,
            # in a process of its own like the gNMI collector
            r = subprocess.run(
                [sys.executable, __file__, "--poll-only", "--switches", "64", "--ports",
                 str(a.ports), "--queues", str(a.queues), "--repeat", str(a.repeat)],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if r.returncode:
                sys.exit(f"Redis poll failed: {r.stderr.strip()[-2000:]}")
            redis = json.loads(r.stdout.strip().splitlines()[-1])
            redis_rate = redis["ports_per_cpu_s"]
        out = bench_gnmi(a, redis_rate)
        if redis:
            out["redis_poll_cpu_s_64_switches"] = redis["poll_cpu_s"]
        print(json.dumps({"bench": "switch-gnmi", **out}))
        return
    print(json.dumps({"bench": "switch", **bench_redis(a, compare=not a.poll_only)}))


def bench_redis(a: argparse.Namespace, compare: bool = True) -> dict[str, Any]:
    """The Redis poll of a.switches switches: best of a.repeat, against (`compare`) one switch
    at a time and the naive loop."""
    exe = shutil.which("redis-server")
    if exe is None:
        sys.exit("redis-server is not installed (Debian package redis-server)")
    with tempfile.TemporaryDirectory() as tmp, redis_server(exe, a.switches + 1, tmp) as port:
        t = time.perf_counter()
        for i in range(a.switches):
            pipe: Any = redis.Redis(port=port, db=i).pipeline(transaction=False)
            for k, h in switch_db(a.ports, a.queues, i).items():
                pipe.hset(k, mapping=h)
            pipe.execute()
        load_s = time.perf_counter() - t
        print(f"loaded {a.switches} switches in {load_s:.1f}s", file=sys.stderr)

        def make(workers: int) -> SwitchSource:
            cfg = SwitchSource.Config(
                switches=[{"name": f"leaf{i:02d}", "address": f"127.0.0.1:{port}", "counters_db": i,  # type: ignore[misc]
                           "appl_db": i, "role": "leaf"} for i in range(a.switches)],
                workers=workers, uplink_neighbor="^spine", timeout_seconds=30,
            )  # fmt: skip
            return SwitchSource(targets_from_config(cfg), cfg)

        conc = make(32)
        conc.collect()  # connections up, as in steady state
        wall, cpu, batches = timed(conc.collect, a.repeat)
        rows = {b.kind.name: b.num_rows for b in batches}
        if not compare:
            return {"poll_wall_s": round(wall, 3), "poll_cpu_s": round(cpu, 3),
                    "ports_per_cpu_s": round(a.switches * a.ports / cpu)}  # fmt: skip
        seq = make(1)
        seq.collect()
        swall, scpu, _ = timed(seq.collect, a.repeat)
        nwall, ncpu, _ = timed(lambda: naive_poll(port, a.switches), 1)
    assert rows["switch_port_sample"] == a.switches * a.ports, rows
    assert rows["switch_queue_sample"] == a.switches * a.ports * a.queues * 2, rows
    return {
        "switches": a.switches, "ports": a.ports, "queues": a.queues,
        "rows": rows,
        "poll_wall_s": round(wall, 3), "poll_cpu_s": round(cpu, 3),
        "sequential_poll_wall_s": round(swall, 3), "sequential_poll_cpu_s": round(scpu, 3),
        "naive_unpipelined_wall_s": round(nwall, 3), "naive_unpipelined_cpu_s": round(ncpu, 3),
        "speedup_vs_naive": round(nwall / wall, 2), "speedup_vs_sequential": round(swall / wall, 2),
        "ports_per_cpu_s": round(a.switches * a.ports / cpu),
    }  # fmt: skip


if __name__ == "__main__":
    main()
