"""No import circles in nhwc_onnx: the graph of which module imports which, read from every
import statement of every module (those inside functions and under TYPE_CHECKING too, as
tests/test_import_fences.py reads them), has no cycle.

A circle, even one a lazy import keeps from failing at start-up, means two modules cannot be
understood, tested or moved apart (``api -> verification -> pairing -> api`` once, and the
type-only ``frontends/onnx/context <-> importer``). Modules found by name at run time (the
frontends table, ``nhwc_onnx.frameworks``, and the package's lazy attributes) are lookups in a
table, not import statements, and are no edges here.
"""
from __future__ import annotations

from pathlib import Path

from tests.test_import_fences import PACKAGE_DIR, imports_of, module_name


def import_graph(package_dir: Path = PACKAGE_DIR) -> dict[str, set[str]]:
    """Module -> the package modules its import statements name. ``from pkg import name``
    names the module ``pkg.name`` when there is one, else ``pkg`` itself."""
    paths = {module_name(p, package_dir): p for p in sorted(package_dir.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        edges = set()
        for target, _line, _top in imports_of(path, package_dir):
            while target and target not in paths:
                target = target.rpartition(".")[0]
            if target and target != module:
                edges.add(target)
        graph[module] = edges
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in sorted(graph.get(module, ())):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


def test_the_package_has_no_import_circle():
    graph = import_graph()
    assert len(graph) > 140  # every module was read
    found = circles(graph)
    assert found == [], "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_a_circle_through_a_lazy_or_type_only_import_is_found(tmp_path):
    pkg = tmp_path / "nhwc_onnx"
    (pkg / "verification").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "api.py").write_text("from .verification import verify\n")
    (pkg / "verification" / "__init__.py").write_text("from .pairing import check\n")
    (pkg / "verification" / "pairing.py").write_text(
        "def check():\n    from ..api import load_source\n")
    (pkg / "context.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .importer import I\n")
    (pkg / "importer.py").write_text("from . import context\n")
    (pkg / "leaf.py").write_text("import os\n")
    assert circles(import_graph(pkg)) == [
        ["nhwc_onnx.api", "nhwc_onnx.verification", "nhwc_onnx.verification.pairing"],
        ["nhwc_onnx.context", "nhwc_onnx.importer"],
    ]
