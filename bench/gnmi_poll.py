"""The gNMI collector's poll alone, in one process, on recorded samples: --switches SONiC caches
(`SonicGnmi`, bench/switch.py's synthetic switches rendered by the test target) are fed whole
samples without a network, then `SwitchSource._collect` (the poll thread's work: the caches'
columns, rates, switch_status, LLDP and the Arrow tables) is timed by its thread CPU; the feed
is not. Last line: JSON.

    python bench/gnmi_poll.py [--switches 256] [--ports 64] [--queues 8] [--polls 5] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.switch import switch_db
from exporters.switch import gnmi as G
from exporters.switch.config import GnmiConfig
from exporters.switch.sonic import Target as SwitchTarget
from exporters.switch.source import SwitchSource
from telemetry.sim.gnmi_target import Target


def caches(a: argparse.Namespace) -> list[tuple[G.SonicGnmi, Any]]:
    """(cache, its sample notification as the target renders it) per switch, prepared."""
    out = []
    for i in range(a.switches):
        db = switch_db(a.ports, a.queues, i)
        appl = {k: v for k, v in db.items() if k.startswith(("PORT_TABLE:", "LLDP_ENTRY_TABLE:"))}
        t = Target({k: v for k, v in db.items() if k not in appl}, appl, {})
        st = G.SonicGnmi(f"leaf{i:03d}", GnmiConfig(address="127.0.0.1:1"), 10.0, 5.0, _Quiet())

        async def get(md: Any, target: str, paths: Any, t: Target = t) -> list[Any]:
            return [t._notification(target, [G.parse_path(p) for p in paths])]

        st._get = get  # type: ignore[method-assign]
        asyncio.run(st._prepare([]))
        st._notification(t._notification("APPL_DB", [G.parse_path(p) for p in G.SONIC_ON_CHANGE]))
        out.append((st, t._notification("COUNTERS_DB", [G.parse_path(p) for p in G.SONIC_SAMPLE])))
    return out


class _Quiet:
    def add(self, reason: str, subject: str = "", detail: str = "", n: int = 1) -> None:
        raise AssertionError(f"unexpected problem {reason} {subject} {detail}")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--switches", type=int, default=256)
    ap.add_argument("--ports", type=int, default=64)
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--polls", type=int, default=5)
    ap.add_argument("--profile", action="store_true", help="cProfile the polls (stderr)")
    a = ap.parse_args()
    cs = caches(a)
    src = SwitchSource([SwitchTarget(st.name, "", "leaf", st) for st, _ in cs])
    cpu, rows = [], {}
    prof = None
    if a.profile:
        import cProfile

        prof = cProfile.Profile()
    for k in range(a.polls + 1):
        for st, n in cs:  # a new sample every interval: the switch's time 10 s later
            n.timestamp = (1_700_000_000 + 10 * k) * 10**9
            st._notification(n)
            st._synced()
        if prof is not None and k:
            prof.enable()
        t0 = time.thread_time()
        batches = src._collect()
        if k:  # the first poll has no previous one to derive rates from: not counted
            cpu.append(time.thread_time() - t0)
        if prof is not None:
            prof.disable()
        rows = {b.kind.name: b.num_rows for b in batches}
    if prof is not None:
        import pstats

        pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(40)
    print(json.dumps({"bench": "gnmi_poll", "switches": a.switches, "ports": a.ports,
                      "queues": a.queues, "polls": a.polls,
                      "poll_cpu_s_median": round(statistics.median(cpu), 4),
                      "poll_cpu_s_min": round(min(cpu), 4), "rows": rows}))  # fmt: skip


if __name__ == "__main__":
    main()
