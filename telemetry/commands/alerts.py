"""render and check the Prometheus alert rules (promtool)

Alert rules rendered from alerts/alerts.yaml (thresholds + templates); promtool unit tests from
alerts/tests/cases.yaml. See docs/alerts.md.

`build` writes the rules and their tests under --out; `check` renders them into a temporary
directory and runs promtool there. Neither edits the checked-in files.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from telemetry.commands.common import add_from_arg, add_out_arg, add_verb_command
from telemetry.errors import UserError


def register(sub: Any) -> list[str]:
    verbs = add_verb_command(sub, "alerts", __doc__)
    b = verbs.add_parser("build", help="write railscope.rules.yaml and railscope.test.yaml")
    add_out_arg(b)
    add_from_arg(b, "alerts config (default: the packaged alerts/alerts.yaml)")
    b.set_defaults(func=run_build)
    c = verbs.add_parser(
        "check",
        help="promtool check + test the rules; verify the checked-in files are current",
    )
    add_from_arg(c, "alerts config (default: the packaged alerts/alerts.yaml)")
    c.set_defaults(func=run_check)
    return ["alerts"]


def _write(out: Path, rules_from: str | None) -> tuple[Path, Path]:
    import alerts

    src = Path(rules_from) if rules_from else alerts.CONFIG
    cfg = alerts.load(src)
    doc = alerts.render(cfg, source=f"alerts config {src}")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"--out {out}: cannot create: {e.strerror}") from None
    rules, tests = out / alerts.RULES.name, out / alerts.TESTS.name
    rules.write_text(alerts.render_text(cfg, source=f"alerts config {src}"))
    tests.write_text(alerts.render_tests(doc))
    return rules, tests


def run_build(args: argparse.Namespace) -> int:
    rules, tests = _write(Path(args.out), args.from_path)
    print(f"wrote {rules}\nwrote {tests}")
    return 0


def run_check(args: argparse.Namespace) -> int:
    import yaml

    import alerts

    ok = True
    with tempfile.TemporaryDirectory(prefix="railscope-alerts-") as d:
        rules, tests = _write(Path(d), args.from_path)
        if not args.from_path:
            for got, checked_in in ((rules, alerts.RULES), (tests, alerts.TESTS)):
                if not checked_in.exists() or checked_in.read_text() != got.read_text():
                    print(f"STALE {checked_in}: run `railscope alerts build --out alerts`")
                    ok = False
        for verb, target in (("check", rules), ("test", tests)):
            res = alerts.promtool(verb, "rules", target.name, cwd=Path(d))
            status = "ok" if res.returncode == 0 else "FAILED"
            print(f"promtool {verb} rules: {status}")
            if res.returncode != 0:
                print((res.stdout + res.stderr).strip())
                ok = False
        names = alerts.alert_names(yaml.safe_load(rules.read_text()))
    cov = alerts.coverage(yaml.safe_load(alerts.CASES.read_text()))
    for name in names:
        fire, quiet = cov.get(name, (0, 0))
        if not fire or not quiet:
            print(f"UNTESTED {name}: {fire} firing and {quiet} non-firing case(s); need >= 1 each")
            ok = False
    print(f"{len(names)} rules: {'all checked' if ok else 'problems above'}")
    return 0 if ok else 1
