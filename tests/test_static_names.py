"""Static checks for names that only fail when a rarely used path runs.

A rename once left ``verification/bisect.py`` calling ``loader.read_graph_def``, a function that
no longer existed: every test passed and ``verify --bisect`` on a .pb ended in an internal
error. Two checks catch that class of bug without running the path:

- ruff with the project's rule set (pyproject.toml ``[tool.ruff.lint]``), whose pyflakes rules
  find undefined names and unused or shadowed imports;
- every ``alias.attr`` where ``alias`` is an imported nhwc_onnx module must name an attribute
  that module really has (ruff cannot see these: the name ``alias`` itself is defined).
"""
from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "nhwc_onnx"
SCANNED = ("nhwc_onnx", "tests", "benchmarks", "examples")


def test_ruff_finds_nothing_under_the_configured_rules():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise",
         *SCANNED],
        check=False, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def _module_name(path: Path) -> str | None:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[0] != PACKAGE:
        return None  # tests and scripts are not importable as package modules
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _absolute(node: ast.ImportFrom, module_name: str | None, is_package: bool) -> str | None:
    if node.level == 0:
        return node.module
    if module_name is None:
        return None
    base = module_name.split(".")
    if not is_package:
        base.pop()
    if node.level > 1:
        base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _import_package_module(name: str) -> ModuleType | None:
    if name != PACKAGE and not name.startswith(PACKAGE + "."):
        return None
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError:
        return None  # ``from pkg import function``: not a module


def _module_aliases(tree: ast.AST, module_name: str | None, is_package: bool):
    """Names bound (anywhere in the file) to one nhwc_onnx module, and only ever to it."""
    bound: dict[str, set] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    bound.setdefault(a.asname, set()).add(a.name)
                else:  # ``import a.b`` binds ``a``
                    top = a.name.split(".")[0]
                    bound.setdefault(top, set()).add(top)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module_name, is_package)
            for a in node.names:
                if a.name != "*" and base:
                    bound.setdefault(a.asname or a.name, set()).add(f"{base}.{a.name}")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.setdefault(node.id, set()).add(None)  # rebound: not a module alias
        elif isinstance(node, ast.arg):
            bound.setdefault(node.arg, set()).add(None)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.setdefault(node.name, set()).add(None)
    aliases = {}
    for name, targets in bound.items():
        if len(targets) != 1 or None in targets:
            continue
        module = _import_package_module(next(iter(targets)))
        if module is not None:
            aliases[name] = module
    return aliases


def _resolve(expr: ast.expr, aliases: dict[str, ModuleType]) -> ModuleType | None:
    if isinstance(expr, ast.Name):
        return aliases.get(expr.id)
    if isinstance(expr, ast.Attribute):
        parent = _resolve(expr.value, aliases)
        if parent is not None:
            value = getattr(parent, expr.attr, None)
            if isinstance(value, ModuleType):
                return value
            return _import_package_module(f"{parent.__name__}.{expr.attr}")
    return None


def unresolved_module_attributes(source: str, path: Path, counter: list | None = None) -> list[str]:
    """``file:line: module.attr`` for each attribute an imported nhwc_onnx module lacks;
    ``counter`` (a one-item list) counts the accesses checked."""
    module_name = _module_name(path) if path.is_relative_to(REPO) else None
    tree = ast.parse(source, str(path))
    aliases = _module_aliases(tree, module_name, path.name == "__init__.py")
    problems = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        module = _resolve(node.value, aliases)
        if module is None:
            continue
        if counter is not None:
            counter[0] += 1
        if hasattr(module, node.attr):
            continue
        if _import_package_module(f"{module.__name__}.{node.attr}") is not None:
            continue  # a submodule not yet imported by its package
        problems.append(f"{path.relative_to(REPO)}:{node.lineno}: "
                        f"{module.__name__}.{node.attr} does not exist")
    return problems


def _python_files():
    for top in SCANNED:
        for path in sorted((REPO / top).rglob("*.py")):
            # hidden folders are local tools (benchmarks/.venv-anchors holds TensorFlow's tree)
            if not any(part.startswith(".") for part in path.relative_to(REPO).parts):
                yield path


def test_every_attribute_of_an_imported_package_module_exists():
    problems = []
    files = 0
    accesses = [0]
    for path in _python_files():
        if path.name.endswith("_pb2.py"):
            continue
        problems += unresolved_module_attributes(path.read_text(encoding="utf-8"), path,
                                                 accesses)
        files += 1
    assert files > 100 and accesses[0] > 200  # the walk really resolved the package's uses
    assert not problems, "\n".join(problems)


def test_every_package_module_imports():
    names = [_module_name(p) for p in sorted((REPO / PACKAGE).rglob("*.py"))]
    for name in names:
        importlib.import_module(name)  # a module that cannot import hides its attribute errors
    assert len(names) > 50


@pytest.mark.parametrize("code, expected", [
    # a bug once in verification/bisect.py
    (("def names(source):\n"
      "    from ..frontends.tensorflow import loader\n"
      "    return loader.read_graph_def(source)\n"),
     ["nhwc_onnx.frontends.tensorflow.loader.read_graph_def"]),
    ("import nhwc_onnx.serialize as ser\nser.lod('m.onnx')\n", ["nhwc_onnx.serialize.lod"]),
    ("from nhwc_onnx.frontends import tensorflow\ntensorflow.reference.run_tf()\n",
     ["nhwc_onnx.frontends.tensorflow.reference.run_tf"]),
    ("from ..frontends.tensorflow import reader\nreader.read_graphdef('m.pb')\n", []),
    ("from . import bisect\nbisect = None\nbisect.anything\n", []),  # rebound: not checked
])
def test_the_attribute_check_sees_a_missing_function(code, expected):
    where = REPO / PACKAGE / "verification" / "bisect.py"
    found = unresolved_module_attributes(code, where)
    assert [p.split(": ")[1].removesuffix(" does not exist") for p in found] == expected
