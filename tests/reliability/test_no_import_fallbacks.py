"""A failing import must never be swallowed.

`passes/pipeline.py` used to catch ImportError and skip every dialect pass and the final
validation, so a broken install saved a core-op model with exit 0; `docs.py` and `cli.py` had
the same fallback. The static test keeps the pattern out of the package; the process test
breaks the import for real.
"""
from __future__ import annotations

import ast
from pathlib import Path

from rel_limits import REPO, run_limited
from rel_models import write_source

from nhwc_onnx.errors import EXIT_INVALID

PACKAGE = REPO / "nhwc_onnx"
IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}


def _caught_names(handler: ast.ExceptHandler) -> set[str]:
    if handler.type is None:
        return set()
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return {t.id if isinstance(t, ast.Name) else getattr(t, "attr", "") for t in types}


def import_error_handlers_that_do_not_raise(root: Path) -> list[str]:
    """'file:line' of every `except ImportError` (or ModuleNotFoundError) that can end without
    raising: the legitimate handlers turn a missing optional runtime into MissingDependencyError
    (exit 2); a handler that may return, continue or fall through is a silent fallback."""
    found = []
    escapes = (ast.Return, ast.Continue, ast.Break)
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ExceptHandler) and _caught_names(node) & IMPORT_ERRORS:
                always_raises = isinstance(node.body[-1], ast.Raise) and not any(
                    isinstance(n, escapes) for n in ast.walk(node))
                if not always_raises:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return found


def test_no_import_error_is_swallowed_in_the_package():
    assert import_error_handlers_that_do_not_raise(PACKAGE) == []


def test_the_static_check_sees_a_swallowed_import(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(
        "try:\n    import x\nexcept (OSError, ImportError):\n    x = None\n"
        "try:\n    import y\nexcept ImportError as exc:\n    raise RuntimeError('y') from exc\n"
        "def f():\n    try:\n        import z\n    except ModuleNotFoundError as exc:\n"
        "        if exc.name == 'z':\n            return None\n        raise\n")
    assert import_error_handlers_that_do_not_raise(tmp_path / "pkg") == ["pkg/m.py:3",
                                                                         "pkg/m.py:12"]


BROKEN_INSTALL = """
import sys
sys.modules["nhwc_onnx.passes.to_dialect.pipeline"] = None  # the module cannot be imported
from nhwc_onnx.cli import main
sys.argv = ["nhwc-onnx", "convert", *sys.argv[1:]]
main()
"""


def test_convert_with_a_broken_dialect_pipeline_import_fails_and_writes_nothing(tmp_path):
    source, _ = write_source(tmp_path / "src", "onnx")
    output = tmp_path / "out" / "m.onnx"
    proc = run_limited(["-c", BROKEN_INSTALL, str(source), "-o", str(output)], timeout=120)
    assert proc.returncode == EXIT_INVALID, (proc.stdout, proc.stderr)
    assert "internal error" in proc.stderr and "to_dialect.pipeline" in proc.stderr
    assert not output.parent.exists()
