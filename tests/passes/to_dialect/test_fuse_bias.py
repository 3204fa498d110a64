"""Bias fusion: channel-vector Add/Sub after Conv / depthwise / ConvTranspose / Dense."""
from __future__ import annotations

import numpy as np

from nhwc_onnx.passes.base import PassContext
from nhwc_onnx.passes.to_dialect.fuse_bias import FuseBias
from tests.passes.dialect_oracles import (
    Builder,
    batchnorm_ref,
    conv_ref,
    conv_transpose_ref,
    convert,
    max_err,
    rand,
    run_dialect,
)

N, H, W = 2, 6, 5
TOL = 1e-4


def test_conv_add_channel_vector_becomes_bias():
    w, bias = rand(4, 3, 3, 3), rand(4)
    b = Builder((N, H, W, 3))
    y = b.op("Conv", [b.x, b.const(w, "W")], (N, H, W, 4), kernel_shape=[3, 3],
             pads=[1, 1, 1, 1], data_format="NHWC", name="conv")
    y = b.op("Add", [y, b.const(bias.reshape(1, 1, 1, 4), "b")], (N, H, W, 4), name="biasadd")
    model = b.model(y)
    ctx = convert(model)
    assert model.graph.op_counts() == {"Conv": 1}
    conv = model.graph.nodes[0]
    assert conv.name == "conv" and len(conv.inputs) == 3
    assert model.graph.outputs[0].name == "biasadd"
    assert [d.node for d in ctx.decisions if d.kind == "fuse_bias"] == ["biasadd"]
    x = rand(N, H, W, 3)
    ref = conv_ref(x, w, bias, (1, 1), (1, 1), (1, 1, 1, 1))
    assert max_err(run_dialect(model, x), ref) <= TOL


def test_depthwise_bias_becomes_addbias():
    c = 3
    w, bias = rand(c, 1, 3, 3), rand(c)
    b = Builder((N, H, W, c))
    y = b.op("Conv", [b.x, b.const(w, "W")], (N, H, W, c), kernel_shape=[3, 3],
             pads=[1, 1, 1, 1], group=c, data_format="NHWC", name="dw")
    y = b.op("Add", [b.const(bias, "b"), y], (N, H, W, c), name="biasadd")
    model = b.model(y)
    convert(model)
    assert model.graph.op_counts() == {"AddBias": 1, "DepthwiseConv2d": 1}
    x = rand(N, H, W, c)
    ref = conv_ref(x, w, bias, (1, 1), (1, 1), (1, 1, 1, 1), group=c)
    assert max_err(run_dialect(model, x), ref) <= TOL


def test_conv_transpose_sub_becomes_negative_bias():
    c, m = 3, 2
    w, bias = rand(c, m, 2, 2), rand(m)
    b = Builder((N, H, W, c))
    y = b.op("ConvTranspose", [b.x, b.const(w, "W")], (N, 2 * H, 2 * W, m), kernel_shape=[2, 2],
             strides=[2, 2], data_format="NHWC", name="up")
    y = b.op("Sub", [y, b.const(bias, "b")], (N, 2 * H, 2 * W, m), name="shift")
    model = b.model(y)
    convert(model)
    assert model.graph.op_counts() == {"ConvTranspose": 1}
    x = rand(N, H, W, c)
    ref = conv_transpose_ref(x, w, -bias, (2, 2), (1, 1), [(0, 2 * H), (0, 2 * W)])
    assert max_err(run_dialect(model, x), ref) <= TOL


def test_matmul_add_becomes_dense_with_bias():
    w, bias = rand(7, 3), rand(3)
    b = Builder((N, 7))
    y = b.op("MatMul", [b.x, b.const(w, "W")], (N, 3), name="fc")
    y = b.op("Add", [y, b.const(bias, "b")], (N, 3), name="fc/bias")
    model = b.model(y)
    convert(model)
    assert model.graph.op_counts() == {"Dense": 1}
    x = rand(N, 7)
    assert max_err(run_dialect(model, x), x.astype(float) @ w + bias) <= TOL


def test_tf_conv_biasadd_batchnorm_all_fold_into_conv():
    w, bias = rand(4, 3, 1, 1), rand(4)
    params = (rand(4, low=0.5, high=1.5), rand(4), rand(4), rand(4, low=0.2, high=2.0))
    b = Builder((N, H, W, 3))
    y = b.op("Conv", [b.x, b.const(w, "W")], (N, H, W, 4), kernel_shape=[1, 1],
             data_format="NHWC", name="conv")
    y = b.op("Add", [y, b.const(bias, "b")], (N, H, W, 4), name="biasadd")
    y = b.op("BatchNormalization", [y, *(b.const(p, f"p{i}") for i, p in enumerate(params))],
             (N, H, W, 4), name="bn", epsilon=1e-3, axis=3)
    model = b.model(y)
    convert(model)
    assert model.graph.op_counts() == {"Conv": 1}
    x = rand(N, H, W, 3)
    ref = batchnorm_ref(conv_ref(x, w, bias, (1, 1), (1, 1), (0, 0, 0, 0)), *params, 1e-3)
    assert max_err(run_dialect(model, x), ref) <= TOL


def test_no_fusion_when_conv_output_has_another_consumer():
    w, bias = rand(4, 3, 1, 1), rand(4)
    b = Builder((N, H, W, 3))
    y = b.op("Conv", [b.x, b.const(w, "W")], (N, H, W, 4), kernel_shape=[1, 1],
             data_format="NHWC", name="conv")
    biased = b.op("Add", [y, b.const(bias, "b")], (N, H, W, 4), name="biasadd")
    out = b.op("Mul", [biased, y], (N, H, W, 4), name="gate")
    model = b.model(out)
    convert(model)
    assert model.graph.op_counts() == {"AddBias": 1, "Conv": 1, "Mul": 1}
    x = rand(N, H, W, 3)
    conv = conv_ref(x, w, None, (1, 1), (1, 1), (0, 0, 0, 0))
    assert max_err(run_dialect(model, x), (conv + bias) * conv) <= TOL


def test_fuse_bias_changes_nothing_without_a_bias_add():
    b = Builder((N, H, W, 3))
    y = b.op("Add", [b.x, b.x], (N, H, W, 3))
    model = b.model(y)
    assert FuseBias()(model, PassContext()).modified is False
    assert np.array_equal([n.op for n in model.graph.nodes], ["Add"])
