"""BatchNorm folding: numbers against numpy references, structure, and the no-fold cases."""
from __future__ import annotations

import numpy as np
import pytest

from nhwc_onnx.passes.base import PassContext
from nhwc_onnx.passes.to_dialect.fold_batchnorm import FoldBatchNorm
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

N, H, W = 2, 7, 5
TOL = 1e-4


def _bn_params(c):
    return (rand(c, low=0.5, high=1.5), rand(c), rand(c), rand(c, low=0.2, high=2.0))


def _add_bn(b, y, shape, params, eps=1e-3, name="bn"):
    return b.op("BatchNormalization", [y, *(b.const(p, f"{name}/{i}") for i, p in
                                           enumerate(params))], shape, name=name,
                epsilon=eps, axis=-1)


@pytest.mark.parametrize("layout,group", [("OIHW", 1), ("OIHW", 2), ("HWIO", 1), ("HWIO", 2)])
def test_conv_then_batchnorm_folds(layout, group):
    c, m = 4, 6
    w = rand(m, c // group, 3, 2)
    bias = rand(m)
    stored = w if layout == "OIHW" else w.transpose(2, 3, 1, 0)
    b = Builder((N, H, W, c))
    y = b.op("Conv", [b.x, b.const(stored, "W"), b.const(bias, "B")], (N, H, W - 1, m),
             kernel_shape=[3, 2], pads=[1, 0, 1, 0], group=group, weight_layout=layout,
             data_format="NHWC", name="conv")
    params = _bn_params(m)
    model = b.model(_add_bn(b, y, (N, H, W - 1, m), params))
    ctx = convert(model)
    # H is exactly SAME, W exactly VALID: one explicit Pad on H, then a VALID conv.
    assert model.graph.op_counts() == {"Conv": 1, "Pad": 1}
    assert [d.node for d in ctx.decisions if d.kind == "fold_batchnorm"] == ["bn"]
    x = rand(N, H, W, c)
    ref = batchnorm_ref(conv_ref(x, w, bias, (1, 1), (1, 1), (1, 0, 1, 0), group), *params, 1e-3)
    assert max_err(run_dialect(model, x), ref) <= TOL


def test_depthwise_then_batchnorm_folds_with_addbias():
    c, mult = 3, 2
    w = rand(c * mult, 1, 3, 3)
    b = Builder((N, H, W, c))
    y = b.op("Conv", [b.x, b.const(w, "W")], (N, 4, 3, c * mult), kernel_shape=[3, 3],
             strides=[2, 2], pads=[1, 1, 1, 1], group=c, data_format="NHWC", name="dw")
    params = _bn_params(c * mult)
    model = b.model(_add_bn(b, y, (N, 4, 3, c * mult), params))
    convert(model)
    assert model.graph.op_counts() == {"AddBias": 1, "DepthwiseConv2d": 1}
    x = rand(N, H, W, c)
    ref = batchnorm_ref(conv_ref(x, w, None, (2, 2), (1, 1), (1, 1, 1, 1), c), *params, 1e-3)
    assert max_err(run_dialect(model, x), ref) <= TOL


@pytest.mark.parametrize("layout,group", [("IOHW", 1), ("IOHW", 2), ("HWOI", 1)])
def test_conv_transpose_then_batchnorm_folds(layout, group):
    c, m = 4, 6
    w = rand(c, m // group, 3, 3)
    stored = w if layout == "IOHW" else w.transpose(2, 3, 1, 0)
    b = Builder((N, H, W, c))
    # full = (i-1)*2 + 3: 15 x 11; pads crop 1 at the start and 1 at the end.
    y = b.op("ConvTranspose", [b.x, b.const(stored, "W")], (N, 13, 9, m), kernel_shape=[3, 3],
             strides=[2, 2], pads=[1, 1, 1, 1], group=group, weight_layout=layout,
             data_format="NHWC", name="deconv")
    params = _bn_params(m)
    model = b.model(_add_bn(b, y, (N, 13, 9, m), params))
    convert(model)
    assert model.graph.op_counts()["ConvTranspose"] == 1
    assert "BatchNormalization" not in model.graph.op_counts()
    x = rand(N, H, W, c)
    ref = conv_transpose_ref(x, w, None, (2, 2), (1, 1), [(1, 13), (1, 9)], group)
    assert max_err(run_dialect(model, x), batchnorm_ref(ref, *params, 1e-3)) <= TOL


def test_gemm_then_batchnorm_folds_into_dense():
    k, m = 7, 5
    w = rand(m, k)
    b = Builder((N, k))
    y = b.op("Gemm", [b.x, b.const(w, "W"), b.const(rand(m), "C")], (N, m), transB=1,
             alpha=0.5, beta=2.0, name="fc")
    c_vec = b.g.find_value("C").const
    params = _bn_params(m)
    model = b.model(_add_bn(b, y, (N, m), params))
    convert(model)
    assert model.graph.op_counts() == {"Dense": 1}
    x = rand(N, k)
    ref = batchnorm_ref(0.5 * x.astype(float) @ w.T + 2.0 * c_vec, *params, 1e-3)
    assert max_err(run_dialect(model, x), ref) <= TOL


def test_keras_folded_mul_add_after_matmul_becomes_dense_with_bias():
    k, m = 6, 4
    w, a, bias = rand(k, m), rand(m), rand(m)
    b = Builder((N, k))
    y = b.op("MatMul", [b.x, b.const(w, "W")], (N, m), name="matmul")
    y = b.op("Mul", [y, b.const(a, "a")], (N, m), name="scale")
    y = b.op("Add", [y, b.const(bias, "b")], (N, m), name="shift")
    model = b.model(y)
    convert(model)
    assert model.graph.op_counts() == {"Dense": 1}
    x = rand(N, k)
    assert max_err(run_dialect(model, x), (x.astype(float) @ w) * a + bias) <= TOL


def _caffe_chain(after_conv: bool):
    """Caffe BatchNorm (no affine) then Scale (Mul + Add of channel vectors)."""
    c = 4
    b = Builder((N, H, W, 3))
    w = rand(c, 3, 1, 1)
    src = b.op("Conv", [b.x, b.const(w, "W")], (N, H, W, c), kernel_shape=[1, 1],
               data_format="NHWC", name="conv")
    if not after_conv:
        src = b.op("Relu", [src], (N, H, W, c), name="relu")
    mean, var = rand(c), rand(c, low=0.2, high=2.0)
    y = b.op("BatchNormalization", [src, b.const(np.ones(c, np.float32), "one"),
                                    b.const(np.zeros(c, np.float32), "zero"),
                                    b.const(mean, "mean"), b.const(var, "var")],
             (N, H, W, c), name="bn", epsilon=1e-5, axis=-1)
    gamma, beta = rand(c), rand(c)
    y = b.op("Mul", [y, b.const(gamma.reshape(1, 1, 1, c), "gamma")], (N, H, W, c), name="mul")
    y = b.op("Add", [y, b.const(beta.reshape(1, 1, 1, c), "beta")], (N, H, W, c), name="add")
    x = rand(N, H, W, 3)
    ref = conv_ref(x, w, None, (1, 1), (1, 1), (0, 0, 0, 0))
    if not after_conv:
        ref = np.maximum(ref, 0)
    ref = (ref - mean) / np.sqrt(var.astype(float) + 1e-5) * gamma + beta
    return b.model(y), x, ref


def test_caffe_batchnorm_scale_pair_folds_into_conv():
    model, x, ref = _caffe_chain(after_conv=True)
    convert(model)
    assert model.graph.op_counts() == {"Conv": 1}
    assert max_err(run_dialect(model, x), ref) <= TOL


def test_caffe_batchnorm_scale_pair_after_relu_is_one_batchnorm():
    model, x, ref = _caffe_chain(after_conv=False)
    convert(model)
    assert model.graph.op_counts() == {"BatchNormalization": 1, "Conv": 1, "Relu": 1}
    assert max_err(run_dialect(model, x), ref) <= TOL


def test_no_fold_when_conv_output_has_another_consumer():
    c = 3
    w = rand(c, 3, 3, 3)
    b = Builder((N, H, W, 3))
    y = b.op("Conv", [b.x, b.const(w, "W")], (N, H, W, c), kernel_shape=[3, 3],
             pads=[1, 1, 1, 1], data_format="NHWC", name="conv")
    params = _bn_params(c)
    bn = _add_bn(b, y, (N, H, W, c), params)
    other = b.op("Relu", [y], (N, H, W, c), name="side")
    s = b.op("Add", [bn, other], (N, H, W, c), name="sum")
    model = b.model(s)
    ctx = convert(model)
    assert model.graph.op_counts()["BatchNormalization"] == 1
    assert any(d.kind == "fold_batchnorm" and d.data.get("folded") is False
               for d in ctx.decisions)
    x = rand(N, H, W, 3)
    conv = conv_ref(x, w, None, (1, 1), (1, 1), (1, 1, 1, 1))
    ref = batchnorm_ref(conv, *params, 1e-3) + np.maximum(conv, 0)
    assert max_err(run_dialect(model, x), ref) <= TOL


def test_no_fold_when_conv_output_is_a_graph_output():
    c = 2
    w = rand(c, 3, 1, 1)
    b = Builder((N, H, W, 3))
    y = b.op("Conv", [b.x, b.const(w, "W")], (N, H, W, c), kernel_shape=[1, 1],
             data_format="NHWC", name="conv")
    bn = _add_bn(b, y, (N, H, W, c), _bn_params(c))
    model = b.model(bn, y)
    convert(model)
    assert model.graph.op_counts() == {"BatchNormalization": 1, "Conv": 1}
    assert [v.name for v in model.graph.outputs] == ["bn", "conv"]


def test_fold_batchnorm_changes_nothing_without_batchnorm():
    b = Builder((N, H, W, 3))
    y = b.op("Relu", [b.x], (N, H, W, 3))
    model = b.model(y)
    assert FoldBatchNorm()(model, PassContext()).modified is False
    assert model.graph.op_counts() == {"Relu": 1}
