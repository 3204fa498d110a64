"""Every dialect op runs with a symbolic batch: a one-node dialect file whose input batch is
``N``, checked, lowered and run by onnxruntime at batch 1 and at batch 3, computes what the
same node computes in a file with that batch fixed (each op's fixed-batch lowering is tested
against independent oracles in tests/runtime)."""
from __future__ import annotations

import numpy as np
import pytest

from nhwc_onnx.dialect.run_lower import run
from nhwc_onnx.ir import DIALECT, Graph, Model, Value
from nhwc_onnx.schemas import validate
from nhwc_onnx.schemas.symbolic_batch import PER_SAMPLE
from nhwc_onnx.serialize import load, save

RNG = np.random.default_rng(9)
H, W, C = 6, 7, 4


def _w(*shape):
    return (RNG.standard_normal(shape) * 0.5).astype(np.float32)


# op -> (input shape after the batch, constant inputs, attributes)
CASES = {
    "Abs": ((H, W, C), [], {}),
    "Add": ((H, W, C), ["x"], {}),
    "AddBias": ((H, W, C), [_w(C)], {}),
    "AveragePool": ((H, W, C), [], {"kernel_shape": [3, 2], "strides": [2, 1],
                                     "pads": "SAME"}),
    "BatchNormalization": ((H, W, C), [_w(C), _w(C), _w(C), np.abs(_w(C)) + 0.5], {}),
    "Concat": ((H, W, C), ["x"], {"axis": 3}),
    "Conv": ((H, W, C), [_w(5, 3, 3, C), _w(5)], {"kernel_shape": [3, 3], "pads": "SAME",
                                                  "strides": [2, 1]}),
    "ConvTranspose": ((H, W, C), [_w(C, 3, 2, 2), _w(3)], {"kernel_shape": [2, 2],
                                                           "strides": [2, 2]}),
    "Dense": ((H, W, C), [_w(5, H, W, C), _w(5)], {}),
    "DepthwiseConv2d": ((H, W, C), [_w(3, 3, C, 2)], {"kernel_shape": [3, 3],
                                                      "pads": "SAME"}),
    "Elu": ((H, W, C), [], {"alpha": 0.7}),
    "Flatten": ((H, W, C), [], {"axis": 1}),
    "Gemm": ((C,), [_w(C, 5), _w(5)], {"alpha": 0.5}),
    "GlobalAveragePool": ((H, W, C), [], {}),
    "GlobalMaxPool": ((H, W, C), [], {}),
    "LeakyRelu": ((H, W, C), [], {"alpha": 0.2}),
    "MatMul": ((H, C), [_w(C, 5)], {}),
    "Max": ((H, W, C), ["x"], {}),
    "MaxPool": ((H, W, C), [], {"kernel_shape": [2, 3], "strides": [2, 2], "pads": "VALID"}),
    "Mul": ((H, W, C), ["x"], {}),
    "PRelu": ((H, W, C), [_w(C)], {}),
    "Pad": ((H, W, C), [], {"pads": [0, 0, 1, 2, 0, 1, 0, 0]}),
    "ReduceMean": ((H, W, C), [], {"axes": [1, 2], "keepdims": 1}),
    "Relu": ((H, W, C), [], {}),
    "Relu6": ((H, W, C), [], {}),
    "Reshape": ((H, W, C), [np.array([0, W, H * C], np.int64)], {}),
    "Scale": ((H, W, C), [], {"scale": 0.25}),
    "Sigmoid": ((H, W, C), [], {}),
    "Slice": ((H, W, C), [], {"starts": [1, 0], "ends": [5, 3], "axes": [1, 3]}),
    "Softmax": ((H, W, C), [], {"axis": 3}),
    "SpaceToDepth": ((H, 8, C), [], {"blocksize": 2}),
    "Squeeze": ((1, W, C), [], {"axes": [1]}),
    "Sum": ((H, W, C), ["x", "x"], {}),
    "Tanh": ((H, W, C), [], {}),
    "Transpose": ((H, W, C), [], {"perm": [0, 2, 1, 3]}),
    "UpSampling2D": ((H, W, C), [], {"size": [1, 2, 3, 1], "mode": "nearest"}),
}


def _file(tmp_path, op: str, batch) -> str:
    shape, extra, attrs = CASES[op]
    g = Graph(op)
    x = g.add_input(Value("x", "float32", (batch, *shape)))
    inputs = [x] + [x if isinstance(e, str) else g.constant(e, f"c{i}")
                    for i, e in enumerate(extra)]
    node = g.make_node(op, inputs, attrs, name="node", domain=DIALECT)
    node.outputs[0].dtype = "float32"
    g.outputs.append(node.outputs[0])
    model = Model(g)
    assert validate(model) == [], (op, validate(model))
    path = tmp_path / f"{op}_{batch}.onnx"
    save(model, path)
    return path


def test_every_dialect_op_but_constant_has_a_case():
    assert set(CASES) == set(PER_SAMPLE) - {"Constant"}


@pytest.mark.parametrize("op", sorted(CASES))
def test_the_op_runs_at_any_batch_as_with_that_batch_fixed(tmp_path, op):
    symbolic = _file(tmp_path, op, "N")
    model = load(symbolic)
    assert validate(model) == []
    assert model.graph.outputs[0].shape is None or model.graph.outputs[0].shape[0] == "N"
    for batch in (1, 3):
        x = RNG.uniform(-1, 1, (batch, *CASES[op][0])).astype(np.float32)
        got = run(symbolic, {"x": x}).outputs["node"]
        want = run(_file(tmp_path, op, batch), {"x": x}).outputs["node"]
        assert got.shape == want.shape and got.shape[0] == batch
        np.testing.assert_array_equal(got, want)
