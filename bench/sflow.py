"""sFlow decode throughput per core: railscope's decoder against pmacct's sfacctd (C) on the
same datagrams in the same run. Last line: one JSON object.

    python bench/sflow.py [--datagrams 20000] [--samples-per-datagram 8] [--repeat 3]
    python bench/sflow.py --workers 2         # also the live collector, 1 and 2 workers
    python bench/sflow.py --fuzz 1000000      # the decoder on random + mutated datagrams

railscope is timed in this process with CPU time (decode only, and decode + rows + Arrow
batches); sfacctd reads the same datagrams from a pcap (`pcap_savefile`) into its print plugin,
and its CPU time (core + plugin processes) is taken from the children's rusage. `rows` is
the collector's path (`decode.scan`, one pass per datagram, then `SflowIngest`, which batches
column-wise): scan + add + drain to Arrow batches; "decode only" is the dict decoder `decode()`; `pcap`
is `railscope sflow --from FILE.pcap`'s whole path on the pcap sfacctd read. Best of --repeat.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from exporters.sflow import encode as E
from exporters.sflow.decode import DecodeError, decode, scan
from exporters.sflow.ingest import SflowIngest
from exporters.sflow.pcap import write_pcap
from telemetry.contracts import ComponentStats


def make_datagrams(n: int, per: int, seed: int = 1) -> list[bytes]:
    """Datagrams like a leaf switch sends: `per` RoCEv2 flow samples with 128-byte headers, and
    one counter sample in every 10th datagram."""
    rng = random.Random(seed)
    out = []
    seq = 0
    for i in range(n):
        samples = []
        for _ in range(per):
            seq += 1
            frame = E.rocev2_frame(f"10.{rng.randrange(16)}.{rng.randrange(256)}.{rng.randrange(1, 255)}",
                                   f"10.{rng.randrange(16)}.{rng.randrange(256)}.{rng.randrange(1, 255)}",
                                   rng.randrange(1 << 24), psn=rng.randrange(1 << 24),
                                   sport=rng.randrange(49152, 65536))  # fmt: skip
            samples.append(E.flow_sample(frame[:128], seq=seq, rate=4096, frame_length=4158,
                                         input=rng.randrange(1, 64), output=rng.randrange(1, 64)))  # fmt: skip
        if i % 10 == 0:
            samples.append(E.counter_sample({"ifindex": i % 64, "ifspeed": 400 * 10**9, "ifstatus": 3,
                                             "in_octets": i * 1000, "out_octets": i * 2000}))  # fmt: skip
        out.append(E.datagram(samples, agent="10.255.0.1", seq=i + 1, uptime_ms=1000 + i))
    return out


def bench_railscope(dgrams: list[bytes], repeat: int) -> dict[str, float]:
    samples = sum(len(d["flows"]) + len(d["counters"]) for d in map(decode, dgrams))
    best_decode = best_full = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        for d in dgrams:
            decode(d)
        best_decode = min(best_decode, time.process_time() - t)
        ing = SflowIngest(ComponentStats("bench"))
        t = time.process_time()
        for d in dgrams:
            ing.add(scan(d), "10.255.0.1", 0)
        ing.drain()
        best_full = min(best_full, time.process_time() - t)
    return {
        "samples": samples,
        "decode_cpu_s": best_decode,
        "full_cpu_s": best_full,
        "decode_samples_per_s": samples / best_decode,
        "decode_datagrams_per_s": len(dgrams) / best_decode,
        "full_samples_per_s": samples / best_full,
        "full_datagrams_per_s": len(dgrams) / best_full,
    }


def bench_railscope_pcap(pcap: Path, repeat: int) -> float | None:
    """CPU seconds for railscope's own `--from FILE.pcap` path (read + decode + Arrow rows) on
    the pcap sfacctd read: the like-for-like comparison."""
    if not pcap.exists():
        return None
    from exporters.sflow.source import SflowSource

    best = float("inf")
    for _ in range(repeat):
        src = SflowSource(pcap_path=str(pcap))
        t = time.process_time()
        src.collect()
        best = min(best, time.process_time() - t)
    return best


def bench_sfacctd(
    dgrams: list[bytes], samples: int, tmp: Path, repeat: int = 1
) -> dict[str, float] | None:
    exe = shutil.which("sfacctd")
    if exe is None:
        return None
    pcap = tmp / "sflow.pcap"
    write_pcap(pcap, [(1_700_000_000 + i * 1e-4, E.udp_frame(d)) for i, d in enumerate(dgrams)])
    out = tmp / "sfacctd.csv"
    conf = tmp / "sfacctd.conf"
    conf.write_text(
        f"daemonize: false\npcap_savefile: {pcap}\npcap_savefile_wait: false\n"
        "plugins: print[p]\naggregate[p]: src_host, dst_host\n"
        f"print_output_file[p]: {out}\nprint_output[p]: csv\nprint_refresh_time[p]: 3600\n"
        "sfacctd_renormalize: false\n"
    )
    cpu = wall = float("inf")
    for _ in range(repeat):  # best of `repeat`, like railscope's figures
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run([exe, "-f", str(conf)], check=True, capture_output=True, timeout=600)
        wall = min(wall, time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = min(cpu, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    counted = 0  # sfacctd's own count of the flow samples it accounted (PACKETS, not renormalized)
    lines = out.read_text().splitlines()
    for line in lines[1:]:
        counted += int(line.split(",")[2])
    return {"cpu_s": cpu, "wall_s": wall, "flow_samples_counted": counted,
            "samples_per_s": samples / cpu, "datagrams_per_s": len(dgrams) / cpu}  # fmt: skip


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _max_rx_queue(port: int) -> int:
    """The fullest receive queue (bytes) of the UDP sockets bound to `port`."""
    want, most = f":{port:04X}", 0
    with open("/proc/net/udp") as f:
        for line in f:
            parts = line.split()
            if len(parts) > 4 and parts[1].endswith(want):
                most = max(most, int(parts[4].split(":")[1], 16))
    return most


def bench_workers(dgrams: list[bytes], samples: int, n: int) -> dict[str, Any]:
    """`--workers n` on loopback: 16 sender sockets (source ports the kernel spreads over the
    workers) send every datagram, paced only by the workers' socket queues (/proc/net/udp
    rx_queue under 2 MiB); wall time until the queues are empty and every worker has handed its
    rows to the parent as Arrow batches (take()). Also the workers' CPU seconds (/proc/PID/stat)
    and this process's (the senders and the pool's readers): on a 2-core machine they share it."""
    from exporters.sflow.ingest import REASONS
    from exporters.sflow.workers import WorkerPool
    from telemetry.problems import Problems

    st = ComponentStats("source:sflow", unit="datagrams")
    pool = WorkerPool(n, "127.0.0.1:0", stats=st, problems=Problems(st, "sflow", REASONS),
                      agents={}, ifnames={}, rcvbuf=8 << 20, max_rows=1 << 40)  # fmt: skip
    host, port = pool.start()
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(16)]
    pids = [w.proc.pid for w in pool._workers]
    cpu0 = sum(_cpu_seconds(p) for p in pids)
    own0 = time.process_time()
    t0 = time.perf_counter()
    for i, d in enumerate(dgrams):
        socks[i % 16].sendto(d, (host, port))
        if i % 128 == 127:
            while _max_rx_queue(port) > 2 << 20:
                time.sleep(0.0005)
    deadline = time.monotonic() + 300
    while _max_rx_queue(port) and time.monotonic() < deadline:  # the workers read it all
        time.sleep(0.001)
    rows = sum(b.num_rows for b in pool.take())  # each worker hands over what it holds
    wall = time.perf_counter() - t0
    cpu = sum(_cpu_seconds(p) for p in pids) - cpu0
    own = time.process_time() - own0
    snap = st.snapshot()
    pool.stop()
    for s in socks:
        s.close()
    return {
        "workers": n,
        "wall_s": round(wall, 3),
        "rows": rows,
        "samples_per_s": round(samples / wall),
        "worker_cpu_s": round(cpu, 3),
        "samples_per_worker_cpu_s": round(samples / cpu) if cpu else 0,
        "sender_and_parent_cpu_s": round(own, 3),  # this process: the 16 senders + the pool
        "socket_drops": int(snap.get("socket_drops", 0)),
        "accounted": snap["received"] + int(snap.get("socket_drops", 0)) == len(dgrams),
        "received_per_worker": [int(snap.get(f"worker{i}_received", 0)) for i in range(n)],
    }


def fuzz(n: int, seed: int) -> dict[str, object]:
    """n datagrams: a third pure random bytes, two thirds mutated valid ones (byte flips,
    truncation, splices, length fields set to extremes). Anything but DecodeError is a failure."""
    rng = random.Random(seed)
    seeds = [
        *make_datagrams(40, 3, seed),
        E.datagram([E.flow_sample(E.rocev2_frame("10.0.0.1", "10.0.0.2", 7, vlan=9)[:96], expanded=True)],
                   agent="fd00::1"),
        E.datagram([E.counter_sample({"ifindex": 1}, {"fcs_errors": 3})]),
    ]  # fmt: skip
    outcomes = {"decoded": 0, "rejected": 0}
    failures: list[str] = []
    ing = SflowIngest(ComponentStats("fuzz"))
    t = time.perf_counter()
    for i in range(n):
        r = rng.random()
        if r < 0.33:
            data = (b"\0\0\0\x05" if rng.random() < 0.5 else b"") + rng.randbytes(
                rng.randrange(0, 700)
            )
        else:
            b = bytearray(rng.choice(seeds))
            for _ in range(rng.randrange(1, 6)):
                op = rng.random()
                pos = rng.randrange(len(b))
                if op < 0.5:
                    b[pos] = rng.randrange(256)
                elif op < 0.7:  # a 32-bit field set to an extreme (lengths, counts)
                    pos -= pos % 4
                    b[pos : pos + 4] = rng.choice(
                        [b"\xff\xff\xff\xff", b"\0\0\0\0", b"\x7f\xff\xff\xff", b"\0\0\x10\0"]
                    )
                elif op < 0.85:
                    del b[pos:]
                    if not b:
                        break
                else:
                    b[pos:pos] = rng.randbytes(rng.randrange(1, 16))
            data = bytes(b)
        try:
            decode(data)
            outcomes["decoded"] += 1
            ing.add(scan(data), "fuzz", 0)
            if i % 1000 == 0:
                ing.drain()  # rows from whatever decoded must fit the record kinds
        except DecodeError:
            outcomes["rejected"] += 1
        except Exception as e:  # the failure this fuzzer looks for
            failures.append(f"{type(e).__name__}: {e} <- {data.hex()}")
    ing.drain()
    return {"bench": "sflow_fuzz", "datagrams": n, **outcomes, "escaped_exceptions": len(failures),
            "first_failures": failures[:3], "seconds": round(time.perf_counter() - t, 1)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--datagrams", type=int, default=20000)
    ap.add_argument("--samples-per-datagram", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--fuzz", type=int, metavar="N", help="fuzz the decoder with N datagrams instead"
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="also run the live collector with 1 and N workers on loopback (aggregate samples/s)",
    )
    a = ap.parse_args()
    if a.fuzz:
        print(json.dumps(fuzz(a.fuzz, a.seed)))
        return
    dgrams = make_datagrams(a.datagrams, a.samples_per_datagram, a.seed)
    rs = bench_railscope(dgrams, a.repeat)
    print(f"railscope: {rs['decode_samples_per_s']:,.0f} samples/s decode-only, "
          f"{rs['full_samples_per_s']:,.0f} samples/s to Arrow rows (one core)", file=sys.stderr)  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        sf = bench_sfacctd(dgrams, int(rs["samples"]), Path(tmp), a.repeat)
        pcap_cpu = bench_railscope_pcap(Path(tmp) / "sflow.pcap", a.repeat)
    result: dict[str, object] = {
        "bench": "sflow",
        "datagrams": len(dgrams),
        "samples": rs["samples"],
        "railscope_decode_samples_per_s_per_core": round(rs["decode_samples_per_s"]),
        "railscope_decode_datagrams_per_s_per_core": round(rs["decode_datagrams_per_s"]),
        "railscope_rows_samples_per_s_per_core": round(rs["full_samples_per_s"]),
        "railscope_rows_datagrams_per_s_per_core": round(rs["full_datagrams_per_s"]),
        "target_samples_per_s_per_core": 50000,
        "meets_target": rs["full_samples_per_s"] >= 50000,
    }
    if sf is not None:
        result.update(
            sfacctd_samples_per_s_per_core=round(sf["samples_per_s"]),
            sfacctd_datagrams_per_s_per_core=round(sf["datagrams_per_s"]),
            sfacctd_cpu_s=round(sf["cpu_s"], 3),
            sfacctd_flow_samples_counted=sf["flow_samples_counted"],
            ratio_railscope_decode_vs_sfacctd=round(
                rs["decode_samples_per_s"] / sf["samples_per_s"], 3
            ),
            ratio_railscope_rows_vs_sfacctd=round(
                rs["full_samples_per_s"] / sf["samples_per_s"], 3
            ),
        )
    if pcap_cpu:
        pcap_rate = rs["samples"] / pcap_cpu
        result["railscope_pcap_samples_per_s_per_core"] = round(pcap_rate)
        if sf is not None:
            result["ratio_railscope_pcap_vs_sfacctd_pcap"] = round(
                pcap_rate / sf["samples_per_s"], 3
            )
    else:
        result["sfacctd"] = "not installed (Debian package pmacct)"
    if a.workers:
        live = {}
        live_dgrams = dgrams * 3  # ~3x longer than one hand-over interval matters
        for n in sorted({1, a.workers}):  # best of --repeat by wall time
            runs = [bench_workers(live_dgrams, 3 * int(rs["samples"]), n) for _ in range(a.repeat)]
            live[n] = min(runs, key=lambda r: r["wall_s"])
        result["live_workers"] = list(live.values())
        if a.workers > 1:
            result[f"live_samples_per_s_workers_{a.workers}_vs_1"] = round(
                live[a.workers]["samples_per_s"] / live[1]["samples_per_s"], 3
            )
    result["load_average_1m"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
