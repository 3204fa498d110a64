"""The command line imports some modules before it dispatches a command
(nhwc_onnx.cli.IMPORTED_BEFORE_DISPATCH): only modules that command imports in any case, so the
early import moves work to a shallower stack and adds none, and never for a help text."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from nhwc_onnx.cli import IMPORTED_BEFORE_DISPATCH, command_name

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TF_MODEL = EXAMPLES / "tf" / "small_cnn.pb"
CAFFE_MODEL = EXAMPLES / "caffe" / "tiny_net.prototxt"
CAFFE_WEIGHTS = EXAMPLES / "caffe" / "tiny_net.caffemodel"
ONNX_MODEL = EXAMPLES / "onnx" / "small_nchw.onnx"
DIALECT_MODEL = EXAMPLES / "tiny_convnet.onnx"

# Dispatches directly, skipping the early imports, and reports which of the listed modules
# the command itself loaded.
_DISPATCH_ONLY = textwrap.dedent("""
    import json, sys
    from nhwc_onnx.cli import IMPORTED_BEFORE_DISPATCH, run_command
    args = sys.argv[1:]
    try:
        code = run_command(args)
    except SystemExit as exc:
        code = exc.code
    listed = IMPORTED_BEFORE_DISPATCH[args[0]]
    print(json.dumps({"code": code, "missing": [m for m in listed if m not in sys.modules]}),
          file=sys.stderr)
""")


def _run_script(script: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script, *map(str, args)],
                          capture_output=True, text=True, timeout=300, check=False)


def _facts(proc: subprocess.CompletedProcess) -> dict:
    """The JSON line each script prints last on stderr."""
    return json.loads(proc.stderr.strip().splitlines()[-1])


def _dispatch_only(*args) -> dict:
    return _facts(_run_script(_DISPATCH_ONLY, *args))


def _cases(tmp: Path) -> list[tuple]:
    converted = tmp / "small_nchw_dialect.onnx"
    return [
        ("check", DIALECT_MODEL),
        ("convert", TF_MODEL, "-o", tmp / "tf.onnx"),
        ("convert", CAFFE_MODEL, "--weights", CAFFE_WEIGHTS, "-o", tmp / "caffe.onnx"),
        ("convert", ONNX_MODEL, "-o", converted),
        ("info", TF_MODEL),
        ("info", CAFFE_MODEL, "--weights", CAFFE_WEIGHTS),
        ("info", ONNX_MODEL),
        ("info", DIALECT_MODEL),
        ("ops",),
        ("ops", "Conv"),
        ("lower", DIALECT_MODEL, "-o", tmp / "lowered.onnx"),
        ("run", DIALECT_MODEL, "--random", "-o", tmp / "outputs"),
        ("verify", ONNX_MODEL, converted),  # after the convert above wrote it
    ]


def test_every_command_imports_its_listed_modules_anyway(tmp_path):
    cases = _cases(tmp_path)
    outcomes = [(case[0], _dispatch_only(*case)) for case in cases]
    assert {name for name, _ in outcomes} == set(IMPORTED_BEFORE_DISPATCH)
    assert [(name, o["code"]) for name, o in outcomes] == [(case[0], 0) for case in cases]
    assert [(name, o["missing"]) for name, o in outcomes] == [(case[0], []) for case in cases]


# Records the stack at the moment numpy starts loading, then runs the whole command line.
_WHERE_NUMPY_LOADS = textwrap.dedent("""
    import json, sys, traceback
    stacks = []

    class Watch:
        def find_spec(self, name, path=None, target=None):
            if name == "numpy" and not stacks:
                stacks.append([f.name for f in traceback.extract_stack()])
            return None

    sys.meta_path.insert(0, Watch())
    from nhwc_onnx.cli import command_line
    sys.argv = ["nhwc-onnx", *sys.argv[1:]]
    code = command_line()
    print(json.dumps({"code": code, "stack": stacks[0] if stacks else None}), file=sys.stderr)
""")


def _where_numpy_loads(*args) -> dict:
    return _facts(_run_script(_WHERE_NUMPY_LOADS, *args))


def test_numpy_loads_before_dispatch_not_inside_the_command():
    facts = _where_numpy_loads("ops", "Conv")
    assert facts["code"] == 0
    assert "_import_before_dispatch" in facts["stack"]
    assert "run_command" not in facts["stack"]  # not from inside the dispatch


def test_a_help_text_imports_nothing_early():
    for args in (["convert", "--help"], ["-q", "ops", "-h"]):
        facts = _where_numpy_loads(*args)
        assert facts == {"code": 0, "stack": None}, args


def test_command_name_skips_the_groups_flags():
    assert command_name(["-q", "-vv", "--debug", "convert", "model.pb"]) == "convert"
    assert command_name(["--version"]) is None
    assert command_name([]) is None


# Runs the command line with importlib.import_module replaced, as a signal or a broken install
# would interrupt the early imports.
_EARLY_IMPORT_FAILS = textwrap.dedent("""
    import importlib, json, signal, sys
    from nhwc_onnx import cli
    from nhwc_onnx.files import signals
    failure = sys.argv.pop(1)
    real = importlib.import_module

    def failing(name, package=None):
        if name != "numpy":
            return real(name, package)
        if failure == "signal":
            raise signals.StoppedBySignal(signal.SIGINT)
        raise ImportError("no numpy here")

    cli.importlib.import_module = failing
    sys.argv = ["nhwc-onnx", *sys.argv[1:]]
    print(json.dumps({"code": cli.command_line()}), file=sys.stderr)
""")


def test_a_signal_during_the_early_imports_ends_the_command_cleanly():
    proc = _run_script(_EARLY_IMPORT_FAILS, "signal", "ops", "Conv")
    assert _facts(proc) == {"code": 128 + 2}
    assert "Error: stopped by SIGINT (temp files removed)" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_a_failed_early_import_is_not_swallowed():
    # numpy and protobuf are required: their absence is a broken install, reported as such
    # (tests/reliability/test_no_import_fallbacks.py keeps every import failure visible)
    proc = _run_script(_EARLY_IMPORT_FAILS, "import", "ops", "Conv")
    assert proc.returncode != 0 and proc.stdout == ""
    assert "ImportError: no numpy here" in proc.stderr
