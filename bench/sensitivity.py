"""Detection sensitivity: per fault kind, the detection rate at each severity, the weakest
severity detected in >= 95 % of runs, and false findings per hour on a busy, healthy cluster.

Each run is a built-in scenario whose every fault is set to one severity (docs/simulator.md,
"Severity": the size of the effect, 1 = the demo's full-strength fault), simulated with realistic
collection timing, ingested into the embedded store and correlated as `railscope demo` does, then
scored against its ground truth. A fault under its visibility floor (the simulator marks it
`scored: false` with the reason) counts neither way; it is reported per kind as `below_floor`.
Runs: every severity x (scenario, seed) of `--runs` (about 35 s each here, the quiet two hours
about 6 minutes: ~13 minutes with the defaults on a 2-core machine). The false-finding rate is the `quiet` scenario (every GPU
busy, the uplinks loaded, HDFS reading and writing, no fault) over `--quiet-minutes`: findings of
cause kinds that no ground truth explains, per simulated hour. The baseline in the same run is
the full-strength severity (1.0), where every kind is found.

    python bench/sensitivity.py [--severities 0.2,0.35,0.5,1] [--runs half:1,half:2,shapes:1]
                                [--quiet-minutes 120] [--svg OUT.svg]

Last line: one JSON object {"kinds": {kind: {"s95": ..., "curve": {sev: rate}, ...}},
"false_per_hour": ..., ...}.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from telemetry.correlate.engine import Correlator
from telemetry.sim import build
from telemetry.sim.model import GroundTruth
from telemetry.sim.run import ingest
from telemetry.sim.scenario import load_scenario
from telemetry.sim.score import read_findings, score
from telemetry.sinks.clickhouse import ClickHouseSink
from telemetry.store import Store
from telemetry.transforms import StampCluster

CLUSTER = "bench"


def one_run(dsn: str, tmp: Path, sc: Any) -> tuple[GroundTruth, Any, float]:
    """Simulate `sc`, ingest it into a fresh database, correlate its window: (truth, score,
    wall seconds)."""
    t = time.perf_counter()
    store = Store(dsn, database=f"sens_{uuid.uuid4().hex[:10]}")
    store.migrate()
    try:
        sim = build(sc, now_s=time.time() - 3600)
        sink = ClickHouseSink(store, spool_dir=str(tmp / f"spool-{uuid.uuid4().hex[:6]}"))
        ingest(sim, [sink], [StampCluster(CLUSTER)])
        start = datetime.fromtimestamp(sim.start_ms / 1000, UTC)
        end = datetime.fromtimestamp(sim.end_ms / 1000, UTC)
        res = Correlator(store, cluster=CLUSTER).run(start, end)
        if res.failed:
            raise RuntimeError(f"detectors failed: {res.failed}")
        truth = sim.ground_truth()
        got = score(truth, read_findings(store, CLUSTER, truth.start_ms, truth.end_ms))
        return truth, got, time.perf_counter() - t
    finally:
        store.client.command(f"DROP DATABASE IF EXISTS `{store.database}`")


def at_severity(name: str, seed: int, severity: float) -> Any:
    """Built-in scenario `name` with every fault at `severity`, realistic timing, seed `seed`."""
    base = load_scenario(name).with_overrides(seed=seed, timing="realistic")
    data = base.model_dump()
    for f in data["faults"]:
        f["severity"] = severity
    return type(base).model_validate(data)


def s95(curve: dict[float, float | None]) -> float | None:
    """The weakest severity from which every stronger one is detected in >= 95 % of runs."""
    best = None
    for sev in sorted(curve, reverse=True):
        rate = curve[sev]
        if rate is None:
            continue
        if rate < 0.95:
            break
        best = sev
    return best


def svg(kinds: dict[str, dict[str, Any]], sevs: list[float]) -> str:
    """The curves as a grid (no plotting library): a row per kind, a column per severity, each
    cell its detection rate - green at 95 % and above, red under - or grey where every fault of
    the kind was under its visibility floor (nothing could show it)."""
    cw, rh, left, top = 64, 20, 190, 40
    w, h = left + cw * len(sevs) + 16, top + rh * len(kinds) + 40
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="{w}" height="{h}" fill="white"/>',
        f'<text x="{left}" y="16">detection rate by severity (realistic timing)</text>',
    ]
    for j, sev in enumerate(sevs):
        out.append(
            f'<text x="{left + cw * j + cw / 2}" y="{top - 6}" text-anchor="middle">{sev:g}</text>'
        )
    for i, (k, v) in enumerate(sorted(kinds.items())):
        y = top + rh * i
        out.append(f'<text x="{left - 6}" y="{y + 14}" text-anchor="end">{k}</text>')
        for j, sev in enumerate(sevs):
            rate = v["curve"].get(f"{sev:g}")
            if rate is None:
                fill, label = (
                    ("#ddd", "floor") if v["below_floor"].get(f"{sev:g}") else ("#fff", "")
                )
            else:
                fill, label = ("#9fd89f" if rate >= 0.95 else "#f4a6a6"), f"{rate:.0%}"
            x = left + cw * j
            out.append(f'<rect x="{x}" y="{y}" width="{cw - 2}" height="{rh - 2}" fill="{fill}"/>')
            out.append(f'<text x="{x + cw / 2}" y="{y + 14}" text-anchor="middle">{label}</text>')
    out.append(
        f'<text x="{left}" y="{h - 12}">floor: every fault of the kind under its visibility floor at that severity (docs/simulator.md)</text>'
    )
    out.append("</svg>")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--severities", default="0.2,0.35,0.5,1")
    ap.add_argument(
        "--runs",
        default="half:1,half:2,shapes:1",
        help="SCENARIO:SEED pairs: the demo's fault mix on its fabric (two seeds: other targets) "
        "and another fabric shape (1-NIC servers, 200G, 8-wide ECMP, three IDCs)",
    )
    ap.add_argument("--quiet-minutes", type=float, default=120.0)
    ap.add_argument("--svg", help="write the curves as an SVG chart here")
    a = ap.parse_args()
    sevs = [float(x) for x in a.severities.split(",") if x]
    runs = [(r.split(":")[0], int(r.split(":")[1])) for r in a.runs.split(",") if r]
    found: dict[str, dict[float, list[int]]] = {}  # kind -> severity -> [detected, faults]
    floor: dict[str, dict[float, int]] = {}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="railscope-sens-") as tmpd:
        tmp = Path(tmpd)
        dsn = f"chdb://{tmp / 'store'}"
        for name, seed in runs:
            for sev in sevs:
                truth, got, secs = one_run(dsn, tmp, at_severity(name, seed, sev))
                for k in got.kinds:
                    c = found.setdefault(k.kind, {}).setdefault(sev, [0, 0])
                    c[0] += k.detected
                    c[1] += k.faults
                for f in truth.faults:
                    if not f.scored and f.origin != "workload":
                        fl = floor.setdefault(f.kind, {})
                        fl[sev] = fl.get(sev, 0) + 1
                print(f"{name} seed {seed} severity {sev:g}: {secs:.0f} s", file=sys.stderr)
        quiet = load_scenario("quiet").with_overrides(minutes=a.quiet_minutes, timing="realistic")
        truth, got, secs = one_run(dsn, tmp, quiet)
        false = sum(k.findings - k.true_findings for k in got.kinds) + sum(got.unmapped.values())
        hours = a.quiet_minutes / 60
        print(
            f"quiet {a.quiet_minutes:g} min: {false} false finding(s), {secs:.0f} s",
            file=sys.stderr,
        )
    kinds: dict[str, dict[str, Any]] = {}
    for k, by in sorted(found.items()):
        curve = {s: (by[s][0] / by[s][1] if by[s][1] else None) for s in sorted(by)}
        kinds[k] = {
            "s95": s95(curve),
            "curve": {f"{s:g}": (round(r, 3) if r is not None else None) for s, r in curve.items()},
            "faults": {f"{s:g}": by[s][1] for s in sorted(by)},
            "below_floor": {f"{s:g}": n for s, n in sorted(floor.get(k, {}).items())},
        }
    for k in sorted(set(floor) - set(kinds)):
        kinds[k] = {"s95": None, "curve": {}, "faults": {},
                    "below_floor": {f"{s:g}": n for s, n in sorted(floor[k].items())}}  # fmt: skip
    weak = {k: v["curve"].get("0.5") for k, v in kinds.items() if v["curve"].get("0.5") is not None}
    if a.svg:
        Path(a.svg).write_text(svg(kinds, sevs) + "\n")
    for k, v in kinds.items():
        print(f"{k:<26} s95 {v['s95']!s:<5} " + " ".join(f"{s}:{r}" for s, r in v["curve"].items()))
    print(
        json.dumps(
            {
                "kinds": kinds,
                "false_per_hour": round(false / hours, 3),
                "quiet_hours": hours,
                "min_rate_at_half": min(weak.values()) if weak else None,
                "runs": len(runs) * len(sevs),
                "timing": "realistic",
                "wall_s": round(time.perf_counter() - t0, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
