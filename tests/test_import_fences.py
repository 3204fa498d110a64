"""The import fences of docs/ARCHITECTURE (IR < schemas < passes; frontends stop at the IR),
checked on the source: every import statement of every nhwc_onnx module, including the lazy
ones inside functions, is resolved and compared with what its layer may use."""
from __future__ import annotations

import ast
from pathlib import Path

import nhwc_onnx

PACKAGE_DIR = Path(nhwc_onnx.__file__).parent

# The leaf layer every layer may use: errors, one conversion's options (which every layer
# reads), our ONNX file classes and files/ (bounded reads, safe writes, wire formats, signals).
LEAVES = {"errors", "files", "onnxfile", "options"}
# Layer (first component under nhwc_onnx) -> the other layers it may import.
ALLOWED = {
    "ir": LEAVES,
    "schemas": LEAVES | {"ir"},
    "passes": LEAVES | {"ir", "schemas"},
    # Frontends emit core ops and may ask the core-op schemas (shape/dtype inference); the
    # passes that turn core ops into dialect ops are not theirs to call.
    "frontends": LEAVES | {"ir", "schemas"},
    "serialize": LEAVES | {"ir", "schemas"},
    "runtime": LEAVES | {"ir", "schemas", "serialize"},
    # what converts is read from the passes' op table and the frontends' declarations
    "support": LEAVES | {"ir", "schemas", "passes", "frameworks", "serialize"},
    # a finished dialect model (check, run, lower) needs no frontend and no pass
    "dialect": LEAVES | {"ir", "schemas", "serialize", "runtime"},
    # the source's runtime against ours: it never converts (convert's stages sit above it)
    "verification": LEAVES | {"ir", "schemas", "serialize", "runtime", "frameworks",
                              "frontends"},
    # pipelines of segments run, check and verify below conversion, which builds them
    "pipeline": LEAVES | {"ir", "schemas", "serialize", "runtime", "frameworks", "frontends",
                          "verification"},
    "conversion": LEAVES | {"ir", "schemas", "passes", "serialize", "runtime", "frameworks",
                            "frontends", "verification", "pipeline"},
    "files": {"errors", "onnxfile"},
    "onnxfile": set(),
    "errors": set(),
    "options": {"errors", "frameworks"},  # the framework names, to check the option
    # The frontends table names each frontend package by its module path (it imports them by
    # name, on use): it imports none of them, so every layer's table reads stay acyclic.
    "frameworks": {"errors"},
}
# only the command line prints and picks exit codes; console is the script's entry point, which
# sets start-up signal handlers before importing it
CLI_LAYERS = {"cli", "console"}
HEAVY = {"tensorflow", "onnxruntime", "cv2"}  # imported inside the functions that need them
CLI_ONLY = {"click"}  # the command line's parser: the library never needs it


def module_name(path: Path, package_dir: Path = PACKAGE_DIR) -> str:
    parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, package_dir: Path = PACKAGE_DIR) -> list[tuple[str, int, bool]]:
    """(absolute module imported, line, at module level) for every import in the file."""
    module = module_name(path, package_dir)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    top_level = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # "from .. import passes" imports a module too: name it.
            targets = [target]
            if node.module is None:
                targets = [f"{target}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [(t, node.lineno, id(node) in top_level) for t in targets]
    return found


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) < 2 or parts[0] != "nhwc_onnx" or parts[1].startswith("__"):
        return ""  # outside the package, or the package's own attributes (``__version__``)
    return parts[1]


def violations(package_dir: Path = PACKAGE_DIR) -> list[str]:
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        source = module_name(path, package_dir)
        src_layer = layer_of(source)
        for target, line, top in imports_of(path, package_dir):
            where = f"{path.relative_to(package_dir.parent)}:{line}: {source} imports {target}"
            if target.split(".")[0] in HEAVY and top:
                found.append(f"{where} at module level (heavy frameworks load lazily)")
            if target.split(".")[0] in CLI_ONLY and src_layer not in CLI_LAYERS:
                found.append(f"{where} (only the command line uses {target.split('.')[0]})")
            dst_layer = layer_of(target)
            if not target.startswith("nhwc_onnx") or dst_layer in ("", src_layer):
                continue
            if src_layer in ALLOWED and dst_layer not in ALLOWED[src_layer]:
                found.append(f"{where} ({src_layer} may import only "
                             f"{', '.join(sorted(ALLOWED[src_layer]))})")
            elif dst_layer in CLI_LAYERS and src_layer not in CLI_LAYERS:
                found.append(f"{where} (only the CLI imports the CLI)")
    return found


def test_no_import_crosses_a_fence():
    found = violations()
    assert not found, "import fence violations:\n" + "\n".join(found)


def test_lazy_and_relative_imports_are_seen(tmp_path):
    """The walker resolves relative imports and finds imports inside functions."""
    pkg = tmp_path / "nhwc_onnx"
    (pkg / "ir").mkdir(parents=True)
    (pkg / "cli").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ir" / "__init__.py").write_text("")
    (pkg / "ir" / "core.py").write_text(
        "def f():\n    from ..passes import rewrite\n    import tensorflow\n")
    (pkg / "ir" / "top.py").write_text("import cv2\nfrom .. import frontends\n")
    (pkg / "batch.py").write_text("def f():\n    from .cli.common import echo\n")
    (pkg / "api.py").write_text("import click\n")
    (pkg / "cli" / "__init__.py").write_text("import click\nfrom .. import api\n")
    found = violations(pkg)
    assert len(found) == 5, found
    assert "nhwc_onnx.api imports click (only the command line uses click)" in found[0]
    assert "nhwc_onnx.batch imports nhwc_onnx.cli.common (only the CLI imports the CLI)" \
        in found[1]
    assert "nhwc_onnx.ir.core imports nhwc_onnx.passes" in found[2]
    assert "nhwc_onnx.ir.top imports cv2 at module level" in found[3]
    assert "nhwc_onnx.ir.top imports nhwc_onnx.frontends" in found[4]
