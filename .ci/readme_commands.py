"""Print the README's commands, one per line: the command lines (not comments, not blank) of the
first ```bash block under the heading "The two commands". `.ci/run` runs exactly these, so the
README and CI cannot drift apart; tests/unit/core/test_ci.py checks there are two."""

from __future__ import annotations

import sys
from pathlib import Path


def readme_commands(text: str) -> list[str]:
    lines = text.splitlines()
    try:
        at = next(i for i, ln in enumerate(lines) if ln.startswith("## The two commands"))
        start = next(i for i in range(at, len(lines)) if lines[i].strip() == "```bash")
    except StopIteration:
        return []
    out = []
    for ln in lines[start + 1 :]:
        if ln.strip() == "```":
            break
        if ln.strip() and not ln.lstrip().startswith("#"):
            out.append(ln.strip())
    return out


if __name__ == "__main__":
    for command in readme_commands(Path(sys.argv[1]).read_text(encoding="utf-8")):
        print(command)
