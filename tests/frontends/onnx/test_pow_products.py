"""Pow with a constant exponent through the whole pipeline, against onnxruntime.

x^2 becomes exactly one Mul(x, x) (the correctly rounded square, bit for bit what onnxruntime
computes), x^3 two products (x * x) * x recorded as a rounding-level rewrite (onnxruntime
multiplies the same way), x^1 no product at all. Near misses - the float after 2, 2.0001,
1.9999, 0.5, -1, an exponent that differs per element, one fed at run time - must be refused
naming the node, never turned into a product close to them.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

sys.path.insert(0, str(Path(__file__).parent))
from onnx_helpers import make_model, run_ort

from nhwc_onnx import api
from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.options import ConvertOptions
from nhwc_onnx.runtime import run

SHAPE = [2, 3, 5, 7]  # NCHW, distinct sizes
X = (np.random.default_rng(31).standard_normal(SHAPE) * 3).astype(np.float32)


def pow_model(exponent, runtime_exponent=False) -> onnx.ModelProto:
    node = helper.make_node("Pow", ["x", "e"], ["y"], name="pow")
    inputs = [("x", SHAPE)] + ([("e", [])] if runtime_exponent else [])
    inits = {} if runtime_exponent else {"e": np.asarray(exponent, np.float32)}
    return make_model([node], inputs, [("y", SHAPE)], inits)


def convert_and_run(model: onnx.ModelProto, tmp_path: Path, **options):
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    result = api.convert(path, options=ConvertOptions(exact_cut=False, **options))
    perms = result.model.io_permutations
    got = run(result.model, {"x": np.ascontiguousarray(np.transpose(X, perms["x"]))})["y"]
    return result, np.transpose(got, np.argsort(perms["y"]))


def mul_inputs(result) -> list[list[str]]:
    return [[v.name for v in n.inputs] for n in result.model.graph.nodes if n.op == "Mul"]


def test_square_is_one_mul_of_x_by_itself_bit_exact(tmp_path):
    model = pow_model(2)
    want = run_ort(model, {"x": X})["y"]
    result, got = convert_and_run(model, tmp_path, strict=True)
    assert result.report.target_ops == {"Mul": 1}, result.report.target_ops
    (inputs,) = mul_inputs(result)
    assert inputs[0] == inputs[1], inputs
    assert not [d for d in result.report.decisions if d["kind"] == "rounding"]
    np.testing.assert_array_equal(got, want)


def test_cube_is_two_products_recorded_as_rounding(tmp_path):
    model = pow_model(3)
    want = run_ort(model, {"x": X})["y"]
    result, got = convert_and_run(model, tmp_path)
    assert result.report.target_ops == {"Mul": 2}, result.report.target_ops
    square, cube = mul_inputs(result)
    assert square[0] == square[1] and cube[0] != cube[1], (square, cube)  # not Mul(x, x)
    rounding = [d for d in result.report.decisions if d["kind"] == "rounding"]
    assert [(d["node"], d["data"]["rewrite"]) for d in rounding] == [("pow", "cube_multiply")]
    np.testing.assert_allclose(got, want, rtol=2.5 * 2.0 ** -23, atol=0)
    np.testing.assert_allclose(got, X.astype(np.float64) ** 3, rtol=2 * 2.0 ** -23, atol=0)


def test_cube_is_refused_under_strict(tmp_path):
    with pytest.raises(UnsupportedOpError) as info:
        convert_and_run(pow_model(3), tmp_path, strict=True)
    assert [p.node for p in info.value.problems] == ["pow"], info.value
    assert "--strict" in info.value.problems[0].reason


def test_power_one_is_the_input(tmp_path):
    result, got = convert_and_run(pow_model(1), tmp_path, strict=True)
    assert "Mul" not in result.report.target_ops, result.report.target_ops
    np.testing.assert_array_equal(got, X)


NEAR_MISSES = {
    "the float after 2": np.nextafter(np.float32(2), np.float32(3)),
    "2.0001": np.float32(2.0001),
    "1.9999": np.float32(1.9999),
    "0.5": np.float32(0.5),
    "-1": np.float32(-1),
    "per element 2 and 3": np.array([2, 3, 2], np.float32).reshape(1, 3, 1, 1),
}


@pytest.mark.parametrize("name", list(NEAR_MISSES))
def test_near_miss_exponents_are_refused_naming_the_node(name, tmp_path):
    with pytest.raises(UnsupportedOpError) as info:
        convert_and_run(pow_model(NEAR_MISSES[name]), tmp_path)
    (problem,) = info.value.problems
    assert (problem.node, problem.op) == ("pow", "Pow"), info.value
    assert "exponent" in problem.reason, problem.reason


def test_run_time_exponent_is_refused(tmp_path):
    with pytest.raises(UnsupportedOpError) as info:
        convert_and_run(pow_model(None, runtime_exponent=True), tmp_path)
    (problem,) = info.value.problems
    assert problem.node == "pow" and "run time" in problem.reason, problem.reason


def test_how_many_exponents_convert(tmp_path):
    converted = []
    for name, exponent in {"1": 1, "2": 2, "3": 3, **NEAR_MISSES}.items():
        try:
            convert_and_run(pow_model(exponent), tmp_path)
        except UnsupportedOpError:
            continue
        converted.append(name)
    assert converted == ["1", "2", "3"], converted
