"""The tree's structure, checked over its source (AST, no imports run): production never imports
the simulator, no import cycles (type-only and function-local imports counted), no giant
modules, and CONTRIBUTING.md's map of where each change goes names files that exist."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("telemetry", "exporters", "dashboards", "alerts")
# the simulator and the commands that drive it; nothing else may import telemetry.sim
SIM_USERS = ("telemetry/sim/", "telemetry/commands/sim.py", "telemetry/commands/demo.py")
MAX_LINES = 800
# the record table may stay one table (one entry per record kind, read top to bottom)
TABLES = ("telemetry/records.py",)


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            parts = p.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = p
    return out


MODULES = _modules()


def _imported(path: Path, module: str) -> Iterator[tuple[str, int]]:
    """Every module name `path` imports, at any depth (under TYPE_CHECKING, inside functions),
    relative imports resolved; with its line."""
    pkg = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            for a in node.names:
                yield f"{base}.{a.name}", node.lineno


def _ours(name: str, modules: dict[str, Path] = MODULES) -> str | None:
    """The module of ours `name` is (a name imported from a module: that module)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _graph() -> dict[str, set[str]]:
    g: dict[str, set[str]] = {m: set() for m in MODULES}
    for m, p in MODULES.items():
        for name, _ in _imported(p, m):
            t = _ours(name)
            # a package's __init__ is imported on the way to its submodules: not an edge back
            if t and t != m and not m.startswith(t + "."):
                g[m].add(t)
    return g


def _cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in g:
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_production_never_imports_the_simulator() -> None:
    bad = []
    for m, p in MODULES.items():
        rel = p.relative_to(ROOT).as_posix()
        if rel.startswith(SIM_USERS):
            continue
        for name, line in _imported(p, m):
            if name == "telemetry.sim" or name.startswith("telemetry.sim."):
                bad.append(f"{rel}:{line} imports {name}")
    assert not bad, "the engine, exporters and serving code must not depend on the simulator:\n" + (
        "\n".join(bad)
    )


def test_no_import_cycles() -> None:
    cycles = _cycles(_graph())
    assert not cycles, "import cycles (counting TYPE_CHECKING and function-local imports):\n" + (
        "\n".join(" <-> ".join(c) for c in cycles)
    )


def test_the_cycle_check_sees_type_only_and_local_imports(tmp_path: Path) -> None:
    """The checker itself: a cycle made only of a TYPE_CHECKING import one way and a
    function-local import the other way is found."""
    g = {"a": {"b"}, "b": {"a"}, "c": {"a"}}
    assert _cycles(g) == [["a", "b"]]
    src = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from x.y import Z\n"
    src += "def f():\n    from . import w\n"
    p = tmp_path / "m.py"
    p.write_text(src)
    assert {n for n, _ in _imported(p, "x.m")} == {"typing.TYPE_CHECKING", "x.y.Z", "x.w"}


def test_no_giant_modules() -> None:
    big = []
    for p in MODULES.values():
        rel = p.relative_to(ROOT).as_posix()
        n = len(p.read_text().splitlines())
        if n > MAX_LINES and rel not in TABLES:
            big.append(f"{rel}: {n} lines")
    assert not big, f"modules over {MAX_LINES} lines (split along their seams):\n" + "\n".join(big)


def _contributing_paths() -> list[str]:
    text = (ROOT / "CONTRIBUTING.md").read_text()
    section = text.split("## Where each change goes", 1)
    assert len(section) == 2, "CONTRIBUTING.md has no 'Where each change goes' section"
    body = section[1].split("\n## ", 1)[0]
    return sorted(
        {
            m.group(1).rstrip("/")
            for m in re.finditer(r"`([\w./-]+\.(?:py|yaml|md|sql)|[\w./-]+/)`", body)
            if "<" not in m.group(1)
        }
    )


def test_contributing_names_files_that_exist() -> None:
    paths = _contributing_paths()
    assert len(paths) >= 15, paths  # the map is read, not skipped
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, f"CONTRIBUTING.md 'Where each change goes' names missing paths: {missing}"


# the CLI and the simulator may drive the commands; nothing a library user imports may
COMMAND_USERS = ("telemetry/commands/", "telemetry/cli.py", "telemetry/sim/")


def _top_level(path: Path) -> tuple[set[str], dict[str, tuple[str, str]]]:
    """What a module defines at its top level (def, class, assignment, also under `if`), and what
    it imports by name there: {local name: (module, name)}."""
    defined: set[str] = set()
    imported: dict[str, tuple[str, str]] = {}
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                imported[a.asname or a.name] = (node.module, a.name)
            continue
        todo: list[ast.AST] = [node]
        while todo:  # the statement and what `if`/`try` hold; not what a def or class holds
            n = todo.pop()
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                defined.add(n.name)
                continue
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                defined.add(n.id)
            todo.extend(ast.iter_child_nodes(n))
    return defined, imported


def _import_problems(modules: dict[str, Path]) -> list[str]:
    """`from m import _name` across modules, and `from m import X` where m only imports X from
    elsewhere (a re-export: two answers to "where does X live?")."""
    tops = {m: _top_level(p) for m, p in modules.items()}
    out = []
    for m, p in modules.items():
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if not (isinstance(node, ast.ImportFrom) and not node.level):
                continue
            src = node.module or ""
            if src not in modules or src == m:
                continue
            defined, imported = tops[src]
            for a in node.names:
                if f"{src}.{a.name}" in modules:
                    continue  # a submodule
                where = f"{p.relative_to(ROOT) if p.is_relative_to(ROOT) else p.name}:{node.lineno}"
                if a.name.startswith("_") and not a.name.startswith("__"):
                    out.append(f"{where} imports the private {src}.{a.name}")
                elif a.name not in defined and a.name in imported:
                    out.append(f"{where} imports {a.name} through {src} ({imported[a.name][0]})")
    return out


def test_no_private_or_reexported_imports() -> None:
    bad = _import_problems(MODULES)
    assert not bad, "import names from where they are defined, and only public ones:\n" + (
        "\n".join(bad)
    )


def test_the_import_check_sees_private_names_and_reexports(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def _p(): ...\nclass X: ...\n")
    (tmp_path / "b.py").write_text("from a import X\nY = 1\n")
    (tmp_path / "c.py").write_text("from a import _p\nfrom b import X, Y\n")
    bad = _import_problems({n: tmp_path / f"{n}.py" for n in "abc"})
    assert bad == ["c.py:1 imports the private a._p", "c.py:2 imports X through b (a)"]


def test_no_library_module_imports_the_commands() -> None:
    bad = []
    for m, p in MODULES.items():
        rel = p.relative_to(ROOT).as_posix()
        if rel.startswith(COMMAND_USERS):
            continue
        for name, line in _imported(p, m):
            if name == "telemetry.commands" or name.startswith("telemetry.commands."):
                bad.append(f"{rel}:{line} imports {name}")
    assert not bad, "the CLI sits on top; libraries must not import it:\n" + "\n".join(bad)


def _layers(text: str) -> list[tuple[str, list[str]]]:
    """CONTRIBUTING.md's ```layers block: [(layer, [module prefix ...])], lowest first."""
    m = re.search(r"```layers\n(.*?)```", text, re.S)
    assert m, "CONTRIBUTING.md has no ```layers block"
    out = []
    for line in m[1].strip().splitlines():
        name, _, paths = line.partition(":")
        mods = [p.rstrip("/").removesuffix(".py").replace("/", ".") for p in paths.split()]
        out.append((name.strip(), mods))
    return out


def _layer_of(module: str, layers: list[tuple[str, list[str]]]) -> int | None:
    """The layer of the longest prefix that holds `module`."""
    best: tuple[int, int] | None = None
    for i, (_, prefixes) in enumerate(layers):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (best is None or len(p) > best[1]):
                best = (i, len(p))
    return None if best is None else best[0]


def _upward(modules: dict[str, Path], layers: list[tuple[str, list[str]]]) -> list[str]:
    out = []
    for m, p in modules.items():
        if m == "telemetry" or m.startswith("telemetry.sim"):
            continue  # the package root; the simulator sits beside the layers
        lm = _layer_of(m, layers)
        if lm is None:
            out.append(f"{m} is on no layer")
            continue
        for name, line in _imported(p, m):
            t = _ours(name, modules)
            if not t or t == "telemetry" or t.startswith("telemetry.sim"):
                continue
            lt = _layer_of(t, layers)
            if lt is not None and lt > lm:
                out.append(f"{m}:{line} ({layers[lm][0]}) imports {t} ({layers[lt][0]})")
    return out


def test_the_layer_map_is_an_import_contract() -> None:
    layers = _layers((ROOT / "CONTRIBUTING.md").read_text())
    names = [n for n, _ in layers]
    assert "ingest" in names and names[0] == "base" and names[-1] == "cli", names
    for _, prefixes in layers:
        for p in prefixes:
            assert p in MODULES or any(m.startswith(p + ".") for m in MODULES), f"{p}: no module"
    bad = _upward(MODULES, layers)
    assert not bad, "imports against CONTRIBUTING.md's layer map:\n" + "\n".join(bad)


def test_the_layer_check_sees_upward_and_unplaced_modules(tmp_path: Path) -> None:
    (tmp_path / "low.py").write_text("from high import x\n")
    (tmp_path / "high.py").write_text("from low import y\n")
    (tmp_path / "stray.py").write_text("")
    layers = _layers("```layers\nfloor: low.py\ntop: high.py\n```")
    mods = {n: tmp_path / f"{n}.py" for n in ("low", "high", "stray")}
    bad = _upward(mods, layers)
    assert bad == ["low:1 (floor) imports high (top)", "stray is on no layer"]
