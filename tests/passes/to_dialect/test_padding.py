"""Padding normalisation: refusals (one error, every node, with numbers), the approximation
option, the non-negativity proof for MaxPool, ConvTranspose forms, and the no-change case."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, event, example, given, settings
from hypothesis import strategies as st

from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.passes.base import PassContext
from nhwc_onnx.passes.to_dialect.normalize_padding import NormalizePadding
from tests.passes.dialect_oracles import (
    Builder,
    conv_transpose_ref,
    convert,
    max_err,
    pool_ref,
    rand,
    run_dialect,
)

N, C = 2, 3


def _pool(b, op, src, shape, name, **attrs):
    return b.op(op, [src], shape, name=name, data_format="NHWC", **attrs)


def test_all_refused_nodes_in_one_error_with_numbers():
    b = Builder((N, 5, 6, C))
    # cip=0 average with an asymmetric begin pad of 2: SAME would start at -1, Pad+VALID would
    # divide border outputs by 3 instead of the real cells.
    a1 = _pool(b, "AveragePool", b.x, (N, 5, 4, C), "avg_lopsided", kernel_shape=[3, 3],
               pads=[2, 0, 0, 0], count_include_pad=0)
    # dilated max pool reading padding on an input that may be negative.
    m1 = _pool(b, "MaxPool", b.x, (N, 3, 6, C), "max_dilated", kernel_shape=[3, 2],
               dilations=[2, 2], pads=[1, 1, 1, 1])
    # Caffe AVE, ceil rounding: the last window (rows 5..7) divides by 2 (clipped to input +
    # pad); neither SAME (3 outputs) nor Pad+VALID (divides by 3) reproduces that.
    a2 = _pool(b, "AveragePool", b.x, (N, 4, 4, C), "avg_counts_pads", kernel_shape=[3, 3],
               strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1)
    other = b.op("Exp", [b.x], (N, 5, 6, C), name="exp")  # unsupported for another reason
    model = b.model(a1, m1, a2, other)
    with pytest.raises(UnsupportedOpError) as err:
        convert(model, strict=True)  # the averages' divisor-ratio form is rounding-level
    problems = {p.node: p for p in err.value.problems}
    assert set(problems) == {"avg_lopsided", "max_dilated", "avg_counts_pads", "exp"}
    assert problems["avg_lopsided"].rule == "padding"
    assert "pads [2, 0, 0, 0]" in problems["avg_lopsided"].reason
    assert "divides by 2 in the source, 3 here" in problems["avg_counts_pads"].reason
    assert "--strict" in problems["avg_counts_pads"].reason
    assert "--strict" not in problems["max_dilated"].reason
    assert "provably >= 0" in problems["max_dilated"].reason
    assert "4 node(s)" in str(err.value)


@pytest.mark.parametrize("cip,pads,ceil_mode", [
    (1, [1, 1, 1, 1], 1),  # Caffe AVE, ceil: the last window divides by the cells in input + pad
    (0, [1, 1, 1, 1], 0),  # PyTorch count_include_pad=False, stride 2 on an even size
])
def test_divisor_ratio_is_a_default_rounding_rewrite_refused_under_strict(cip, pads, ceil_mode):
    def build():
        b = Builder((N, 6, 7, C))
        out = (N, 4, 4, C) if ceil_mode else (N, 3, 4, C)
        y = _pool(b, "AveragePool", b.x, out, "avg", kernel_shape=[3, 3], strides=[2, 2],
                  pads=pads, ceil_mode=ceil_mode, count_include_pad=cip)
        return b.model(y), out

    model, out = build()
    ctx = convert(model)
    assert not ctx.warnings
    rounding = [d for d in ctx.decisions if d.kind == "rounding"]
    assert [(d.node, d.data["rewrite"], d.data["bound_ulps"]) for d in rounding] == [
        ("avg", "average_divisor_ratio", 4)]
    x = rand(N, 6, 7, C)
    extent = ((-1, 7), (-1, 8)) if cip else None
    exact = pool_ref(x.astype(float), "avg", (3, 3), (2, 2), (1, 1), out[1:3], extent)
    assert max_err(run_dialect(model, x), exact) <= 1e-6
    assert model.graph.op_counts() == {"AveragePool": 1, "Mul": 1, "Pad": 1}
    with pytest.raises(UnsupportedOpError, match="--strict refuses"):
        convert(build()[0], strict=True)


def test_pool_window_covering_the_whole_input_becomes_valid_with_a_larger_kernel():
    b = Builder((N, 6, 6, C))
    # Inception v1's last pool in ONNX: 7x7 window with end padding on a 6x6 map.
    y = _pool(b, "AveragePool", b.x, (N, 1, 1, C), "avg", kernel_shape=[7, 7], pads=[0, 0, 1, 1])
    model = b.model(y)
    convert(model)
    node = model.graph.nodes[0]
    assert (node.op, node.attrs["kernel_shape"], node.attrs["pads"]) == ("AveragePool", [6, 6],
                                                                         "VALID")
    x = rand(N, 6, 6, C)
    assert max_err(run_dialect(model, x), x.mean(axis=(1, 2), keepdims=True)) <= 1e-6


@pytest.mark.parametrize("activation", ["Relu", "Sigmoid", "concat"])
def test_maxpool_zero_pad_allowed_on_proven_nonnegative_input(activation):
    b = Builder((N, 7, 6, C))
    if activation == "concat":
        r = b.op("Relu", [b.x], (N, 7, 6, C), name="relu")
        s = b.op("Clip", [b.x], (N, 7, 6, C), name="clip", min=0.0, max=6.0)
        src = b.op("Concat", [r, s], (N, 7, 6, 2 * C), name="cat", axis=3)
        c = 2 * C
    else:
        src = b.op(activation, [b.x], (N, 7, 6, C), name="act")
        c = C
    y = _pool(b, "MaxPool", src, (N, 4, 3, c), "pool", kernel_shape=[3, 3], strides=[2, 2],
              pads=[0, 0, 1, 1], ceil_mode=1)
    model = b.model(y)
    ctx = convert(model)
    assert "Pad" in model.graph.op_counts()
    assert [d.data["choice"] for d in ctx.decisions if d.kind == "padding"] == ["PAD"]
    x = rand(N, 7, 6, C)
    act = {"Relu": np.maximum(x, 0), "Sigmoid": 1 / (1 + np.exp(-x.astype(float))),
           "concat": np.concatenate([np.maximum(x, 0), np.clip(x, 0, 6)], axis=3)}[activation]
    ref = pool_ref(act.astype(float), "max", (3, 3), (2, 2), (0, 0), (4, 3))
    assert max_err(run_dialect(model, x), ref) <= 1e-5


@pytest.mark.parametrize("relu,pads,strides", [(False, [0, 0, 0, 0], [1, 1]),
                                                (True, [2, 1, 1, 2], [2, 3])])
def test_dilated_maxpool_is_a_max_of_shifted_slices(relu, pads, strides):
    b = Builder((N, 9, 8, C))
    src = b.op("Relu", [b.x], (N, 9, 8, C), name="relu") if relu else b.x
    outs = [(9 + pads[0] + pads[2] - 5) // strides[0] + 1,
            (8 + pads[1] + pads[3] - 3) // strides[1] + 1]
    y = _pool(b, "MaxPool", src, (N, *outs, C), "pool", kernel_shape=[3, 2], dilations=[2, 2],
              strides=strides, pads=pads)
    model = b.model(y)
    convert(model)
    x = rand(N, 9, 8, C)
    xin = np.maximum(x, 0) if relu else x
    ref = pool_ref(xin.astype(float), "max", (3, 2), strides, (pads[0], pads[1]), outs,
                   dilations=(2, 2))
    assert max_err(run_dialect(model, x), ref) == 0


def test_maxpool_on_a_possibly_negative_input_uses_edge_padding():
    b = Builder((N, 7, 6, C))
    # H: ceil rounding makes 4 windows starting at row 0 (TF SAME would start at -1).
    y = _pool(b, "MaxPool", b.x, (N, 4, 3, C), "pool", kernel_shape=[3, 3], strides=[2, 2],
              pads=[0, 0, 1, 1], ceil_mode=1)
    model = b.model(y)
    ctx = convert(model)
    assert "Pad" not in model.graph.op_counts() and "Concat" in model.graph.op_counts()
    assert any("edge" in d.detail for d in ctx.decisions if d.kind == "padding")
    x = rand(N, 7, 6, C, low=-2.0, high=-1.0)  # all negative: a zero pad would win everywhere
    ref = pool_ref(x.astype(float), "max", (3, 3), (2, 2), (0, 0), (4, 3))
    assert max_err(run_dialect(model, x), ref) == 0


def test_normalize_padding_changes_nothing_on_tf_padding():
    b = Builder((N, 7, 6, C))
    y = _pool(b, "MaxPool", b.x, (N, 4, 3, C), "pool", kernel_shape=[3, 3], strides=[2, 2],
              auto_pad="SAME_UPPER")
    z = b.op("Conv", [y, b.const(rand(2, C, 1, 1), "W")], (N, 4, 3, 2), kernel_shape=[1, 1],
             auto_pad="VALID", data_format="NHWC")
    model = b.model(z)
    ctx = PassContext()
    assert NormalizePadding()(model, ctx).modified is False
    assert [d.data["choice"] for d in ctx.decisions] == ["SAME", "VALID"]


ct_axis = st.tuples(st.integers(1, 5), st.integers(1, 4), st.integers(1, 3), st.integers(1, 2),
                    st.integers(0, 2), st.integers(0, 2), st.integers(0, 2))


@settings(max_examples=40, deadline=None)
@given(h=ct_axis, w=ct_axis, form=st.sampled_from(["pads", "SAME_UPPER", "VALID", "shape"]))
@example(h=(4, 3, 2, 1, 1, 1, 1), w=(3, 3, 2, 1, 1, 1, 1), form="pads")  # PyTorch-style x2
@example(h=(4, 1, 3, 1, 0, 0, 0), w=(3, 2, 3, 1, 0, 0, 0), form="SAME_UPPER")  # kernel < stride
@example(h=(4, 3, 1, 1, 0, 2, 0), w=(3, 3, 1, 2, 0, 0, 1), form="pads")  # VALID, then Slice
def test_conv_transpose_always_exact(h, w, form):
    """ONNX ConvTranspose-11 windows: SAME, VALID, or VALID then Slice; never refused."""
    windows, attrs_pads, out_shape = [], [], []
    for i, k, s, d, op, pb, pe in (h, w):
        op = op % max(s, d)  # ONNX requires output_padding < stride or dilation
        full = (i - 1) * s + (k - 1) * d + 1 + op
        if form == "pads":
            start, length = pb, full - pb - pe
        elif form == "SAME_UPPER":
            total = max(full - i * s, 0)
            start, length = total // 2, i * s
        elif form == "VALID":
            start, length = 0, full
        else:  # explicit output_shape, NOTSET: the odd crop goes to the start (ONNX)
            length = max(full - pb - pe, 1)
            total = max(full - length, 0)
            start = total - total // 2
        assume(length >= 1)
        windows.append((start, length))
        out_shape.append(length)
        attrs_pads.append(op)
    wgt = rand(C, 2, h[1], w[1])
    b = Builder((N, h[0], w[0], C))
    attrs = {"kernel_shape": [h[1], w[1]], "strides": [h[2], w[2]], "dilations": [h[3], w[3]],
                 "output_padding": attrs_pads, "data_format": "NHWC"}
    if form == "pads":
        attrs["pads"] = [h[5], w[5], h[6], w[6]]
    elif form == "shape":
        attrs["output_shape"] = out_shape
    else:
        attrs["auto_pad"] = form
    bias = rand(2)
    y = b.op("ConvTranspose", [b.x, b.const(wgt, "W"), b.const(bias, "B")],
             (N, *out_shape, 2), name="deconv", **attrs)
    model = b.model(y)
    ctx = convert(model)
    event(" ".join(d.detail.split(";")[0].split(" then")[0] for d in ctx.decisions
                   if d.kind == "padding") + (" + Slice" if "Slice" in model.graph.op_counts()
                                              else ""))
    x = rand(N, h[0], w[0], C)
    ref = conv_transpose_ref(x, wgt, bias, (h[2], w[2]), (h[3], w[3]), windows)
    assert max_err(run_dialect(model, x), ref) <= 1e-5


def test_remembered_axis_verdicts_equal_fresh_ones_for_every_field():
    # analyse_axis is memoised: axes differing in any one field must not share a verdict.
    import itertools

    from nhwc_onnx.passes.to_dialect import padding_math as pm

    base = {"size": 7, "kernel": 3, "stride": 2, "dilation": 1, "begin": 1, "end": 1, "out": 4,
            "count_include_pad": False}
    variants = [base] + [dict(base, **{k: v}) for k, v in [
        ("size", 8), ("kernel", 2), ("stride", 1), ("dilation", 2), ("begin", 0), ("end", 0),
        ("out", 3), ("count_include_pad", True)]]
    pm.analyse_axis.cache_clear()
    checked = 0
    for fields, kind, dilation in itertools.product(variants, (pm.CONV, pm.MAX, pm.AVG), (1, 2)):
        src = pm.AxisSource(**fields)
        for _ in range(2):  # the second call is answered from memory
            assert pm.analyse_axis(src, kind, dilation) == pm.analyse_axis.__wrapped__(
                src, kind, dilation)
        checked += 1
    assert checked == 54 and pm.analyse_axis.cache_info().hits >= 54
