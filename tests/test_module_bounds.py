"""Module boundaries of the package: no import cycles, no borrowed private names.

The import graph is read from the source (every ``from .x import y``, those
inside functions included: a lazy import is still a dependency, and a cycle
through one only waits for the call that closes it). A module is a unit: a
top-level module (``stream``) or a whole subpackage (``backends``), whose
modules share their internals among themselves.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import aces_fast as af

PACKAGE = Path(af.__file__).parent

# The package root is left out of the graph: importing any module imports it
# first, so an edge to it (``from . import __version__`` inside a function) is
# not a dependency that orders anything.
ROOT = ""

# Imports of another unit's underscore name that are allowed, with the reason.
# (importer, unit, name): none today; a new entry says why it cannot be public.
PRIVATE_ALLOWED: set[tuple[str, str, str]] = set()


def _modules(package: Path) -> dict[str, Path]:
    """Dotted name (relative to the package) -> source file."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _unit(module: str) -> str:
    return module.split(".")[0]


def import_graph(package: Path) -> tuple[dict[str, set[str]], list[tuple[str, str, str]]]:
    """``(unit -> units it imports, [(importer, unit, name)] of private names)`` of
    the relative imports in ``package``'s source."""
    modules = _modules(package)
    graph: dict[str, set[str]] = {_unit(m): set() for m in modules if m != ROOT}
    private = []
    for module, path in modules.items():
        here = module.split(".") if module else []
        if path.name != "__init__.py":
            here = here[:-1]  # the package the module is in
        tree = ast.parse(path.read_text(), filename=str(path))
        bound: dict[str, str] = {}  # local name -> another unit's module it names
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.level == 0:
                continue  # absolute imports name other distributions (numpy, pyarrow)
            base = here[: len(here) - (node.level - 1)]
            target = ".".join(base + (node.module.split(".") if node.module else []))
            for alias in node.names:
                sub = f"{target}.{alias.name}".strip(".")
                dst = sub if sub in modules else target  # `from . import stream`: a module
                if _unit(dst) == _unit(module):
                    continue
                if dst != ROOT and module != ROOT:
                    graph[_unit(module)].add(_unit(dst))
                if dst == sub:
                    bound[alias.asname or alias.name] = dst
                elif _private(alias.name):
                    private.append((module, _unit(dst), alias.name))
        # `from . import ray as engine` and then `engine._run(...)`: the same borrowing
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in bound
                and _private(node.attr)
            ):
                private.append((module, _unit(bound[node.value.id]), node.attr))
    return graph, private


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one unit (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_package_has_no_import_cycles():
    graph, _ = import_graph(PACKAGE)
    # the edges the data model and the engine interface exist for
    assert graph["parquet"] == {"_problems", "_types"}  # the model and shared type names
    assert "_problems" in graph["datasets"] and "parquet" in graph["datasets"]
    assert "stream" not in graph["ray"] and "ray" in graph["stream"]
    assert "_engine" in graph["ray"] and "_engine" in graph["stream"]
    assert not graph["_engine"] & {"stream", "ray", "datasets"}
    assert cycles(graph) == []


def test_no_module_imports_another_ones_private_names():
    _, private = import_graph(PACKAGE)
    assert [p for p in private if p not in PRIVATE_ALLOWED] == []
    # an allowance nothing uses any more is removed with the import it allowed
    assert set(private) >= PRIVATE_ALLOWED


def test_the_checks_see_cycles_lazy_imports_and_private_names(tmp_path):
    """The two checks above on a package that breaks both rules: a cycle closed
    by an import inside a function, and a borrowed underscore name."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import f\n")
    (pkg / "a.py").write_text("from .b import g, _hidden\n\ndef f():\n    return g()\n")
    (pkg / "b.py").write_text("def g():\n    from .c import h\n    return h()\n_hidden = 1\n")
    (pkg / "c.py").write_text("def h():\n    from . import a as mod\n    return mod._f\n")
    (pkg / "sub" / "__init__.py").write_text("from ._x import _shared\n")
    (pkg / "sub" / "_x.py").write_text("from ..a import f\n_shared = 2\n")
    graph, private = import_graph(pkg)
    assert graph == {"a": {"b"}, "b": {"c"}, "c": {"a"}, "sub": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    # within a subpackage its modules share private names; across units not
    assert private == [("a", "b", "_hidden"), ("c", "a", "_f")]


_HAS_RAY = importlib.util.find_spec("ray") is not None
_HAS_ARROW = importlib.util.find_spec("pyarrow") is not None


@pytest.mark.parametrize(
    "module",
    [
        "_problems",
        "datasets",
        "_engine",
        "stream",
        pytest.param("parquet", marks=pytest.mark.skipif(not _HAS_ARROW, reason="no pyarrow")),
        pytest.param("_input", marks=pytest.mark.skipif(not _HAS_ARROW, reason="no pyarrow")),
        pytest.param(
            "ray", marks=pytest.mark.skipif(not (_HAS_RAY and _HAS_ARROW), reason="no ray")
        ),
    ],
)
def test_each_module_imports_first_in_a_fresh_interpreter(module):
    """Imported first, before anything else of the package could have loaded
    what it needs, each module still imports (a cycle would leave a name
    undefined half-way)."""
    code = f"import aces_fast.{module} as m; print(sorted(getattr(m, '__all__', ())))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith("[")


def test_the_data_model_keeps_its_public_home():
    from aces_fast import _problems, datasets

    assert datasets.Problem is _problems.Problem and datasets.Dataset is _problems.Dataset
    assert {"Problem", "Dataset"} <= set(datasets.__all__)


def test_engines_are_found_by_name():
    from aces_fast import _engine, stream

    local = stream.get_engine("local")
    assert isinstance(local, stream.LocalEngine) and local.name == "local"
    with pytest.raises(ValueError, match="engine must be one of 'local', 'ray'; got 'spark'"):
        stream.get_engine("spark")
    # the shared pieces keep their names in aces_fast.stream
    assert stream.rerank_table is _engine.rerank_table
    assert stream.results_schema is _engine.results_schema
    assert stream.DEFAULT_BATCH_SIZE == _engine.DEFAULT_BATCH_SIZE


@pytest.mark.skipif(not (_HAS_RAY and _HAS_ARROW), reason="ray is not installed")
def test_the_ray_engine_is_found_by_name():
    from aces_fast import ray as ray_engine
    from aces_fast import stream

    engine = stream.get_engine("ray")
    assert isinstance(engine, ray_engine.RayEngine) and engine.name == "ray"
