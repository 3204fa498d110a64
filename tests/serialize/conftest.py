"""Models for the serializer tests, built in code with every dimension a different size."""
from __future__ import annotations

import numpy as np
import pytest

from nhwc_onnx.ir import DIALECT, NHWC, Graph, Model, Value


def build_rich_model() -> Model:
    """A valid dialect model touching many ops, attribute kinds and constant dtypes."""
    rng = np.random.default_rng(7)
    g = Graph("rich")
    x = g.add_input(Value("input:0", "float32", (2, 7, 5, 3), NHWC))

    def op(name, op_type, inputs, **attrs):
        return g.make_node(op_type, inputs, attrs, name=name, domain=DIALECT).output

    w = g.constant(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "conv/W")
    b = g.constant(rng.standard_normal(4).astype(np.float32), "conv/B")
    y = op("conv", "Conv", [x, w, b], kernel_shape=[3, 3], strides=[2, 1], pads="SAME")
    y = op("elu", "Elu", [y], alpha=1)  # an int on a float attribute: still written FLOAT
    dw = g.constant(rng.standard_normal((3, 2, 4, 2)).astype(np.float32), "dw/W")
    y = op("dw", "DepthwiseConv2d", [y, dw], kernel_shape=[3, 2], dilations=[1, 2],
           pads="VALID")
    y = op("scale", "Scale", [y], scale=2)
    y = op("pad", "Pad", [y], pads=[0, 0, 1, 2, 0, 1, 0, 0], mode="constant", value=0.0)
    y = op("pool", "MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2], pads="SAME")
    shape = g.constant(np.array([2, -1], dtype=np.int64), "reshape/shape")
    flat = op("reshape", "Reshape", [y, shape])
    dense_w = g.constant(rng.standard_normal((6, 48)).astype(np.float32), "fc/W")
    logits = op("fc", "Dense", [flat, dense_w])
    probs = op("softmax", "Softmax", [logits], axis=1)
    g.outputs.append(probs)
    g.outputs.append(y)
    model = Model(g, {"source": "unit test", "options": "--seed 7", "a_first_key": "x"})
    model.io_permutations = {"input:0": [0, 2, 3, 1]}
    model.doc = "serializer test model"
    return model


@pytest.fixture
def rich_model() -> Model:
    return build_rich_model()


@pytest.fixture
def build_model():
    """The builder itself, for tests that need several fresh copies."""
    return build_rich_model
