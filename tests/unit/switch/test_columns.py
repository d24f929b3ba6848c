"""counters.field_columns (the gNMI path's column-wise reading of sonic_counters.csv) against
fields_from (the Redis path's row-wise one) on the real dump's hashes and on hashes made to be
awkward: absent counters on some ports only, values that are not counters, JSON numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from exporters.switch import counters as C
from tests.unit.switch.seen import Seen

FIX = Path(__file__).parents[2] / "fixtures" / "sonic"


def _hashes() -> tuple[list[str], list[dict[str, Any]]]:
    db = json.loads((FIX / "counters_db.json").read_text())
    keys = [f"COUNTERS:{o}" for o in db["COUNTERS_PORT_NAME_MAP"].values()]
    hs = [dict(db[k]) for k in keys]
    # port 0: SAI pause durations (preferred over SONiC's estimate), port 1: the estimate only,
    # so the choice between the two is made port by port; port 2: a PFC counter missing (its
    # sum must be null, not partial), one that is not a number, one past 64 bits; port 1:
    # counters as JSON numbers (an integer is fine, a fraction is not); port 3: no counters
    a, b = hs[1], hs[2]
    for p in range(8):
        hs[0][f"SAI_PORT_STAT_PFC_{p}_RX_PAUSE_DURATION_US"] = str(7 * p)
        a.pop(f"SAI_PORT_STAT_PFC_{p}_RX_PAUSE_DURATION_US", None)
        a[f"EST_PORT_STAT_PFC_{p}_RX_PAUSE_DURATION_US"] = str(1000 * (p + 1))
    a["SAI_PORT_STAT_IF_IN_OCTETS"] = 12345
    a["SAI_PORT_STAT_IF_OUT_OCTETS"] = 1.5
    del b["SAI_PORT_STAT_PFC_5_TX_PKTS"]
    b["SAI_PORT_STAT_PFC_6_RX_PKTS"] = "lots"
    b["SAI_PORT_STAT_IF_IN_ERRORS"] = str(1 << 64)
    keys.append("COUNTERS:none")
    hs.append({})
    return keys, hs


def _row_wise(kind: str, keys: list[str], hs: list[dict[str, Any]], p: int | None) -> Any:
    seen = Seen()
    rows = [
        C.fields_from(
            kind, k, {n: v if isinstance(v, str) else json.dumps(v) for n, v in h.items()}, seen, p
        )
        for k, h in zip(keys, hs, strict=True)
    ]
    return rows, seen


def test_columns_equal_rows_value_by_value() -> None:
    keys, hs = _hashes()
    cache: dict[str, Any] = {}
    compared = 0
    for kind, p in [("port", None), *(("priority", p) for p in range(8))]:
        rows, seen_rows = _row_wise(kind, keys, hs, p)
        seen = Seen()
        cols = C.field_columns(kind, keys, hs, seen, p)
        assert set(cols) == set(rows[0])
        for field, col in cols.items():
            assert list(col) == [r[field] for r in rows], (kind, p, field)
            compared += len(col)
        assert sorted(set(seen.got)) == sorted(set(seen_rows.got)), (kind, p)
        # the shared cache gives the same columns
        assert C.field_columns(kind, keys, hs, Seen(), p, cache=cache) == cols
    assert compared > 100
    port, _ = _row_wise("port", keys, hs, None)
    assert port[0]["pfc_rx_pause_duration_us_total"] == sum(7 * p for p in range(8))
    assert port[1]["rx_bytes_total"] == 12345 and port[1]["tx_bytes_total"] is None
    assert port[1]["pfc_rx_pause_duration_us_total"] == sum(1000 * (p + 1) for p in range(8))
    assert port[2]["pfc_tx_pause_total"] is None and port[2]["pfc_rx_pause_total"] is None
    assert port[2]["rx_errors_total"] is None
    assert all(v is None for v in port[3].values())


def test_bad_values_are_named() -> None:
    keys, hs = _hashes()
    seen = Seen()
    C.field_columns("port", keys, hs, seen)
    subjects = {s for r, s in seen.got if r == "bad_value"}
    assert f"{keys[2]} SAI_PORT_STAT_PFC_6_RX_PKTS='lots'" in subjects
    assert f"{keys[2]} SAI_PORT_STAT_IF_IN_ERRORS='{1 << 64}'" in subjects
    assert f"{keys[1]} SAI_PORT_STAT_IF_OUT_OCTETS='1.5'" in subjects


def test_no_hashes() -> None:
    cols = C.field_columns("queue", [], [], Seen())
    assert cols and all(list(c) == [] for c in cols.values())


def test_pfc_sums_only_over_all_eight_priorities() -> None:
    full = [{"priority": p, "rx_pause_total": p, "tx_pause_total": None} for p in range(8)]
    assert C.pfc_sums(full) == {"pfc_rx_pause_total": 28, "pfc_tx_pause_total": None}
    assert C.pfc_sums(full[:7]) == {"pfc_rx_pause_total": None, "pfc_tx_pause_total": None}


def test_uniform_hashes_read_by_the_fast_path_equal_rows() -> None:
    """Hashes that all have the first one's counters (a switch model: every port alike) go
    through the itemgetter read; a later hash with more counters still has them read."""
    _, hs = _hashes()
    base = {k: v for k, v in hs[0].items() if v.isdigit()}
    uniform = [{k: str(int(v) + i) for k, v in base.items()} for i in range(5)]
    uniform[3]["SAI_PORT_STAT_PFC_2_TX_PAUSE_DURATION_US"] = "77"  # only this one has it
    uniform[4]["SAI_PORT_STAT_IF_OUT_ERRORS"] = "5"
    ukeys = [f"COUNTERS:u{i}" for i in range(5)]
    for kind, p in [("port", None), *(("priority", p) for p in range(8))]:
        rows, _ = _row_wise(kind, ukeys, uniform, p)
        cols = C.field_columns(kind, ukeys, uniform, Seen(), p)
        for field, col in cols.items():
            assert list(col) == [r[field] for r in rows], (kind, p, field)
    # one counter of the kind on the first hash: itemgetter of one name
    q = [{"SAI_QUEUE_STAT_PACKETS": str(i)} for i in range(3)]
    cols = C.field_columns("queue", ["a", "b", "c"], q, Seen())
    assert list(cols["tx_packets_total"]) == [0, 1, 2] and cols["tx_bytes_total"] == [None] * 3


def test_batched_read_equals_rows_whatever_one_value_is() -> None:
    """Hashes alike (one switch model) are read in one batch (read_counters); one awkward value
    anywhere (not a string, not a counter, out of range, int()'s own spellings) must give the
    row-wise values and name the same problems, through the batch or the column fallback;
    counters on no hash are null."""
    _, hs = _hashes()
    base = {k: v for k, v in hs[0].items() if v.isdigit()}
    ukeys = [f"COUNTERS:u{i}" for i in range(4)]
    kinds = [("port", None), *(("priority", p) for p in range(8))]
    awkward: list[Any] = ["lots", 5.5, 5.0, 7, True, "-1", str(1 << 64), str((1 << 64) - 1),
                          "1_000", " 12", "+5", "1e3", "", "٣"]  # fmt: skip
    for bad in [None, *awkward]:
        uniform = [{k: str(int(v) + i) for k, v in base.items()} for i in range(4)]
        if bad is not None:
            uniform[2]["SAI_PORT_STAT_IF_IN_OCTETS"] = bad
            if bad != str((1 << 64) - 1):  # summed over priorities: past 64 bits (not asked)
                uniform[2]["SAI_PORT_STAT_PFC_3_RX_PKTS"] = bad
        cache: dict[str, Any] = {}
        seen = Seen()
        every = [t for k, p in kinds for t in C.terms(k, p)]
        C.read_counters(every, ukeys, uniform, seen, cache)
        if bad is None:  # the batch: arrays, every counter the first hash has
            assert all(hasattr(cache[t][1], "dtype") for t in every if t in uniform[0]), (
                "not read in one batch"
            )
        for kind, p in kinds:
            rows, seen_rows = _row_wise(kind, ukeys, uniform, p)
            cols = C.field_columns(kind, ukeys, uniform, seen, p, cache=cache)
            for field, col in cols.items():
                assert list(col) == [r[field] for r in rows], (bad, kind, p, field)
            assert set(seen_rows.got) <= set(seen.got), (bad, kind, p)
        assert cache["SAI_PORT_STAT_PFC_0_TX_PAUSE_DURATION_US"][1] == [None] * 4


def test_a_sum_past_64_bits_has_no_value_on_both_paths() -> None:
    """rx_packets_total = unicast + non-unicast: numpy wraps a uint64 sum past 2**64 silently
    (a counter that seems to go backwards, read as a reset); both paths store no value there."""
    big = str(2**63 + 5)
    hs = [
        {"SAI_PORT_STAT_IF_IN_UCAST_PKTS": "7", "SAI_PORT_STAT_IF_IN_NON_UCAST_PKTS": "3"},
        {"SAI_PORT_STAT_IF_IN_UCAST_PKTS": big, "SAI_PORT_STAT_IF_IN_NON_UCAST_PKTS": big},
        {"SAI_PORT_STAT_IF_IN_UCAST_PKTS": big, "SAI_PORT_STAT_IF_IN_NON_UCAST_PKTS": "9"},
    ]
    keys = [f"COUNTERS:oid:{i}" for i in range(len(hs))]
    cols = C.field_columns("port", keys, hs, Seen())
    rows, _ = _row_wise("port", keys, hs, None)
    assert list(cols["rx_packets_total"]) == [10, None, 2**63 + 14]
    assert [r["rx_packets_total"] for r in rows] == [10, None, 2**63 + 14]
