"""Text the command line prints from a file never carries raw control characters.

A node named `relu ESC [2J` cleared the user's screen in `check`'s text output and in errors.
Every line goes through one place (``cli.common.echo``, and the log formatter), which escapes
C0 controls (but newline and tab), DEL and C1 controls as ``\\xNN``. Real processes: the log
handler is the command line's own, and the bytes are what a terminal would receive.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

CLEAR = "\x1b[2J"  # ESC [2J: erase the screen
CSI = "\x9b"  # the C1 form of ESC [
HOSTILE = f"n{CLEAR}{CSI}1m\x07\x7f\r"  # ESC, C1 CSI, BEL, DEL, CR
SHOWN = "n\\x1b[2J\\x9b1m\\x07\\x7f\\x0d"


def _cli(*args, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nhwc_onnx.cli", *map(str, args)],
                          capture_output=True, timeout=120, check=False, cwd=cwd)


def _assert_escaped(proc: subprocess.CompletedProcess, *, where: str = "both") -> str:
    """No control byte but newline on either stream; the hostile name shown escaped."""
    out, err = proc.stdout.decode(), proc.stderr.decode()
    for stream in (out, err):
        assert not any(ord(c) < 0x20 and c not in "\n\t" or 0x7f <= ord(c) <= 0x9f
                       for c in stream), repr(stream)
    text = {"stdout": out, "stderr": err, "both": out + err}[where]
    assert SHOWN in text, (out, err)
    return text


def _onnx_model(path: Path, *, op: str = "Sin", input_name: str = "x",
                node_name: str = HOSTILE, **attrs) -> Path:
    graph = helper.make_graph(
        [helper.make_node("Relu", [input_name], ["r"], name="relu"),
         helper.make_node(op, ["r"], ["y"], name=node_name, **attrs)], "g",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, [1, 3, 5, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 5, 7])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_printable_escapes_controls_and_keeps_newlines_tabs_and_text():
    from nhwc_onnx.cli.common import printable

    assert printable(f"a{CLEAR}b\n\tc é ✓") == "a\\x1b[2Jb\n\tc é ✓"
    assert printable("\x00\x1f\x7f\x80\x9f\xa0") == "\\x00\\x1f\\x7f\\x80\\x9f\xa0"
    assert printable("bad \udcff byte") == "bad \\udcff byte"  # undecodable byte of a name


def test_check_text_output_escapes_node_names(tmp_path):
    model = _onnx_model(tmp_path / "invalid.onnx")  # Sin is no dialect op: INVALID
    proc = _cli("check", model)
    assert proc.returncode == 1
    assert f"node '{SHOWN}' (Sin) [unknown-op]" in _assert_escaped(proc, where="stdout")


def test_check_escapes_a_file_name(tmp_path):
    source = _onnx_model(tmp_path / "src.onnx", op="Relu", node_name="relu2")
    folder = tmp_path / "models"
    folder.mkdir()
    convert = _cli("-q", "convert", source, "-o", folder / f"m{CLEAR}.onnx")
    assert convert.returncode == 0, convert.stderr
    proc = _cli("check", folder)  # the folder form: the name comes from the file system
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().startswith(f"{folder}/m\\x1b[2J.onnx: valid (")


def test_a_refusal_escapes_node_names_in_the_error_and_the_batch_table(tmp_path):
    refused = _onnx_model(tmp_path / "refused.onnx")
    single = _cli("convert", refused, "-o", tmp_path / "out.onnx")
    assert single.returncode == 1
    assert f"node '{SHOWN}' (Sin)" in _assert_escaped(single, where="stderr")
    batch = _cli("convert", refused, refused, "--output-dir", tmp_path / "d")
    assert batch.returncode == 1
    assert f"node '{SHOWN}' (Sin)" in _assert_escaped(batch, where="stdout")


def test_info_run_and_warnings_escape_names_from_the_model(tmp_path):
    source = _onnx_model(tmp_path / "src.onnx", op="Softmax", input_name=HOSTILE,
                         node_name=f"soft{CLEAR}", axis=2)
    model = tmp_path / "m.onnx"
    # -vv: the warning is also a debug log line; both go through the escaping
    convert = _cli("-vv", "convert", source, "-o", model, "--allow-transpose")
    assert convert.returncode == 0, convert.stderr
    err = _assert_escaped(convert, where="both")
    assert "Warning: inserted Transpose" in err and "soft\\x1b[2J" in err
    assert "DEBUG nhwc_onnx.passes: warning: inserted Transpose" in err
    info = _cli("info", model)
    assert info.returncode == 0, info.stderr
    assert f"input  {SHOWN}: float32" in _assert_escaped(info, where="stdout")
    run = _cli("run", model, "--random", "--output-dir", tmp_path / "outs")
    assert run.returncode == 0, run.stderr
    assert f"input  {SHOWN}: float32" in _assert_escaped(run, where="stdout")


@pytest.mark.parametrize("fmt", ["json", "junit"])
def test_machine_formats_carry_no_raw_control_character(fmt, tmp_path):
    """JSON escapes them itself (\\u001b); JUnit XML wrote them raw (XML 1.0 cannot even hold
    ESC): now the echo escapes them and the document parses."""
    import json
    from xml.etree import ElementTree

    model = _onnx_model(tmp_path / "invalid.onnx")
    proc = _cli("check", model, "--format", fmt)
    assert proc.returncode == 1
    out = proc.stdout.decode()
    assert "\x1b" not in out and "\x9b" not in out and "\x07" not in out
    if fmt == "json":
        assert json.loads(out)["files"][0]["issues"][0]["node"] == HOSTILE
    else:
        failure = ElementTree.fromstring(out).find(".//failure")
        assert "n\\x1b[2J\\x9b1m\\x07\\x7f" in failure.get("message")  # CR: &#13;


def _failing_source(path: Path, op: str, **attrs) -> Path:
    """x (1,3,5,7) -> Relu -> a node onnxruntime fails on (named HOSTILE) -> y: verified
    against the conversion of a plain Relu, which has the same inputs and outputs."""
    from onnx import numpy_helper

    inits = []
    inputs = ["r"]
    if op == "Pad":  # reflect pads larger than the axis: fails while running
        inits.append(numpy_helper.from_array(np.array([0, 0, 6, 0, 0, 0, 6, 0], np.int64),
                                             "pads"))
        inputs.append("pads")
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node(op, inputs, ["y"], name=HOSTILE, **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("op,attrs,said", [
    ("Pad", {"mode": "reflect"}, "onnxruntime failed running the source"),  # at run
    ("MaxPool", {"kernel_shape": [2, 2], "pads": [3, 3, 3, 3]},  # at session creation
     "onnxruntime cannot run the source"),
])
def test_onnxruntime_log_never_reaches_the_terminal(tmp_path, op, attrs, said):
    good = _onnx_model(tmp_path / "good.onnx", op="Relu", node_name="relu2")
    converted = tmp_path / "good.nhwc.onnx"
    assert _cli("convert", good, "-o", converted).returncode == 0
    bad = _failing_source(tmp_path / "bad.onnx", op, **attrs)
    proc = _cli("verify", bad, converted)
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.decode()
    if op == "Pad":  # the message names the node: escaped, and whole
        _assert_escaped(proc, where="stderr")
        assert "Status Message: Pad reflect" in err, err
    assert "\x1b" not in err and "[E:onnxruntime" not in err, err  # its log line marker
    assert err.startswith(f"Error: {said} "), err
    assert len(err.strip().splitlines()) == 1, err
