"""One simulated `small` run per test session, as polars frames per record kind (no store)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

START = "2026-11-01T00:00:00Z"


def run_tables(scenario: str = "small", **over: Any) -> tuple[Any, dict[str, Any]]:
    from telemetry.sim import build
    from telemetry.sim.scenario import load_scenario

    sc = load_scenario(scenario).with_overrides(start=START, **over)
    sim = build(sc)
    return sim, sim_tables(sim)


def sim_tables(sim: Any) -> dict[str, Any]:
    """Every record kind the simulation emits, one polars frame per kind."""
    import polars as pl

    parts: dict[str, list[pa.Table]] = {}
    for batches in sim.batches(disturbed=False):
        for b in batches:
            parts.setdefault(b.kind.name, []).append(b.table)
    return {k: pl.from_arrow(pa.concat_tables(v)) for k, v in parts.items()}


@pytest.fixture(scope="session")
def small() -> tuple[Any, dict[str, Any]]:
    return run_tables("small")
