"""What a fault's severity means, and below which severity nothing could show it.

`severity` is the size of the effect, one documented thing per kind (docs/simulator.md, "Severity";
1 is the full-strength fault the built-in scenarios inject). A fault whose effect stays under a
visibility floor - a DCI link never near capacity, a cross-tenant flow too small for sFlow to
sample, a pinned ECMP share that never makes its uplink stand out, a straggling rank within the
ranks' own noise - is kept in the ground truth with `scored: false` and the reason, never a fault
nothing could show. It reads what the simulation noted while solving; it never reads the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from telemetry.sim.model import Fault

# a straggling rank is told from the others' noise (~2 % per collective) from this slowdown on
STRAGGLER_MIN_RATIO = 1.1
# a DCI link is near capacity from this utilization on (the 85 % mark, with its sample noise)
DCI_MIN_UTILIZATION = 0.86
# sFlow samples a flow's packets one in `sampling_rate`: fewer expected samples than this over
# a fault and it may well never be seen (P(none) = e^-3 = 5 %)
MIN_EXPECTED_SAMPLES = 3.0

# The faults only logs show (collective_timeout, nccl_transport_fallback, nccl_gdr_disabled) and
# nccl_network_error have no floor: a line is logged or not, and logs.py logs it whenever the
# fault holds (a job running, a connection routed over the flapped link).

FRAME = 4154  # bytes: a RoCEv2 frame of 4 KiB payload (engine.FRAME)


def dci_utilization(severity: float) -> float:
    """The DCI links' utilization a dci_saturation of `severity` drives them to."""
    return min(0.99, 0.80 + 0.15 * severity)


def throttle_clock(severity: float) -> float:
    """The clock factor of a throttled GPU (1 = full clock)."""
    return max(0.2, 1.0 - 0.4 * severity)


def apply_floors(
    faults: Sequence[Fault],
    *,
    dt_s: int,
    sampling_rate: int,
    pinned_clear_s: dict[str, float],
    clear_needed_s: float,
) -> None:
    """Mark, in place, the injected faults (and their consequences) that stay under their
    visibility floor: `scored = False` and `detail["unscored"]` saying why."""
    for f in faults:
        sev = float(f.detail.get("severity", 1.0))
        why = ""
        if f.kind == "dci_saturation" and dci_utilization(sev) < DCI_MIN_UTILIZATION:
            why = (
                f"severity {sev:g} drives the DCI to {dci_utilization(sev):.0%}: "
                f"not near capacity (under {DCI_MIN_UTILIZATION:.0%})"
            )
        elif f.kind == "cross_tenant_flow":
            seconds = (f.end_ms - f.start_ms) / 1000
            expected = 10e9 / 8 * sev * seconds / (FRAME * sampling_rate)
            f.detail["expected_sflow_samples"] = round(expected, 2)
            if expected < MIN_EXPECTED_SAMPLES:
                why = (
                    f"{expected:.1f} sFlow samples expected at 1:{sampling_rate}: "
                    f"under {MIN_EXPECTED_SAMPLES:g}, it may never be sampled"
                )
        elif f.kind == "ecmp_collision" and f.origin == "injected":
            clear = pinned_clear_s.get(f.id, 0.0)
            f.detail["clear_seconds"] = int(clear)
            if clear < clear_needed_s:
                why = (
                    f"the pinned share ({sev:g} of the leaf's flows) never made its uplink stand "
                    f"clear of its group for {clear_needed_s:g} s (longest {clear:g} s)"
                )
        elif f.kind == "collective_straggler":
            ratio = float(f.detail.get("slowdown_ratio", 0.0))
            if ratio < STRAGGLER_MIN_RATIO:
                why = (
                    f"the rank is {ratio:.3f}x slower: within the ranks' noise "
                    f"(under {STRAGGLER_MIN_RATIO}x)"
                )
        if why:
            f.scored = False
            f.detail["unscored"] = why


def longest_clear(runs: Sequence[tuple[int, int, bool]], dt_s: int) -> float:
    """The longest stretch, in seconds, of consecutive epochs (t0, t1, clear) that were clear."""
    best = cur = 0.0
    last = None
    for t0, t1, clear in sorted(runs):
        if not clear or (last is not None and t0 != last):
            cur = 0.0
        if clear:
            cur += (t1 - t0) * dt_s
            best = max(best, cur)
        last = t1
    return best


__all__ = [
    "DCI_MIN_UTILIZATION",
    "MIN_EXPECTED_SAMPLES",
    "STRAGGLER_MIN_RATIO",
    "apply_floors",
    "dci_utilization",
    "longest_clear",
    "throttle_clock",
]
