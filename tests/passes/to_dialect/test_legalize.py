"""Legalisation: exact dialect subgraphs for ops outside the dialect, and one error for the rest."""
from __future__ import annotations

import numpy as np
import pytest

from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.ir import DIALECT
from nhwc_onnx.passes.base import PassContext
from nhwc_onnx.passes.to_dialect.select_and_legalize import Legalize
from tests.passes.dialect_oracles import Builder, convert, max_err, rand, run_dialect

N, H, W, C = 2, 6, 5, 3
TOL = 1e-5
SHAPE = (N, H, W, C)


def _ops(model):
    return model.graph.op_counts()


def _run(model, x):
    return run_dialect(model, x).astype(np.float64)


def test_sub_and_neg_are_exact_negations():
    b = Builder(SHAPE)
    bias = rand(C)
    s1 = b.op("Sub", [b.x, b.const(bias, "b")], SHAPE, name="sub_const")
    s2 = b.op("Sub", [b.const(bias.reshape(1, 1, 1, C), "b2"), s1], SHAPE, name="rsub")
    s3 = b.op("Sub", [s2, b.x], SHAPE, name="sub")
    y = b.op("Neg", [s3], SHAPE, name="neg")
    model = b.model(y)
    convert(model)
    assert "Sub" not in _ops(model) and _ops(model)["AddBias"] == 2
    x = rand(*SHAPE)
    xf = x.astype(np.float32)
    expected = -((bias - (xf - bias)) - xf)  # float32 arithmetic, as the source computes it
    assert np.array_equal(run_dialect(model, x), expected.astype(np.float32))


def test_division_by_powers_of_two_only():
    b = Builder(SHAPE)
    d1 = b.op("Div", [b.x, b.const(np.float32(4.0), "four")], SHAPE, name="div4")
    d2 = b.op("Div", [d1, b.const(np.array([0.5, -2.0, 8.0], np.float32), "v")], SHAPE,
              name="div_vec")
    model = b.model(d2)
    convert(model)
    assert _ops(model) == {"BatchNormalization": 1, "Scale": 1}
    x = rand(*SHAPE)
    expected = (x / np.float32(4)) / np.array([0.5, -2.0, 8.0], np.float32)
    assert np.array_equal(run_dialect(model, x), expected)


def test_division_by_three_is_multiplication_up_to_one_rounding_step():
    b = Builder(SHAPE)
    model = b.model(b.op("Div", [b.x, b.const(np.float32(3.0), "three")], SHAPE, name="div3"))
    ctx = convert(model)
    assert [d.data["exact"] for d in ctx.decisions if d.node == "div3"
            and d.kind == "legalize" and "exact" in d.data] == [False]
    x = rand(*SHAPE)
    got = _run(model, x)
    expected = x / np.float32(3.0)
    ulp = np.spacing(np.abs(expected).astype(np.float32))
    assert np.all(np.abs(got - expected) <= ulp)


def test_min_clip_and_general_bounds():
    b = Builder(SHAPE)
    other = b.op("Sigmoid", [b.x], SHAPE, name="sig")
    m = b.op("Min", [b.x, other], SHAPE, name="min")
    c1 = b.op("Clip", [m], SHAPE, name="clip", min=-0.25, max=0.5)
    c2 = b.op("Clip", [c1], SHAPE, name="relu", min=0.0)
    c3 = b.op("Clip", [b.x], SHAPE, name="cap", max=0.3)
    y = b.op("Add", [c2, c3], SHAPE, name="out")
    model = b.model(y)
    convert(model)
    assert "Min" not in _ops(model) and "Clip" not in _ops(model)
    x = rand(*SHAPE)
    sig = 1 / (1 + np.exp(-x.astype(float)))
    ref = np.maximum(np.clip(np.minimum(x, sig), -0.25, 0.5), 0) + np.minimum(x, 0.3)
    assert max_err(_run(model, x), ref) <= 1e-6


def test_squared_difference_and_scalar_tensors():
    b = Builder(SHAPE)
    other = b.op("Sigmoid", [b.x], SHAPE, name="sig")
    sq = b.op("SquaredDifference", [b.x, other], SHAPE, name="sqdiff")
    mean = b.op("ReduceMean", [sq], (), axes=[0, 1, 2, 3], keepdims=0, name="mse")
    total = b.op("Add", [mean, b.const(np.float32(1.0), "one")], (), name="plus_one")
    model = b.model(total)
    convert(model)
    x = rand(*SHAPE)
    d = x - (1 / (1 + np.exp(-x.astype(float))))
    assert model.graph.outputs[0].shape == ()
    # (the runtime's lowering stores 0-d initializers as shape (1,), hence the ravel)
    assert max_err(_run(model, x).ravel(), np.asarray([(d * d).mean() + 1.0])) <= 1e-6


def test_prelu_with_a_non_channel_slope():
    slope = rand(1, H, W, 1)
    b = Builder(SHAPE)
    y = b.op("PRelu", [b.x, b.const(slope, "slope")], SHAPE, name="prelu")
    model = b.model(y)
    convert(model)
    assert "PRelu" not in _ops(model)
    x = rand(*SHAPE)
    expected = np.where(x >= 0, x, x * slope)
    assert np.array_equal(run_dialect(model, x), expected)


def test_gather_with_constant_indices():
    b = Builder(SHAPE)
    g1 = b.op("Gather", [b.x, b.const(np.array([2, 0, -1], np.int64), "idx")], (N, H, W, 3),
              axis=-1, name="pick")
    g2 = b.op("Gather", [g1, b.const(np.array(1, np.int64), "row")], (N, W, 3), axis=1,
              name="row")
    model = b.model(g2)
    convert(model)
    x = rand(*SHAPE)
    assert max_err(_run(model, x), x[..., [2, 0, 2]][:, 1]) == 0


def test_split_becomes_slices():
    b = Builder(SHAPE)
    node = b.g.make_node("Split", [b.x], {"axis": -1, "split": [1, 2]}, name="split", outputs=2)
    node.outputs[0].shape, node.outputs[1].shape = (N, H, W, 1), (N, H, W, 2)
    y = b.op("Concat", [node.outputs[1], node.outputs[0]], SHAPE, axis=3, name="swap")
    model = b.model(y)
    convert(model)
    assert _ops(model) == {"Concat": 1, "Slice": 2}
    x = rand(*SHAPE)
    assert max_err(_run(model, x), np.concatenate([x[..., 1:], x[..., :1]], axis=3)) == 0


def test_broadcasts_squeeze_excite_and_constants():
    b = Builder(SHAPE)
    g = b.op("GlobalAveragePool", [b.x], (N, 1, 1, C), data_format="NHWC", name="gap")
    s = b.op("Sigmoid", [g], (N, 1, 1, C), name="gate")
    se = b.op("Mul", [b.x, s], SHAPE, name="excite")
    row = rand(1, H, 1, 1)
    y = b.op("Add", [se, b.const(row, "row")], SHAPE, name="add_row")
    z = b.op("Add", [y, b.const(np.float32(0.5), "half")], SHAPE, name="add_scalar")
    per_channel = rand(C)
    v = b.op("Mul", [z, b.const(per_channel, "per_channel")], SHAPE, name="mul_channel")
    model = b.model(v)
    convert(model)
    counts = _ops(model)
    assert counts["UpSampling2D"] == 1 and counts["AddBias"] == 1
    assert counts["BatchNormalization"] == 1
    x = rand(*SHAPE)
    gate = 1 / (1 + np.exp(-x.mean(axis=(1, 2), keepdims=True).astype(float)))
    ref = ((x * gate + row) + 0.5) * per_channel
    assert max_err(_run(model, x), ref) <= 1e-5


def test_sum_with_broadcasting_and_mean_of_two():
    b = Builder(SHAPE)
    g = b.op("ReduceMean", [b.x], (N, 1, W, C), axes=[1], keepdims=1, name="rows")
    s = b.op("Sum", [b.x, g, b.x], SHAPE, name="sum")
    m = b.op("Mean", [s, b.x], SHAPE, name="mean")
    model = b.model(m)
    convert(model)
    x = rand(*SHAPE)
    ref = (2 * x + x.mean(axis=1, keepdims=True) + x) / 2
    assert max_err(_run(model, x), ref) <= TOL


@pytest.mark.parametrize("coord,rule", [
    ("asymmetric", "floor"), ("half_pixel", "round_prefer_floor"),
    ("tf_half_pixel_for_nn", "floor"),
    # align_corners happens to read the same rows for these sizes: the brute-force check finds it
    ("align_corners", "round_prefer_floor"),
])
def test_nearest_resize_equal_to_upsampling(coord, rule):
    b = Builder(SHAPE)
    scales = [1.0, 2.0, 3.0, 1.0] if coord != "align_corners" else [1.0, 2.0, 2.0, 1.0]
    y = b.op("Resize", [b.x], (N, 2 * H, int(scales[2]) * W, C), mode="nearest", scales=scales,
             coordinate_transformation_mode=coord, nearest_mode=rule, name="up")
    model = b.model(y)
    convert(model)
    assert _ops(model) == {"UpSampling2D": 1}
    x = rand(*SHAPE)
    ref = x.repeat(2, axis=1).repeat(int(scales[2]), axis=2)
    assert max_err(_run(model, x), ref) == 0


def test_resize_that_differs_is_refused():
    b = Builder(SHAPE)
    y = b.op("Resize", [b.x], (N, 2 * H, 2 * W, C), mode="nearest", scales=[1.0, 2.0, 2.0, 1.0],
             coordinate_transformation_mode="asymmetric", nearest_mode="ceil", name="up")
    with pytest.raises(UnsupportedOpError, match="UpSampling2D reads"):
        convert(b.model(y))


def _bilinear_half_pixel(x, sh, sw):
    def axis_weights(n, s):
        src = (np.arange(n * s) + 0.5) / s - 0.5
        src = np.clip(src, 0, n - 1)
        lo = np.floor(src).astype(int)
        hi = np.minimum(lo + 1, n - 1)
        return lo, hi, src - lo

    lo_h, hi_h, fh = axis_weights(x.shape[1], sh)
    lo_w, hi_w, fw = axis_weights(x.shape[2], sw)
    x = x.astype(float)
    top = x[:, lo_h] * (1 - fh)[None, :, None, None] + x[:, hi_h] * fh[None, :, None, None]
    return top[:, :, lo_w] * (1 - fw)[None, None, :, None] + top[:, :, hi_w] * fw[None, None, :,
                                                                                     None]


def test_linear_half_pixel_resize_is_upsampling_linear():
    b = Builder(SHAPE)
    y = b.op("Resize", [b.x], (N, 2 * H, 2 * W, C), mode="linear", sizes=[N, 2 * H, 2 * W, C],
             coordinate_transformation_mode="half_pixel", name="up")
    model = b.model(y)
    convert(model)
    assert model.graph.nodes[0].attrs == {"size": [1, 2, 2, 1], "mode": "linear"}
    x = rand(*SHAPE)
    assert max_err(_run(model, x), _bilinear_half_pixel(x, 2, 2)) <= TOL


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(mode):
    bs, cc = 2, 3
    b = Builder((N, H, W, bs * bs * cc))
    y = b.op("DepthToSpace", [b.x], (N, H * bs, W * bs, cc), blocksize=bs, mode=mode,
             data_format="NHWC", name="d2s")
    model = b.model(y)
    convert(model)
    x = rand(N, H, W, bs * bs * cc)
    ref = np.zeros((N, H * bs, W * bs, cc))
    for bi in range(bs):
        for bj in range(bs):
            for c in range(cc):
                ch = (bi * bs + bj) * cc + c if mode == "DCR" else c * bs * bs + bi * bs + bj
                ref[:, bi::bs, bj::bs, c] = x[..., ch]
    assert max_err(_run(model, x), ref) == 0


def test_hard_sigmoid_and_hard_swish():
    b = Builder(SHAPE)
    hs = b.op("HardSigmoid", [b.x], SHAPE, alpha=0.3, beta=0.4, name="hsig")
    sw = b.op("HardSwish", [b.x], SHAPE, name="hswish")
    y = b.op("Add", [hs, sw], SHAPE, name="out")
    model = b.model(y)
    convert(model)
    x = rand(*SHAPE, low=-5, high=5)
    ref = np.clip(0.3 * x + 0.4, 0, 1) + x * np.clip(x / 6 + 0.5, 0, 1)
    assert max_err(_run(model, x), ref) <= 1e-5


@pytest.mark.parametrize("mode,value", [("edge", 0.0), ("reflect", 0.0), ("constant", 1.5)])
def test_pad_modes_as_concat_of_slices(mode, value):
    pads = [0, 2, 1, 0, 0, 1, 3, 0]
    b = Builder(SHAPE)
    y = b.op("Pad", [b.x], (N, H + 3, W + 4, C), pads=pads, mode=mode, value=value, name="pad")
    model = b.model(y)
    convert(model)
    x = rand(*SHAPE)
    widths = [(0, 0), (2, 1), (1, 3), (0, 0)]
    kw = {"constant_values": value} if mode == "constant" else {}
    assert max_err(_run(model, x), np.pad(x, widths, mode=mode, **kw)) == 0


def test_tile_expand_and_reductions():
    b = Builder(SHAPE)
    t = b.op("Tile", [b.x, b.const(np.array([1, 1, 2, 1], np.int64), "reps")], (N, H, 2 * W, C),
             name="tile")
    g = b.op("ReduceMax", [t], (N, C), axes=[1, 2], keepdims=0, name="gmax")
    e = b.op("Expand", [g, b.const(np.array([3, N, C], np.int64), "shape")], (3, N, C),
             name="expand")
    r = b.op("ReduceSum", [e], (1, N, C), axes=[0], keepdims=1, name="sum3")
    model = b.model(r)
    with pytest.raises(UnsupportedOpError, match="ReduceSum computed as ReduceMean"):
        convert(model, strict=True)  # 3 cells: ReduceMean * 3 is rounding-level
    ctx = convert(model)
    assert [d.data["rewrite"] for d in ctx.decisions if d.kind == "rounding"] == [
        "reduce_sum_scale"]
    x = rand(*SHAPE)
    assert max_err(_run(model, x), 3 * np.tile(x, (1, 1, 2, 1)).max(axis=(1, 2))[None]) <= TOL
    b = Builder(SHAPE)
    t = b.op("Tile", [b.x, b.const(np.array([1, 1, 2, 1], np.int64), "reps")], (N, H, 2 * W, C),
             name="tile")
    g = b.op("ReduceMin", [t], (N, 1, 1, C), axes=[1, 2], keepdims=1, name="gmin")
    e = b.op("Expand", [g, b.const(np.array([N, 4, 1, C], np.int64), "shape")], (N, 4, 1, C),
             name="expand")
    r = b.op("ReduceSum", [e], (N, 1, 1, C), axes=[1, 2], keepdims=1, name="sum4")
    model = b.model(r)
    convert(model)
    x = rand(*SHAPE)
    assert max_err(_run(model, x), 4 * x.min(axis=(1, 2), keepdims=True)) <= TOL


def test_everything_left_over_is_one_error():
    b = Builder(SHAPE)
    e = b.op("Exp", [b.x], SHAPE, name="exp")
    lg = b.op("Log", [e], SHAPE, name="log")
    d = b.op("Div", [lg, b.x], SHAPE, name="div")
    s = b.op("Softmax", [d], SHAPE, axis=1, name="softmax_h")
    ok = b.op("Relu", [s], SHAPE, name="relu")
    model = b.model(ok)
    with pytest.raises(UnsupportedOpError) as err:
        convert(model)
    by_node = {p.node: p.reason for p in err.value.problems}
    assert set(by_node) == {"exp", "log", "div", "softmax_h"}
    assert "non-constant" in by_node["div"] and "axis 1" in by_node["softmax_h"]


def test_legalize_changes_nothing_on_a_dialect_graph():
    b = Builder(SHAPE)
    y = b.op("Scale", [b.x], SHAPE, domain=DIALECT, scale=2.0)
    model = b.model(y)
    assert Legalize()(model, PassContext()).modified is False


def test_non_float32_graph_io_is_refused_not_a_bug():
    b = Builder(SHAPE)
    b.x.dtype = "float16"
    relu = b.op("Relu", [b.x], SHAPE, name="relu")
    relu.dtype = "float16"
    with pytest.raises(UnsupportedOpError) as err:
        convert(b.model(relu))
    text = str(err.value)
    assert "'x' (graph input)" in text and "'relu' (graph output)" in text
    assert "element type float16" in text
