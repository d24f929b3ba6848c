"""A dashboard viewer cannot inject SQL through a variable (`?var-job=...`): every variable is
interpolated as `${var:sqlstring}` and the local checker quotes like Grafana plus backslash
escaping. Every panel of every dashboard, run on the simulator's data in the embedded engine,
returns the same rows for `\\' OR 1=1 --` as for a value that matches nothing."""

from __future__ import annotations

from typing import Any

import pytest

import dashboards
from dashboards.clickhouse import expand
from tests.integration.dashboards.test_queries import ALL_VARS, sim  # noqa: F401 (fixture)

INJECTION = "\\' OR 1=1 --"


@pytest.mark.scenario("small")  # `sim` reads small's scenario_run
@pytest.mark.parametrize("variable", ["cluster", "job", "node", "tenant", "switch"])
def test_injected_variable_changes_no_query_result(sim: dict[str, Any], variable: str) -> None:  # noqa: F811
    store = sim["store"]

    def rows(value: str) -> dict[str, Any]:
        values = {**ALL_VARS, variable: value}
        return {q.where: r for q, r in dashboards.run(store, sim["start"], sim["end"], values, 60)}

    nothing, injected = rows("no-such-value"), rows(INJECTION)
    assert not [w for w, r in injected.items() if isinstance(r, str)], injected
    assert injected == nothing
    # the variable filters something: the run with all values returns more somewhere
    if variable == "cluster":
        every = rows(ALL_VARS["cluster"])
        assert sum(every.values()) > sum(nothing.values())


def test_raw_quoted_variables_are_refused_by_the_checker() -> None:
    from datetime import UTC, datetime

    t = datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(ValueError, match="sqlstring"):
        expand("SELECT 1 WHERE x = '${job}'", t, t, {"job": "a"})
    assert (
        expand("SELECT ${job:sqlstring}", t, t, {"job": INJECTION}) == "SELECT '\\\\\\' OR 1=1 --'"
    )
