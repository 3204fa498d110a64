"""Property test: Conv, DepthwiseConv2d, MaxPool, AveragePool lowered vs TensorFlow kernels.

Hypothesis sweeps input size (1x1 included), kernel, stride, dilation and SAME/VALID. The
oracle is TensorFlow: tf.nn.conv2d (which on CPU accepts stride and dilation both > 1; the
direct-sum test in test_lower_conv_family.py confirms those numbers), the raw
depthwise convolution as one tf.nn.conv2d per channel (the raw DepthwiseConv2dNative kernel
follows the same size rule but, with oneDNN off, supports neither unequal strides nor dilation),
tf.nn.max_pool2d and tf.nn.avg_pool2d (TF pooling has no dilation, so pools sweep dilation 1 only).
"""
from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from nhwc_onnx.ir import DIALECT, Graph, Model, Value
from nhwc_onnx.runtime import run
from nhwc_onnx.schemas import validate
from nhwc_onnx.schemas.base import valid_tf

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

OPS = ("Conv", "DepthwiseConv2d", "MaxPool", "AveragePool")


def _run(op: str, x: np.ndarray, weight: np.ndarray | None, attrs: dict) -> np.ndarray:
    g = Graph()
    inputs = [g.add_input(Value("x", shape=x.shape))]
    if weight is not None:
        inputs.append(g.constant(weight, "w"))
    node = g.make_node(op, inputs, attrs, name="n", domain=DIALECT)
    g.outputs = [node.output]
    model = Model(g)
    assert validate(model) == []
    return run(model, {"x": x})[node.output.name]


def _reference(op: str, x, weight, k, s, d, pads) -> np.ndarray:
    import tensorflow as tf

    if op == "Conv":  # dialect W (M, kH, kW, C) -> TF HWIO
        return tf.nn.conv2d(x, weight.transpose(1, 2, 3, 0), [1, *s, 1], pads,
                            dilations=[1, *d, 1]).numpy()
    if op == "DepthwiseConv2d":
        # One tf.nn.conv2d per input channel: TF's reference depthwise kernel (oneDNN off)
        # supports neither unequal strides nor dilation; conv2d supports both.
        per_channel = [
            tf.nn.conv2d(x[..., ch:ch + 1], weight[:, :, ch:ch + 1, :], [1, *s, 1], pads,
                         dilations=[1, *d, 1]).numpy()
            for ch in range(x.shape[-1])
        ]
        return np.concatenate(per_channel, axis=-1)
    pool = tf.nn.max_pool2d if op == "MaxPool" else tf.nn.avg_pool2d
    return pool(x, list(k), list(s), pads).numpy()


@st.composite
def cases(draw):
    op = draw(st.sampled_from(OPS))
    n = draw(st.integers(1, 2))
    h, w = draw(st.integers(1, 11)), draw(st.integers(1, 11))
    c = draw(st.integers(1, 4))
    k = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    pooling = op.endswith("Pool")
    d = (1, 1) if pooling else (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    pads = draw(st.sampled_from(["SAME", "VALID"]))
    extra = draw(st.integers(1, 3))  # output channels (Conv) or depth multiplier
    seed = draw(st.integers(0, 2**31 - 1))
    return op, (n, h, w, c), k, s, d, pads, extra, seed


@settings(max_examples=200, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_spatial_ops_match_tensorflow(case):
    op, x_shape, k, s, d, pads, extra, seed = case
    if pads == "VALID":  # an empty output is refused by the schema, so not a numeric case
        assume(all(valid_tf(x_shape[1 + a], k[a], s[a], d[a]) >= 1 for a in range(2)))
    gen = np.random.default_rng(seed)
    x = gen.standard_normal(x_shape).astype(np.float32) - 1.0  # mostly negative (see pools)
    c = x_shape[3]
    weight = None
    attrs = {"strides": list(s), "pads": pads}
    if op == "Conv":
        weight = gen.standard_normal((extra, *k, c)).astype(np.float32)
        attrs["dilations"] = list(d)
    elif op == "DepthwiseConv2d":
        weight = gen.standard_normal((*k, c, extra)).astype(np.float32)
        attrs["dilations"] = list(d)
    else:
        attrs["kernel_shape"] = list(k)
    got = _run(op, x, weight, attrs)
    ref = _reference(op, x, weight, k, s, d, pads)
    assert got.shape == ref.shape
    err = float(np.max(np.abs(got - ref)))
    assert err <= 1e-5 * max(1.0, float(np.max(np.abs(ref)))), (case, err)


@st.composite
def transpose_cases(draw):
    n = draw(st.integers(1, 2))
    h, w, c = draw(st.integers(1, 6)), draw(st.integers(1, 6)), draw(st.integers(1, 3))
    k = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = draw(st.sampled_from(["SAME", "VALID"]))
    m = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**31 - 1))
    return (n, h, w, c), k, s, d, pads, m, seed


@settings(max_examples=120, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(transpose_cases())
def test_conv_transpose_matches_tensorflow(case):
    """tf.nn.conv2d_transpose, output size i*s (SAME) or the full size (VALID)."""
    import tensorflow as tf

    x_shape, k, s, d, pads, m, seed = case
    gen = np.random.default_rng(seed)
    x = gen.standard_normal(x_shape).astype(np.float32)
    weight = gen.standard_normal((x_shape[3], m, *k)).astype(np.float32)  # (C, M, kH, kW)
    got = _run("ConvTranspose", x, weight, {"strides": list(s), "dilations": list(d),
                                            "pads": pads})
    if pads == "SAME":
        out_hw = [x_shape[1] * s[0], x_shape[2] * s[1]]
    else:
        out_hw = [(x_shape[1 + a] - 1) * s[a] + (k[a] - 1) * d[a] + 1 for a in range(2)]
    # TF's CPU transpose kernel rejects dilation > 1: dilate the kernel with zeros instead.
    w_hw = weight.transpose(2, 3, 1, 0)
    dilated = np.zeros(((w_hw.shape[0] - 1) * d[0] + 1, (w_hw.shape[1] - 1) * d[1] + 1,
                        *w_hw.shape[2:]), w_hw.dtype)
    dilated[::d[0], ::d[1]] = w_hw
    ref = tf.nn.conv2d_transpose(x, dilated, [x_shape[0], *out_hw, m], [1, *s, 1], pads).numpy()
    assert got.shape == ref.shape
    err = float(np.max(np.abs(got - ref)))
    assert err <= 1e-5 * max(1.0, float(np.max(np.abs(ref)))), (case, err)
