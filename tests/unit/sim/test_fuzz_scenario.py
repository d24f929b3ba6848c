"""Fuzzing the scenario loader (telemetry/sim/scenario.py: YAML text -> validated Scenario, and
`with_overrides` as `railscope sim --nodes/--minutes` applies it) with the built-in scenarios as
seeds: their YAML text mutated (tests/yaml_fuzz.py: deep nesting, self-referring anchors, tags,
YAML 1.1 scalars), or their parsed documents structurally mutated (tests/fuzz.py: wrong types,
missing / unknown keys, huge and non-finite numbers, unicode). Only ConfigError escapes (one line
naming the key); a scenario that validates can be sized and seeded. >= 100,000 inputs; slow."""

from __future__ import annotations

import random

import pytest
import yaml

from telemetry.config import parse_yaml
from telemetry.errors import ConfigError
from telemetry.sim.engine import _rng
from telemetry.sim.scenario import SCENARIO_DIR, parse_scenario_yaml
from tests.fuzz import fuzz_accepted_or_refused, mutate_doc
from tests.yaml_fuzz import mutate_yaml

pytestmark = pytest.mark.slow
TEXTS = [p.read_text() for p in sorted(SCENARIO_DIR.glob("*.yaml"))]
DOCS = [yaml.safe_load(t) for t in TEXTS]
TEXT_SHARE = 0.03  # a YAML parse costs ~20x a validation: 3 inputs in 100 go through one


def test_scenarios_let_only_config_error_out() -> None:
    def one(rnd: random.Random) -> None:
        if rnd.random() < TEXT_SHARE:
            raw = parse_yaml(mutate_yaml(rnd, rnd.choice(TEXTS)), "scenario s.yaml")
        else:
            raw = mutate_doc(rnd, rnd.choice(DOCS))
        sc = parse_scenario_yaml(raw, "scenario s.yaml", "s")
        assert sc.steps >= 1 and sc.total_servers >= 1
        _rng(sc.seed, "jobs")  # numpy takes the seed
        if rnd.random() < 0.1:
            sc.with_overrides(nodes=rnd.choice([1, 3, 100]), minutes=rnd.choice([None, 1]))

    def one_line(e: Exception) -> None:
        assert str(e).startswith("scenario ") and "\n" not in str(e), str(e)

    fuzz_accepted_or_refused(one, ConfigError, one_line)
