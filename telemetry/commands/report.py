"""per-job end-to-end report (text/json) or a self-contained HTML report

Per hop of a job's traffic path (GPU -> NIC -> leaf port -> uplinks -> spine ...), the evidence
for and against it being the bottleneck, ranked. Run `railscope correlate` first. Reads the store
only.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from telemetry.commands.common import add_command, add_range_args, add_store_args, store_from_args
from telemetry.commands.correlate import time_range
from telemetry.errors import UserError


def register(sub: Any) -> list[str]:
    p = add_command(sub, "report", __doc__)
    p.add_argument(
        "--job", action="append", metavar="NAMESPACE/NAME", help="job to report on (repeatable)"
    )
    add_range_args(p)
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument(
        "--html",
        metavar="OUT",
        help="write a self-contained HTML report (charts, no network) to OUT",
    )
    add_store_args(p)
    p.set_defaults(func=run)
    return ["report"]


def _range(store: Any, args: argparse.Namespace) -> tuple[datetime, datetime]:
    from telemetry.correlate import Correlator

    rng = time_range(Correlator(store), args.since, args.until)
    if rng is None:
        raise UserError(
            "report: the store holds no data; run the demo, a source or `railscope replay` first"
        )
    return rng


def run(args: argparse.Namespace) -> int:
    from telemetry.correlate.report import job_report, render_text

    if not args.job and not args.html:
        raise UserError("report: give --job NAMESPACE/NAME (repeatable) and/or --html OUT")
    cfg, store = store_from_args(args, reading=True)
    start, end = _range(store, args)
    from telemetry.correlate.thresholds import default_thresholds, merge_thresholds

    thresholds = merge_thresholds(default_thresholds(), cfg.correlate.thresholds)
    reports = [
        job_report(store, j, start, end, cluster=cfg.cluster, thresholds=thresholds)
        for j in args.job or []
    ]
    if args.html:
        from telemetry.correlate.html import render_html

        out = Path(args.html)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render_html(store, start, end, cluster=cfg.cluster, jobs=reports))
        print(f"wrote {out} ({out.stat().st_size:,} bytes, {datetime.now(UTC):%H:%M:%S}Z)")
    for rep in reports:
        if args.format == "json":
            print(json.dumps(rep.to_dict(), default=str))
        elif not args.html:
            print(render_text(rep), end="")
    return 0
