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


# --- finding kinds: declared once (telemetry/correlate/kinds.yaml), reported by one detector -----

KINDS_FILE = ROOT / "telemetry/correlate/kinds.yaml"
DETECTORS_DIR = ROOT / "telemetry/correlate/detectors"
# besides its declaration and its detector's module, where telemetry/ may name a finding kind (the
# simulator aside: it injects what the kinds detect), each with why
NAMED_ELSEWHERE = {
    ("telemetry/correlate/detectors/nccl.py", "ecmp_imbalance"): (
        "low_flow_entropy names the ECMP collisions its too few QPs explain"
    ),
    ("telemetry/correlate/report_logs.py", "nccl_gdr_disabled"): (
        "a log event (log_event.kind) that shares the finding kind's name"
    ),
}
# thresholds.yaml's sections are checked against the kinds that list them by its loader
NOT_SCANNED = (
    "telemetry/sim/",
    "telemetry/correlate/kinds.yaml",
    "telemetry/correlate/thresholds.yaml",
)


def _declared_kinds() -> dict[str, str]:
    """kinds.yaml: kind -> its category (read as data, nothing imported)."""
    import yaml

    return {k: str(v["category"]) for k, v in yaml.safe_load(KINDS_FILE.read_text()).items()}


def _detected_kinds() -> dict[str, str]:
    """Every kind a `@detector(...)` in detectors/ reports (its name and `also`) -> its module."""
    out: dict[str, str] = {}
    for p in sorted(DETECTORS_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if not isinstance(node, ast.FunctionDef):
                continue
            for d in node.decorator_list:
                if isinstance(d, ast.Call) and getattr(d.func, "id", "") == "detector":
                    names = [d.args[0]] + [
                        e for kw in d.keywords if kw.arg == "also" for e in ast.walk(kw.value)
                    ]
                    for n in names:
                        if isinstance(n, ast.Constant) and isinstance(n.value, str):
                            out[n.value] = p.stem
    return out


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _named(path: Path, kinds: set[str]) -> Iterator[tuple[str, int]]:
    """(kind, line) for every string in `path`'s code that names a kind: the whole string, or a
    quoted SQL literal inside one (comments and docstrings explain, they do not name). A YAML
    file: every key or value that is a kind."""
    pattern = re.compile(r"(?:^|')(\w+)(?:'|$)")
    if path.suffix == ".yaml":
        import yaml

        stack = [yaml.safe_load(path.read_text())]
        while stack:
            v = stack.pop()
            if isinstance(v, dict):
                stack += [*v.keys(), *v.values()]
            elif isinstance(v, list):
                stack += v
            elif isinstance(v, str) and v in kinds:
                yield v, 0
        return
    tree = ast.parse(path.read_text(), str(path))
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            for m in pattern.finditer(node.value):
                if m.group(1) in kinds:
                    yield m.group(1), node.lineno


def test_every_declared_kind_has_a_detector_in_its_category_and_back() -> None:
    declared, detected = _declared_kinds(), _detected_kinds()
    assert len(declared) >= 30  # the file is read, not skipped
    assert sorted(set(declared) - set(detected)) == [], "declared in kinds.yaml, no detector"
    assert sorted(set(detected) - set(declared)) == [], "a detector's kind kinds.yaml lacks"
    moved = {k: (declared[k], detected[k]) for k in declared if declared[k] != detected[k]}
    assert not moved, f"kind: (declared category, detector module) differ: {moved}"


def test_each_finding_kind_is_named_only_by_its_declaration_and_its_detector() -> None:
    kinds = _declared_kinds()
    bad = []
    for p in sorted((ROOT / "telemetry").rglob("*")):
        rel = p.relative_to(ROOT).as_posix()
        if p.suffix not in (".py", ".yaml") or rel.startswith(NOT_SCANNED):
            continue
        for kind, line in _named(p, set(kinds)):
            if rel == f"telemetry/correlate/detectors/{kinds[kind]}.py":
                continue
            if (rel, kind) not in NAMED_ELSEWHERE:
                bad.append(f"{rel}:{line} names {kind}")
    assert not bad, (
        "a finding kind is declared in telemetry/correlate/kinds.yaml and named by its detector; "
        "read what you need from the declaration (telemetry.correlate.kinds):\n" + "\n".join(bad)
    )


def test_the_kind_name_check_sees_sql_literals_not_docstrings(tmp_path: Path) -> None:
    p = tmp_path / "m.py"
    p.write_text(
        '"""pfc_storm in a docstring explains."""\n'
        "# link_flap in a comment explains\n"
        'A = "gpu_xid"\n'
        "SQL = f\"SELECT 1 WHERE kind = 'ecn_hotspot' AND x = {A}\"\n"
        'B = "gpu_xid_total, not a kind"\n'
    )
    kinds = {"pfc_storm", "link_flap", "gpu_xid", "ecn_hotspot"}
    assert sorted(_named(p, kinds)) == [("ecn_hotspot", 4), ("gpu_xid", 3)]


def test_findings_built_by_hand_carry_their_modules_category() -> None:
    """A detector that builds `Finding(kind, category, ...)` itself (not `ctx.finding`) writes
    its module's category, which kinds.yaml declares for the kind."""
    declared = _declared_kinds()
    bad = []
    for p in sorted(DETECTORS_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Finding"):
                continue
            kind, category = (
                a.value if isinstance(a, ast.Constant) else None for a in node.args[:2]
            )
            if category != p.stem or declared.get(str(kind)) != p.stem:
                bad.append(f"{p.name}:{node.lineno} Finding({kind!r}, {category!r}, ...)")
    assert not bad, "\n".join(bad)


def test_an_exception_is_counted_by_problems_not_by_its_class_name() -> None:
    """`stats.error(type(e).__name__)` makes a label value per exception class: an unbounded set.
    Problems.exception() counts it under `exception` and names the class in the log line."""
    pattern = re.compile(r"\.error\(\s*type\(\w+\)\.__name__")
    bad = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in sorted(MODULES.values())
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not bad, "count an exception with Problems.exception(e):\n" + "\n".join(bad)


# Time has one owner (issue 48): the versioned-fact predicates (as_of, valid_during), UTC and
# the epoch are telemetry/times.py's; a hand-written copy elsewhere drifts from it
# (dashboards/ write Grafana's SQL, rendered byte for byte: not checked here)
TIME_OWNER = "telemetry/times.py"
TIME_USERS = ("telemetry/", "exporters/")
FROZEN = ("telemetry/store/migrations/",)  # released migrations keep their own SQL
_VERSIONED_BY_HAND = re.compile(
    r"valid_to\s+IS\s+(NOT\s+)?NULL|\bvalid_to\s*[<>]|[<>]=?\s*[\w.]*\bvalid_to\b"
    r"|\w+\.tzinfo\s+else\s+\w+\.replace\(tzinfo=",
    re.IGNORECASE,
)


def _time_by_hand(path: Path) -> Iterator[tuple[str, int]]:
    """What `path` writes by hand that times.py owns: a versioned-fact predicate, a naive-to-UTC
    conversion, or a definition of `_utc`/`as_utc`/`EPOCH`."""
    text = path.read_text()
    for m in _VERSIONED_BY_HAND.finditer(text):
        yield m[0], text.count("\n", 0, m.start()) + 1
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.FunctionDef) and node.name in ("_utc", "as_utc"):
            yield f"def {node.name}", node.lineno
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(getattr(t, "id", "") == "EPOCH" for t in targets):
                yield "EPOCH =", node.lineno


def test_time_is_owned_by_times_py() -> None:
    bad = []
    for p in MODULES.values():
        rel = p.relative_to(ROOT).as_posix()
        if rel == TIME_OWNER or rel.startswith(FROZEN) or not rel.startswith(TIME_USERS):
            continue
        bad += [f"{rel}:{line} {what!r}" for what, line in _time_by_hand(p)]
    assert not bad, "use telemetry/times.py (as_of, valid_during, as_utc, EPOCH):\n" + "\n".join(
        bad
    )


def test_the_time_check_sees_predicates_conversions_and_copies(tmp_path: Path) -> None:
    p = tmp_path / "m.py"
    p.write_text(
        'A = "valid_from <= {t} AND (valid_to IS NULL OR valid_to > {t})"\n'
        'B = "h.valid_from < x AND (h.valid_to IS NULL OR x < h.valid_to)"\n'
        "def _utc(t):\n"
        "    return t if t.tzinfo else t.replace(tzinfo=UTC)\n"
        "EPOCH = 0\n"
        'C = "valid_from, valid_to FROM pod"  # a column list is no predicate\n'
    )
    got = sorted((line, what) for what, line in _time_by_hand(p))
    assert [line for line, _ in got] == [1, 1, 2, 2, 3, 4, 5]
