"""The ClickHouse HTTP endpoint of `railscope serve` against the same work in-process.

A `railscope serve` process (no sources) holds store B; this process holds store A; both get the
same 1M-row, 8-column table. Measured with clickhouse-connect both ways:
- query: `query_arrow` of all 1M rows (ArrowStream) over HTTP to serve vs in-process on A;
- insert: `insert_arrow` of 1M rows over HTTP vs in-process.
Ratios are in-process time / endpoint time (1.0 = as fast as in-process). Last line: one JSON object.
`--soak SECONDS` instead runs serve with the node (fixture), sFlow and inventory sources, correlate
and readers (tests/integration/serve/soak.py) and reports its RSS: it must not grow after the
first minute.

    python bench/serve.py [--rows 1000000] [--repeat 5]
    python bench/serve.py --soak 600 [--readers 4]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from telemetry.store import Store

TABLE = """CREATE TABLE IF NOT EXISTS bench.t (
    ts DateTime64(3, 'UTC'), node LowCardinality(String), gpu UInt16, util Float64,
    power Float64, temp Float64, clock UInt64, mem UInt64
) ENGINE = MergeTree ORDER BY (node, gpu, ts)"""
FILL = """INSERT INTO bench.t SELECT
    toDateTime64('2026-11-01 00:00:00', 3, 'UTC') + toIntervalMillisecond(number * 10),
    concat('gpu-', toString(number % 128)), number % 8, (number % 1000) / 1000.0,
    300 + (number % 400), 40 + (number % 50), 1410000000 + number % 100000, number * 4096
FROM numbers({rows})"""
QUERY = "SELECT * FROM bench.t"


def best(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Best time of each, taken round-robin so load from elsewhere on the machine hits all alike."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
    return {k: min(v) for k, v in times.items()}


def start_serve(path: Path, port: int, log: Path | None = None) -> subprocess.Popen[bytes]:
    """`railscope serve` on the embedded store `path` (no sources, no correlate), answering on
    `port`; its output to `log` (appended) when given."""
    out = open(log, "ab") if log else None  # noqa: SIM115 (the child keeps it)
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
        "RAILSCOPE_CONFIG": "",
        "RAILSCOPE__PROMETHEUS__ENABLED": "false",
    }
    p = subprocess.Popen(
        [sys.executable, "-m", "telemetry.cli", "--log-level", "warning", "serve",
         "--dsn", f"chdb://{path}", "--query-listen", f"127.0.0.1:{port}", "--no-correlate"],
        env=env, stdout=out, stderr=subprocess.STDOUT if out else None,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2) as r:
                if r.read() == b"Ok.\n":
                    return p
        except OSError:
            time.sleep(0.3)
    p.kill()
    raise SystemExit("railscope serve did not answer /ping")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--soak", type=float, metavar="SECONDS", help="RSS of a serve soak instead")
    ap.add_argument("--readers", type=int, default=4, help="--soak: concurrent HTTP readers")
    args = ap.parse_args()
    if args.soak:
        return soak(args.soak, args.readers)

    import clickhouse_connect

    tmp = Path(tempfile.mkdtemp(prefix="railscope-bench-serve-"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    serve = start_serve(tmp / "b", port)
    try:
        local = Store(f"chdb://{tmp / 'a'}").client
        clients = {
            "inprocess": local,
            "http": clickhouse_connect.get_client(host="127.0.0.1", port=port),
            "http_uncompressed": clickhouse_connect.get_client(
                host="127.0.0.1", port=port, compress=False
            ),
        }
        for c in (local, clients["http"]):
            c.command("CREATE DATABASE IF NOT EXISTS bench")
            c.command(TABLE)
            c.command("TRUNCATE TABLE bench.t")
            c.command(FILL.format(rows=args.rows))
        data: pa.Table = local.query_arrow(QUERY)
        assert data.num_rows == args.rows
        q = best({k: (lambda c=c: c.query_arrow(QUERY)) for k, c in clients.items()}, args.repeat)
        for c in (local, clients["http"]):
            c.command("CREATE TABLE IF NOT EXISTS bench.i AS bench.t")

        def insert(c: object) -> None:
            c.command("TRUNCATE TABLE bench.i")  # type: ignore[attr-defined]
            c.insert_arrow("bench.i", data)  # type: ignore[attr-defined]

        ins = best({k: (lambda c=c: insert(c)) for k, c in clients.items()}, args.repeat)
        for c in clients.values():
            assert c.query("SELECT count() FROM bench.i").result_rows[0][0] == args.rows
    finally:
        serve.terminate()
        rc = serve.wait(60)
    rows = args.rows
    out = {
        "rows": rows,
        "columns": data.num_columns,
        "arrow_mib": round(data.nbytes / (1 << 20), 1),
        "query_seconds": {k: round(v, 3) for k, v in q.items()},
        "insert_seconds": {k: round(v, 3) for k, v in ins.items()},
        "query_rows_per_s": {k: round(rows / v) for k, v in q.items()},
        "insert_rows_per_s": {k: round(rows / v) for k, v in ins.items()},
        "ratio_http_vs_inprocess": round(q["inprocess"] / q["http"], 3),
        "ratio_http_vs_inprocess_uncompressed": round(q["inprocess"] / q["http_uncompressed"], 3),
        "insert_ratio_http_vs_inprocess": round(ins["inprocess"] / ins["http"], 3),
        "insert_ratio_http_vs_inprocess_uncompressed": round(
            ins["inprocess"] / ins["http_uncompressed"], 3
        ),
        "serve_exit_code": rc,
        "cpus": os.cpu_count(),
    }
    for k in clients:
        print(f"{k:<18} query {rows / q[k]:>12,.0f} rows/s   insert {rows / ins[k]:>12,.0f} rows/s")
    print(
        f"ratio (endpoint / in-process, clickhouse-connect defaults): query "
        f"{out['ratio_http_vs_inprocess']:.3f}, insert {out['insert_ratio_http_vs_inprocess']:.3f}"
        "  (targets >= 0.7)"
    )
    print(json.dumps(out))


def soak(seconds: float, readers: int) -> None:
    from tests.integration.serve.soak import run_soak

    s = run_soak(Path(tempfile.mkdtemp(prefix="railscope-bench-soak-")), seconds, readers, every=10)
    mib = [(round(t), round(kib / 1024)) for t, kib in s.samples]
    after = [m for t, m in mib if t >= 60]
    out = {
        "soak_seconds": seconds,
        "readers": readers,
        "queries_answered": sum(s.answered),
        "reader_errors": len(s.errors),
        "serve_exit_code": s.exit_code,
        "log_errors": s.log.count(" ERROR "),
        "rss_mib_every_10s": [m for _, m in mib],
        "rss_mib_at_60s": after[0] if after else None,
        "rss_mib_max_after_60s": max(after) if after else None,
        "rss_growth_after_60s_mib": (max(after) - after[0]) if after else None,
    }
    print(f"serve RSS (MiB, every 10 s): {out['rss_mib_every_10s']}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
