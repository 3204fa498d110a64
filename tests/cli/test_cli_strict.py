"""--strict on the command line and strict= in the API: rounding-level rewrites are listed by
default and refused, naming the node, under strict; nothing is written then."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import nhwc_onnx
from nhwc_onnx.errors import UnsupportedOpError


def _div_net(path, divisor: float):
    """conv -> divide by a constant (e.g. an image normalisation by 255 or 3)."""
    w = numpy_helper.from_array(
        np.random.default_rng(3).standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    c = numpy_helper.from_array(np.array(divisor, np.float32), "c")
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Div", ["y", "c"], ["z"], name="normalise")]
    graph = helper.make_graph(
        nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 7, 5])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], [w, c])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_cli_lists_rounding_rewrites_and_strict_refuses_them(invoke, tmp_path):
    src = _div_net(tmp_path / "net.onnx", 3.0)
    out, report = tmp_path / "out.onnx", tmp_path / "report.json"
    result = invoke("convert", src, "-o", out, "--report", report, "--verify")
    assert result.exit_code == 0, result.output + result.stderr
    assert "rounding: 'normalise'" in result.output
    decisions = json.loads(report.read_text())["decisions"]
    assert [(d["node"], d["data"]["rewrite"]) for d in decisions if d["kind"] == "rounding"] == [
        ("normalise", "reciprocal_multiply")]
    strict_out = tmp_path / "strict.onnx"
    result = invoke("convert", src, "-o", strict_out, "--strict")
    assert result.exit_code == 1
    assert "normalise" in result.stderr and "--strict" in result.stderr, result.stderr
    assert not strict_out.exists()


def test_cli_strict_converts_bit_exact_division(invoke, tmp_path):
    src = _div_net(tmp_path / "net.onnx", 4.0)
    result = invoke("convert", src, "-o", tmp_path / "out.onnx", "--strict", "--verify")
    assert result.exit_code == 0, result.output + result.stderr
    assert "rounding:" not in result.output


def test_api_strict_option(tmp_path):
    src = _div_net(tmp_path / "net.onnx", 3.0)
    assert "strict" not in nhwc_onnx.convert(src).report.options
    with pytest.raises(UnsupportedOpError, match="normalise"):
        nhwc_onnx.convert(src, options=nhwc_onnx.ConvertOptions(strict=True))
    exact = _div_net(tmp_path / "exact.onnx", 0.5)
    strict = nhwc_onnx.ConvertOptions(strict=True)
    assert nhwc_onnx.convert(exact, options=strict).report.options["strict"] is True


def test_the_removed_approximate_padding_is_in_no_option_record_or_report(invoke, tmp_path):
    # docs/rounding.md: no rewrite approximates any more, so the option is gone everywhere
    src = _div_net(tmp_path / "net.onnx", 3.0)
    out, report = tmp_path / "m.onnx", tmp_path / "m.json"
    assert invoke("convert", src, "-o", out, "--report", report).exit_code == 0
    assert "approximate_padding" not in report.read_text()
    assert b"approximate_padding" not in out.read_bytes()
    assert invoke("convert", src, "-o", out, "--approximate-padding").exit_code == 2
    assert "approximate" not in invoke("convert", "-h").stdout
    with pytest.raises(TypeError):
        nhwc_onnx.ConvertOptions(approximate_padding=True)  # the option is gone from the API
