"""Real collection's clocks, applied to the simulator's records: every device samples at its own
phase within the interval with jitter, gNMI stamps each leaf with its own time, SNMP walks a
table over a fraction of a second, clocks are skewed, samples go missing, devices restart
(counters begin again from 0; a switch re-learns LLDP), batches are stored twice, sFlow datagrams
are lost, and batches arrive late.

The physics stays the ground truth's: a sample taken at time s carries the device's counters at
s (interpolated within the step that holds s), so rates computed from each series' own time
deltas are the true rates; only *when* things were sampled and *what reached the store* change.
Every draw is a pure function of (seed, device, step), so the same scenario and seed give the
same records whatever the chunking. It never writes anything itself.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

Profile = Literal["ideal", "realistic", "harsh"]
PROFILES: tuple[str, ...] = Profile.__args__  # type: ignore[attr-defined]


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SourceTiming(_M):
    """How one class of sources (node exporters, switch collectors, NCCL writers) samples."""

    phase: float = Field(
        0.0, ge=0, le=1, description="Spread of each device's phase, as a share of the interval."
    )
    jitter_seconds: float = Field(0.0, ge=0, description="Per-sample jitter, uniform +/-.")
    skew_seconds: float = Field(0.0, ge=0, description="Per-device clock offset, uniform +/-.")
    missed: float = Field(0.0, ge=0, lt=1, description="Share of polls that never arrive.")
    restarts_per_hour: float = Field(
        0.0, ge=0, description="Restarts in the class per hour (counters from 0 after)."
    )
    restart_seconds: float = Field(20.0, ge=0, description="Silence while a device restarts.")


class SwitchTiming(SourceTiming):
    transport: Literal["redis", "gnmi", "snmp", "mixed"] = Field(
        "redis",
        description="redis: one time per poll; gnmi: a time per leaf; snmp: a walk's times; "
        "mixed: each switch one of the three (by seed)",
    )
    leaf_jitter_seconds: float = Field(0.0, ge=0, description="gNMI: per-leaf time, uniform +/-.")
    walk_seconds: float = Field(0.0, ge=0, description="SNMP: how long one walk of a switch takes.")


class TelemetrySpec(_M):
    """A scenario's `telemetry:` section: a profile, and any key of it overridden."""

    profile: Profile = "realistic"
    node: SourceTiming = Field(default_factory=SourceTiming)  # type: ignore[arg-type]
    switch: SwitchTiming = Field(default_factory=SwitchTiming)  # type: ignore[arg-type]
    nccl: SourceTiming = Field(default_factory=SourceTiming)  # type: ignore[arg-type]
    sflow_loss: float = Field(0.0, ge=0, lt=1, description="Share of sFlow datagrams lost.")
    duplicates: float = Field(0.0, ge=0, lt=1, description="Share of polls stored twice.")
    late_share: float = Field(
        0.0, ge=0, le=1, description="Share of polls reaching the store late."
    )
    late_seconds: float = Field(30.0, ge=0, description="How late a late poll arrives.")

    @model_validator(mode="before")
    @classmethod
    def _profile_defaults(cls, data: Any) -> Any:
        """The profile's values under the keys the scenario gives (a key given wins)."""
        if not isinstance(data, dict):
            return data
        name = data.get("profile", "realistic")
        base = PROFILE_VALUES.get(name) if isinstance(name, str) else None
        if base is None:
            return data  # the Literal names the bad profile
        return _merge(base, data)

    @property
    def ideal(self) -> bool:
        return self == TelemetrySpec.model_validate({"profile": "ideal"})


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


# The profiles. realistic: what a healthy production fleet sends (NTP-synced clocks, every device
# at its own phase, a few hundred ms of jitter, a rare lost poll). harsh: production extremes
# (docs/simulator.md, "Timing").
PROFILE_VALUES: dict[str, dict[str, Any]] = {
    "ideal": {"profile": "ideal"},
    "realistic": {
        "profile": "realistic",
        "node": {"phase": 1.0, "jitter_seconds": 0.2, "skew_seconds": 0.1, "missed": 0.002},
        "switch": {
            "transport": "mixed",
            "phase": 1.0,
            "jitter_seconds": 0.3,
            "leaf_jitter_seconds": 0.05,
            "walk_seconds": 0.3,
            "skew_seconds": 0.2,
            "missed": 0.002,
        },
        "nccl": {"skew_seconds": 0.1},
        "sflow_loss": 0.01,
    },
    "harsh": {
        "profile": "harsh",
        "node": {
            "phase": 1.0,
            "jitter_seconds": 2.0,
            "skew_seconds": 1.0,
            "missed": 0.05,
            "restarts_per_hour": 6,
        },
        "switch": {
            "transport": "mixed",
            "phase": 1.0,
            "jitter_seconds": 2.0,
            "leaf_jitter_seconds": 0.5,
            "walk_seconds": 1.0,
            "skew_seconds": 1.0,
            "missed": 0.05,
            "restarts_per_hour": 6,
        },
        "nccl": {"jitter_seconds": 0.5, "skew_seconds": 1.0},
        "sflow_loss": 0.10,
        "duplicates": 0.01,
        "late_share": 0.20,
        "late_seconds": 30,
    },
}

# record kind -> (source class, device column); kinds not listed keep their times
CLASS_OF: dict[str, tuple[str, str]] = {
    "gpu_sample": ("node", "node"),
    "nic_sample": ("node", "node"),
    "nic_priority_sample": ("node", "node"),
    "gpu_event": ("node", "node"),
    "switch_port_sample": ("switch", "switch"),
    "switch_queue_sample": ("switch", "switch"),
    "switch_priority_sample": ("switch", "switch"),
    "collective_sample": ("nccl", "node"),
    "flow_sample": ("sflow", "agent"),
}
# kinds sampled on the interval (the rest are events: only their clock is skewed)
POLLED = frozenset(
    {
        "gpu_sample",
        "nic_sample",
        "nic_priority_sample",
        "switch_port_sample",
        "switch_queue_sample",
        "switch_priority_sample",
    }
)
_STREAMS = {
    "phase": 1,
    "jitter": 2,
    "leaf": 3,
    "skew": 4,
    "miss": 5,
    "dup": 6,
    "late": 7,
    "transport": 8,
    "walk": 9,
    "loss": 10,
    "restart": 11,
}
_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _h64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, vectorised: uint64 in, well-mixed uint64 out."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


@dataclass
class Restart:
    cls: str
    device: str
    down_ms: int  # last moment it was sampled before
    up_ms: int  # first moment it samples again, counters from 0


@dataclass
class Disturber:
    """Applies a TelemetrySpec to the simulator's batches, chunk by chunk (state carries the last
    counters of every series, for interpolation and restarts)."""

    spec: TelemetrySpec
    seed: int
    start_ms: int
    dt_ms: int
    end_ms: int
    devices: dict[str, list[str]]  # source class -> device names
    # sources that stop sending (the collection_gap fault): (class, device, from ms, to ms)
    gaps: list[tuple[str, str, int, int]] = field(default_factory=list)
    restarts: list[Restart] = field(default_factory=list)
    _dev_h: dict[str, int] = field(default_factory=dict)
    _last: dict[str, Any] = field(default_factory=dict)  # kind -> each series' last counters
    _base_df: dict[tuple[int, str, str], Any] = field(default_factory=dict)  # restart bases
    _lldp: Any = None  # the LLDP rows (a restarted switch re-sends its own)

    def __post_init__(self) -> None:
        rng = np.random.default_rng([self.seed, 0x71])  # the restarts' own stream
        hours = (self.end_ms - self.start_ms) / 3_600_000
        for cls in ("node", "switch"):
            t: SourceTiming = getattr(self.spec, cls)
            devs = self.devices.get(cls, [])
            if not devs or t.restarts_per_hour <= 0:
                continue
            for _ in range(int(rng.poisson(t.restarts_per_hour * hours))):
                dev = devs[int(rng.integers(len(devs)))]
                down = int(self.start_ms + rng.uniform(0.05, 0.95) * (self.end_ms - self.start_ms))
                self.restarts.append(Restart(cls, dev, down, down + int(t.restart_seconds * 1000)))
        self.restarts.sort(key=lambda r: r.down_ms)

    # -- draws -----------------------------------------------------------------------------------
    def _hash(self, names: np.ndarray) -> np.ndarray:
        """A uint64 per name (strings, cached)."""
        out = np.empty(len(names), np.uint64)
        for i, n in enumerate(names):
            h = self._dev_h.get(n)
            if h is None:
                h = self._dev_h[n] = _h64(f"{self.seed}\x1f{n}")
            out[i] = h
        return out

    def uniform(self, stream: str, h: np.ndarray, k: np.ndarray | int = 0) -> np.ndarray:
        """A uniform [0, 1) per element for (stream, hashed name, integer k)."""
        with np.errstate(over="ignore"):
            s = np.uint64(_STREAMS[stream]) * np.uint64(0x9E3779B97F4A7C15)
            x = _mix(h ^ s) + np.asarray(k, dtype=np.int64).astype(np.uint64) * np.uint64(
                0xD1B54A32D192ED03
            )
        return (_mix(x) >> np.uint64(11)).astype(np.float64) / float(1 << 53)

    def transport(self, switches: np.ndarray) -> np.ndarray:
        """Per switch: 0 redis, 1 gnmi, 2 snmp (mixed: half redis, a third gNMI, the rest SNMP)."""
        t = self.spec.switch.transport
        if t != "mixed":
            return np.full(len(switches), {"redis": 0, "gnmi": 1, "snmp": 2}[t])
        u = self.uniform("transport", self._hash(switches))
        return np.where(u < 0.5, 0, np.where(u < 0.83, 1, 2))

    # -- batches -----------------------------------------------------------------------------------
    def inventory(self, tables: dict[str, Any]) -> None:
        """Remember the LLDP rows (a restarted switch re-sends its own)."""
        t = tables.get("lldp_link")
        if t is not None and t.num_rows:
            self._lldp = t

    def apply(self, kind: str, table: Any) -> Any:
        """`table` of `kind` (samples on the simulator's grid) as collection would have stored
        it: its times, its counters at those times, without what was lost, with duplicates."""
        import pyarrow as pa

        if kind not in CLASS_OF or not table.num_rows:
            return table
        cls, dev_col = CLASS_OF[kind]
        if cls == "sflow":
            return self._sflow(table)
        spec: SourceTiming = getattr(self.spec, cls)
        ts = table.column("ts").cast(pa.int64()).to_numpy().copy()
        devs = table.column(dev_col).to_numpy(zero_copy_only=False)
        dh = self._hash(devs)
        step = np.rint((ts - self.start_ms) / self.dt_ms).astype(np.int64)
        skew = spec.skew_seconds * 1000 * (2 * self.uniform("skew", dh) - 1)
        if kind not in POLLED:
            jit = spec.jitter_seconds * 1000 * (2 * self.uniform("jitter", dh, step) - 1)
            table = _with_ts(table, ts + np.rint(jit + skew).astype(np.int64))
            gone = self._in_gap(cls, devs, ts)
            return table.filter(pa.array(~gone)) if gone.any() else table
        # the moment the device took the sample: its phase before the grid point, its jitter
        true_off = -spec.phase * self.dt_ms * self.uniform("phase", dh)
        true_off += spec.jitter_seconds * 1000 * (2 * self.uniform("jitter", dh, step) - 1)
        if cls == "switch":
            true_off += self._leaf_offsets(table, devs, dh, step)
        # stays inside the step it samples, (grid - dt, grid]: its counters are then exactly the
        # step's (a sample after the grid point would need the next step's increase, not known
        # yet: extrapolating this one's overshoots where the rate falls, and the counter would
        # go back at the next sample); whole ms, as the time it is stamped with
        true_off = np.rint(np.clip(true_off, -(self.dt_ms - 1), 0))
        if true_off.any() or any(r.cls == cls for r in self.restarts):
            table = self._counters(kind, table, ts, true_off)
        new_ts = ts + np.rint(true_off + skew).astype(np.int64)
        keep = self._present(cls, spec, devs, dh, step, ts)
        table = _with_ts(table, new_ts)
        dup = keep & (self.uniform("dup", dh, step) < self.spec.duplicates)
        if keep.all() and not dup.any():
            return table
        return table.take(pa.array(np.concatenate([np.flatnonzero(keep), np.flatnonzero(dup)])))

    def batches(
        self, batches: list[Any], keep: set[str] | frozenset[str] = frozenset()
    ) -> list[Any]:
        """apply() to each batch, but those of the source classes in `keep` (stamped by a device
        already); batches left empty are dropped."""
        from telemetry.contracts import Batch

        out = []
        for b in batches:
            if CLASS_OF.get(b.kind.name, ("", ""))[0] in keep:
                out.append(b)
                continue
            t = self.apply(b.kind.name, b.table)
            if t.num_rows:
                out.append(b if t is b.table else Batch(b.kind, t))
        return out

    def _leaf_offsets(
        self, table: Any, devs: np.ndarray, dh: np.ndarray, step: np.ndarray
    ) -> np.ndarray:
        """gNMI: each leaf (port, queue) its own time; SNMP: where in the walk the row was read."""
        sw = self.spec.switch
        tr = self.transport(devs)
        leaf_key = _row_keys(table, ("switch", "port", "queue", "priority"))
        lh = self._hash(leaf_key)
        leaf = sw.leaf_jitter_seconds * 1000 * (2 * self.uniform("leaf", lh, step) - 1)
        walk = -sw.walk_seconds * 1000 * self.uniform("walk", lh)  # the walk ends at the poll
        return np.where(tr == 1, leaf, np.where(tr == 2, walk, 0.0))

    def _present(
        self,
        cls: str,
        spec: SourceTiming,
        devs: np.ndarray,
        dh: np.ndarray,
        step: np.ndarray,
        ts: np.ndarray,
    ) -> np.ndarray:
        """Rows that reach the store: not a missed poll, not while the device restarts."""
        keep = self.uniform("miss", dh, step) >= spec.missed
        for r in self.restarts:
            if r.cls == cls:
                keep &= ~((devs == r.device) & (ts > r.down_ms) & (ts < r.up_ms))
        return keep & ~self._in_gap(cls, devs, ts)

    def _in_gap(self, cls: str, devs: np.ndarray, ts: np.ndarray) -> np.ndarray:
        out = np.zeros(len(devs), bool)
        for c, dev, lo, hi in self.gaps:
            if c == cls:
                out |= (devs == dev) & (ts >= lo) & (ts < hi)
        return out

    def _counters(self, kind: str, table: Any, ts: np.ndarray, off: np.ndarray) -> Any:
        """Counters at the moment each sample was taken: the step's increase is spread evenly
        over the step (a sample `off` ms before the grid point misses that share of it), and a
        restarted device's counters begin again from 0 (the value one step before it came back
        is taken off every later sample of the series)."""
        import polars as pl

        from telemetry.records import KINDS

        k = KINDS[kind]
        counters = [
            f.name for f in k.fields if f.role == "counter" and f.name in table.column_names
        ]
        if not counters:
            return table
        keys = [f.name for f in k.labels() if f.name in table.column_names and f.name != "cluster"]
        dev_col = CLASS_OF[kind][1]
        src = pl.from_arrow(table.select([*keys, *counters]))
        assert isinstance(src, pl.DataFrame)
        df = src.with_columns(
            pl.concat_str(
                [pl.col(c).cast(pl.String).fill_null("") for c in keys], separator="\x1f"
            ).alias("_key"),
            pl.Series("_ts", ts),
            pl.Series("_off", off / self.dt_ms),
            pl.int_range(pl.len()).alias("_row"),
        )
        last = self._last.get(kind)
        if last is not None:
            df = df.join(last, on="_key", how="left")
        else:
            df = df.with_columns(pl.lit(None, pl.Float64).alias(f"_last_{c}") for c in counters)
        df = df.sort(["_key", "_ts"])
        prev = {
            c: pl.col(c).cast(pl.Float64).shift(1).over("_key").fill_null(pl.col(f"_last_{c}"))
            for c in counters
        }
        df = df.with_columns(
            (pl.col(c).cast(pl.Float64) - prev[c]).clip(0).fill_null(0.0).alias(f"_inc_{c}")
            for c in counters
        ).with_columns(
            (pl.col(c).cast(pl.Float64) + pl.col(f"_inc_{c}") * pl.col("_off")).alias(f"_v_{c}")
            for c in counters
        )
        # the next chunk's previous values: each series' last raw counters
        self._last[kind] = df.group_by("_key").agg(
            pl.col(c).cast(pl.Float64).drop_nulls().last().alias(f"_last_{c}") for c in counters
        )
        if last is not None:
            self._last[kind] = pl.concat([last, self._last[kind]]).unique("_key", keep="last")
        for n, r in enumerate(self.restarts):
            if r.cls != CLASS_OF[kind][0]:
                continue
            after = (pl.col(dev_col) == r.device) & (pl.col("_ts") >= r.up_ms)
            if df.filter(after).is_empty():
                continue
            bkey = (n, kind, "")
            base = self._base_df.get(bkey)
            fresh = (
                df.filter(after)
                .group_by("_key")
                .agg(
                    (pl.col(f"_v_{c}") - pl.col(f"_inc_{c}")).first().alias(f"_b_{c}")
                    for c in counters
                )
            )
            base = fresh if base is None else pl.concat([base, fresh]).unique("_key", keep="first")
            self._base_df[bkey] = base
            df = (
                df.join(base, on="_key", how="left")
                .with_columns(
                    pl.when(after)
                    .then((pl.col(f"_v_{c}") - pl.col(f"_b_{c}").fill_null(0.0)).clip(0))
                    .otherwise(pl.col(f"_v_{c}"))
                    .alias(f"_v_{c}")
                    for c in counters
                )
                .drop([f"_b_{c}" for c in counters])
            )
        df = df.sort("_row")
        for c in counters:
            i = table.schema.get_field_index(c)
            f = table.schema.field(i)
            v = df.get_column(f"_v_{c}").round(0).cast(pl.UInt64).to_arrow()
            table = table.set_column(i, f, v.cast(f.type))
        return table

    def _sflow(self, table: Any) -> Any:
        """Lost datagrams: the samples an agent sent in one datagram vanish together (a
        datagram here: an agent's samples of one 100 ms slot)."""
        import pyarrow as pa

        if self.spec.sflow_loss <= 0:
            return table
        ts = table.column("ts").cast(pa.int64()).to_numpy()
        ah = self._hash(table.column("agent").to_numpy(zero_copy_only=False))
        keep = self.uniform("loss", ah, ts // 100) >= self.spec.sflow_loss
        return table.filter(pa.array(keep))

    def arrival_delay_ms(self, kind: str, table: Any) -> np.ndarray | None:
        """How long after its time each row reaches the store (None: all at once): a share of
        polls (`late_share`, chosen by device and time) arrives `late_seconds` late."""
        import pyarrow as pa

        if self.spec.late_share <= 0 or kind not in CLASS_OF or not table.num_rows:
            return None
        cls, dev_col = CLASS_OF[kind]
        if cls == "sflow":
            return None
        ts = table.column("ts").cast(pa.int64()).to_numpy()
        dh = self._hash(table.column(dev_col).to_numpy(zero_copy_only=False))
        late = self.uniform("late", dh, ts // self.dt_ms) < self.spec.late_share
        return np.where(late, int(self.spec.late_seconds * 1000), 0)

    def relearned_lldp(self, lo_ms: int, hi_ms: int) -> list[Any]:
        """LLDP rows of switches that came back from a restart in [lo, hi): re-learnt then."""
        import pyarrow.compute as pc

        out = []
        for r in self.restarts:
            if r.cls == "switch" and lo_ms <= r.up_ms < hi_ms and self._lldp is not None:
                t = self._lldp.filter(pc.equal(self._lldp.column("local_device"), r.device))
                if t.num_rows:
                    out.append(_with_ts(t, np.full(t.num_rows, r.up_ms, np.int64)))
        return out


def _row_keys(table: Any, cols: Sequence[str]) -> np.ndarray:
    """One string per row joining the given label columns that the table has."""
    import pyarrow as pa
    import pyarrow.compute as pc

    have = [c for c in cols if c in table.column_names and c not in ("ts", "cluster")]
    parts = [pc.cast(table.column(c), pa.string()) for c in have]
    if not parts:
        return np.full(table.num_rows, "", dtype=object)
    joined = pc.binary_join_element_wise(*[pc.fill_null(p, "") for p in parts], "\x1f")
    return np.asarray(joined.to_numpy(zero_copy_only=False), dtype=object)


def _with_ts(table: Any, ts: np.ndarray) -> Any:
    import pyarrow as pa

    i = table.schema.get_field_index("ts")
    f = table.schema.field(i)
    return table.set_column(i, f, pa.array(ts, pa.int64()).cast(f.type))


def device_lists(node_names: Iterable[str], switch_names: Iterable[str]) -> dict[str, list[str]]:
    return {"node": sorted(node_names), "switch": sorted(switch_names)}


__all__ = [
    "PROFILES",
    "Disturber",
    "Restart",
    "SourceTiming",
    "SwitchTiming",
    "TelemetrySpec",
    "device_lists",
]
