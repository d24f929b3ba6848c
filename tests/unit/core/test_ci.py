"""The README's two commands are what CI runs, and the deployment pins (constraints.txt) agree
with pyproject.toml's ranges."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[3]


def _readme_commands(text: str) -> list[str]:
    """.ci/readme_commands.py's answer for `text` (.ci is not a package: loaded by path)."""
    spec = importlib.util.spec_from_file_location("rc", ROOT / ".ci/readme_commands.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.readme_commands(text)


def test_ci_runs_the_readme_s_two_commands() -> None:
    demo, tests = _readme_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    assert demo.startswith("pip install -e . &&") and "railscope demo" in demo
    assert tests.startswith("pip install -e '.[test]' &&") and "pytest" in tests
    run = (ROOT / ".ci/run").read_text(encoding="utf-8")
    assert "readme_commands.py README.md" in run and "python3 -m venv" in run


def test_a_readme_without_the_block_gives_no_commands() -> None:
    assert _readme_commands("# x\n```bash\npip install x\n```\n") == []
    text = (
        "## The two commands\n\n```bash\n# a comment\npip install a\n\npytest\n```\npip install b\n"
    )
    assert _readme_commands(text) == ["pip install a", "pytest"]


def _pins() -> dict[str, str]:
    out = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep, f"constraints.txt: {line!r} is not NAME==VERSION"
            out[name.strip().lower().replace("_", "-")] = version.strip()
    return out


def test_constraints_pin_every_runtime_dependency_inside_its_range() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pins = _pins()
    for dep in project["dependencies"]:
        req = Requirement(dep)
        name = req.name.lower().replace("_", "-")
        assert name in pins, f"constraints.txt does not pin {req.name} (.ci/refresh-constraints)"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {req.name}=={pins[name]}, outside pyproject.toml's {req.specifier}"
        )
    image = (ROOT / "deploy/image/Dockerfile").read_text(encoding="utf-8")
    assert "-c constraints.txt" in image
