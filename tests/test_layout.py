"""The package's layout is part of its design (DESIGN.md): the parts follow the data path and
each imports only the parts below it, counting imports inside functions too.  These tests read
the source (no imports run), so a new cycle or an oversized module fails here with its name."""
from __future__ import annotations

import ast
import os
import re
from itertools import pairwise

import pytest

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kafka_tiered_source")
PACKAGE = "kafka_tiered_source"
MAX_LINES = 600

# Bottom to top.  A part may import parts of its own layer or below; within a layer the graph
# must still be acyclic.  "(package)" is kafka_tiered_source/__init__.py, the public facade.
LAYERS = [
    {"errors", "model", "ids", "redact", "version", "_native", "dataclass", "logs"},   # vocabulary: imports nothing of ours
    {"options"},                                        # one option table, frozen configs
    {"protocol", "records"},                            # Kafka wire messages; v2 batches -> Arrow
    {"storage"},                                        # fetchers, layouts, index files
    {"metrics", "cost", "quota", "telemetry"},          # accounting
    {"planning"},                                       # where each offset lives, read tasks
    {"values"},                                         # typed keys and values (schemas -> Arrow)
    {"executor"},                                       # one read task
    {"spark", "scanner"},                               # the data source; the read without Spark
    {"testing"},                                        # the embedded broker
    {"cli", "(package)"},                               # entry points
]
RANK = {part: i for i, layer in enumerate(LAYERS) for part in layer}


def _modules(root: str = ROOT):
    for dirpath, _, files in os.walk(root):
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, os.path.dirname(root))[:-3].replace(os.sep, ".")
                yield path, rel[: -len(".__init__")] if rel.endswith(".__init__") else rel, f == "__init__.py"


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "(package)"


def _imports(path: str, module: str, is_package: bool):
    """Every module of ours that ``module`` imports, at any depth of its code."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    here = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == PACKAGE:
                # "from kafka_tiered_source import planning": the names are parts
                for alias in node.names:
                    yield f"{PACKAGE}.{alias.name}", node.lineno
            elif target.startswith(PACKAGE + "."):
                yield target, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    yield alias.name, node.lineno


def _graph():
    edges: dict[str, dict[str, str]] = {}
    for path, module, is_package in _modules():
        src = _part(module)
        for target, line in _imports(path, module, is_package):
            dst = _part(target)
            if dst != src:
                edges.setdefault(src, {}).setdefault(dst, f"{os.path.relpath(path, ROOT)}:{line}")
    return edges


def test_every_part_has_a_layer():
    parts = {_part(m) for _, m, _ in _modules()}
    assert parts - set(RANK) == set(), "a new part: give it a place in LAYERS (and DESIGN.md)"


def test_parts_import_only_parts_below_them():
    wrong = [f"{src} imports {dst} ({where})"
             for src, dsts in _graph().items() for dst, where in dsts.items()
             if RANK.get(dst, -1) > RANK.get(src, -1)]
    assert wrong == []


def test_no_import_cycle_between_parts():
    edges = _graph()
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node, path):
        state[node] = 1
        for nxt in edges.get(node, {}):
            if state.get(nxt) == 1:
                cycle.extend(path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt])
                return True
            if state.get(nxt) is None and visit(nxt, path + [nxt]):
                return True
        state[node] = 2
        return False

    for start in sorted(edges):
        if state.get(start) is None and visit(start, [start]):
            break
    where = [edges[a][b] for a, b in pairwise(cycle)]
    assert cycle == [], f"cycle {' -> '.join(cycle)} at {where}"


def _module_graph() -> dict[str, dict[str, str]]:
    """module -> {module it imports: where}; ``from a import b`` is an import of ``a.b`` when
    that is a module, else of ``a`` (whose ``__init__`` runs)."""
    found = list(_modules())
    modules = {m for _, m, _ in found}
    edges: dict[str, dict[str, str]] = {m: {} for m in modules}
    for path, module, is_package in found:
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        here = module.split(".") if is_package else module.split(".")[:-1]
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = (".".join(here[: len(here) - (node.level - 1)] + ([node.module] if node.module else []))
                        if node.level else node.module or "")
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for t in targets:
                if t in modules and t != module:
                    edges[module].setdefault(t, f"{os.path.relpath(path, ROOT)}:{node.lineno}")
    return edges


def _loops(edges: dict[str, dict[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, {}):
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
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_two_modules_import_each_other():
    """Not directly, not through a loop, lazy imports and the package root included."""
    edges = _module_graph()
    loops = [" <-> ".join(comp) + " (" + ", ".join(edges[a][b] for a in comp for b in comp if b in edges[a]) + ")"
             for comp in _loops(edges)]
    assert loops == []


def test_the_loop_check_sees_a_loop_through_a_lazy_import():
    edges = {"p.a": {"p.b": "a.py:1"}, "p.b": {"p.c": "b.py:1"}, "p.c": {"p.a": "c.py:9"}, "p.d": {"p.a": "d.py:1"}}
    assert _loops(edges) == [["p.a", "p.b", "p.c"]]
    assert _loops({"p.a": {"p.b": "a.py:1"}, "p.b": {}}) == []


# DESIGN.md's diagram names these groups of parts as one node
DIAGRAM_NODES = {"errors": "vocabulary", "model": "vocabulary", "ids": "vocabulary", "redact": "vocabulary",
                 "version": "vocabulary", "_native": "vocabulary", "dataclass": "vocabulary", "logs": "vocabulary",
                 "metrics": "accounting", "cost": "accounting",
                 "quota": "accounting", "telemetry": "accounting", "(package)": "package"}


def _reduced(edges: dict[str, set[str]]) -> set[tuple[str, str]]:
    """The edges no other path implies (the transitive reduction of an acyclic graph)."""
    def reach(start: str, without: tuple[str, str]) -> set[str]:
        seen: set[str] = set()
        todo = [n for n in edges.get(start, ()) if (start, n) != without]
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo += edges.get(n, ())
        return seen
    return {(a, b) for a, bs in edges.items() for b in bs if b not in reach(a, (a, b))}


def test_design_diagram_is_the_import_graph():
    """DESIGN.md's mermaid diagram has exactly the edges of the parts' import graph that no
    other path implies: drawn from the code, so it cannot drift from it."""
    edges: dict[str, set[str]] = {}
    for src, dsts in _graph().items():
        for dst in dsts:
            a, b = DIAGRAM_NODES.get(src, src), DIAGRAM_NODES.get(dst, dst)
            if a != b:
                edges.setdefault(a, set()).add(b)
    with open(os.path.join(os.path.dirname(ROOT), "DESIGN.md"), encoding="utf-8") as f:
        design = f.read()
    block = re.search(r"```mermaid\n(.*?)```", design, re.S)
    assert block, "DESIGN.md has no mermaid diagram"
    drawn = set(re.findall(r"^\s*([\w]+)\s*-->\s*([\w]+)\s*$", block.group(1), re.M))
    assert drawn == _reduced(edges), (
        f"missing from the diagram: {sorted(_reduced(edges) - drawn)}; not in the code: {sorted(drawn - _reduced(edges))}")


@pytest.mark.parametrize("path", sorted(p for p, _, _ in _modules()))
def test_module_size(path):
    with open(path, encoding="utf-8") as f:
        lines = sum(1 for _ in f)
    assert lines <= MAX_LINES, f"{os.path.relpath(path, ROOT)} has {lines} lines; split it by concern"


def test_the_checker_sees_function_level_imports(tmp_path):
    """The graph counts imports inside functions (the cycles the layout issue found hid there)."""
    path = tmp_path / "probe.py"
    path.write_text("def f():\n    from ..spark.datasource import x\n")
    assert [t for t, _ in _imports(str(path), "kafka_tiered_source.planning.probe", False)] == [
        "kafka_tiered_source.spark.datasource"]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _names_defined(tree: ast.AST) -> set[str]:
    """Every name a module binds anywhere: functions, classes, variables, attributes it assigns
    (``self._x = ...``), parameters, imports, keyword arguments (``set_defaults(_run=...)``) and
    strings that could be ``__slots__`` entries."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Store):
            out.add(n.id if isinstance(n, ast.Name) else n.attr)
        elif isinstance(n, (ast.arg, ast.keyword)) and n.arg:
            out.add(n.arg)
        elif isinstance(n, ast.alias):
            out.add(n.asname or n.name.split(".")[0])
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.isidentifier():
            out.add(n.value)
    return out


def _private_reach_ins(root: str = ROOT) -> list[str]:
    """Where a module takes another module's private name: ``from .x import _y`` (a private
    *module* may be imported: it belongs to its package, as ``records._python`` does), or
    ``obj._y`` where ``_y`` is bound nowhere in the module reading it but in another module of
    the package (a private attribute reached from outside the module that owns it)."""
    trees = {module: (path, is_package, ast.parse(open(path, encoding="utf-8").read(), path))
             for path, module, is_package in _modules(root)}
    defined = {module: _names_defined(tree) for module, (_, _, tree) in trees.items()}
    owners: dict[str, set[str]] = {}
    for module, names in defined.items():
        for name in names:
            owners.setdefault(name, set()).add(module)
    package_dir = os.path.dirname(root)

    def is_module(dotted: str) -> bool:
        base = os.path.join(package_dir, *dotted.split("."))
        return dotted in trees or os.path.isdir(base) or os.path.exists(base + ".pyi") or bool(
            [f for f in os.listdir(os.path.dirname(base)) if f.startswith(os.path.basename(base) + ".")
             and f.endswith((".so", ".pyd"))] if os.path.isdir(os.path.dirname(base)) else [])

    found = []
    for module, (path, is_package, tree) in trees.items():
        here = module.split(".") if is_package else module.split(".")[:-1]
        where = os.path.relpath(path, package_dir)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    target = ".".join(here[: len(here) - (node.level - 1)] + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target.split(".")[0] != PACKAGE:
                    continue
                found += [f"{where}:{node.lineno}: from {target} import {a.name}" for a in node.names
                          if _private(a.name) and not is_module(f"{target}.{a.name}")]
            elif isinstance(node, ast.Attribute) and _private(node.attr):
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                    continue
                others = owners.get(node.attr, set()) - {module}
                if node.attr not in defined[module] and others:
                    found.append(f"{where}:{node.lineno}: .{node.attr} (private to {', '.join(sorted(others))})")
    return sorted(found)


def test_no_module_takes_another_modules_private_names():
    """What one module uses of another is public there (the issue's case: a planner calling a
    listing's private ``_map``); a private name is free to change with its own module."""
    assert _private_reach_ins() == []


def test_the_private_name_check_sees_imports_and_attributes(tmp_path):
    pkg = tmp_path / PACKAGE
    (pkg / "records").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "records" / "__init__.py").write_text("")
    (pkg / "records" / "_python.py").write_text("class _Cursor:\n    pass\n")
    (pkg / "records" / "owner.py").write_text("class Listing:\n    def _map(self):\n        return []\n")
    (pkg / "records" / "user.py").write_text(
        "from . import _python\nfrom ._python import _Cursor\n\n"
        "def plan(listing):\n    return listing._map(), _python, _Cursor\n")
    assert _private_reach_ins(str(pkg)) == [
        "kafka_tiered_source/records/user.py:2: from kafka_tiered_source.records._python import _Cursor",
        "kafka_tiered_source/records/user.py:5: ._map (private to kafka_tiered_source.records.owner)"]


def test_scan_runs_without_spark():
    """``scan()`` (the scanner part) sits beside ``spark``, not on it: nothing in it imports the Spark part or pyspark."""
    assert "spark" not in _graph().get("scanner", {})
    scan_dir = os.path.join(ROOT, "scanner")
    for f in sorted(os.listdir(scan_dir)):
        if f.endswith(".py"):
            tree = ast.parse(open(os.path.join(scan_dir, f), encoding="utf-8").read())
            names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
            names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
            assert not [n for n in names if n.split(".")[0] == "pyspark"], f


def _printed_by_a_new_process(code: str) -> str:
    """What ``code`` prints, run by a new interpreter at the checkout's top (its imports its own)."""
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=os.path.dirname(ROOT)).stdout.strip()


def test_planning_and_the_cli_import_no_arrow_spark_or_cloud_sdk():
    """A new process's first plan, and every ``kafka-tiered`` command's parser, pay only for
    what planning uses (issue 36): no pyarrow or numpy (the decoder's), no pyspark, no boto3,
    no fsspec (a ``file:///`` store is read without it), no ssl for a plain connection."""
    code = ("import sys, kafka_tiered_source, kafka_tiered_source.cli as cli\n"
            "from kafka_tiered_source import planning\n"
            "from kafka_tiered_source.planning import checked, estimate, online\n"
            "from kafka_tiered_source.storage import fsspec_fetcher, aiven_layout\n"
            "from kafka_tiered_source.protocol.client import BrokerClient\n"
            "cli.build_parser()\n"
            "heavy = ('pyarrow', 'numpy', 'pyspark', 'boto3', 'botocore', 'fsspec', 'ssl', 'pandas')\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n")
    out = _printed_by_a_new_process(code)
    assert out == "[]", out


def test_a_named_command_imports_only_its_own_modules():
    """``kafka-tiered estimate`` builds only its own parser (issue 36's cold start): not the
    embedded broker's modules (crc32c, and through it importlib.metadata, email, zipfile), not
    ``export``'s, and planning's error-only helpers (difflib) wait for an error."""
    code = ("import contextlib, io, sys\n"
            "from kafka_tiered_source.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            "    try:\n"
            "        main(['estimate', '--help'])\n"
            "    except SystemExit:\n"
            "        pass\n"
            "assert '--bootstrap-servers' in out.getvalue(), out.getvalue()\n"
            "from kafka_tiered_source.planning import checked, estimate, online\n"
            "unwanted = ('kafka_tiered_source.testing', 'kafka_tiered_source.cli.broker', 'kafka_tiered_source.cli.export',\n"
            "            'crc32c', 'importlib.metadata', 'email', 'zipfile', 'difflib')\n"
            "print(sorted(m for m in sys.modules if m in unwanted))\n")
    out = _printed_by_a_new_process(code)
    assert out == "[]", out
