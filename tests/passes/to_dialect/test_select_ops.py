"""Op selection: one-to-one mappings, weight re-layouts and the small activation patterns."""
from __future__ import annotations

import numpy as np
import pytest

from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.ir import DIALECT
from nhwc_onnx.passes.base import PassContext
from nhwc_onnx.passes.to_dialect.select_and_legalize import SelectOps
from tests.passes.dialect_oracles import Builder, conv_ref, convert, max_err, rand, run_dialect

N, H, W, C = 2, 7, 5, 4
TOL = 1e-5


def _ops(model):
    return [n.op for n in model.graph.nodes]


def test_grouped_conv_keeps_group_and_relays_weights():
    w = rand(6, 2, 3, 3)  # group 2: C/g = 2 input channels per group
    b = Builder((N, H, W, C))
    y = b.op("Conv", [b.x, b.const(w, "W")], (N, 3, 2, 6), kernel_shape=[3, 3], strides=[2, 2],
             group=2, data_format="NHWC", auto_pad="VALID", name="gconv")
    model = b.model(y)
    convert(model)
    node = model.graph.nodes[0]
    assert node.op == "Conv" and node.attrs["group"] == 2 and node.inputs[1].shape == (6, 3, 3, 2)
    x = rand(N, H, W, C)
    assert max_err(run_dialect(model, x), conv_ref(x, w, None, (2, 2), (1, 1), (0, 0, 0, 0),
                                                   2)) <= TOL


def test_depthwise_multiplier_stride_and_dilation():
    mult = 3
    w = rand(C * mult, 1, 3, 2)
    b = Builder((N, H, W, C))
    y = b.op("Conv", [b.x, b.const(w, "W")], (N, 4, 3, C * mult), kernel_shape=[3, 2],
             strides=[2, 2], dilations=[2, 2], group=C, data_format="NHWC",
             auto_pad="SAME_UPPER", name="dw")
    model = b.model(y)
    convert(model)
    node = model.graph.nodes[0]
    assert node.op == "DepthwiseConv2d" and node.inputs[1].shape == (3, 2, C, mult)
    x = rand(N, H, W, C)
    # TF SAME: H total = (4-1)*2 + 5 - 7 = 4 -> (2, 2); W total = (3-1)*2 + 3 - 5 = 2 -> (1, 1)
    ref = conv_ref(x, w, None, (2, 2), (2, 2), (2, 1, 2, 1), C)
    assert max_err(run_dialect(model, x), ref) <= TOL


def test_flatten_then_gemm_becomes_dense_on_the_map():
    w = rand(3, H * W * C)
    b = Builder((N, H, W, C))
    f = b.op("Flatten", [b.x], (N, H * W * C), axis=1, name="flat")
    y = b.op("Gemm", [f, b.const(w, "W")], (N, 3), transB=1, name="fc")
    model = b.model(y)
    convert(model)
    assert _ops(model) == ["Dense"]
    assert model.graph.nodes[0].inputs[1].shape == (3, H, W, C)
    x = rand(N, H, W, C)
    assert max_err(run_dialect(model, x), x.reshape(N, -1).astype(float) @ w.T) <= 1e-4


def test_reshape_then_matmul_becomes_reshape_and_dense():
    w = rand(H * W * C, 3)
    b = Builder((N, H, W, C))
    f = b.op("Reshape", [b.x, b.const(np.array([-1, H * W * C], np.int64), "shape")],
             (N, H * W * C), name="flat")
    y = b.op("MatMul", [f, b.const(w, "W")], (N, 3), name="fc")
    model = b.model(y)
    convert(model)
    assert _ops(model) == ["Reshape", "Dense"]
    assert model.graph.nodes[1].inputs[1].shape == (3, H * W * C)
    x = rand(N, H, W, C)
    assert max_err(run_dialect(model, x), x.reshape(N, -1).astype(float) @ w) <= 1e-4


def test_non_constant_operands_stay_gemm_and_matmul():
    b = Builder((N, 6))
    t = b.op("Transpose", [b.x], (6, N), perm=[1, 0])
    mm = b.op("MatMul", [b.x, t], (N, N), name="mm")
    gm = b.op("Gemm", [mm, mm], (N, N), alpha=2.0, name="gm")
    model = b.model(gm)
    convert(model)
    assert _ops(model) == ["Transpose", "MatMul", "Gemm"]
    x = rand(N, 6)
    prod = x.astype(float) @ x.T
    assert max_err(run_dialect(model, x), 2.0 * prod @ prod) <= 1e-4


def test_activation_patterns():
    b = Builder((N, H, W, C))
    r = b.op("Relu", [b.x], (N, H, W, C), name="relu")
    r6 = b.op("Min", [r, b.const(np.float32(6.0), "six")], (N, H, W, C), name="relu6")
    clip = b.op("Clip", [b.x], (N, H, W, C), name="clip", min=0.0, max=6.0)
    scaled = b.op("Mul", [b.x, b.const(np.float32(0.2), "slope")], (N, H, W, C), name="ax")
    leaky = b.op("Max", [b.x, scaled], (N, H, W, C), name="leaky")
    big = b.op("Mul", [b.const(np.array([1.5], np.float32), "k"), b.x], (N, H, W, C), name="bx")
    not_leaky = b.op("Max", [big, b.x], (N, H, W, C), name="max")
    s = b.op("Sum", [r6, clip, leaky, not_leaky], (N, H, W, C), name="sum")
    model = b.model(s)
    convert(model)
    counts = model.graph.op_counts()
    assert counts == {"LeakyRelu": 1, "Max": 1, "Relu6": 2, "Scale": 1, "Sum": 1}, counts
    x = rand(N, H, W, C, low=-9, high=9)
    ref = 2 * np.clip(x, 0, 6) + np.where(x > 0, x, 0.2 * x) + np.maximum(1.5 * x, x)
    assert max_err(run_dialect(model, x), ref) <= 1e-4


@pytest.mark.parametrize("shape,axis,ok", [((N, H, W, C), -1, True), ((N, C, 1, 1), 1, True),
                                           ((N, H, W, C), 1, False)])
def test_softmax_axis(shape, axis, ok):
    b = Builder(shape)
    y = b.op("Softmax", [b.x], shape, axis=axis, name="sm")
    model = b.model(y)
    if not ok:
        with pytest.raises(UnsupportedOpError, match="layout Transpose"):
            convert(model)
        return
    convert(model)
    x = rand(*shape, low=-3, high=3)
    e = np.exp(x.astype(float) - x.max(axis=axis, keepdims=True))
    assert max_err(run_dialect(model, x), e / e.sum(axis=axis, keepdims=True)) <= TOL


def test_tensor_ops_map_with_positive_axes():
    b = Builder((N, H, W, C))
    p = b.op("Pad", [b.x], (N, H + 1, W + 3, C), pads=[0, 1, 2, 0, 0, 0, 1, 0], name="pad")
    s = b.op("Slice", [p], (N, H - 1, W + 3, C - 1), starts=[1, 0], ends=[-1, -1],
             axes=[1, -1], name="slice")
    t = b.op("Transpose", [s], (N, C - 1, H - 1, W + 3), perm=[0, 3, 1, 2], name="tr")
    cat = b.op("Concat", [t, t], (N, 2 * C - 2, H - 1, W + 3), axis=-3, name="cat")
    m = b.op("ReduceMean", [cat], (N, 2 * C - 2, 1, 1), axes=[-1, 2], keepdims=1, name="mean")
    q = b.op("Squeeze", [m], (N, 2 * C - 2), axes=[-1, -2], name="sq")
    r = b.op("Reshape", [q, b.const(np.array([0, -1, 2], np.int64), "shape")],
             (N, C - 1, 2), name="reshape")
    model = b.model(r)
    convert(model)
    assert _ops(model) == ["Pad", "Slice", "Transpose", "Concat", "ReduceMean", "Squeeze",
                           "Reshape"]
    x = rand(N, H, W, C)
    ref = np.pad(x, [(0, 0), (1, 0), (2, 1), (0, 0)])[:, 1:-1, :, :C - 1].transpose(0, 3, 1, 2)
    ref = np.concatenate([ref, ref], axis=1).mean(axis=(2, 3)).reshape(N, C - 1, 2)
    assert max_err(run_dialect(model, x), ref) <= TOL


def test_strided_spatial_slice_is_a_one_by_one_maxpool():
    b = Builder((N, H, W, C))
    y = b.op("Slice", [b.x], (N, 3, 2, C), starts=[1, -1], ends=[7, -100], axes=[1, 2],
             steps=[2, -2], name="rev")
    with pytest.raises(UnsupportedOpError, match="positive steps"):
        convert(b.model(y))
    b = Builder((N, H, W, C))
    y = b.op("Slice", [b.x], (N, 3, 2, C - 1), starts=[1, 0, 1], ends=[7, 5, 9], axes=[1, 2, 3],
             steps=[2, 3, 1], name="strided")
    model = b.model(y)
    convert(model)
    assert _ops(model) == ["Slice", "MaxPool"]
    x = rand(N, H, W, C)
    assert max_err(run_dialect(model, x), x[:, 1:7:2, 0:5:3, 1:]) == 0


def test_select_ops_changes_nothing_on_a_dialect_graph():
    b = Builder((N, H, W, C))
    y = b.op("Relu", [b.x], (N, H, W, C), domain=DIALECT)
    model = b.model(y)
    assert SelectOps()(model, PassContext()).modified is False
    assert _ops(model) == ["Relu"]
