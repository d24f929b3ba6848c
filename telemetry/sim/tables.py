"""Arrow columns and tables of record kinds (telemetry/records.py) from numpy arrays: the one
place the simulator's record writers (inventory.py, samples.py) turn values into a kind's schema.
Builds tables only; never decides what goes in them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from telemetry.records import RecordKind


def ts_column(ms: np.ndarray) -> pa.Array:
    return pa.array(ms.astype(np.int64), type=pa.timestamp("ms", tz="UTC"))


def record_table(kind: RecordKind, n: int, cols: dict[str, Any]) -> pa.Table:
    """A table of `kind` from column arrays; absent nullable fields are null, absent strings ''."""
    arrays = []
    for f in kind.fields:
        c = cols.get(f.name)
        if c is None:
            if f.nullable:
                arrays.append(pa.nulls(n, f.arrow_type))
            elif f.arrow_type == pa.string():
                arrays.append(const_column("", n))
            else:
                raise ValueError(f"{kind.name}.{f.name}: no values")
            continue
        if not isinstance(c, pa.Array | pa.ChunkedArray):
            c = pa.array(c, type=f.arrow_type, from_pandas=True)
        elif c.type != f.arrow_type:
            c = c.cast(f.arrow_type)
        arrays.append(c)
    return pa.Table.from_arrays(arrays, schema=kind.arrow_schema)


def const_column(value: str, n: int) -> pa.Array:
    return pa.array([value], pa.string()).take(np.zeros(n, dtype=np.int32))


def masked_column(values: np.ndarray, valid: np.ndarray | None, type_: pa.DataType) -> pa.Array:
    if valid is None or valid.all():
        return pa.array(values, type=type_)
    return pa.array(values, type=type_, mask=~valid)


__all__ = ["const_column", "masked_column", "record_table", "ts_column"]
