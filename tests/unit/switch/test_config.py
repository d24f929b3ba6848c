"""The gnmi: and snmp: sections of a switch validate with the rest of the config (pydantic only)
and name the key that is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from telemetry.config import load_config
from telemetry.errors import ConfigError


def test_gnmi_and_snmp_sections(tmp_path: Path) -> None:
    f, pw = tmp_path / "c.yaml", tmp_path / "pw"
    pw.write_text("s3cret\n")  # a secret file is read when the config loads
    f.write_text(
        "sources:\n  switch:\n    switches:\n"
        "      - {name: leaf01, gnmi: {address: '10.0.0.1:8080', dialect: openconfig,\n"
        f"         username: u, password_file: {pw}, tls: {{ca: /etc/ca.pem}}}}}}\n"
        "      - {name: oob1, snmp: {address: '10.0.9.1', version: '3', user: r,\n"
        "         auth_key: a, priv_key: p, priv_protocol: aes256}}\n"
    )
    c = load_config(str(f), env={}).source("switch")
    g, s = c.switches[0].gnmi, c.switches[1].snmp
    assert (g.dialect, g.mode, g.tls.ca, g.tls.skip_verify) == (
        "openconfig",
        "stream",
        "/etc/ca.pem",
        False,
    )
    assert (s.version, s.priv_protocol, s.max_repetitions) == ("3", "aes256", 25)


@pytest.mark.parametrize(
    ("switch", "message"),
    [
        ("{name: a, gnmi: {address: 'h:1', dialect: junos}}", "sources.switch.switches.0.gnmi.dialect"),
        ("{name: a, gnmi: {address: 'h:1', tls: {verify: no}}}", "sources.switch.switches.0.gnmi.tls.verify"),
        ("{name: a, snmp: {address: h, version: '1'}}", "sources.switch.switches.0.snmp.version"),
        ("{name: a, gnmi: {address: 'h:1', origin: openconfig}}", "origin applies to the openconfig dialect only"),
    ],
)  # fmt: skip
def test_bad_sections_name_the_key(tmp_path: Path, switch: str, message: str) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(f"sources:\n  switch:\n    switches: [{switch}]\n")
    with pytest.raises(ConfigError) as e:
        load_config(str(f), env={})
    assert message in str(e.value)
