"""Many agents inserting at once: N node agents' GPU and NIC batches (8 GPUs, 8 NIC ports per
server, one insert per kind per agent per interval, spread over the interval as real agents'
phases are) sent over ClickHouse's HTTP interface for a few minutes, by two paths into the same
kind of embedded store, in the same run:

- direct (today): every agent inserts into the store (`railscope serve`'s endpoint over the
  embedded engine, standing in for a ClickHouse server): one INSERT, and one part, per batch;
- gateway: every agent inserts into `railscope ingest`, which answers from its write-ahead log
  and sends the store one merged insert per kind every `--flush-seconds`.

Each agent keeps an unanswered batch and retries it with its token (as the ClickHouse sink does),
and `--lost-answers` of the answered ones are sent again later with the same token (an answer
lost on the way back): exactly-once is checked on the rows, every (node, gpu, ts) and (node,
device, port, ts) once. Measured per path: rows/s stored, the store's active parts every 2 s,
merges (system.events), insert latency p50/p99 seen by agents, CPU per million rows of the store
process and of the gateway process (/proc), the offered vs achieved insert rate. The load
generator (this process) is not counted. Last line: one JSON object.

    python bench/scale.py [--agents 1250] [--interval 10] [--seconds 180] [--flush-seconds 2]
"""

from __future__ import annotations

import argparse
import heapq
import http.client
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.results import report  # noqa: E402
from telemetry.records import GPU_SAMPLE, NIC_SAMPLE, RecordKind  # noqa: E402

DB = "railscope"
TICK = os.sysconf("SC_CLK_TCK")


# -- the agents' batches ---------------------------------------------------------------------
def template(kind: RecordKind, node: str, rng: np.random.Generator) -> pa.Table:
    """One agent's batch of `kind`: 8 rows (GPUs 0-7, or mlx5_0..7 port 1) with every field a
    real agent fills, numbers random."""
    n = 8
    cols: dict[str, Any] = {}
    for f in kind.fields:
        t = f.type
        if f.name == "node":
            cols[f.name] = [node] * n
        elif f.name == "cluster":
            cols[f.name] = ["bench"] * n
        elif f.name == "gpu":
            cols[f.name] = list(range(n))
        elif f.name == "device":
            cols[f.name] = [f"mlx5_{i}" for i in range(n)]
        elif f.name == "port":
            cols[f.name] = [1] * n
        elif t == "time":
            cols[f.name] = [0] * n
        elif t in ("str", "lstr"):
            cols[f.name] = [f"{f.name}-{i}" for i in range(n)]
        elif t == "bool":
            cols[f.name] = [True] * n
        elif t == "f64":
            cols[f.name] = (rng.random(n) * 500).tolist()
        elif t in ("counter", "u64", "u32", "i64"):
            cols[f.name] = rng.integers(0, 1 << 30, n).tolist()
        else:  # u8, u16
            cols[f.name] = rng.integers(0, 200, n).tolist()
    arrays = [
        pa.array(cols[f.name], pa.int64()).cast(f.arrow_type)
        if f.type == "time"
        else pa.array(cols[f.name], f.arrow_type)
        for f in kind.fields
    ]
    return pa.Table.from_arrays(arrays, schema=kind.arrow_schema)


def payload(table: pa.Table, ts_ms: int) -> bytes:
    """The batch of one cycle as the sink sends it: an Arrow IPC stream, `ts` set."""
    i = table.schema.get_field_index("ts")
    t = table.set_column(
        i,
        table.schema.field(i),
        pa.array([ts_ms] * table.num_rows, pa.int64()).cast(pa.timestamp("ms", "UTC")),
    )
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    return sink.getvalue().to_pybytes()


@dataclass(order=True)
class Send:
    at: float
    seq: int
    kind: str = field(compare=False)
    body: bytes = field(compare=False)
    token: str = field(compare=False)
    rows: int = field(compare=False)
    first: float = field(compare=False, default=0.0)  # when it was due the first time
    resend: bool = field(compare=False, default=False)  # a copy after a lost answer


class Agents:
    """The load: a schedule of sends, worker threads with keep-alive connections, retries."""

    def __init__(self, a: argparse.Namespace, host: str, port: int, t0: float) -> None:
        self.a, self.host, self.port, self.t0 = a, host, port, t0
        rng = np.random.default_rng(1)
        self.templates = [
            {k.table: template(k, f"gpu-{i:05d}", rng) for k in (GPU_SAMPLE, NIC_SAMPLE)}
            for i in range(a.agents)
        ]
        self.phase = [random.Random(i).random() * a.interval for i in range(a.agents)]
        self.heap: list[Send] = []
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.seq = 0
        self.latencies: list[float] = []
        self.acked_at: list[float] = []  # when each first send was answered
        self.late: list[float] = []  # how long after its due time a first send started
        self.acked_rows = {GPU_SAMPLE.table: 0, NIC_SAMPLE.table: 0}
        self.acked_tokens: set[str] = set()
        self.sent_first = 0
        self.errors: dict[str, int] = {}
        self.resends = 0
        self.outstanding = 0
        self.stop_at = t0 + a.seconds
        self.ts0 = int(time.time() * 1000) - 120_000  # inside every TTL, before "now"
        self.cycle = 0
        self.done = threading.Event()

    def schedule_cycle(self, cycle: int) -> None:
        """Every agent's two batches of `cycle`, each at the agent's phase in the interval."""
        base = self.t0 + cycle * self.a.interval
        ts = self.ts0 + cycle * int(self.a.interval * 1000)
        made = [
            (base + self.phase[i], table_name, payload(tb, ts))
            for i, tables in enumerate(self.templates)
            for table_name, tb in tables.items()
        ]
        with self.cond:
            for at, table_name, body in made:
                self.seq += 1
                heapq.heappush(
                    self.heap, Send(at, self.seq, table_name, body, uuid.uuid4().hex, 8, at)
                )
                self.outstanding += 1
            self.cond.notify_all()

    def scheduler(self) -> None:
        """Adds each cycle's sends ahead of time, until the run's end."""
        cycle = 0
        while self.t0 + cycle * self.a.interval < self.stop_at:
            self.schedule_cycle(cycle)
            cycle += 1
            wake = self.t0 + cycle * self.a.interval - self.a.interval / 2
            time.sleep(max(0.0, wake - time.monotonic()))

    def worker(self) -> None:
        conn: http.client.HTTPConnection | None = None
        while True:
            with self.cond:
                while True:
                    if self.done.is_set() and (
                        not self.heap
                        or time.monotonic() > self.drain_until
                        or self.heap[0].at > self.drain_until
                    ):
                        return  # what is still unanswered stays counted in `outstanding`
                    now = time.monotonic()
                    if self.heap and self.heap[0].at <= now:
                        s = heapq.heappop(self.heap)
                        break
                    self.cond.wait(0.05 if not self.heap else max(0.001, self.heap[0].at - now))
            if conn is None:
                conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
            q = urllib.parse.urlencode(
                {
                    "query": f"INSERT INTO `{DB}`.`{s.kind}` FORMAT ArrowStream",
                    "insert_deduplication_token": s.token,
                }
            )
            started = time.monotonic()
            if not s.resend and s.first == s.at:
                with self.lock:
                    self.late.append(started - s.at)
            try:
                conn.request(
                    "POST",
                    "/?" + q,
                    body=s.body,
                    headers={"Content-Type": "application/octet-stream"},
                )
                resp = conn.getresponse()
                text = resp.read()
                ok = resp.status == 200
                why = (
                    ""
                    if ok
                    else (resp.headers.get("X-ClickHouse-Exception-Code") or str(resp.status))
                )
                if not ok:
                    print(
                        f"  {s.kind}: {text[:200]!r}", file=sys.stderr
                    ) if random.random() < 0.01 else None
            except (OSError, http.client.HTTPException) as e:
                ok, why = False, type(e).__name__
                conn.close()
                conn = None
            took = time.monotonic() - started
            with self.cond:
                if ok:
                    if not s.resend:
                        self.latencies.append(took)
                        self.acked_at.append(started + took)
                        if s.token not in self.acked_tokens:
                            self.acked_tokens.add(s.token)
                            self.acked_rows[s.kind] += s.rows
                        self.outstanding -= 1
                        if random.random() < self.a.lost_answers:  # the answer "was lost": again
                            self.resends += 1
                            self.seq += 1
                            heapq.heappush(
                                self.heap,
                                Send(
                                    time.monotonic() + random.uniform(0.5, 30),
                                    self.seq,
                                    s.kind,
                                    s.body,
                                    s.token,
                                    s.rows,
                                    s.first,
                                    resend=True,
                                ),
                            )
                else:  # kept and retried with its token, as the sink does
                    self.errors[why] = self.errors.get(why, 0) + 1
                    self.seq += 1
                    retry = Send(
                        time.monotonic() + random.uniform(0.5, 2.0),
                        self.seq,
                        s.kind,
                        s.body,
                        s.token,
                        s.rows,
                        s.first,
                        s.resend,
                    )
                    heapq.heappush(self.heap, retry)
                self.cond.notify_all()

    def run(self, workers: int, drain_s: float) -> None:
        self.drain_until = float("inf")
        threads = [threading.Thread(target=self.worker, daemon=True) for _ in range(workers)]
        for t in threads:
            t.start()
        self.scheduler()
        time.sleep(max(0.0, self.stop_at - time.monotonic()))
        self.drain_until = time.monotonic() + drain_s  # finish what is due; resends past it dropped
        self.done.set()
        with self.cond:
            self.cond.notify_all()
        for t in threads:
            t.join(drain_s + 120)


# -- the processes under test ----------------------------------------------------------------
def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(args: list[str], cfg: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAILSCOPE_DSN", None)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "telemetry.cli",
            "--config",
            str(cfg),
            "--log-level",
            "warning",
            *args,
        ],
        stdout=open(log, "wb"),
        stderr=subprocess.STDOUT,
        env=env,
    )


def wait_http(port: int, proc: subprocess.Popen[bytes], seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/ping")
            if c.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"nothing answered on {port}")


class Store:
    """Queries the store process over HTTP (what the bench reads: parts, events, rows)."""

    def __init__(self, port: int) -> None:
        import clickhouse_connect

        self.c = clickhouse_connect.get_client(
            host="127.0.0.1", port=port, autogenerate_session_id=False
        )

    def query(self, sql: str) -> list[Any]:
        """`sql`'s rows; a refusal for load (too many queries at once: code 202, 203; memory: 241;
        HTTP 503) is retried with a growing pause for up to a minute, as a monitor should."""
        pause, deadline = 0.2, time.monotonic() + 60
        while True:
            try:
                return list(self.c.query(sql).result_rows)
            except Exception as e:  # clickhouse_connect's DatabaseError / OperationalError
                text = str(e)
                busy = any(f"Code: {c}." in text for c in (202, 203, 241)) or "503" in text
                if not busy or time.monotonic() + pause > deadline:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 5.0)

    def parts(self) -> tuple[int, int]:
        """(active parts, rows in them) of the two tables."""
        n, rows = self.query(
            f"SELECT count(), sum(rows) FROM system.parts WHERE database = '{DB}' AND active "
            f"AND table IN ('{GPU_SAMPLE.table}', '{NIC_SAMPLE.table}')"
        )[0]
        return int(n), int(rows)

    def events(self) -> dict[str, int]:
        rows = self.query(
            "SELECT event, value FROM system.events WHERE event IN "
            "('Merge', 'MergedRows', 'InsertQuery', 'InsertedRows', 'MergeSourceParts')"
        )
        return {e: int(v) for e, v in rows}

    def rows(self) -> dict[str, tuple[int, int]]:
        g = self.query(
            f"SELECT count(), uniqExact(node, gpu, ts) FROM `{DB}`.`{GPU_SAMPLE.table}`"
        )[0]
        n = self.query(
            f"SELECT count(), uniqExact(node, device, port, ts) FROM `{DB}`.`{NIC_SAMPLE.table}`"
        )[0]
        return {GPU_SAMPLE.table: (int(g[0]), int(g[1])), NIC_SAMPLE.table: (int(n[0]), int(n[1]))}


def pct(xs: list[float], q: float) -> float:
    return round(float(np.percentile(np.array(xs), q)) * 1000, 1) if xs else 0.0


def growth_per_min(samples: list[tuple[float, int]]) -> float:
    """Slope of active parts over the run's last two thirds (parts per minute)."""
    tail = samples[len(samples) // 3 :]
    if len(tail) < 3:
        return 0.0
    x = np.array([t for t, _ in tail]) / 60
    y = np.array([p for _, p in tail], dtype=float)
    return round(float(np.polyfit(x, y, 1)[0]), 2)


def run_path(name: str, a: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    work = tmp / name
    work.mkdir()
    sport, gport = free_port(), free_port()
    cfg = work / "railscope.yaml"
    cfg.write_text(
        json.dumps(
            {
                "cluster": "bench",
                "prometheus": {"enabled": False},
                "sink": {"spool_dir": str(work / "spool")},
                "serve": {"threads": 16},
                "ingest": {
                    "spool_dir": str(work / "ingest"),
                    "flush_seconds": a.flush_seconds,
                    "threads": a.workers,
                },
            }
        )
    )
    store_proc = start(
        [
            "serve",
            "--dsn",
            f"chdb://{work / 'store'}",
            "--query-listen",
            f"127.0.0.1:{sport}",
            "--no-correlate",
        ],
        cfg,
        work / "serve.log",
    )
    procs = {"store": store_proc}
    try:
        wait_http(sport, store_proc)
        target = sport
        if name == "gateway":
            gw = start(
                [
                    "ingest",
                    "--dsn",
                    f"http://127.0.0.1:{sport}/{DB}",
                    "--ingest-listen",
                    f"127.0.0.1:{gport}",
                    "--no-metrics",
                ],
                cfg,
                work / "ingest.log",
            )
            procs["gateway"] = gw
            wait_http(gport, gw)
            target = gport
        st = Store(sport)
        cpu0 = {k: cpu_seconds(p.pid) for k, p in procs.items()}
        ev0 = st.events()
        t0 = time.monotonic() + 2.0
        agents = Agents(a, "127.0.0.1", target, t0)
        th = threading.Thread(target=agents.run, args=(a.workers, a.drain_seconds), daemon=True)
        th.start()
        samples: list[tuple[float, int]] = []
        rows_at: list[tuple[float, int]] = []
        while th.is_alive():
            time.sleep(2.0)
            parts, rows = st.parts()
            t = time.monotonic() - t0
            samples.append((t, parts))
            rows_at.append((t, rows))
            if len(samples) % 5 == 0:
                print(
                    f"  {name} {t:6.0f}s: active parts {parts:5d}, rows {rows:,}, "
                    f"outstanding {agents.outstanding}, errors {agents.errors}",
                    file=sys.stderr,
                )
        th.join()
        end_t = time.monotonic()
        if name == "gateway":  # what the gateway still holds goes in its next merged insert
            time.sleep(a.flush_seconds * 2 + 2)
        cpu1 = {k: cpu_seconds(p.pid) for k, p in procs.items()}
        ev1 = st.events()
        rows = st.rows()
        stored = sum(n for n, _ in rows.values())
        distinct = sum(u for _, u in rows.values())
        acked = sum(agents.acked_rows.values())
        window = a.seconds
        # rows stored by the end of the load (the drain after it is not counted)
        t_end, rows_end = next(((t, r) for t, r in rows_at if t >= window), rows_at[-1])
        cpu = {k: round(cpu1[k] - cpu0[k], 1) for k in procs}
        total_cpu = sum(cpu.values())
        first_sends = len(agents.latencies)
        out: dict[str, Any] = {
            "inserts_offered_per_s": round(a.agents * 2 / a.interval, 1),
            # answered within the load's window (not the drain after it)
            "inserts_achieved_per_s": round(
                sum(1 for x in agents.acked_at if x <= t0 + window) / window, 1
            ),
            "rows_per_s": round(rows_end / t_end),
            "rows_stored": stored,
            "rows_acked": acked,
            "duplicates": stored - distinct,
            "lost": acked - distinct,
            "unanswered_batches": agents.outstanding,
            "lost_answer_resends": agents.resends,
            "errors": agents.errors,
            "max_active_parts": max((p for _, p in samples), default=0),
            "active_parts_last": samples[-1][1] if samples else 0,
            "parts_growth_per_min": growth_per_min(samples),
            "active_parts_series": [p for _, p in samples[:: max(1, len(samples) // 30)]],
            "p50_insert_ms": pct(agents.latencies, 50),
            "p99_insert_ms": pct(agents.latencies, 99),
            "p99_send_late_ms": pct(agents.late, 99),
            "insert_queries": ev1.get("InsertQuery", 0) - ev0.get("InsertQuery", 0),
            "merges": ev1.get("Merge", 0) - ev0.get("Merge", 0),
            "merged_rows": ev1.get("MergedRows", 0) - ev0.get("MergedRows", 0),
            "cpu_s": cpu,
            "cpu_s_per_million_rows": round(total_cpu / max(stored, 1) * 1e6, 2),
            "cpu_s_per_million_rows_by_process": {
                k: round(v / max(stored, 1) * 1e6, 2) for k, v in cpu.items()
            },
            "store_peak_rss_mib": round(peak_rss_mib(store_proc.pid)),
            "run_s": round(end_t - t0, 1),
        }
        if name == "gateway":
            out["gateway_peak_rss_mib"] = round(peak_rss_mib(procs["gateway"].pid))
            out["gateway_cpu_ms_per_insert"] = round(cpu["gateway"] / max(first_sends, 1) * 1000, 3)
        return out
    finally:
        for p in reversed(list(procs.values())):
            p.terminate()
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--agents", type=int, default=1250, help="node agents (8 GPUs, 8 NIC ports each)"
    )
    ap.add_argument("--interval", type=float, default=10.0, help="each agent's collection interval")
    ap.add_argument("--seconds", type=float, default=180.0, help="run length per path")
    ap.add_argument(
        "--flush-seconds", type=float, default=2.0, help="the gateway's ingest.flush_seconds"
    )
    ap.add_argument("--workers", type=int, default=48, help="concurrent agent connections")
    ap.add_argument(
        "--lost-answers", type=float, default=0.02, help="answers lost: batch sent again later"
    )
    ap.add_argument(
        "--drain-seconds", type=float, default=60.0, help="after the run: retries finish"
    )
    ap.add_argument("--paths", default="direct,gateway")
    a = ap.parse_args()
    paths: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="railscope-scale-") as tmp:
        for name in [p for p in a.paths.split(",") if p]:
            print(
                f"{name}: {a.agents} agents, {a.agents * 2 / a.interval:g} inserts/s offered, {a.seconds:g} s",
                file=sys.stderr,
            )
            paths[name] = run_path(name, a, Path(tmp))
            print(f"{name}: {json.dumps(paths[name])}", file=sys.stderr)
    lines = []
    for name, r in paths.items():
        lines.append(
            f"{name:8s}: {r['rows_per_s']:>8,} rows/s, inserts {r['inserts_achieved_per_s']}/{r['inserts_offered_per_s']} per s, "
            f"active parts max {r['max_active_parts']} (growth {r['parts_growth_per_min']}/min), "
            f"insert p50/p99 {r['p50_insert_ms']}/{r['p99_insert_ms']} ms, {r['cpu_s_per_million_rows']} CPU-s per M rows, "
            f"duplicates {r['duplicates']}, lost {r['lost']}"
        )
    report(
        {
            "agents": a.agents,
            "interval_s": a.interval,
            "inserts_per_s": round(a.agents * 2 / a.interval, 1),
            "seconds": a.seconds,
            "flush_seconds": a.flush_seconds,
            "machine": f"{os.cpu_count()} CPUs",
            "paths": paths,
        },
        *lines,
    )


if __name__ == "__main__":
    main()
