"""Passes facing absurd or degenerate graphs: sizes are judged before anything is allocated or
looped over, and the answer is a project error naming the node, or exact numbers."""
from __future__ import annotations

import itertools
import time
from fractions import Fraction

import numpy as np
import pytest

from nhwc_onnx.errors import InvalidModelError
from nhwc_onnx.ir import NCHW, Graph, Model, Node, Value
from nhwc_onnx.passes.base import PassContext
from nhwc_onnx.passes.fold_constants import FoldConstants
from nhwc_onnx.passes.static_shapes import StaticShapes
from nhwc_onnx.passes.to_dialect.legalize_tensor import _coordinate, _nearest, _nearest_mismatch
from nhwc_onnx.schemas import core as core_eval
from tests.passes.dialect_oracles import Builder, convert, max_err, rand, run_dialect

COORDS = ("asymmetric", "half_pixel", "pytorch_half_pixel", "tf_half_pixel_for_nn",
          "align_corners")
RULES = ("floor", "ceil", "round_prefer_floor", "round_prefer_ceil")


def _brute_force_mismatches(coord, rule, scale, n, m) -> list[int]:
    factor = m // n
    return [d for d in range(m)
            if min(max(_nearest(_coordinate(coord, d, scale, n, m), rule), 0), n - 1)
            != d // factor]


@pytest.mark.parametrize("coord,rule", list(itertools.product(COORDS, RULES)))
def test_nearest_shortcut_agrees_with_checking_every_cell(coord, rule):
    for n, factor in itertools.product(range(1, 6), range(1, 7)):
        m = n * factor
        if m == n:
            continue
        expected = _brute_force_mismatches(coord, rule, Fraction(m, n), n, m)
        found = _nearest_mismatch(coord, rule, Fraction(m, n), n, m)
        if expected:
            assert found in expected, (coord, rule, n, factor, found, expected)
        else:
            assert found is None, (coord, rule, n, factor, found)


def test_large_integer_nearest_upsampling_is_proved_without_a_loop_and_exact():
    b = Builder((1, 4, 3, 2))
    y = b.op("Resize", [b.x], (1, 4 * 3000, 3, 2), mode="nearest",
             scales=[1.0, 3000.0, 1.0, 1.0], coordinate_transformation_mode="asymmetric",
             nearest_mode="floor", name="up")
    model = b.model(y)
    start = time.perf_counter()
    convert(model)
    assert time.perf_counter() - start < 15.0  # a hang guard (the bug took minutes)
    assert model.graph.op_counts() == {"UpSampling2D": 1}
    x = rand(1, 4, 3, 2)
    assert max_err(run_dialect(model, x), x.repeat(3000, axis=1)) == 0


def _core_graph(op: str, attrs: dict, consts=()):
    g = Graph("t")
    x = g.add_input(Value("x", "float32", (2, 3, 7, 5), NCHW))
    ins = [x] + [g.constant(np.asarray(c), f"c{i}") for i, c in enumerate(consts)]
    node = g.make_node(op, ins, attrs, name="big")
    g.outputs.append(node.output)
    return Model(g)


@pytest.mark.parametrize("op,attrs", [
    ("Resize", {"mode": "nearest", "scales": [1.0, 1.0, 1e6, 1e6]}),
    ("AveragePool", {"kernel_shape": [2, 2], "pads": [1 << 40, 0, 0, 0], "strides": [1, 1],
                     "data_format": "NCHW"}),
    ("Pad", {"pads": [0, 0, 1 << 30, 0, 0, 0, 1 << 30, 0]}),
])
def test_absurd_static_shapes_are_invalid_models_naming_the_node(op, attrs):
    with pytest.raises(InvalidModelError, match="node 'big' .*refused as absurd"):
        StaticShapes()(_core_graph(op, attrs), PassContext())


def test_a_large_but_sane_shape_is_accepted():
    model = _core_graph("Resize", {"mode": "nearest", "scales": [1.0, 1.0, 100.0, 100.0]})
    StaticShapes()(model, PassContext())
    assert model.graph.outputs[0].shape == (2, 3, 700, 500)


@pytest.mark.parametrize("op,inputs", [
    ("Range", [np.int64(0), np.int64(1 << 40), np.int64(1)]),
    ("ConstantOfShape", [np.array([1 << 20, 1 << 20], np.int64)]),
    ("Expand", [np.ones((1, 1), np.float32), np.array([1 << 16, 1 << 16], np.int64)]),
    ("Tile", [np.ones((2, 2), np.float32), np.array([1 << 20, 1 << 20], np.int64)]),
])
def test_evaluators_refuse_absurd_outputs_before_allocating(op, inputs):
    node = Node(op, [Value(f"i{k}", const=np.asarray(a)) for k, a in enumerate(inputs)],
                [Value("out")], {}, name="big")
    start = time.perf_counter()
    with pytest.raises(InvalidModelError, match="node 'big' .*absurd"):
        core_eval.evaluate_node(node, inputs)
    assert time.perf_counter() - start < 15.0  # a hang guard (the bug took minutes)


def test_evaluator_budget_allows_normal_outputs():
    node = Node("Range", [Value(f"i{k}", const=np.int64(v)) for k, v in enumerate((2, 11, 3))],
                [Value("out")], {}, name="r")
    (out,) = core_eval.evaluate_node(node, [np.int64(2), np.int64(11), np.int64(3)])
    assert out.tolist() == [2, 5, 8]


def test_folding_leaves_over_budget_outputs_unevaluated(monkeypatch):
    g = Graph("t")
    x = g.add_input(Value("x", "float32", (64, 64)))
    fill = g.make_node("ConstantOfShape", [g.constant(np.array([64, 64], np.int64), "dims")],
                       {"value": np.array([2.0], np.float32)}, name="fill")
    add = g.make_node("Add", [x, fill.output], name="add")
    g.outputs.append(add.output)
    model = Model(g)
    StaticShapes()(model, PassContext())
    calls = []
    real = core_eval.evaluate_node

    def spy(node, arrays, *rest):
        calls.append(node.op)
        return real(node, arrays, *rest)

    monkeypatch.setattr("nhwc_onnx.passes.fold_constants.evaluate_node", spy)
    FoldConstants(max_bytes=1024)(model, PassContext())
    assert "ConstantOfShape" not in calls and g.find_node("fill") is not None
    FoldConstants(max_bytes=1 << 20)(model, PassContext())
    assert calls == ["ConstantOfShape"] and g.find_node("fill") is None
    assert np.array_equal(add.inputs[1].const, np.full((64, 64), 2.0, np.float32))


@pytest.mark.parametrize("shape", [(6,), ()])
def test_hard_sigmoid_without_a_channel_axis_is_exact(shape):
    b = Builder(shape)
    y = b.op("HardSigmoid", [b.x], shape, alpha=0.3, beta=0.4, name="hs")
    model = b.model(y)
    convert(model)
    x = np.array(rand(*shape) * 5, np.float32)
    ref = np.clip(np.float32(0.3) * x + np.float32(0.4), 0, 1)
    assert max_err(run_dialect(model, x), ref) <= 1e-6


@pytest.mark.parametrize("dims", [np.array([-1], np.int64), np.array(4, np.int64)])
def test_constant_of_shape_with_a_bad_shape_names_the_node(dims):
    from nhwc_onnx.errors import InvalidAttributeError

    node = Node("ConstantOfShape", [Value("d", const=dims)], [Value("out")], {}, name="fill")
    with pytest.raises(InvalidAttributeError, match="node 'fill' .*1-D list of integers >= 0"):
        core_eval.evaluate_node(node, [dims])


def test_reshape_to_a_float_target_is_an_invalid_model():
    model = _core_graph("Reshape", {}, [np.array([np.nan, 105], np.float32)])
    with pytest.raises(InvalidModelError, match="node 'big' .*must be integer"):
        StaticShapes()(model, PassContext())


def test_shape_inference_failing_on_attribute_values_blames_the_node():
    model = _core_graph("SpaceToDepth", {"blocksize": 0, "data_format": "NCHW"})
    with pytest.raises(InvalidModelError, match="node 'big' .*malformed node"):
        StaticShapes()(model, PassContext())


def test_folding_a_node_numpy_rejects_blames_the_node():
    g = Graph("t")
    x = g.add_input(Value("x", "float32", (2, 3)))
    a = g.constant(np.ones((2, 3), np.float32), "a")
    b = g.constant(np.ones((4, 5), np.float32), "b")
    bad = g.make_node("Add", [a, b], name="bad_add")  # shapes that do not broadcast
    g.outputs.append(g.make_node("Add", [x, bad.output], name="out").output)
    with pytest.raises(InvalidModelError, match="node 'bad_add' .*malformed node"):
        FoldConstants()(Model(g), PassContext())


@pytest.mark.parametrize("reps", [(1, 37, 1, 1), (1, 3, 1 << 12, 1)])
def test_tile_by_many_copies_uses_few_nodes_and_is_exact(reps):
    shape = (1, 2, 3, 2)
    out = tuple(d * r for d, r in zip(shape, reps))
    b = Builder(shape)
    y = b.op("Tile", [b.x, b.const(np.array(reps, np.int64), "reps")], out, name="tile")
    model = b.model(y)
    start = time.perf_counter()
    convert(model)
    assert time.perf_counter() - start < 15.0  # a hang guard (the bug took minutes)
    assert len(model.graph) <= 40
    x = rand(*shape)
    assert max_err(run_dialect(model, x), np.tile(x, reps)) == 0


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum"])
def test_reducing_a_scalar_leaves_it_unchanged(op):
    b = Builder(())
    y = b.op(op, [b.x], (), keepdims=1, name="red")
    model = b.model(y)
    convert(model)
    x = np.array(-1.25, np.float32)
    assert max_err(run_dialect(model, x), x) == 0


def test_padding_proof_of_an_absurd_window_is_not_attempted():
    from nhwc_onnx.passes.to_dialect import padding_math as pm

    start = time.perf_counter()
    with pytest.raises(pm.WindowTooLarge, match="too large"):
        pm.source_windows(pm.resolve_axis(5, 1 << 40, 2, 1, 0, 0, "SAME_UPPER", False, False),
                          pm.MAX)
    assert time.perf_counter() - start < 15.0  # a hang guard (the bug took minutes)
