"""Activation idioms in ONNX graphs (tf2onnx's Keras ELU, clip as Min/Max, PReLU as two Relus)
become one dialect op and match onnxruntime."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from onnx import helper

sys.path.insert(0, str(Path(__file__).parent))
from onnx_backend_cases import execute_pipeline
from onnx_helpers import convert, make_model, run_ort

SHAPE = [2, 3, 7, 5]
RNG = np.random.default_rng(5)


def _conv(out="c"):
    return (helper.make_node("Conv", ["x", "w"], [out], pads=[1, 1, 1, 1]),
            {"w": RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)})


def _cases():
    zero, six = np.array(0, np.float32), np.array(6, np.float32)
    slope = RNG.uniform(0.1, 0.5, (1, 4, 1, 1)).astype(np.float32)
    return {
        # tf2onnx of Keras 3 ELU(alpha=0.4): Where(Greater(x, 0), Elu(x), Mul(0.4, Elu(x)))
        "elu_where": ([helper.make_node("Greater", ["c", "zero"], ["pos"]),
                       helper.make_node("Elu", ["c"], ["e"], alpha=1.0),
                       helper.make_node("Mul", ["alpha", "e"], ["ae"]),
                       helper.make_node("Where", ["pos", "e", "ae"], ["y"])],
                      {"zero": zero, "alpha": np.array(0.4, np.float32)}, {"Elu": 1}),
        "relu6_min_max": ([helper.make_node("Max", ["c", "zero"], ["m"]),
                           helper.make_node("Min", ["m", "six"], ["y"])],
                          {"zero": zero, "six": six}, {"Relu6": 1}),
        "prelu_two_relus": ([helper.make_node("Relu", ["c"], ["p"]),
                             helper.make_node("Neg", ["c"], ["n"]),
                             helper.make_node("Relu", ["n"], ["rn"]),
                             helper.make_node("Mul", ["neg_slope", "rn"], ["q"]),
                             helper.make_node("Add", ["p", "q"], ["y"])],
                            {"neg_slope": -slope}, {"PRelu": 1}),
    }


def test_onnx_idioms_become_one_dialect_op():
    converted = []
    for name, (nodes, inits, ops) in _cases().items():
        conv, weights = _conv()
        model = make_model([conv, *nodes], [("x", SHAPE)], [("y", None)], {**weights, **inits},
                           opset=13)
        feeds = {"x": (RNG.standard_normal(SHAPE) * 3).astype(np.float32)}
        want = run_ort(model, feeds)["y"]
        core = convert(model)
        got = execute_pipeline(core, feeds)["y"]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=name)
        counts = core.graph.op_counts()
        assert counts.pop("Conv") == 1 and counts == ops, (name, counts)
        converted.append(name)
    assert len(converted) == 3
