"""`build_source(name, cfg)`: the one way to build a source: from its `sources.<name>` section,
replaying a capture when a path is given (or the section says `from:`), live otherwise. Which
sources exist is the table in telemetry/catalog.py (re-exported here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from telemetry.catalog import SOURCES, SourceEntry, entry
from telemetry.config import Config

if TYPE_CHECKING:
    from telemetry.contracts import Source


def build_source(
    name: str, cfg: Config, *, from_path: str | None = None, once: bool = False
) -> Source:
    """The source `name` built from `cfg.sources.<name>`: replaying `from_path` (or the section's
    `from`) when set, live otherwise. `once`: the caller collects one cycle and stops (no
    background threads for a long run). The result has `interval_seconds` (the section's
    override, else the global interval)."""
    section = cfg.source(name)
    path = from_path or section.from_path
    src = entry(name).load().build(section, cfg, from_path=path, once=once)
    src.interval_seconds = section.interval_seconds or cfg.interval_seconds
    return src  # type: ignore[no-any-return]


__all__ = ["SOURCES", "SourceEntry", "build_source", "entry"]
