"""Layers that point one way: the import graph of the four packages, parsed from the source.

Rules (docs/architecture.md):

(a) layer order ``theory < numerics < llm_validation < delaybound``: a module never imports a
    module of a higher layer, not even inside a function;
(b) no import cycle between modules (the strongly connected components of the module graph are
    all single modules);
(c) no module over :data:`MAX_CODE_LINES` code lines (docstrings, comments and blank lines
    not counted), except :data:`LINE_LIMIT_EXEMPT`;
(d) inside ``llm_validation/claims/`` the rooms point one way (:data:`CLAIMS_ROOMS`): a module
    imports only from its own room or lower ones, and a room's ``__init__`` imports nothing
    (it is a map).

The graph holds EVERY import statement of every module (``ast``): top-level, inside functions
and classes, under ``if TYPE_CHECKING:``, absolute and relative. ``import a.b`` and
``from a import b`` where ``a.b`` is a module are edges to ``a.b``; ``from a import name`` where
``name`` is not a module is an edge to ``a`` (a package means its ``__init__``). An
``importlib.import_module`` call is an import too: a module that calls it depends on every
module of the four packages that one of its string constants names exactly, as a dotted name
(that is how ``delaybound.cli`` loads its command modules; a bare package name such as the
program name ``"delaybound"`` is not taken for an import). Imports of other packages (stdlib,
torch, ...) are not part of the graph. Violations are reported as edges
``src -> dst (file:line, where)``.
"""

from __future__ import annotations

import ast
import re
from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Mapping

import pytest

#: The layers, lowest first: a module may import only from its own layer or lower ones.
LAYERS = ("theory", "numerics", "llm_validation", "delaybound")
#: Largest module, in code lines (house style: one concept per file, ~450 code lines;
#: docstrings, comments and blank lines do not count, so documenting a module never pushes it
#: over).
MAX_CODE_LINES = 450
#: The rooms of ``llm_validation.claims``, lowest first; its top-level modules (the phases and
#: the front door) sit above them all.
CLAIMS_ROOMS = ("record", "plan", "decide", "sizes", "catalogue", "report")
#: Modules allowed to be longer: the one file of configuration dataclasses.
LINE_LIMIT_EXEMPT = frozenset({"llm_validation/config.py"})
#: Repository root (this file is tests/test_architecture.py).
ROOT = Path(__file__).resolve().parent.parent
#: Fewest modules each layer must have for the scan to count as having seen it (a guard
#: against a scan that silently finds nothing and so passes).
MIN_MODULES_PER_LAYER = 5


@dataclass(frozen=True, order=True)
class Edge:
    """One import: module ``src`` imports module ``dst``."""

    src: str
    dst: str
    path: str
    """File of ``src``, relative to the scanned root."""
    line: int
    where: str
    """``top``, ``function``, ``class``, ``TYPE_CHECKING`` or ``importlib``."""

    def __str__(self) -> str:
        return f"{self.src} -> {self.dst}  ({self.path}:{self.line}, {self.where})"


def discover(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under the given package directories
    (``pkg/__init__.py`` is the module ``pkg``)."""
    modules: dict[str, Path] = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _resolve(name: str, modules: Mapping[str, Path]) -> str | None:
    """The module ``name`` denotes: itself, else its longest prefix that is a module; None when
    it is outside the scanned packages."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


class _ImportCollector(ast.NodeVisitor):
    """Collects (target name, line, where) for every import in one module's syntax tree."""

    def __init__(self, module: str, is_package: bool, modules: Mapping[str, Path]):
        self.module, self.modules = module, modules
        self.package = module if is_package else module.rpartition(".")[0]
        self.found: list[tuple[str, int, str]] = []
        self.context: list[str] = []
        self.strings: list[tuple[str, int]] = []
        self.uses_importlib = False

    def _where(self) -> str:
        return self.context[-1] if self.context else "top"

    def _scoped(self, node: ast.AST, label: str) -> None:
        self.context.append(label)
        self.generic_visit(node)
        self.context.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._scoped(node, "function")

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._scoped(node, "class")

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
        if name == "TYPE_CHECKING":
            self.context.append("TYPE_CHECKING")
            for child in node.body:
                self.visit(child)
            self.context.pop()
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.found.append((alias.name, node.lineno, self._where()))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base_parts = self.package.split(".") if self.package else []
            if node.level - 1 > len(base_parts):
                raise ValueError(f"{self.module}:{node.lineno}: relative import beyond the top")
            base_parts = base_parts[: len(base_parts) - (node.level - 1)]
            base = ".".join(base_parts + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            target = sub if alias.name != "*" and sub in self.modules else base
            self.found.append((target, node.lineno, self._where()))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr == "import_module":
            self.uses_importlib = True
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "import_module":
            self.uses_importlib = True

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            self.strings.append((node.value, node.lineno))


def module_edges(module: str, path: Path, modules: Mapping[str, Path], root: Path) -> list[Edge]:
    """Every import of one module inside the scanned packages, as edges (self-imports dropped)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    collector = _ImportCollector(module, path.name == "__init__.py", modules)
    collector.visit(tree)
    rel = path.relative_to(root).as_posix()
    found = list(collector.found)
    if collector.uses_importlib:
        found += [(s, line, "importlib") for s, line in collector.strings
                  if "." in s and s in modules]
    edges = set()
    for name, line, where in found:
        dst = _resolve(name, modules)
        if dst is not None and dst != module:
            edges.add(Edge(module, dst, rel, line, where))
    return sorted(edges)


def import_graph(root: Path, packages: Iterable[str]) -> tuple[dict[str, Path], list[Edge]]:
    """The modules of ``packages`` under ``root`` and every import edge between them."""
    modules = discover(root, packages)
    edges = [e for m, p in modules.items() for e in module_edges(m, p, modules, root)]
    return modules, edges


def strongly_connected_components(nodes: Iterable[str],
                                  edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Tarjan's algorithm (iterative): the SCCs of the directed graph, each sorted, in sorted
    order."""
    adj: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in edges:
        adj.setdefault(a, []).append(b)
        adj.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    for start in sorted(adj):
        if start in index:
            continue
        work = [(start, iter(sorted(adj[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(adj[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                out.append(sorted(comp))
    return sorted(out)


def cycles(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The SCCs with more than one module (self-loops are not module-to-module cycles)."""
    return [c for c in strongly_connected_components(nodes, edges) if len(c) > 1]


def shortest_cycle(component: list[str], edges: Iterable[tuple[str, str]]) -> list[str]:
    """A shortest cycle through the component's first module (BFS inside the component)."""
    inside = set(component)
    adj: dict[str, list[str]] = {}
    for a, b in edges:
        if a in inside and b in inside:
            adj.setdefault(a, []).append(b)
    start = component[0]
    parent: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(adj.get(node, [])):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return list(reversed(path)) + [start]
            if nxt not in parent:
                parent[nxt] = node
                queue.append(nxt)
    raise AssertionError(f"no cycle through {start} inside {component}")


def upward_edges(edges: Iterable[Edge], layers: tuple[str, ...] = LAYERS) -> list[Edge]:
    """Edges from a lower layer into a higher one."""
    rank = {name: i for i, name in enumerate(layers)}
    return sorted(e for e in edges if rank[e.src.split(".")[0]] < rank[e.dst.split(".")[0]])


def _layer(module: str) -> str:
    return module.split(".")[0]


@lru_cache(maxsize=1)
def _repo_graph() -> tuple[dict[str, Path], list[Edge]]:
    return import_graph(ROOT, LAYERS)


def _cycle_report(component: list[str], edges: list[Edge]) -> str:
    inside = set(component)
    pairs = [(e.src, e.dst) for e in edges]
    lines = [f"cycle among {len(component)} modules: {', '.join(component)}",
             "  e.g. " + " -> ".join(shortest_cycle(component, pairs)),
             "  edges inside it:"]
    lines += [f"    {e}" for e in edges if e.src in inside and e.dst in inside]
    return "\n".join(lines)


# ------------------------------------------------------------------------------- the repository
def test_every_layer_is_scanned():
    modules, edges = _repo_graph()
    for layer in LAYERS:
        own = [m for m in modules if _layer(m) == layer]
        assert len(own) >= MIN_MODULES_PER_LAYER, f"{layer}: only {own} found under {ROOT}"
        assert any(_layer(e.src) == layer for e in edges), f"{layer}: no internal imports parsed"


@pytest.mark.parametrize("layer", LAYERS)
def test_no_upward_imports(layer):
    _, edges = _repo_graph()
    bad = [e for e in upward_edges(edges) if _layer(e.src) == layer]
    assert not bad, (f"{len(bad)} upward import(s) from {layer} (layer order "
                     f"{' < '.join(LAYERS)}):\n" + "\n".join(f"  {e}" for e in bad))


@pytest.mark.parametrize("layer", LAYERS)
def test_no_import_cycles(layer):
    modules, edges = _repo_graph()
    found = [c for c in cycles(modules, [(e.src, e.dst) for e in edges])
             if any(_layer(m) == layer for m in c)]
    assert not found, (f"{len(found)} import cycle(s) involving {layer}:\n"
                       + "\n".join(_cycle_report(c, edges) for c in found))


def code_lines(source: str) -> int:
    """Lines that hold code: every line of the module but blank ones, comment-only ones and
    those of docstrings (a string expression that is a module's, class's or function's first
    statement)."""
    tree = ast.parse(source)
    doc: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            # a docstring, and the attribute docstrings after assignments (house style)
            for i, stmt in enumerate(body):
                if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
                        and isinstance(stmt.value.value, str) \
                        and (i == 0 or isinstance(body[i - 1], (ast.Assign, ast.AnnAssign))):
                    doc.update(range(stmt.lineno, stmt.end_lineno + 1))
    n = 0
    for i, line in enumerate(source.splitlines(), start=1):
        s = line.strip()
        if s and not s.startswith("#") and i not in doc:
            n += 1
    return n


@pytest.mark.parametrize("layer", LAYERS)
def test_modules_are_at_most_450_code_lines(layer):
    modules, _ = _repo_graph()
    long = []
    for name, path in sorted(modules.items()):
        rel = path.relative_to(ROOT).as_posix()
        if _layer(name) != layer or rel in LINE_LIMIT_EXEMPT:
            continue
        n = code_lines(path.read_text(encoding="utf-8"))
        if n > MAX_CODE_LINES:
            long.append(f"  {rel}: {n} code lines")
    assert not long, (f"modules of {layer} over {MAX_CODE_LINES} code lines:\n"
                      + "\n".join(long))


def _room_rank(module: str) -> int | None:
    """Rank of a ``llm_validation.claims`` module's room (top-level modules: above every
    room); None outside the package."""
    parts = module.split(".")
    if parts[:2] != ["llm_validation", "claims"] or len(parts) < 3:
        return None
    return CLAIMS_ROOMS.index(parts[2]) if parts[2] in CLAIMS_ROOMS else len(CLAIMS_ROOMS)


def test_claims_rooms_point_one_way():
    modules, edges = _repo_graph()
    rooms = {m.split(".")[2] for m in modules if m.startswith("llm_validation.claims.")
             and modules[m].name == "__init__.py"}
    assert rooms == set(CLAIMS_ROOMS), f"rooms on disk {sorted(rooms)} != {CLAIMS_ROOMS}"
    bad = [e for e in edges if _room_rank(e.src) is not None and _room_rank(e.dst) is not None
           and _room_rank(e.src) < _room_rank(e.dst)]
    maps = [e for e in edges if _room_rank(e.src) is not None
            and modules[e.src].name == "__init__.py"]
    assert not bad, "upward imports between the rooms of claims/ (" + " < ".join(
        CLAIMS_ROOMS) + " < top):\n" + "\n".join(f"  {e}" for e in bad)
    assert not maps, "a room's __init__ is a map, it imports nothing:\n" + "\n".join(
        f"  {e}" for e in maps)


def test_every_claims_module_is_named_in_its_map():
    """The package map (claims/__init__.py) and each room's map name every module."""
    modules, _ = _repo_graph()
    top = (ROOT / "llm_validation" / "claims" / "__init__.py").read_text(encoding="utf-8")
    missing = []
    for m, path in modules.items():
        parts = m.split(".")
        if parts[:2] != ["llm_validation", "claims"] or len(parts) < 3 \
                or path.name == "__init__.py":
            continue
        if f"``{parts[-1]}``" not in top and f".{parts[-1]}`" not in top:
            missing.append(f"  {m} (claims/__init__.py)")
        if len(parts) == 4:
            room = (path.parent / "__init__.py").read_text(encoding="utf-8")
            if m not in room:
                missing.append(f"  {m} ({parts[2]}/__init__.py)")
    assert not missing, "modules missing from the maps:\n" + "\n".join(missing)


#: Files at ``llm_validation/``'s top level, at most: the package's map, the configuration, the
#: dispatcher, the run directory, the recorder and the machine; everything else lives in a room.
MAX_TOP_LEVEL_FILES = 8


def test_llm_validation_top_level_is_a_front_hall():
    """``llm_validation/`` keeps at most :data:`MAX_TOP_LEVEL_FILES` modules outside its rooms."""
    top = sorted(p.name for p in (ROOT / "llm_validation").glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_FILES, f"llm_validation/ top level holds {len(top)}: {top}"


def test_code_lines_leave_out_docstrings_comments_and_blanks():
    src = ('"""Module doc\n\nmore."""\n\n# a comment\nX = 1\n"""X\'s doc."""\n\n'
           'def f():\n    """f\'s doc."""\n    return X  # trailing\n')
    assert code_lines(src) == 3


# -------------------------------------------------------------- self-tests of the machinery
def test_cycle_finder_on_a_synthetic_graph():
    nodes = ["a", "b", "c", "d", "e", "f", "g", "h"]
    edges = [("a", "b"), ("b", "c"), ("c", "a"),  # a 3-cycle
             ("c", "d"), ("d", "e"), ("e", "d"),  # a 2-cycle reachable from it
             ("f", "g"), ("g", "g"),  # a DAG edge and a self-loop: no cycle between modules
             ("h", "a")]
    assert cycles(nodes, edges) == [["a", "b", "c"], ["d", "e"]]
    assert strongly_connected_components(nodes, edges) == [
        ["a", "b", "c"], ["d", "e"], ["f"], ["g"], ["h"]]
    assert shortest_cycle(["a", "b", "c"], edges) == ["a", "b", "c", "a"]
    assert shortest_cycle(["d", "e"], edges) == ["d", "e", "d"]
    dag = [("a", "b"), ("b", "c"), ("a", "c"), ("c", "d")]
    assert cycles(nodes, dag) == []
    # A long chain closed at the end is one component (the iterative walk has no recursion limit).
    chain = [(f"n{i:04d}", f"n{i + 1:04d}") for i in range(2999)] + [("n2999", "n0000")]
    [big] = cycles([f"n{i:04d}" for i in range(3000)], chain)
    assert len(big) == 3000


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_import_parser_on_a_synthetic_package(tmp_path):
    _write(tmp_path, "low/__init__.py", "from low.core import THING\n")
    _write(tmp_path, "low/core.py", "import os\nTHING = 1\n")
    _write(tmp_path, "low/sub/__init__.py", "from . import leaf\n")
    _write(tmp_path, "low/sub/leaf.py", (
        "from typing import TYPE_CHECKING\n"
        "from ..core import THING\n"            # relative, two levels
        "from .. import core\n"                 # from-package-import-submodule
        "if TYPE_CHECKING:\n"
        "    from high.app import App\n"        # type-only, still an (upward) import
        "def f():\n"
        "    import high.app\n"                 # function-level
        "    from low import sub\n"             # a package: its __init__
        "    from low.sub import leaf\n"        # itself: dropped
        "    return THING\n"))
    _write(tmp_path, "high/__init__.py", "")
    _write(tmp_path, "high/app.py", (
        "import importlib\n"
        "from low.sub.leaf import f as g\n"
        "NAMES = ('low.core', 'not.a.module', 'high', 'low.sub')\n"
        "def load():\n"
        "    return [importlib.import_module(n) for n in NAMES]\n"
        "class App:\n"
        "    from low import THING\n"))         # a name, not a module: the package
    modules, edges = import_graph(tmp_path, ("low", "high"))
    assert set(modules) == {"low", "low.core", "low.sub", "low.sub.leaf", "high", "high.app"}
    got = {(e.src, e.dst, e.line, e.where) for e in edges}
    assert got == {
        ("low", "low.core", 1, "top"),
        ("low.sub", "low.sub.leaf", 1, "top"),
        ("low.sub.leaf", "low.core", 2, "top"),
        ("low.sub.leaf", "low.core", 3, "top"),
        ("low.sub.leaf", "high.app", 5, "TYPE_CHECKING"),
        ("low.sub.leaf", "high.app", 7, "function"),
        ("low.sub.leaf", "low.sub", 8, "function"),
        ("high.app", "low.sub.leaf", 2, "top"),
        ("high.app", "low.core", 3, "importlib"),
        ("high.app", "low.sub", 3, "importlib"),
        ("high.app", "low", 7, "class"),
    }
    assert [(e.src, e.dst, e.where) for e in upward_edges(edges, ("low", "high"))] == [
        ("low.sub.leaf", "high.app", "TYPE_CHECKING"), ("low.sub.leaf", "high.app", "function")]
    assert cycles(modules, [(e.src, e.dst) for e in edges]) == [
        ["high.app", "low.sub", "low.sub.leaf"]]


# ------------------------------------------------------------------ the module table of the docs
_ROW = re.compile(r"^\| `([^`]+\.py)` \|", re.M)


def _table_rows() -> dict[str, set[str]]:
    """Package -> the module paths (relative to it) of docs/architecture.md's module table."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    out: dict[str, set[str]] = {}
    for section in re.split(r"^### ", text, flags=re.M)[1:]:
        pkg = section.split("/", 1)[0].strip()
        if pkg in LAYERS:
            out.setdefault(pkg, set()).update(_ROW.findall(section))
    return out


def test_every_module_has_one_row_in_the_architecture_table():
    """docs/architecture.md's module table cannot drift: every module of the four packages has
    a row, and every row names a module that exists."""
    modules, _ = _repo_graph()
    rows = _table_rows()
    have = {(_layer(m), p.relative_to(ROOT / _layer(m)).as_posix()) for m, p in modules.items()}
    listed = {(pkg, rel) for pkg, rels in rows.items() for rel in rels}
    missing = sorted(f"{pkg}/{rel}" for pkg, rel in have - listed
                     if not (rel.endswith("__init__.py") and rel != "__init__.py"))
    stale = sorted(f"{pkg}/{rel}" for pkg, rel in listed - have)
    assert not missing, "modules without a row in docs/architecture.md:\n  " + "\n  ".join(missing)
    assert not stale, "rows of docs/architecture.md naming no module:\n  " + "\n  ".join(stale)
