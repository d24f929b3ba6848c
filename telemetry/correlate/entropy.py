"""Flow entropy against ECMP: how likely hashing alone is to overload one member of an ECMP group,
given how many equal flows cross it, and how many QPs per connection would make that unlikely.

A RoCEv2 flow is one QP (its UDP source port is the QP's), so a connection of q QPs is q flows. M
equal flows hashed uniformly onto W members leave one member with at least `ratio` x its even
share (M/W flows) with the probability computed here exactly (balls into bins, by dynamic
programming over the members). `ratio` is the one `ecmp_imbalance` judges a collision with
(`ecmp.max_over_mean`), so the probability is that of the collision the fabric detector reports.
Pure arithmetic; reads no store.
"""

from __future__ import annotations

import functools
import math

import numpy as np

MAX_FLOWS = 4096  # beyond this many flows through one group, hashing spreads them evenly enough
# QPs per connection tried, in order, for the setting that meets a target (NCCL takes any count up
# to 128; these are the ones people set)
QP_STEPS = (*range(2, 17), 24, 32, 48, 64, 96, 128)


def collision_probability(flows: int, width: int, ratio: float) -> float:
    """P(one of `width` members gets >= `ratio` x flows/width of `flows` equal flows), uniform
    hashing. 1.0 when flows cannot be spread (fewer flows than `width / ratio`), 0.0 for one
    member or no flows."""
    if width <= 1 or flows <= 0:
        return 0.0
    flows = min(flows, MAX_FLOWS)
    k = max(1, math.ceil(ratio * flows / width - 1e-9))  # a member with k flows is hot
    return round(1.0 - _all_below(flows, width, k), 6)


@functools.lru_cache(maxsize=4096)
def _all_below(m_total: int, width: int, k: int) -> float:
    """P(every member holds fewer than k of m_total flows). p[m]: that probability for m flows
    over the members added so far; adding a member, c of the m flows land on it (binomial with
    p = 1 / members so far) and the rest spread over the earlier members."""
    if k > m_total:
        return 1.0
    m = np.arange(m_total + 1)
    logfact = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, m_total + 1)))))
    p = (m < k).astype(float)  # one member: fine while it holds < k
    c = np.arange(k)
    mm, cc = np.meshgrid(m, c, indexing="ij")
    valid = cc <= mm
    rest = np.where(valid, mm - cc, 0)
    for members in range(2, width + 1):
        q = 1.0 / members
        logpmf = (
            logfact[mm] - logfact[cc] - logfact[rest] + cc * math.log(q) + rest * math.log1p(-q)
        )
        pmf = np.where(valid, np.exp(np.where(valid, logpmf, 0.0)), 0.0)
        p = (pmf * p[rest]).sum(axis=1)
    return float(min(1.0, max(0.0, p[m_total])))


def qps_needed(
    connections: int, flows_per_qp: int, width: int, ratio: float, target: float
) -> int | None:
    """The fewest QPs per connection (from QP_STEPS) at which `connections` connections of
    `flows_per_qp` flows per QP through one group of `width` collide below `target`; None when
    even the most NCCL allows does not."""
    for q in QP_STEPS:
        if collision_probability(connections * flows_per_qp * q, width, ratio) < target:
            return q
    return None


__all__ = ["QP_STEPS", "collision_probability", "qps_needed"]
