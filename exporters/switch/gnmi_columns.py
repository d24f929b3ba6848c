"""The SONiC gNMI column reader: a whole `COUNTERS/Ethernet*` (or `.../Queues`) update read
straight into counter columns with msgspec and numpy (`whole_reader`, `read_whole`), and the
column helpers `SonicGnmi.poll_columns` builds its records with (port status, LLDP, update
times, concatenation).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import Iterable, Sequence
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from exporters.switch import counters as C
from exporters.switch.gnmi_decode import json_value

PORT_TERMS = tuple(
    t for k, p in [("port", None), *(("priority", p) for p in C.PRIORITIES)] for t in C.terms(k, p)
)
QUEUE_TERMS = C.terms("queue")
_WD = "PFC_WD_STATUS"
_U64_MAX = np.uint64(2**64 - 1)


def whole_kind(elems: list[tuple[str, dict[str, str]]]) -> str | None:
    """ "port" for `COUNTERS/Ethernet*`, "queue" for `COUNTERS/Ethernet*/Queues`, else None."""
    if len(elems) not in (2, 3) or elems[0][0] != "COUNTERS" or "*" not in elems[1][0]:
        return None
    if len(elems) == 2:
        return "port"
    return "queue" if elems[2][0] == "Queues" else None


@functools.lru_cache(maxsize=32)
def whole_reader(
    kind: str, layout: tuple[str, ...] = ()
) -> tuple[Any, tuple[str, ...], dict[str, str]]:
    """A msgspec decoder of a whole update of `kind` ({name: {counter: "n"}}) that keeps only
    the counters the mapping reads (and PFC_WD_STATUS of queues), each a str or absent (None;
    JSON null or a number is refused); its counters; their struct attributes.

    `layout`: the keys of one hash in the order the switch sends them (`layout`). The struct
    then has a field for each of them in that order, those the mapping does not read taking
    any JSON value and dropped with the struct: msgspec looks a key up at the field it expects
    next and searches every field only when that one is not it, so a key that is no field at
    all (80 of a SONiC port's ~130 counters) costs a search of all the struct's fields. One
    64-port SONiC update (sonic-gnmi sends its keys sorted: Go's json.Marshal of a map): 0.46 ms
    without the layout, 0.32 ms with it. Any order still decodes the same, only slower."""
    terms = tuple(dict.fromkeys(QUEUE_TERMS if kind == "queue" else PORT_TERMS))
    keys = (*terms, _WD) if kind == "queue" else terms
    attrs = {k: f"c{i}" for i, k in enumerate(keys)}  # counter names need not be identifiers
    sent = dict.fromkeys(layout)
    order = [*sent, *(k for k in keys if k not in sent)]
    fields = [
        (attrs[k], str, msgspec.field(default=None, name=k))
        if k in attrs
        else (f"x{i}", Any, msgspec.field(default=None, name=k))
        for i, k in enumerate(order)
    ]
    struct = msgspec.defstruct(f"_{kind}_counters", fields, gc=False)  # type: ignore[arg-type]
    return msgspec.json.Decoder(dict[str, struct]), terms, attrs  # type: ignore[valid-type]


def layout(raw: bytes) -> tuple[str, ...]:
    """The keys of a whole update's first hash, in the order sent (once per switch and kind)."""
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        first = next(iter(json_value(raw, "json_ietf_val").values()), None)
        if isinstance(first, dict):
            return tuple(first)
    return ()


def read_whole(
    kind: str, raw: bytes, names: Sequence[str], reader: Any = None
) -> tuple[dict[str, Any], dict[str, tuple[Sequence[Any], C.Column]], list[Any] | None] | None:
    """(the update's {name: counters}, `read_batch`'s columns for `names`, the queues'
    PFC_WD_STATUS) of a whole update's JSON text, or None where `SonicGnmi._take` does not
    apply (see there). `reader`: `whole_reader`'s answer for the switch's key order."""
    dec, terms, attrs = reader or whole_reader(kind)
    try:
        top = dec.decode(raw)
    except msgspec.MsgspecError:  # not JSON, not objects of objects, a counter not a string
        return None
    structs = list(map(top.get, names))
    if None in structs:  # a port (queue) of the maps left out
        return None
    n = len(structs)
    have = [t for t in terms if getattr(structs[0], attrs[t]) is not None]
    if not have:  # no counter the mapping reads (or an empty hash): the general way
        return None
    rows = map(attrgetter(*(attrs[t] for t in have)), structs)
    arr = _uint64s(rows if len(have) == 1 else itertools.chain.from_iterable(rows), n * len(have))
    if arr is None:
        return None
    arr = arr.reshape(n, len(have)).T.copy()  # each counter's values contiguous, as read_batch
    present = C._Present(n)
    cols: dict[str, tuple[Sequence[Any], C.Column]] = {
        t: (present, arr[j]) for j, t in enumerate(have)
    }
    absent = [t for t in terms if t not in cols]
    if absent:  # counters the model lacks: on none of them
        get = attrgetter(*(attrs[t] for t in absent))
        vals = (
            map(get, structs)
            if len(absent) == 1
            else itertools.chain.from_iterable(map(get, structs))
        )
        if set(vals) - {None}:
            return None
        nones = (None,) * n
        cols.update((t, (nones, [None] * n)) for t in absent)
    wd = list(map(attrgetter(attrs[_WD]), structs)) if kind == "queue" else None
    return top, cols, wd


def _uint64s(values: Iterable[Any], count: int) -> np.ndarray[Any, Any] | None:
    """Counter strings as one uint64 array where every one is ASCII digits (int()'s value) and
    below 2**64 - 1 (`count` of them); None otherwise (one absent, empty, a sign, a space, a comma ...)."""
    try:
        text = ",".join(values).encode("ascii")
    except (TypeError, UnicodeEncodeError):  # None (absent on some), or not ASCII
        return None
    # bytes.isdigit: ASCII 0-9 only; an empty value leaves two commas side by side
    if not text.replace(b",", b"").isdigit() or b",," in text or text[:1] == b"," or text[-1:] == b",":  # fmt: skip
        return None
    arr = np.fromstring(text, dtype=np.uint64, sep=",")  # strtoull: saturates past 2**64 - 1
    if len(arr) != count or arr.max() == _U64_MAX:  # a comma in one / too large for sure
        return None
    return arr


STR_TYPES = frozenset((str,))
FIELD_TERMS = tuple(dict.fromkeys(PORT_TERMS))  # once each (the priority rows repeat some)


def port_status(
    names: Sequence[str], appl: dict[str, dict[str, str]]
) -> tuple[list[Any], list[Any], list[tuple[Any, ...]]]:
    """(up, speed_bps) of each port from APPL_DB PORT_TABLE (`counters.port_status`), and the
    problems that read named (reason, subject, detail, n)."""
    named: list[tuple[Any, ...]] = []
    rec = _Record(named)
    up, speed = [], []
    for n in names:
        u, sp = C.port_status(n, appl, rec)
        up.append(u)
        speed.append(sp)
    return up, speed, named


class _Record:
    """Problems kept to be named again (`C.Problems`)."""

    def __init__(self, into: list[tuple[Any, ...]]) -> None:
        self.into = into

    def add(self, reason: str, subject: str = "", detail: str = "", n: int = 1) -> None:
        self.into.append((reason, subject, detail, n))


_LLDP_FIELDS = ("local_port", "remote_device", "remote_port", "remote_chassis_id", "source")


def lldp_columns(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """`counters.lldp_rows` as lldp_link columns ({} where there are none)."""
    if not rows:
        return {}
    return {f: [r[f] for r in rows] for f in _LLDP_FIELDS}


def ts_column(ts: list[int | None]) -> C.Column:
    """Rows' update times: one array where they are one time (a notification's ports or
    queues, the common case), else the list."""
    if ts and ts[0] is not None and ts.count(ts[0]) == len(ts):
        return np.full(len(ts), ts[0], dtype=np.int64)
    return ts


def concat_columns(chunks: list[C.Column]) -> C.Column:
    """Columns end to end: one array when every chunk is one, else one list."""
    if all(isinstance(c, np.ndarray) for c in chunks):
        return np.concatenate(chunks)
    return [x for c in chunks for x in c]
