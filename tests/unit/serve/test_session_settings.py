"""The settings serve itself SETs on every statement's session (the user's limits, serve's own)
are declared in the one table of setting rules: each is a limit the table caps by the user's
limit, or const, so no SETTINGS clause of a statement undoes it."""

from __future__ import annotations

from telemetry.serve.policy import SERVE_SETTINGS, Limits, Refused, check_setting, setting_rule


def test_every_session_setting_is_ruled_by_the_table() -> None:
    limits = Limits(3, 1 << 30, 1000, 1 << 20, 4)
    session = limits.settings()
    assert set(SERVE_SETTINGS) <= set(session)
    for name, value in session.items():
        rule = setting_rule(name)
        assert rule.const or rule.cap == name, name
        # a client may repeat what serve sets, never go past it
        check_setting("u", 0, frozenset(), limits, name, value)
        if rule.cap:
            try:
                check_setting("u", 0, frozenset(), limits, name, str(float(value) * 2 + 1))
            except Refused as e:
                assert e.code == 452, name
            else:
                raise AssertionError(f"{name} raised past the user's limit")
