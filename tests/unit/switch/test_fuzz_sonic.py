"""Fuzzing the SONiC dump parsing (DumpSonicDb + `poll`: COUNTERS_DB maps, port / queue / PG
counter hashes, RATES, USER_WATERMARKS, APPL_DB PORT_TABLE and LLDP_ENTRY_TABLE) with dumps
seeded from the real one (tests/fixtures/sonic, cut to one port, two queues and a PG). Every key
of each dump is mutated on its own (a hash's fields: wrong types, huge, negative, non-finite or
non-numeric counters, unicode; the key: missing, not a hash, in sonic-db-dump's wrapper with
another type), so one poll parses ~15 mutated hashes. `poll` never raises: what it cannot read
it reports under a declared reason (counters.REASONS), which the source counts as
railscope_component_failed_total{reason=...}. >= 100,000 mutated hashes; marked slow."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from exporters.switch import counters as C
from exporters.switch.sonic import DumpSonicDb, poll
from tests.fuzz import fuzz, mutate_doc, odd_value

pytestmark = pytest.mark.slow
FIX = Path(__file__).parents[2] / "fixtures" / "sonic"
POLLS_PER_EXAMPLE = 12  # x ~22 keys = ~105k mutated hashes


def _seed() -> dict[str, Any]:
    """The real COUNTERS_DB cut to its first port, two of its queues and one PG."""
    full = json.loads((FIX / "counters_db.json").read_text())
    port, oid = next(iter(full[C.PORT_NAME_MAP].items()))
    keep: dict[str, Any] = {C.PORT_NAME_MAP: {port: oid}}
    oids = {oid}
    for m, idx in ((C.QUEUE_NAME_MAP, ("0", "3")), (C.PG_NAME_MAP, ("3",))):
        keep[m] = {k: v for k, v in full[m].items() if k in {f"{port}:{i}" for i in idx}}
        oids |= set(keep[m].values())
    for m in (C.QUEUE_TYPE_MAP, C.QUEUE_INDEX_MAP, C.PG_INDEX_MAP):
        keep[m] = {k: v for k, v in full[m].items() if k in oids}
    keep.update((k, v) for k, v in full.items() if ":" in k and k.split(":", 1)[1] in oids)
    return keep


COUNTERS = _seed()
APPL = {  # the port's PORT_TABLE and every LLDP entry (all of them are read)
    k: v
    for k, v in json.loads((FIX / "appl_db.json").read_text()).items()
    if k.startswith("LLDP_ENTRY_TABLE:")
    or k == f"PORT_TABLE:{next(iter(COUNTERS[C.PORT_NAME_MAP]))}"
}


def _key(rnd: random.Random, value: Any) -> Any:
    """One key's value mutated: its hash edited, or the key itself made odd."""
    r = rnd.random()
    if r < 0.85:
        return mutate_doc(rnd, value, 2)
    if r < 0.9:
        return {"type": rnd.choice(["hash", "string", "list", 5]), "value": value}
    return odd_value(rnd)


def _db(rnd: random.Random, doc: dict[str, Any]) -> tuple[dict[str, Any], int]:
    out = {k: _key(rnd, v) for k, v in doc.items() if rnd.random() > 0.03}
    if rnd.random() < 0.05:
        out[rnd.choice(list(doc)) + rnd.choice(["0", ":", " "])] = odd_value(rnd)
    return out, len(out)


def test_sonic_dump_poll_never_raises() -> None:
    reasons: Counter[str] = Counter()
    polled = [0, 0]  # polls, port rows

    class Problems:
        def add(self, reason: str, subject: str = "", detail: str = "", n: int = 1) -> None:
            assert reason in C.REASONS, reason
            assert isinstance(subject, str) and isinstance(detail, str)
            reasons[reason] += n

    def check(rnd: random.Random) -> int:
        fed = 0
        for _ in range(POLLS_PER_EXAMPLE):
            counters, n1 = _db(rnd, COUNTERS)
            appl, n2 = _db(rnd, APPL)
            ports, queues, lldp = poll(
                DumpSonicDb({"COUNTERS_DB": counters, "APPL_DB": appl}), Problems()
            )
            for row in ports:
                assert isinstance(row["port"], str)
                for k, v in row.items():
                    assert v is None or isinstance(v, str | int | float | list), (k, v)
            for row in queues:
                assert 0 <= row["queue"] <= 255
            assert all(isinstance(v, str) for r in lldp for v in r.values())
            polled[0] += 1
            polled[1] += len(ports)
            fed += n1 + n2
        return fed

    fuzz(check)
    assert polled[1] and set(reasons) == set(C.REASONS)  # rows and every reason exercised
