"""Every statement the engine runs is valid on the cluster's Distributed tables: a subquery or a
JOIN's right side over a Distributed table inside a query over a Distributed table must be GLOBAL
(ClickHouse refuses it otherwise: DISTRIBUTED_IN_JOIN_SUBQUERY_DENIED, code 288, the default
`distributed_product_mode = 'deny'`), and nothing may name a table the cluster schema lacks.

The engine runs once, as in cluster mode (`Store.cluster` set: its cluster-only SQL included),
over a small simulated cluster on the session's embedded engine, and every client call it makes
is recorded. A second process replays them on the two-shard configuration the sharding test
builds (`test_sharding.py`: `Distributed` tables over `*_local` ones, shards on hosts that are not
there, read with `skip_unavailable_shards`): ClickHouse analyses every statement there as it
would on a real cluster, so a missing GLOBAL fails here. Inserts into shards that cannot be
reached are the only failures allowed (no ClickHouse server runs here)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from telemetry.correlate.engine import Correlator
from telemetry.correlate.html import render_html
from telemetry.correlate.registry import Context, Window, detectors
from telemetry.correlate.report import job_report
from telemetry.correlate.thresholds import default_thresholds
from telemetry.pool import DIMENSIONS, accounting, preemptions
from telemetry.sim import build
from telemetry.sim.run import ingest
from telemetry.sim.scenario import load_scenario
from telemetry.sinks.clickhouse import ClickHouseSink
from telemetry.store import Store
from telemetry.transforms import StampCluster
from tests.integration.core.test_sharding import CLUSTER

ROOT = Path(__file__).parents[3]
RECORDED = ("query", "command", "query_arrow", "query_df", "raw_query", "insert", "insert_arrow")


class Recorder:
    """The engine's client, recording each call (method, arguments) before making it."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name not in RECORDED:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            return attr(*args, **kwargs)

        return call


REPLAY = textwrap.dedent("""
    import json, pickle, re, sys
    import clickhouse_connect
    from telemetry.store.migrations import Context, render_all
    path, config, database, recorded = sys.argv[1:5]
    c = clickhouse_connect.get_client(
        dsn=f"chdb://{path}", chdb_options={"config-file": config},
        settings={"skip_unavailable_shards": 1},
    )
    # the cluster schema as `railscope db migrate --cluster prod` renders it; no Keeper here:
    # ON CLUSTER dropped and the replicas' tables plain MergeTree (as test_sharding does)
    for s in render_all(Context(database, "prod", {})):
        s = s.replace(" ON CLUSTER `prod`", "")
        s = re.sub(r"Replicated(\\w*MergeTree)\\('[^']*', '\\{replica\\}'(?:, )?", r"\\1(", s)
        try:
            c.command(s)
        except Exception as e:  # a backfill of empty tables into shards that are not there
            if not (s.startswith("INSERT INTO") and "ALL_CONNECTION_TRIES_FAILED" in str(e)):
                raise
    engines = dict(c.query(
        "SELECT name, engine FROM system.tables WHERE database = {d:String}", {"d": database}
    ).result_rows)
    failures = []
    for method, args, kwargs in pickle.load(open(recorded, "rb")):
        try:
            getattr(c, method)(*args, **kwargs)
        except Exception as e:
            failures.append([method, str(args[0])[:400], str(e)[:400]])
    print(json.dumps({"engines": engines, "failures": failures}))
""")

# What the shards not being there explains, after the statement was analysed: an insert that
# must reach them (distributed_foreground_insert) cannot; and an aggregate over a Distributed
# table whose every shard is skipped returns no row at all (one row on a cluster), so a scalar
# subquery made of one is empty.
UNREACHABLE = (
    "ALL_CONNECTION_TRIES_FAILED",
    "NETWORK_ERROR",
    "Connection refused",
    "Scalar subquery returned empty result",
)


def test_every_engine_statement_runs_on_distributed_tables(chdb_dsn: str, tmp_path: Path) -> None:
    db = f"clq_{os.getpid()}_{id(tmp_path) % 100000}"
    plain = Store(chdb_dsn, database=db)
    plain.migrate()
    try:
        sc = load_scenario("small").with_overrides(minutes=4)
        sim = build(sc)
        ingest(sim, [ClickHouseSink(plain, spool_dir=str(tmp_path / "spool"))], [StampCluster("c")])
        rec = Recorder(plain.client)
        # the engine as in cluster mode: its cluster-only statements (foreground inserts into
        # Distributed tables, no cross-tick memo of the lease index) on the same tables
        store = Store(plain.dsn, database=db, cluster="prod", client=rec)
        start = datetime.fromtimestamp(sim.start_ms / 1000, UTC)
        end = datetime.fromtimestamp(sim.end_ms / 1000, UTC)
        res = Correlator(store, cluster="c").run(start, end)
        assert res.findings and not res.failed  # the engine found things: its queries ran
        # and what people read from it: a job's report and the HTML report (findings,
        # incidents, the link heatmap)
        ns, job = plain.query_rows(
            f"SELECT namespace, job FROM {plain.table('pod')} WHERE job != '' LIMIT 1"
        )[0]
        rep = job_report(store, f"{ns}/{job}", start, end, cluster="c")
        assert "<svg" in render_html(store, start, end, cluster="c", jobs=[rep])
        # every detector once over the whole range, whatever the engine skipped for want of
        # input (two need the engine's per-window facts: they ran in the engine's ticks above)
        for name, spec in detectors().items():
            if name not in ("placement_violation", "job_spans_su"):
                spec.fn(Context(store, Window(start, end), default_thresholds(), "c", {}))
        for by in (None, *DIMENSIONS):  # `railscope pool` and the pool detectors' accounting
            accounting(store, start, end, by=by, cluster="c")
        preemptions(store, start, end, cluster="c")
        # hundreds of statements (468 once a batch run wrote its findings and incidents per
        # chunk instead of per tick, 369 once it read where its data lies in one statement and
        # incidents' blast radius in two a tick): every detector's, the engine's and the readers'
        assert len(rec.calls) > 250
        # test_sharding's two shards, on addresses that refuse at once (a name that does not
        # resolve costs seconds per statement)
        (tmp_path / "cluster.xml").write_text(
            CLUSTER.replace(
                "clickhouse-shard0</host><port>9000", "127.0.0.1</host><port>1"
            ).replace("clickhouse-shard1</host><port>9000", "127.0.0.2</host><port>1")
        )
        with open(tmp_path / "calls.pickle", "wb") as f:
            pickle.dump(rec.calls, f)
    finally:
        plain.client.command(f"DROP DATABASE IF EXISTS `{db}`")
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            REPLAY,
            str(tmp_path / "cluster-store"),
            str(tmp_path / "cluster.xml"),
            db,
            str(tmp_path / "calls.pickle"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["engines"]["flow_samples"] == "Distributed"  # the replay read shards
    assert result["engines"]["flow_samples_local"] == "MergeTree"
    wrong = [f for f in result["failures"] if not any(u in f[2] for u in UNREACHABLE)]
    assert not wrong, "\n\n".join(" | ".join(f) for f in wrong[:10])
