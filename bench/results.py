"""What the benches share: timing one contender, and the report (lines for people, then the
result as one JSON object on the last line, for scripts and the figures in docs/)."""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable
from typing import Any


def timed(fn: Callable[..., Any], *a: Any, clock: Callable[[], float] = time.process_time) -> Any:
    """(seconds, fn(*a)). By default CPU seconds of this process: per core, and steady on a
    machine others share; pass clock=time.perf_counter for wall time (work in other threads)."""
    gc.collect()  # start each contender from the same heap state
    t = clock()
    r = fn(*a)
    return clock() - t, r


def report(result: dict[str, Any], *lines: str) -> None:
    for line in lines:
        print(line)
    print(json.dumps(result))
