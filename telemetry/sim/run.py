"""Run a simulation into a store through the real pipeline, and fingerprint what was stored.

Writes only through `Pipeline` + the given sinks (the ClickHouse sink in the CLI); reads the store
only to fingerprint the rows of this run. Never deletes data.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from telemetry.contracts import Sink, Transform
from telemetry.pipeline import Pipeline
from telemetry.records import KINDS, RecordKind
from telemetry.sim.engine import Simulation
from telemetry.sim.source import SimSource

# the record kinds a simulation writes (the scorer's findings are not among them)
SIM_KINDS = (
    "node",
    "hypernode",
    "job",
    "pod",
    "pod_ip_lease",
    "gpu_nic_affinity",
    "lldp_link",
    "hdfs_transfer",
    "hdfs_block_placement",
    "gpu_event",
    "nic_sample",
    "switch_port_sample",
    "switch_queue_sample",
    "gpu_sample",
    "flow_sample",
    "collective_sample",
)


@dataclass
class RunResult:
    rows: int
    seconds: float
    rows_by_kind: dict[str, int] = field(default_factory=dict)


def ingest(
    sim: Simulation,
    sinks: Sequence[Sink],
    transforms: Sequence[Transform] = (),
    progress: Callable[[int, int, int], None] | None = None,
    *,
    through_parsers: Any = None,
) -> RunResult:
    """Publish every chunk of the simulation through a pipeline; `progress(done, total, rows)`.
    `through_parsers`: a config (the sources' settings) to render every step as device files and
    read them back through the real sources instead (through_parsers.py); slower."""
    src: Any = SimSource(sim)
    if through_parsers is not None:
        from telemetry.sim.through_parsers import ThroughParsersSource

        src = ThroughParsersSource(sim, through_parsers)
    pipe = Pipeline([src], sinks, transforms)
    t = time.perf_counter()
    rows = 0
    while not src.done:
        rows += pipe.run_once()
        if progress:
            progress(src.chunks_done, src.chunks, rows)
    pipe.close()
    if through_parsers is not None:
        src.close()
    for sink in sinks:  # a batch the store refused is a bug in the simulator: say so
        st = sink.stats
        if st.failed or st.dropped:
            from telemetry.errors import UserError

            raise UserError(
                f"sink {sink.name}: {st.failed} failed operation(s), {st.dropped} dropped row(s): {st.errors}"
            )
    return RunResult(rows, time.perf_counter() - t, dict(src.rows_by_kind))


def fingerprint(store: Any, sim: Simulation, cluster: str) -> str:
    """A hash of every row this run stored, with times relative to the run's start: two runs with
    the same scenario and seed give the same fingerprint whenever they ran."""
    import hashlib

    selects = []  # one statement for every kind: (kind, rows, hash)
    for name in SIM_KINDS:
        k = KINDS[name]
        exprs = ", ".join(_expr(k, f.name, sim.start_ms) for f in k.fields if f.name != "cluster")
        selects.append(
            f"SELECT '{name}', count(), sum(cityHash64({exprs})) FROM {store.table(k, final=True)} "
            f"WHERE cluster = {{c:String}} AND {k.time_field} >= fromUnixTimestamp64Milli({{s:Int64}}, 'UTC') "
            f"AND {k.time_field} <= fromUnixTimestamp64Milli({{e:Int64}}, 'UTC')"
        )
    got = {
        name: (n, h)
        for name, n, h in store.query_rows(
            " UNION ALL ".join(selects), {"c": cluster, "s": sim.start_ms, "e": sim.end_ms}
        )
    }
    parts = [f"{name}:{got[name][0]}:{got[name][1]}" for name in SIM_KINDS]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _expr(k: RecordKind, name: str, start_ms: int) -> str:
    f = k.by_name[name]
    if f.type == "time":
        e = f"toUnixTimestamp64Milli(`{name}`) - {start_ms}"
        return f"ifNull({e}, -1)" if f.nullable else e
    # round: float sums may differ in the last bit between code paths
    e = f"round(`{name}`, 6)" if f.type == "f64" else f"`{name}`"
    # cityHash64 of anything with a NULL is NULL, and sum() skips it: a null must hash as a value
    return f"ifNull(toString({e}), 'NULL')" if f.nullable else e


__all__ = ["SIM_KINDS", "RunResult", "fingerprint", "ingest"]
