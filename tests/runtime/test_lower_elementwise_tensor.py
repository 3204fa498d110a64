"""Lowering of the elementwise and tensor dialect ops, checked numerically.

Each test builds a one-node dialect model, runs it through ``nhwc_onnx.runtime.run`` (lowering
to standard ONNX + onnxruntime) and compares with an independent oracle: a TensorFlow kernel
where one exists, else a numpy formula. Inputs are random with every dimension a different size.
"""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from nhwc_onnx.ir import Graph, Model, Value
from nhwc_onnx.runtime import run
from nhwc_onnx.schemas import infer_shapes, validate

SHAPE = (2, 7, 5, 3)
TOL = 1e-5  # relative to the output's scale: max |err| <= TOL * max(1, max |expected|)


def rand(*shape, scale=4.0, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def run_op(op, feeds, consts=(), attrs=None):
    """Run a one-node model: ``feeds`` become graph inputs, then ``consts`` constants."""
    g = Graph()
    values, feed_dict = [], {}
    for idx, array in enumerate(feeds):
        name = f"x{idx}"
        values.append(g.add_input(Value(name, shape=array.shape)))
        feed_dict[name] = array
    for idx, array in enumerate(consts):
        values.append(g.constant(np.asarray(array), f"w{idx}"))
    node = g.make_node(op, values, dict(attrs or {}), name="n", domain="nhwc")
    g.outputs = [node.output]
    model = Model(g)
    assert [str(i) for i in validate(model)] == []
    inferred = infer_shapes(model)["n"]
    out = run(model, feed_dict)["n"]
    assert out.shape == inferred, "shape inference and the lowering disagree"
    assert out.dtype == np.float32
    return out


def assert_close(got, want):
    want = np.asarray(want, dtype=np.float32)
    assert got.shape == want.shape
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    err = float(np.max(np.abs(got.astype(np.float64) - want))) if want.size else 0.0
    assert err <= TOL * scale, f"max abs error {err} (scale {scale})"


# -- unary activations --------------------------------------------------------------------------


@pytest.mark.parametrize(("op", "oracle"), [
    ("Abs", tf.math.abs),
    ("Relu", tf.nn.relu),
    ("Relu6", tf.nn.relu6),
    ("Sigmoid", tf.math.sigmoid),
    ("Tanh", tf.math.tanh),
    ("Elu", tf.nn.elu),  # TensorFlow's Elu has alpha 1, the dialect's default
    ("LeakyRelu", lambda x: tf.nn.leaky_relu(x, alpha=0.01)),  # dialect default 0.01, TF's 0.2
])
def test_unary_with_default_attributes_matches_tensorflow(op, oracle):
    x = rand(*SHAPE, scale=5.0)
    assert (x > 6).any() and (x < 0).any()  # Relu6 must clip on both sides
    assert_close(run_op(op, [x]), oracle(x).numpy())


def test_leaky_relu_alpha_matches_tensorflow():
    x = rand(*SHAPE, seed=1)
    assert_close(run_op("LeakyRelu", [x], attrs={"alpha": 0.3}),
                 tf.nn.leaky_relu(x, alpha=0.3).numpy())


def test_elu_alpha_matches_formula():
    x = rand(*SHAPE, seed=2)
    want = np.where(x >= 0, x, 0.7 * np.expm1(x.astype(np.float64)))
    assert_close(run_op("Elu", [x], attrs={"alpha": 0.7}), want)


@pytest.mark.parametrize("scale", [2.5, -0.125, 3])
def test_scale_multiplies_by_the_attribute(scale):
    x = rand(*SHAPE, seed=3)
    assert_close(run_op("Scale", [x], attrs={"scale": scale}), x * np.float32(scale))


def test_scale_default_is_identity():
    x = rand(*SHAPE, seed=4)
    assert np.array_equal(run_op("Scale", [x]), x)


@pytest.mark.parametrize("slope", [
    np.array([0.1, -0.5, 2.0], np.float32),  # one value per channel (last axis)
    np.array([0.25], np.float32),
    np.array(0.3, np.float32),
])
def test_prelu_uses_the_last_axis_as_channel(slope):
    x = rand(*SHAPE, seed=5)
    want = np.where(x >= 0, x, x * slope)  # numpy broadcasts slope over the last axis
    assert_close(run_op("PRelu", [x], [slope]), want)


# -- binary and variadic ------------------------------------------------------------------------


def test_add_and_mul_match_tensorflow():
    a, b = rand(*SHAPE, seed=6), rand(*SHAPE, seed=7)
    assert_close(run_op("Add", [a, b]), tf.add(a, b).numpy())
    assert_close(run_op("Mul", [a, b]), tf.multiply(a, b).numpy())
    assert_close(run_op("Mul", [a], [b]), a * b)  # a constant operand of the same shape


def test_sum_matches_tensorflow_add_n():
    xs = [rand(*SHAPE, seed=s) for s in (8, 9, 10)]
    assert_close(run_op("Sum", xs), tf.add_n(xs).numpy())
    assert_close(run_op("Sum", xs[:1]), xs[0])


def test_max_broadcasts_like_numpy():
    a, b = rand(2, 1, 5, 1, seed=11), rand(7, 1, 3, seed=12)
    assert_close(run_op("Max", [a, b]), tf.maximum(a, b).numpy())
    c, d = rand(*SHAPE, seed=13), rand(3, seed=14)
    e = rand(2, 7, 1, 3, seed=15)
    assert_close(run_op("Max", [c, d, e]), np.maximum(np.maximum(c, d), e))


def test_add_bias_matches_tensorflow_bias_add():
    x, bias = rand(*SHAPE, seed=16), rand(3, seed=17)
    assert_close(run_op("AddBias", [x], [bias]), tf.nn.bias_add(x, bias).numpy())
    x2, bias2 = rand(4, 6, seed=18), rand(6, seed=19)
    assert_close(run_op("AddBias", [x2], [bias2]), tf.nn.bias_add(x2, bias2).numpy())


# -- shape ops ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("shape", "tf_shape"), [
    ([0, -1, 3], [2, -1, 3]),  # 0 copies the input dim
    ([2, 105], [2, 105]),
    ([-1], [-1]),
    ([0, 7, 0, -1], [2, 7, 5, -1]),  # a 0 copies the dim at its own index
    ([3, 5, 7, 2], [3, 5, 7, 2]),
])
def test_reshape_matches_tensorflow(shape, tf_shape):
    x = rand(*SHAPE, seed=20)
    got = run_op("Reshape", [x], [np.array(shape, np.int64)])
    assert np.array_equal(got, tf.reshape(x, tf_shape).numpy())


@pytest.mark.parametrize(("axis", "rows"), [(None, 2), (0, 1), (2, 14), (3, 70), (4, 210)])
def test_flatten_keeps_row_major_order(axis, rows):
    x = rand(*SHAPE, seed=21)
    attrs = {} if axis is None else {"axis": axis}
    got = run_op("Flatten", [x], attrs=attrs)
    assert np.array_equal(got, tf.reshape(x, [rows, -1]).numpy())


def test_softmax_on_the_channel_axis_matches_tensorflow():
    x = rand(*SHAPE, seed=22)
    assert_close(run_op("Softmax", [x], attrs={"axis": 3}), tf.nn.softmax(x, axis=-1).numpy())


@pytest.mark.parametrize("axis", [None, 0, 2])
def test_softmax_coerces_to_2d_like_onnx1(axis):
    x = rand(*SHAPE, scale=2.0, seed=23)
    k = 1 if axis is None else axis
    rows = int(np.prod(SHAPE[:k]))
    want = tf.reshape(tf.nn.softmax(tf.reshape(x, [rows, -1]), axis=-1), SHAPE).numpy()
    attrs = {} if axis is None else {"axis": axis}
    got = run_op("Softmax", [x], attrs=attrs)
    assert_close(got, want)
    # Independent check of the same meaning: each flattened block sums to 1.
    np.testing.assert_allclose(got.reshape(rows, -1).sum(axis=1), 1.0, rtol=1e-5)


def test_squeeze_matches_tensorflow():
    x = rand(2, 1, 5, 1, seed=24)
    assert np.array_equal(run_op("Squeeze", [x], attrs={"axes": [1, 3]}),
                          tf.squeeze(x, [1, 3]).numpy())


@pytest.mark.parametrize(("axis", "shapes"), [
    (3, [(2, 7, 5, 3), (2, 7, 5, 4), (2, 7, 5, 2)]),
    (1, [(2, 7, 5, 3), (2, 4, 5, 3)]),
    (0, [(2, 7, 5, 3), (3, 7, 5, 3)]),
])
def test_concat_matches_tensorflow(axis, shapes):
    xs = [rand(*s, seed=30 + i) for i, s in enumerate(shapes)]
    assert np.array_equal(run_op("Concat", xs, attrs={"axis": axis}),
                          tf.concat(xs, axis=axis).numpy())


def test_concat_with_a_constant_input():
    x, c = rand(*SHAPE, seed=35), rand(2, 7, 5, 1, seed=36)
    assert np.array_equal(run_op("Concat", [x], [c], attrs={"axis": 3}),
                          np.concatenate([x, c], axis=3))


@pytest.mark.parametrize(("attrs", "begin", "size"), [
    ({"starts": [1, 0], "ends": [5, -1], "axes": [1, 2]}, [0, 1, 0, 0], [2, 4, 4, 3]),
    ({"starts": [-2], "ends": [1000], "axes": [3]}, [0, 0, 0, 1], [2, 7, 5, 2]),
    ({"starts": [0, 3], "ends": [1, 7]}, [0, 3, 0, 0], [1, 4, 5, 3]),
    ({"starts": [-100, 2], "ends": [-1, 2 ** 31 - 1], "axes": [2, 1]}, [0, 2, 0, 0],
     [2, 5, 4, 3]),
])
def test_slice_matches_tensorflow(attrs, begin, size):
    x = rand(*SHAPE, seed=40)
    got = run_op("Slice", [x], attrs=attrs)
    assert np.array_equal(got, tf.slice(x, begin, size).numpy())


@pytest.mark.parametrize(("axes", "keepdims"), [
    ([1, 2], None), ([1, 2], 0), ([3], 1), ([0, 3], 0), (None, None), (None, 0),
])
def test_reduce_mean_matches_tensorflow(axes, keepdims):
    x = rand(*SHAPE, seed=41)
    attrs = {}
    if axes is not None:
        attrs["axes"] = axes
    if keepdims is not None:
        attrs["keepdims"] = keepdims
    want = tf.reduce_mean(x, axis=axes, keepdims=keepdims != 0).numpy()
    assert_close(run_op("ReduceMean", [x], attrs=attrs), want)


@pytest.mark.parametrize("perm", [[0, 3, 1, 2], [3, 1, 0, 2], None])
def test_transpose_matches_tensorflow(perm):
    x = rand(*SHAPE, seed=42)
    attrs = {} if perm is None else {"perm": perm}
    assert np.array_equal(run_op("Transpose", [x], attrs=attrs),
                          tf.transpose(x, perm=perm).numpy())


def test_constant_outputs_its_value():
    value = rand(3, 5, 2, seed=43)
    assert np.array_equal(run_op("Constant", [], attrs={"value": value}), value)


def test_chain_of_ops_runs_end_to_end():
    """Shapes flow through several lowered ops: Relu6 -> AddBias -> Reshape -> Softmax."""
    x, bias = rand(*SHAPE, seed=44), rand(3, seed=45)
    g = Graph()
    xv = g.add_input(Value("x", shape=SHAPE))
    r = g.make_node("Relu6", [xv], {}, domain="nhwc")
    b = g.make_node("AddBias", [r.output, g.constant(bias, "bias")], {}, domain="nhwc")
    s = g.make_node("Reshape", [b.output, g.constant(np.array([0, -1], np.int64), "shape")], {},
                    domain="nhwc")
    sm = g.make_node("Softmax", [s.output], {"axis": 1}, name="probs", domain="nhwc")
    g.outputs = [sm.output]
    model = Model(g)
    assert validate(model) == []
    logits = tf.reshape(tf.nn.bias_add(tf.nn.relu6(x), bias), [2, -1])
    assert_close(run(model, {"x": x})["probs"], tf.nn.softmax(logits, axis=-1).numpy())


def test_random_slices_match_numpy_indexing():
    """ONNX-1 bounds (negative from the end, clamped past it) equal numpy's for step 1."""
    rng = np.random.default_rng(46)
    x = rand(*SHAPE, seed=47)
    checked = 0
    while checked < 20:
        axes = [int(a) for a in rng.permutation(4)[: rng.integers(1, 5)]]
        starts = [int(v) for v in rng.integers(-9, 9, len(axes))]
        ends = [int(v) for v in rng.integers(-9, 12, len(axes))]
        index = [slice(None)] * 4
        for a, s, e in zip(axes, starts, ends):
            index[a] = slice(s, e)
        want = x[tuple(index)]
        if want.size == 0:
            continue  # an empty slice is invalid in the dialect (tested in tests/schemas)
        got = run_op("Slice", [x], attrs={"starts": starts, "ends": ends, "axes": axes})
        assert np.array_equal(got, want), (starts, ends, axes)
        checked += 1
