"""Caffe's Log, Exp and MVN as core ops, against OpenCV where it computes Caffe's formula and
against that formula in float64 (run_with_blobs feeds the same inputs) where it does not:
OpenCV's Log reads no log_param (it computes ln(x)), and its MVN adds eps to the variance where
Caffe adds it to the standard deviation."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from caffe_testlib import compare_with_opencv, run_with_blobs
from test_layers_opencv import layer, net

from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.passes.base import PassContext
from nhwc_onnx.passes.pipeline import to_dialect

SHAPE = (2, 5, 7, 6)
# Log reads positive values: the sigmoid of the random inputs
SIG = layer("sig", "Sigmoid", ["data"], ["sig"])


def _one(type_: str, params: str, bottom: str = "data") -> str:
    body = (SIG if bottom == "sig" else "") + layer("out", type_, [bottom], ["out"], params)
    return net(body, SHAPE)


EXP_CASES = ["", "exp_param { base: 2 scale: 0.5 shift: 0.3 }",
             "exp_param { scale: -0.7 shift: 1.2 }", "exp_param { base: 10 scale: 0.2 }",
             "exp_param { base: 0.5 shift: -2 }"]


@pytest.mark.parametrize("params", EXP_CASES)
def test_exp_matches_opencv(tmp_path, params):
    model, results = compare_with_opencv(tmp_path, _one("Exp", params), tol=1e-5)
    assert len(results) == 1 and model.graph.op_counts()["Exp"] == 1


def test_log_with_default_parameters_matches_opencv(tmp_path):
    model, _ = compare_with_opencv(tmp_path, _one("Log", "", bottom="sig"), tol=1e-5)
    assert model.graph.op_counts()["Log"] == 1


@pytest.mark.parametrize("base,scale,shift", [(2.0, 0.5, 3.0), (10.0, 2.0, 0.1),
                                              (-1.0, 3.0, 0.0), (0.5, 1.0, 1.5)])
def test_log_parameters_follow_caffes_formula(tmp_path, base, scale, shift):
    params = f"log_param {{ base: {base} scale: {scale} shift: {shift} }}"
    _, _, feeds, outs = run_with_blobs(tmp_path, _one("Log", params, bottom="sig"))
    x = 1 / (1 + np.exp(-feeds["data"].astype(np.float64)))
    want = np.log(shift + scale * x) / (1.0 if base == -1 else np.log(base))
    np.testing.assert_allclose(outs["out"], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op,params", [("Exp", ""), ("Log", "")])
def test_log_and_exp_are_refused_by_the_dialect(tmp_path, op, params):
    from caffe_testlib import make_net

    _, _, model = make_net(tmp_path, _one(op, params))
    with pytest.raises(UnsupportedOpError) as refusal:
        to_dialect(model, PassContext())
    assert {p.op for p in refusal.value.problems} == {op}


MVN_CASES = {
    "per_channel_variance": "normalize_variance: true across_channels: false",
    "across_channels_variance": "normalize_variance: true across_channels: true",
    "per_channel_mean_only": "normalize_variance: false across_channels: false",
    "across_channels_mean_only": "normalize_variance: false across_channels: true",
}


@pytest.mark.parametrize("params", MVN_CASES.values(), ids=MVN_CASES.keys())
def test_mvn_with_default_eps_matches_opencv(tmp_path, params):
    compare_with_opencv(tmp_path, _one("MVN", f"mvn_param {{ {params} }}"), tol=1e-5)


@pytest.mark.parametrize("across", [False, True])
def test_mvn_eps_is_added_to_the_standard_deviation_as_in_caffe(tmp_path, across):
    params = f"mvn_param {{ eps: 0.1 across_channels: {str(across).lower()} }}"
    _, _, feeds, outs = run_with_blobs(tmp_path, _one("MVN", params))
    x = feeds["data"].astype(np.float64)
    axes = (1, 2, 3) if across else (2, 3)
    centered = x - x.mean(axis=axes, keepdims=True)
    want = centered / (np.sqrt((centered ** 2).mean(axis=axes, keepdims=True)) + 0.1)
    np.testing.assert_allclose(outs["out"], want, rtol=1e-5, atol=1e-6)
    with pytest.raises(AssertionError, match="max error"):  # OpenCV: sqrt(var + eps)
        compare_with_opencv(tmp_path, _one("MVN", params), tol=1e-4)


def test_mvn_subtracting_the_mean_converts_and_dividing_by_the_std_is_refused(tmp_path):
    from nhwc_onnx import convert

    proto = tmp_path / "net.prototxt"
    proto.write_text(_one("MVN", "mvn_param { normalize_variance: false }"))
    assert "ReduceMean" in convert(proto).model.graph.op_counts()
    proto.write_text(_one("MVN", "mvn_param { normalize_variance: true }"))
    with pytest.raises(UnsupportedOpError) as refusal:
        convert(proto)
    assert {p.op for p in refusal.value.problems} >= {"Div", "Sqrt"}
