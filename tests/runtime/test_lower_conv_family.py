"""Lowered conv/pool family vs independent oracles: TensorFlow kernels and numpy formulas.

Every model is one dialect node fed random data whose dimensions all differ; tolerance is
max|diff| <= 1e-5 * max(1, max|ref|) (float32 sums of a few dozen products).
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from nhwc_onnx.ir import DIALECT, Graph, Model, Value
from nhwc_onnx.runtime import run
from nhwc_onnx.schemas import validate

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

RNG_SEED = 1234


def rng(seed: int = RNG_SEED) -> np.random.Generator:
    return np.random.default_rng(seed)


def randn(gen: np.random.Generator, *shape: int) -> np.ndarray:
    return gen.standard_normal(shape).astype(np.float32)


def one_node_model(op: str, x: np.ndarray, params: list, attrs: dict | None = None,
                   extra_inputs: list | None = None) -> tuple[Model, dict]:
    """A model with graph input x (plus ``extra_inputs`` graph inputs) and constant params.

    ``params`` entries are arrays (constants) or None (absent optional input). Returns the model
    and the feeds dict. The model must validate cleanly: a test of numbers is also a test that
    the schema accepts what it computes.
    """
    g = Graph()
    feeds = {"x": x}
    inputs = [g.add_input(Value("x", shape=x.shape))]
    for i, arr in enumerate(extra_inputs or []):
        name = f"x{i + 1}"
        inputs.append(g.add_input(Value(name, shape=arr.shape)))
        feeds[name] = arr
    for i, arr in enumerate(params):
        inputs.append(None if arr is None else g.constant(np.asarray(arr), f"p{i}"))
    node = g.make_node(op, inputs, dict(attrs or {}), name=op.lower(), domain=DIALECT)
    g.outputs = [node.output]
    model = Model(g)
    issues = validate(model)
    assert issues == [], [str(i) for i in issues]
    return model, feeds


def run_one(op: str, x: np.ndarray, params: list, attrs: dict | None = None,
            extra_inputs: list | None = None) -> np.ndarray:
    model, feeds = one_node_model(op, x, params, attrs, extra_inputs)
    (out,) = run(model, feeds).values()
    return out


def assert_close(got: np.ndarray, ref: np.ndarray, rel: float = 1e-5) -> float:
    """max|got-ref| <= rel * max(1, max|ref|); returns the max abs error."""
    ref = np.asarray(ref, np.float32)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    err = float(np.max(np.abs(got - ref))) if ref.size else 0.0
    scale = max(1.0, float(np.max(np.abs(ref))) if ref.size else 1.0)
    assert err <= rel * scale, f"max abs error {err} > {rel} * {scale}"
    return err


def tf():
    """TensorFlow, imported on first use (it takes seconds)."""
    import tensorflow

    return tensorflow


def tf_conv(x, w_mhwc, strides, dilations, pads, group=1):
    """Oracle for dialect Conv: tf.nn.conv2d per channel group (filter HWIO)."""
    t = tf()
    xs = np.split(x, group, axis=3)
    ws = np.split(w_mhwc, group, axis=0)
    outs = [t.nn.conv2d(xg, wg.transpose(1, 2, 3, 0), [1, *strides, 1], pads,
                        dilations=[1, *dilations, 1]).numpy() for xg, wg in zip(xs, ws)]
    return np.concatenate(outs, axis=3)


# -- Conv ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("x_shape, m, k, s, d, group, pads", [
    ((2, 7, 5, 3), 4, (3, 2), (1, 1), (1, 1), 1, "SAME"),
    ((2, 7, 5, 3), 4, (3, 2), (1, 1), (1, 1), 1, "VALID"),
    ((2, 7, 9, 3), 5, (3, 3), (2, 2), (1, 1), 1, "SAME"),   # odd sizes, stride 2
    ((2, 8, 6, 3), 5, (4, 3), (2, 2), (1, 1), 1, "SAME"),   # even sizes, odd total padding
    ((2, 7, 9, 3), 5, (3, 3), (2, 3), (1, 1), 1, "VALID"),
    ((2, 9, 7, 3), 4, (3, 2), (1, 1), (2, 3), 1, "SAME"),   # dilation
    ((2, 9, 7, 3), 4, (3, 2), (1, 1), (2, 3), 1, "VALID"),
    ((2, 7, 5, 6), 4, (3, 3), (1, 2), (1, 1), 2, "SAME"),   # groups
    ((2, 7, 5, 6), 9, (2, 3), (2, 1), (1, 1), 3, "VALID"),
    ((2, 1, 1, 3), 4, (3, 3), (1, 1), (1, 1), 1, "SAME"),   # 1x1 spatial
    ((2, 1, 1, 3), 4, (1, 1), (2, 2), (1, 1), 1, "VALID"),
    ((2, 8, 7, 3), 4, (1, 2), (3, 3), (1, 1), 1, "SAME"),   # kernel < stride
    ((2, 11, 10, 3), 4, (3, 3), (2, 2), (2, 2), 1, "SAME"),  # stride and dilation both > 1
])
@pytest.mark.parametrize("with_bias", [True, False])
def test_conv_matches_tf_conv2d(x_shape, m, k, s, d, group, pads, with_bias):
    gen = rng()
    x = randn(gen, *x_shape)
    w = randn(gen, m, *k, x_shape[3] // group)
    b = randn(gen, m) if with_bias else None
    attrs = {"pads": pads, "strides": list(s), "dilations": list(d), "group": group}
    got = run_one("Conv", x, [w, b], attrs)
    ref = tf_conv(x, w, s, d, pads, group) + (b if with_bias else 0)
    assert_close(got, ref)


def test_conv_with_stride_and_dilation_matches_a_direct_sum():
    """tf.nn.convolution refuses stride and dilation both > 1; check TF's conv2d by hand."""
    gen = rng(7)
    x, w = randn(gen, 1, 9, 8, 2), randn(gen, 3, 2, 2, 2)
    got = run_one("Conv", x, [w], {"pads": "VALID", "strides": [2, 3], "dilations": [2, 3]})
    ref = np.zeros((1, 4, 2, 3), np.float32)  # ceil((9-3+1)/2), ceil((8-4+1)/3)
    for i in range(4):
        for j in range(2):
            patch = x[0, 2 * i:2 * i + 3:2, 3 * j:3 * j + 4:3, :]  # (2, 2, C) taps
            ref[0, i, j] = np.einsum("hwc,mhwc->m", patch, w)
    assert_close(got, ref)


# -- DepthwiseConv2d -------------------------------------------------------------------------------


@pytest.mark.parametrize("x_shape, k, mult, s, d, pads", [
    ((2, 7, 5, 3), (3, 3), 1, (1, 1), (1, 1), "SAME"),
    ((2, 7, 5, 3), (3, 2), 2, (1, 1), (1, 1), "VALID"),
    ((2, 9, 8, 3), (3, 3), 3, (2, 2), (1, 1), "SAME"),
    ((2, 9, 8, 3), (2, 3), 2, (2, 1), (1, 1), "VALID"),
    ((2, 9, 7, 4), (3, 3), 2, (1, 1), (2, 3), "SAME"),
    ((2, 9, 7, 4), (3, 2), 1, (1, 1), (2, 2), "VALID"),
    ((2, 1, 1, 3), (3, 3), 2, (1, 1), (1, 1), "SAME"),
    ((2, 11, 9, 3), (3, 3), 2, (2, 2), (2, 2), "SAME"),
])
def test_depthwise_matches_tf(x_shape, k, mult, s, d, pads):
    gen = rng(3)
    x = randn(gen, *x_shape)
    w = randn(gen, *k, x_shape[3], mult)
    got = run_one("DepthwiseConv2d", x, [w],
                  {"pads": pads, "strides": list(s), "dilations": list(d)})
    # One tf.nn.conv2d per channel: tf.nn.depthwise_conv2d computes another size when stride
    # and dilation are both > 1, and TF's reference depthwise kernel (oneDNN off) supports
    # neither unequal strides nor dilation. The dialect's sizes are Conv's (docs/design.md).
    ref = np.concatenate([
        tf().nn.conv2d(x[..., c:c + 1], w[:, :, c:c + 1, :], [1, *s, 1], pads,
                       dilations=[1, *d, 1]).numpy()
        for c in range(x.shape[-1])], axis=-1)
    assert_close(got, ref)


# -- ConvTranspose ---------------------------------------------------------------------------------


def dilate_kernel(w_hw, d):
    """Insert d-1 zeros between taps: the same kernel undilated (TF's CPU transpose kernel
    rejects dilation > 1)."""
    kh, kw = w_hw.shape[:2]
    out = np.zeros(((kh - 1) * d[0] + 1, (kw - 1) * d[1] + 1, *w_hw.shape[2:]), w_hw.dtype)
    out[::d[0], ::d[1]] = w_hw
    return out


def tf_conv_transpose(x, w_onnx, s, d, pads, out_hw, group=1):
    """tf.nn.conv2d_transpose per group; the dialect's W (C, M/g, kH, kW) is TF's (kH,kW,M,C)."""
    t = tf()
    outs = []
    for xg, wg in zip(np.split(x, group, axis=3), np.split(w_onnx, group, axis=0)):
        shape = [x.shape[0], *out_hw, wg.shape[1]]
        outs.append(t.nn.conv2d_transpose(xg, dilate_kernel(wg.transpose(2, 3, 1, 0), d), shape,
                                          [1, *s, 1], pads).numpy())
    return np.concatenate(outs, axis=3)


@pytest.mark.parametrize("x_shape, m, k, s, d, pads", [
    ((2, 3, 4, 3), 5, (3, 3), (2, 2), (1, 1), "SAME"),
    ((2, 3, 4, 3), 5, (3, 3), (2, 2), (1, 1), "VALID"),
    ((2, 4, 3, 3), 2, (3, 2), (1, 1), (1, 1), "SAME"),
    ((2, 4, 3, 3), 2, (4, 3), (2, 3), (1, 1), "SAME"),      # odd crop: the extra at the end
    ((2, 3, 4, 3), 4, (2, 1), (3, 2), (1, 1), "SAME"),      # kernel < stride: zero-fill
    ((2, 3, 4, 3), 4, (2, 1), (3, 2), (1, 1), "VALID"),
    ((2, 4, 5, 3), 2, (3, 3), (1, 1), (2, 2), "VALID"),     # dilation
    ((2, 4, 5, 3), 2, (3, 2), (1, 1), (2, 1), "SAME"),
    ((2, 1, 1, 3), 4, (3, 3), (2, 2), (1, 1), "SAME"),      # 1x1 spatial
])
def test_conv_transpose_matches_tf(x_shape, m, k, s, d, pads):
    gen = rng(5)
    x = randn(gen, *x_shape)
    w = randn(gen, x_shape[3], m, *k)
    b = randn(gen, m)
    got = run_one("ConvTranspose", x, [w, b],
                  {"pads": pads, "strides": list(s), "dilations": list(d)})
    if pads == "SAME":
        out_hw = [x_shape[1] * s[0], x_shape[2] * s[1]]
    else:
        out_hw = [(x_shape[1 + a] - 1) * s[a] + (k[a] - 1) * d[a] + 1 for a in range(2)]
    ref = tf_conv_transpose(x, w, s, d, pads, out_hw) + b
    assert_close(got, ref)


@pytest.mark.parametrize("pads, out_hw", [
    ("SAME", [5, 7]),   # ceil(o / s) == i: TF accepts these output sizes too
    ("SAME", [6, 8]),
    ("VALID", [8, 10]),  # one row and column past the full result: zeros
])
def test_conv_transpose_output_shape_matches_tf(pads, out_hw):
    gen = rng(11)
    x, w = randn(gen, 2, 3, 4, 3), randn(gen, 3, 2, 3, 3)
    got = run_one("ConvTranspose", x, [w],
                  {"pads": pads, "strides": [2, 2], "output_shape": out_hw})
    assert_close(got, tf_conv_transpose(x, w, (2, 2), (1, 1), pads, out_hw))


def test_grouped_conv_transpose_matches_tf_per_group():
    gen = rng(13)
    x, w = randn(gen, 2, 3, 4, 6), randn(gen, 6, 2, 3, 2)
    got = run_one("ConvTranspose", x, [w], {"pads": "SAME", "strides": [2, 2], "group": 3})
    assert_close(got, tf_conv_transpose(x, w, (2, 2), (1, 1), "SAME", [6, 8], group=3))


@pytest.mark.parametrize("pads, out_pad", [("SAME", [1, 1]), ("VALID", [1, 0]), ("SAME", [0, 1])])
def test_conv_transpose_output_padding_follows_the_dialect_crop(pads, out_pad):
    """output_padding appends zeros to the full TF result before the dialect's crop."""
    gen = rng(17)
    x, w = randn(gen, 2, 3, 4, 3), randn(gen, 3, 2, 3, 3)
    got = run_one("ConvTranspose", x, [w],
                  {"pads": pads, "strides": [2, 2], "output_padding": out_pad})
    full = tf_conv_transpose(x, w, (2, 2), (1, 1), "VALID", [7, 9])
    full = np.pad(full, [(0, 0), (0, out_pad[0]), (0, out_pad[1]), (0, 0)])
    if pads == "SAME":  # o = i*s; crop floor(total/2) at the start
        (th, tw) = (full.shape[1] - 6, full.shape[2] - 8)
        ref = full[:, th // 2:th // 2 + 6, tw // 2:tw // 2 + 8]
    else:
        ref = full
    assert_close(got, ref)


# -- pooling ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("x_shape, k, s, pads", [
    ((2, 7, 5, 3), (3, 3), (2, 2), "SAME"),
    ((2, 7, 5, 3), (3, 3), (2, 2), "VALID"),
    ((2, 8, 6, 3), (2, 2), (2, 2), "SAME"),
    ((2, 9, 7, 3), (3, 2), (1, 1), "SAME"),
    ((2, 9, 7, 3), (4, 3), (3, 2), "SAME"),
    ((2, 9, 7, 3), (4, 3), (3, 2), "VALID"),
    ((2, 8, 7, 3), (1, 2), (3, 3), "SAME"),   # kernel < stride
    ((2, 1, 1, 3), (3, 3), (2, 2), "SAME"),   # 1x1: only the real cell counts
])
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_matches_tf(op, x_shape, k, s, pads):
    gen = rng(19)
    x = randn(gen, *x_shape) - 2.0  # mostly negative: a padded zero would win a max or move a mean
    got = run_one(op, x, [], {"kernel_shape": list(k), "strides": list(s), "pads": pads})
    fn = tf().nn.max_pool2d if op == "MaxPool" else tf().nn.avg_pool2d
    assert_close(got, fn(x, list(k), list(s), pads).numpy())


@pytest.mark.parametrize("op, reduce", [("GlobalAveragePool", np.mean),
                                        ("GlobalMaxPool", np.max)])
def test_global_pools_match_numpy(op, reduce):
    x = randn(rng(23), 2, 7, 5, 3) - 1.0
    assert_close(run_one(op, x, []), reduce(x, axis=(1, 2), keepdims=True))


# -- Pad, SpaceToDepth, UpSampling2D, BatchNormalization ------------------------------------------


@pytest.mark.parametrize("x_shape, paddings", [
    ((2, 7, 5, 3), [[0, 0], [1, 2], [3, 0], [0, 0]]),
    ((2, 7, 5, 3), [[1, 0], [0, 1], [2, 2], [1, 3]]),
    ((3, 5), [[2, 1], [0, 4]]),
])
def test_pad_matches_tf(x_shape, paddings):
    x = randn(rng(29), *x_shape)
    flat = [p for row in paddings for p in row]
    assert_close(run_one("Pad", x, [], {"pads": flat}), tf().pad(x, paddings).numpy())


@pytest.mark.parametrize("x_shape, bs", [((2, 6, 4, 3), 2), ((2, 6, 9, 5), 3), ((1, 4, 8, 2), 4)])
def test_space_to_depth_matches_tf(x_shape, bs):
    x = randn(rng(31), *x_shape)
    got = run_one("SpaceToDepth", x, [], {"blocksize": bs})
    assert np.array_equal(got, tf().nn.space_to_depth(x, bs).numpy())


def test_space_to_depth_matches_the_dialect_formula():
    x = randn(rng(37), 2, 6, 4, 3)
    got = run_one("SpaceToDepth", x, [], {"blocksize": 2})
    for bi in range(2):
        for bj in range(2):
            block = got[..., (bi * 2 + bj) * 3:(bi * 2 + bj + 1) * 3]
            assert np.array_equal(block, x[:, bi::2, bj::2, :])


@pytest.mark.parametrize("x_shape, size", [((2, 7, 5, 3), (2, 3)), ((2, 3, 4, 5), (3, 1)),
                                           ((1, 1, 1, 3), (4, 2))])
def test_upsampling_nearest_matches_floor_formula_and_tf(x_shape, size):
    """TF2 nearest uses half-pixel centres: floor((dst + 0.5) / s) == floor(dst / s) for integer
    s, so both oracles must agree with the dialect's floor(dst / scale) exactly."""
    x = randn(rng(41), *x_shape)
    got = run_one("UpSampling2D", x, [], {"size": [1, *size, 1], "mode": "nearest"})
    rows = np.arange(x_shape[1] * size[0]) // size[0]
    cols = np.arange(x_shape[2] * size[1]) // size[1]
    assert np.array_equal(got, x[:, rows][:, :, cols])
    out_hw = [x_shape[1] * size[0], x_shape[2] * size[1]]
    assert np.array_equal(got, tf().image.resize(x, out_hw, method="nearest").numpy())


@pytest.mark.parametrize("x_shape, size", [((2, 1, 1, 3), (1, 7, 5, 2)), ((2, 3, 5), (1, 4, 1)),
                                           ((3, 2), (2, 5)), ((1, 2, 1, 3, 2), (2, 1, 3, 1, 1))])
def test_upsampling_nearest_on_any_axes_repeats_like_numpy(x_shape, size):
    """The broadcast legalisation uses nearest on any axis and rank: numpy.repeat per axis."""
    x = randn(rng(43), *x_shape)
    got = run_one("UpSampling2D", x, [], {"size": list(size)})
    ref = x
    for axis, scale in enumerate(size):
        ref = np.repeat(ref, scale, axis)
    assert np.array_equal(got, ref)


@pytest.mark.parametrize("x_shape, size", [((2, 7, 5, 3), (2, 3)), ((2, 3, 4, 5), (4, 1)),
                                           ((1, 1, 2, 3), (3, 2))])
def test_upsampling_linear_matches_tf2_bilinear(x_shape, size):
    x = randn(rng(47), *x_shape)
    got = run_one("UpSampling2D", x, [], {"size": [1, *size, 1], "mode": "linear"})
    out_hw = [x_shape[1] * size[0], x_shape[2] * size[1]]
    ref = tf().image.resize(x, out_hw, method="bilinear", antialias=False).numpy()
    assert_close(got, ref)


@pytest.mark.parametrize("x_shape, eps", [((2, 7, 5, 3), 1e-3), ((2, 6), 0.0)])
def test_batchnorm_matches_tf(x_shape, eps):
    gen = rng(53)
    c = x_shape[-1]
    x = randn(gen, *x_shape)
    scale, bias, mean = randn(gen, c), randn(gen, c), randn(gen, c)
    var = gen.uniform(0.5, 2.0, c).astype(np.float32)
    got = run_one("BatchNormalization", x, [scale, bias, mean, var], {"epsilon": eps})
    ref = tf().nn.batch_normalization(x, mean, var, bias, scale, eps).numpy()
    assert_close(got, ref)


# -- Dense, Gemm, MatMul ---------------------------------------------------------------------------


def test_dense_on_4d_input_uses_hwc_row_order():
    gen = rng(59)
    x, w, b = randn(gen, 2, 7, 5, 3), randn(gen, 4, 7, 5, 3), randn(gen, 4)
    got = run_one("Dense", x, [w, b])
    assert_close(got, np.einsum("nhwc,mhwc->nm", x, w) + b)


def test_dense_on_2d_input_without_bias():
    gen = rng(61)
    x, w = randn(gen, 2, 5), randn(gen, 3, 5)
    assert_close(run_one("Dense", x, [w, None]), x @ w.T)


@pytest.mark.parametrize("trans_a, trans_b, c_shape", [(0, 0, (4,)), (1, 0, (2, 4)),
                                                       (0, 1, (2, 1)), (1, 1, (1, 4))])
def test_gemm_matches_numpy(trans_a, trans_b, c_shape):
    gen = rng(67)
    a = randn(gen, *((5, 2) if trans_a else (2, 5)))
    b = randn(gen, *((4, 5) if trans_b else (5, 4)))
    c = randn(gen, *c_shape)
    got = run_one("Gemm", a, [], {"alpha": 0.5, "beta": 2.0, "transA": trans_a,
                                  "transB": trans_b}, extra_inputs=[b, c])
    ref = 0.5 * (a.T if trans_a else a) @ (b.T if trans_b else b) + 2.0 * c
    assert_close(got, ref)


@pytest.mark.parametrize("a_shape, b_shape", [((2, 5), (5, 4)), ((3, 2, 5), (5, 4)),
                                              ((3, 1, 2, 5), (4, 5, 6)), ((5,), (3, 5, 2))])
def test_matmul_matches_numpy(a_shape, b_shape):
    gen = rng(71)
    a, b = randn(gen, *a_shape), randn(gen, *b_shape)
    assert_close(run_one("MatMul", a, [], extra_inputs=[b]), np.matmul(a, b))


# -- whole-model lowering: shapes lent to intermediate values, unknown dimensions ------------------


def test_chain_lowering_lends_inferred_shapes_only_while_lowering():
    gen = rng(73)
    x, w = randn(gen, 2, 6, 8, 3), randn(gen, 5, 3, 3, 3)
    g = Graph()
    xv = g.add_input(Value("x", shape=x.shape))
    conv = g.make_node("Conv", [xv, g.constant(w, "w")], {"pads": "SAME"}, domain=DIALECT)
    s2d = g.make_node("SpaceToDepth", [conv.output], {"blocksize": 2}, domain=DIALECT)
    g.outputs = [s2d.output]
    model = Model(g)
    assert validate(model) == []
    assert conv.output.shape is None  # SpaceToDepth's lowering needs it: lent, then removed
    results = run(model, {"x": x.astype(np.float64)}, extra_outputs=[conv.output.name])
    assert conv.output.shape is None
    t = tf()
    conv_ref = t.nn.conv2d(x, w.transpose(1, 2, 3, 0), 1, "SAME").numpy()
    assert_close(results[conv.output.name], conv_ref)
    assert_close(results[s2d.output.name], t.nn.space_to_depth(conv_ref, 2).numpy())


@pytest.mark.parametrize("op", ["Conv", "AveragePool", "MaxPool"])
def test_same_padding_with_unknown_spatial_size_matches_tf(op):
    """Unknown H, W: the lowering falls back to auto_pad SAME_UPPER, TF's own SAME rule."""
    gen = rng(79)
    x = randn(gen, 2, 7, 8, 3) - 1.0
    g = Graph()
    xv = g.add_input(Value("x", shape=(None, None, None, 3)))
    if op == "Conv":
        w = randn(gen, 4, 4, 3, 3)
        node = g.make_node(op, [xv, g.constant(w, "w")], {"pads": "SAME", "strides": [2, 3]},
                           domain=DIALECT)
    else:
        node = g.make_node(op, [xv], {"pads": "SAME", "strides": [2, 3],
                                      "kernel_shape": [4, 3]}, domain=DIALECT)
    g.outputs = [node.output]
    model = Model(g)
    assert validate(model) == []
    got = run(model, {"x": x})[node.output.name]
    t = tf()
    if op == "Conv":
        ref = t.nn.conv2d(x, w.transpose(1, 2, 3, 0), [1, 2, 3, 1], "SAME").numpy()
    else:
        pool = t.nn.avg_pool2d if op == "AveragePool" else t.nn.max_pool2d
        ref = pool(x, [4, 3], [2, 3], "SAME").numpy()
    assert_close(got, ref)
