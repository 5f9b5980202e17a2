"""The architecture, asserted from the code: which layer imports which, no
import circle, no module too long to read, few modules outside a layer, and
docs/development.md's module map matching the tree.

The layers (docs/development.md): ``cli/`` and ``run/`` on top; the core
below them (``store/``, ``judge/``, ``model/``, ``site/``, ``spack/``,
``parsers/``, ``stats/``, ``jobside/`` and the few top-level modules)
imports neither, and no ReFrame; the model of a run (``model/``) sits below
both the judgement and the store, which read it;
``spack/`` (all of Spack) builds on the top-level modules and the
benchmarks' declarations (``parsers/registry.py``) only; the check
library (``checklib/``) builds on the core with ReFrame; the checks
(``reframe_checks/``) build on the check library and never import the
command layer.
"""

import ast
import re
import subprocess
import sys
from pathlib import Path

from sandbox import code_strings

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "hpc_health"
#: Longest module: one that needs more is doing more than one job.
MAX_LINES = 450
#: Modules directly in hpc_health/, outside every layer (``__init__`` and
#: ``__main__`` count).
MAX_TOP_LEVEL = 6
#: The command layer, which nothing below it may import (``python -m
#: hpc_health`` is its entry point).
COMMAND = ("hpc_health.cli", "hpc_health.run", "hpc_health.__main__")
#: Layers that are the check library or the checks, allowed ReFrame.
WITH_REFRAME = ("hpc_health.checklib",)
#: All of Spack: core, below the site layer; the site, the check library,
#: the run and the commands call it.
SPACK = ("hpc_health.spack",)


def _module_name(path):
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules():
    """{dotted name: path} of every module of the package."""
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_only(node):
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(path, known, typing=True):
    """Every module *path* imports, at the top or inside a function (a lazy
    import is a dependency all the same), and what it imports for type
    annotations only (``if TYPE_CHECKING:``: an arrow all the same) unless
    *typing* is false.  ``from P import name`` is an import of P.name when
    that is a module, else of P."""
    tree = ast.parse(path.read_text(), str(path))
    package = _module_name(path) if path.name == "__init__.py" else \
        _module_name(path).rpartition(".")[0]
    found = set()

    def visit(node):
        if not typing and isinstance(node, ast.If) and _type_checking_only(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in known else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _graph(typing=True):
    """{module: what it imports}; with *typing* false, not counting what it
    imports for type annotations only (which runs no code: no circle)."""
    known = _modules()
    return {name: imports(path, known, typing) for name, path in known.items()}


def _within(name, prefixes):
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_the_core_imports_neither_the_command_layer_nor_reframe():
    bad = []
    for name, deps in _graph().items():
        if _within(name, COMMAND):
            continue
        for dep in deps:
            if _within(dep, COMMAND):
                bad.append(f"{name} imports {dep} (the command layer)")
            if _within(dep, ("reframe",)) and not _within(name, WITH_REFRAME):
                bad.append(f"{name} imports {dep} (ReFrame: only checklib/ may)")
    assert not bad, "\n".join(bad)


def test_the_judge_and_the_store_import_no_command_layer_and_no_reframe():
    # The rule docs/development.md states, asserted on its own: the core
    # that judges and keeps results runs without ReFrame installed.
    graph = _graph()
    core = [n for n in graph if _within(n, ("hpc_health.judge", "hpc_health.store"))]
    assert core
    for name in core:
        assert not [d for d in graph[name] if _within(d, COMMAND + ("reframe",))], name


def test_the_checks_never_import_the_command_layer():
    known = _modules()
    checks = sorted((REPO / "reframe_checks").glob("*.py"))
    assert checks
    for path in checks:
        deps = imports(path, known)
        assert not [d for d in deps if _within(d, COMMAND)], path.name


#: The layers, lowest first: a module may import its own layer and those
#: below it, never one above (issue 45: every arrow points down).  The
#: top-level modules are the ground floor; ``__main__`` is the entry point.
LAYERS = (
    ("hpc_health.errors", "hpc_health.paths", "hpc_health.processes", "hpc_health.units",
     "hpc_health"),
    ("hpc_health.parsers", "hpc_health.stats"),
    ("hpc_health.site", "hpc_health.jobside", "hpc_health.spack"),
    ("hpc_health.model",),
    ("hpc_health.judge",),
    ("hpc_health.store",),
    ("hpc_health.checklib", "hpc_health.render"),
    ("hpc_health.run",),
    ("hpc_health.cli",),
    ("hpc_health.__main__",),
)


def _rank(name):
    best = None
    for rank, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (name == p or name.startswith(p + ".")) and p != "hpc_health":
                if best is None or len(p) > best[1]:
                    best = (rank, len(p))
    if best is None and name.startswith("hpc_health"):
        return 0
    return None if best is None else best[0]


def test_every_import_points_down_or_sideways():
    up = []
    for name, deps in _graph().items():
        here = _rank(name)
        for dep in deps:
            there = _rank(dep)
            if here is not None and there is not None and there > here:
                up.append(f"{name} imports {dep}")
    assert not up, "\n".join(up)


def test_a_type_only_import_is_an_arrow_but_no_circle():
    # judge/drift.py reads the references' type for its annotations only:
    # the layer test sees it, the circle test does not.
    known = _modules()
    drift = PACKAGE / "judge" / "drift.py"
    assert "hpc_health.model.references" in imports(drift, known)
    assert "hpc_health.model.references" not in imports(drift, known, typing=False)


def test_the_judge_reads_the_store_only_through_the_model():
    # Issue 45: judge/ needs nothing from store/, not even for its types;
    # what it reads from the index is model.runs.FigureIndex.
    for name, deps in _graph().items():
        if _within(name, ("hpc_health.judge", "hpc_health.model", "hpc_health.stats")):
            assert not [d for d in deps if _within(d, ("hpc_health.store",))], name


#: What Spack reads below it beside the top-level modules: the benchmarks'
#: declarations, for the archives a kit holds of each (issue 45).
SPACK_READS = ("hpc_health.parsers.registry",)


def test_spack_builds_only_on_the_top_level_modules_and_the_declarations():
    # Kit, environments, locks, index, pre-build: one package below the
    # site layer, importing neither ReFrame nor any other layer but the
    # benchmarks' declarations.
    graph = _graph()
    top = {_module_name(p) for p in PACKAGE.glob("*.py")}
    spack = [n for n in graph if _within(n, SPACK)]
    assert spack
    for name in spack:
        assert not [d for d in graph[name] if _within(d, ("hpc_health", "reframe"))
                    and not _within(d, SPACK + SPACK_READS) and d not in top], name


#: Words and pieces of the Spack command lines the suite runs: only
#: hpc_health/spack/commands.py holds them.
_SPACK_WORDS = {"concretize", "--fail-fast"}
_SPACK_PIECES = ("spack -e", "location -i", "concretizer:", "-m hpc_health.spack")


def test_one_module_names_every_spack_command():
    named = {}
    for name, path in _modules().items():
        found = [s for _, s in code_strings(path)
                 if s in _SPACK_WORDS or any(p in s for p in _SPACK_PIECES)]
        if found:
            named[name] = found
    assert set(named) == {"hpc_health.spack.commands"}, named


def test_the_renderers_import_neither_the_commands_nor_the_run():
    for name, deps in _graph().items():
        if _within(name, ("hpc_health.render",)):
            assert not [d for d in deps if _within(d, COMMAND)], name


def _cycles(graph):
    """Strongly connected components of more than one module (or a module
    importing itself): Tarjan's algorithm."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def connect(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_no_import_circle():
    assert _cycles(_graph(typing=False)) == []


def test_the_circle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_is_too_long():
    long = {name: n for name, path in _modules().items()
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines: {long}"


def test_few_modules_outside_a_layer():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL, top


def _untyped_public(path):
    """Public functions and methods (not nested ones) of *path* with a
    parameter or the return not annotated."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    scopes = [(tree, "")] + [(c, c.name + ".") for c in tree.body if isinstance(c, ast.ClassDef)]
    for scope, prefix in scopes:
        for f in scope.body:
            if not isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) or f.name.startswith("_"):
                continue
            a = f.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]
            if prefix:
                params = [p for p in params if p.arg not in ("self", "cls")]
            if f.returns is None or any(p.annotation is None for p in params):
                found.append(f"{prefix}{f.name}")
    return found


#: The layers that judge and keep results, with the model and the statistics
#: they stand on (all of it judge/ before issue 45 moved them below).
TYPED = ("hpc_health.stats", "hpc_health.model", "hpc_health.judge", "hpc_health.store")


def test_the_judge_and_the_store_type_every_public_function():
    # mypy (ci/test.sh, configured in pyproject.toml) checks them.
    untyped = {}
    for name, path in _modules().items():
        if _within(name, TYPED) and _untyped_public(path):
            untyped[name] = _untyped_public(path)
    assert not untyped


def test_the_spack_command_lines_and_the_fixtures_side_are_typed():
    # mypy checks all of spack/; these two are what the other layers call.
    modules = _modules()
    for name in ("hpc_health.spack.commands", "hpc_health.spack.fixtures"):
        assert _untyped_public(modules[name]) == [], name


# --- docs/development.md's map of the tree ------------------------------------------

def _map_entries():
    """What the module map in docs/development.md names under
    ``hpc_health/``: one or more names at the start of a line (a folder ends
    in /), two spaces of indent per level, then a description after two
    spaces or more."""
    text = (REPO / "docs" / "development.md").read_text()
    block = re.search(r"^```\n(hpc_health/ .*?)^```", text, re.S | re.M)
    assert block, "docs/development.md has no module map (a ``` block starting hpc_health/)"
    entries, folders = set(), []
    for line in block.group(1).splitlines()[1:]:
        indent = len(line) - len(line.lstrip(" "))
        if indent == 0:
            break                   # the package's part of the map ends
        names = re.split(r" {2,}", line.strip(), maxsplit=1)[0].split()
        if indent % 2 or not names or not all(n.endswith((".py", "/")) for n in names):
            continue                # a description's second line
        folders = folders[:indent // 2 - 1]
        for name in names:
            entries.add("".join(folders) + name)
        if names[-1].endswith("/"):
            folders.append(names[-1])
    return entries


def _tree_entries():
    """The package's folders (ending in /) and modules, but ``__init__.py``."""
    found = set()
    for p in PACKAGE.rglob("*.py"):
        rel = p.relative_to(PACKAGE)
        for parent in list(rel.parents)[:-1]:
            found.add(f"{parent.as_posix()}/")
        if p.name != "__init__.py":
            found.add(rel.as_posix())
    return found


def test_the_module_map_in_the_docs_is_the_tree():
    documented, tree = _map_entries(), _tree_entries()
    assert sorted(documented - tree) == [], "in docs/development.md's map, not in the tree"
    assert sorted(tree - documented) == [], "in the tree, not in docs/development.md's map"


def test_the_command_starts_without_numpy_scipy_or_reframe():
    # Every command imports what it judges with when it runs: --version,
    # --help and the commands that need no statistics start in the
    # interpreter's time (docs/development.md, store scale).
    code = ("import sys, hpc_health.cli.main; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'scipy', 'reframe'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_readme_is_read_in_five_minutes():
    """README.md at most 150 lines: today's figures once, the history in
    docs/development.md (issue 45)."""
    assert len((REPO / "README.md").read_text().splitlines()) <= 150


#: Longest function in the layers that run, judge and keep (issue 45).
MAX_FUNCTION_LINES = 60


def test_no_function_of_run_judge_or_store_is_too_long():
    long = []
    for name, path in _modules().items():
        if not _within(name, ("hpc_health.run",) + TYPED):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{name}.{node.name}: {lines} lines")
    assert not long, long
