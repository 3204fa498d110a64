"""What `nhwc-onnx --help` and `nhwc-onnx check` load: only what they use (startup time is the
cost of a CI step that checks models on every commit)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

_RUN_CLI = textwrap.dedent("""
    import json, re, sys
    from nhwc_onnx.cli import command_line
    sys.argv = ["nhwc-onnx", *sys.argv[1:]]
    code = command_line()
    loaded = sorted(m for m in sys.modules if m in {
        "secrets", "xml.etree.ElementTree", "nhwc_onnx.passes", "nhwc_onnx.frontends",
        "nhwc_onnx.api", "nhwc_onnx.verification", "nhwc_onnx.runtime", "logging",
        "nhwc_onnx.schemas", "nhwc_onnx.schemas.core", "nhwc_onnx.serialize",
        "nhwc_onnx.options", "dataclasses", "numpy", "onnx", "google.protobuf", "tensorflow",
        "onnxruntime", "cv2"})
    patterns = [p for p in re._cache if isinstance(p, tuple) and "\\ud7ff" in str(p[1])]
    print(json.dumps({"code": code, "loaded": loaded, "xml_pattern": bool(patterns)}),
          file=sys.stderr)
""")


def _run(*args: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", _RUN_CLI, *args], capture_output=True,
                          text=True, timeout=120, check=False)
    facts = json.loads(proc.stderr.strip().splitlines()[-1])
    facts["stdout"] = proc.stdout
    return facts


def test_help_loads_no_conversion_machinery():
    # the command list needs each command's module, not numpy, onnx or anything they convert
    facts = _run("--help")
    assert {**facts, "stdout": ""} == {"code": 0, "loaded": [], "xml_pattern": False,
                                       "stdout": ""}
    assert "Commands:" in facts["stdout"]


def test_check_loads_only_the_reader_and_the_schemas():
    facts = _run("check", str(EXAMPLES / "tiny_convnet.onnx"))
    # secrets: temp-file names come from os.urandom; the XML pattern: only JUnit needs it;
    # logging: nothing check runs logs (nhwc_onnx.cli.COMMANDS_THAT_NEVER_LOG); the core ops: a
    # dialect model has none (nhwc_onnx.schemas.base.Registry defines them on first lookup);
    # dataclasses: the records check makes are named tuples and plain classes
    # (nhwc_onnx/errors.py); onnx: dialect files are read with the project's own protobuf
    # classes (nhwc_onnx.onnxfile); no frontend, pass, runtime or conversion option
    assert facts["stdout"].endswith(": valid (8 nodes)\n")
    assert {**facts, "stdout": ""} == {
        "code": 0, "xml_pattern": False, "stdout": "",
        "loaded": ["google.protobuf", "nhwc_onnx.schemas", "nhwc_onnx.serialize", "numpy"]}


def test_check_judges_rules_that_read_values_and_rules_that_do_not(tmp_path):
    import numpy as np

    from nhwc_onnx.ir import DIALECT, Graph, Model, Value
    from nhwc_onnx.schemas import validate
    from nhwc_onnx.serialize import save

    def one_node(op, shape, const, attrs=None):
        g = Graph()
        node = g.make_node(op, [g.add_input(Value("x", shape=shape)), g.constant(const, "c")],
                           attrs or {}, name="n", domain=DIALECT)
        g.outputs = list(node.outputs)
        return Model(g)

    conv = one_node("Conv", (1, 9, 9, 64), np.ones((64, 3, 3, 64), np.float32),
                    {"kernel_shape": [3, 3], "pads": "SAME"})  # 147 KB: lifted, mapped
    bad_reshape = one_node("Reshape", (1, 4, 6), np.array([-1, -1], np.int64))
    facts = _run("check", str(save(conv, tmp_path / "conv.onnx")))
    assert facts["code"] == 0 and facts["stdout"].endswith(": valid (1 nodes)\n")
    facts = _run("check", str(save(bad_reshape, tmp_path / "reshape.onnx")))
    # Reshape's rule reads its target shape (a deferred constant decoded on that read)
    assert facts["code"] == 1
    [issue] = validate(bad_reshape)
    assert issue.message in facts["stdout"]


def test_check_with_junit_still_escapes_control_characters():
    from nhwc_onnx.dialect.check import _xml_text

    assert _xml_text("a\x01b\tc") == "a\\x01b\tc"
    facts = _run("check", str(EXAMPLES / "tiny_convnet.onnx"), "--format", "junit")
    assert facts["code"] == 0 and facts["xml_pattern"]
    assert facts["stdout"].count("<testcase") == 1


def test_the_pass_pipeline_and_progress_leave_rarely_needed_stdlib_modules_unloaded():
    # fractions (+ decimal) only for Resize proofs; shutil (+ bz2, lzma) only to draw a bar
    code = ("import sys\n"
            "import nhwc_onnx.passes.to_dialect.pipeline, nhwc_onnx.passes.pipeline\n"
            "import nhwc_onnx.cli.progress\n"
            "print(sorted(m for m in ('fractions', 'decimal', 'shutil') if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert proc.stdout.strip() == "[]"


_NUMPY_AFTER_CHECK = textwrap.dedent("""
    import os, sys
    from nhwc_onnx.cli import command_line
    sys.argv = ["nhwc-onnx", "check", sys.argv[1]]
    command_line()
    import numpy
    core = getattr(numpy, "_core", None) or numpy.core  # numpy 2 / numpy 1
    print(len(os.listdir("/proc/self/task")), os.environ.get("OPENBLAS_NUM_THREADS"),
          core.multiarray._get_madvise_hugepage(), file=sys.stderr)
""")


def _numpy_after_check(**chosen: str) -> list[str]:
    """[threads, OPENBLAS_NUM_THREADS, huge pages on] of a `check` process."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "NUMPY_MADVISE_HUGEPAGE")}
    env.update(chosen)
    proc = subprocess.run(
        [sys.executable, "-c", _NUMPY_AFTER_CHECK, str(EXAMPLES / "tiny_convnet.onnx")],
        capture_output=True, text=True, timeout=120, check=False, env=env)
    return proc.stderr.strip().splitlines()[-1].split()


def test_the_command_line_sets_numpy_defaults_unless_the_user_chose():
    # OpenBLAS would start one spinning worker per core at numpy's import (CPU the CI job needs);
    # huge pages would make first touches of folded weights wait for memory compaction
    assert _numpy_after_check() == ["1", "1", "False"]
    chosen = _numpy_after_check(OPENBLAS_NUM_THREADS="2", NUMPY_MADVISE_HUGEPAGE="1")
    assert chosen[1:] == ["2", "True"]
    if (os.cpu_count() or 1) >= 2:  # OpenBLAS never starts more workers than cores
        assert chosen[0] == "2"
