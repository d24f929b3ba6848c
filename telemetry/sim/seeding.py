"""Deterministic randomness of the simulator: one independent numpy stream per purpose, and a
stable hash of names. Same seed -> same draws, on any machine and Python (no `hash()`: it is
salted per process). Holds no state and imports nothing of the simulator.
"""

from __future__ import annotations

import zlib

import numpy as np

# one independent random stream per purpose: changing HDFS load never moves a fault's target
_RNG_STREAMS = {"jobs": 1, "faults": 2, "hdfs": 3, "static": 4, "steps": 5, "collectives": 6}


def stream_rng(seed: int, stream: str, *extra: int) -> np.random.Generator:
    """The random stream of `stream` (one of _RNG_STREAMS) for `seed`, split further by `extra`
    (a step: each step draws from its own stream)."""
    return np.random.default_rng([seed, _RNG_STREAMS[stream], *extra])


def stable_hash(*parts: object) -> int:
    """A 32-bit hash of the parts' text: ECMP's 5-tuple hash, MAC addresses and the like."""
    return zlib.crc32("|".join(map(str, parts)).encode())


__all__ = ["stable_hash", "stream_rng"]
