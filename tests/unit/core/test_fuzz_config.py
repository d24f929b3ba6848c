"""Fuzzing the config loader (telemetry/config.py: YAML text -> secrets resolved -> validated
Config, every known source's section validated too) with the shipped configs as seeds
(examples/railscope.yaml and deploy/railscope/config.yaml's railscope.yaml): their YAML text
mutated (tests/yaml_fuzz.py), or their documents structurally mutated (tests/fuzz.py), with and
without RAILSCOPE__* environment overrides (themselves mutated). Only ConfigError escapes, as one
line. >= 100,000 inputs; marked slow."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from telemetry import config as config_module
from telemetry.config import Config, config_from_document, parse_yaml
from telemetry.errors import ConfigError
from tests.fuzz import fuzz_accepted_or_refused, mutate_doc
from tests.yaml_fuzz import mutate_yaml

pytestmark = pytest.mark.slow
ROOT = Path(__file__).parents[3]
DEPLOYED = yaml.safe_load((ROOT / "deploy" / "railscope" / "config.yaml").read_text())
ENV = {
    "RAILSCOPE_CLUSTER": "train-west",
    "RAILSCOPE__SINK__BATCH_ROWS": "5000",
    "RAILSCOPE__SOURCES__SWITCH__SWITCHES": "[]",
    "RAILSCOPE__PROMETHEUS__LISTEN": "127.0.0.1:9580",
}
TEXT_SHARE = 0.02  # a YAML parse (libyaml) costs ~3x a validation


@pytest.fixture
def seeds(tmp_path: Path) -> Iterator[list[str]]:
    """The two configs' text; the deployed one's Redis password file is a real file here. The
    secret values the loader remembers for log masking are restored afterwards."""
    pw = tmp_path / "redis-password"
    pw.write_text("s3cret-fuzz\n")
    texts = [
        (ROOT / "examples" / "railscope.yaml").read_text(),
        DEPLOYED["data"]["railscope.yaml"].replace(
            "/etc/railscope-secrets/redis-password", str(pw)
        ),
    ]
    remembered = set(config_module._SECRET_VALUES)
    yield texts
    config_module._SECRET_VALUES.clear()
    config_module._SECRET_VALUES.update(remembered)


def test_configs_let_only_config_error_out(seeds: list[str]) -> None:
    docs = [yaml.safe_load(t) for t in seeds]
    for d in docs:  # the seeds themselves are valid
        assert isinstance(config_from_document(d, "config c.yaml", env={}), Config)

    def one(rnd: random.Random) -> None:
        env = {}
        if rnd.random() < 0.2:
            env = {k: mutate_yaml(rnd, v) if rnd.random() < 0.3 else v for k, v in ENV.items()}
        if rnd.random() < TEXT_SHARE:
            raw = parse_yaml(mutate_yaml(rnd, rnd.choice(seeds)), "config c.yaml")
        else:
            raw = mutate_doc(rnd, rnd.choice(docs))
        config_from_document(raw, "config c.yaml", env=env)

    def one_line(e: Exception) -> None:
        assert str(e) and "\n" not in str(e), str(e)

    fuzz_accepted_or_refused(one, ConfigError, one_line)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("a: 0b_", "invalid literal for int() with base 2"),  # the fuzzer's seed 2912163
        ("a: 0x_", "invalid literal for int() with base 16"),
        ("t: 2001-13-45", "month must be in 1..12"),
    ],
)
def test_a_scalar_pyyaml_types_but_cannot_build_is_a_config_error(text: str, said: str) -> None:
    """PyYAML's resolver types these as an int or a timestamp and its constructor then raises a
    ValueError, not a YAMLError: one ConfigError line naming the source, never a traceback."""
    with pytest.raises(ConfigError) as e:
        parse_yaml(text, "environment RAILSCOPE_X")
    assert str(e.value).startswith("environment RAILSCOPE_X: not valid YAML: ")
    assert said in str(e.value) and "\n" not in str(e.value)
