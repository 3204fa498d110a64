"""Constant folding: Keras decomposed BatchNorm, bias Reshape->Squeeze, shape subgraphs."""
from __future__ import annotations

import numpy as np

from nhwc_onnx.ir import Graph, Model, Value
from nhwc_onnx.passes import PassContext
from nhwc_onnx.passes.fold_constants import FoldConstants
from nhwc_onnx.passes.static_shapes import StaticShapes
from tests.passes.core_oracles import rand, run_pass_and_compare

C = 5
GAMMA, BETA, MEAN = rand(C), rand(C), rand(C)
VAR = rand(C, low=0.1, high=2.0)
BIAS = rand(1, C)


def _keras_batchnorm():
    """x * (gamma * rsqrt(var + eps)) + (beta - mean * gamma * rsqrt(var + eps)), as Keras emits."""
    g = Graph()
    x = g.add_input(Value("x", shape=(2, 4, 3, C), layout="NHWC"))
    add_eps = g.make_node("Add", [g.constant(VAR, "bn/var"), g.constant(np.float32(1e-3), "eps")],
                          name="bn/add")
    rsqrt = g.make_node("Rsqrt", [add_eps.output], name="bn/Rsqrt")
    scale = g.make_node("Mul", [rsqrt.output, g.constant(GAMMA, "bn/gamma")], name="bn/mul")
    mul_x = g.make_node("Mul", [x, scale.output], name="bn/mul_1")
    mul_mean = g.make_node("Mul", [g.constant(MEAN, "bn/mean"), scale.output], name="bn/mul_2")
    shift = g.make_node("Sub", [g.constant(BETA, "bn/beta"), mul_mean.output], name="bn/sub")
    out = g.make_node("Add", [mul_x.output, shift.output], name="bn/add_1")
    # bias stored as (1, C), reshaped then squeezed to (C,)
    resh = g.make_node("Reshape", [g.constant(BIAS, "bias"), g.constant(np.asarray([1, 1, C]))],
                       name="bias/reshape")
    sq = g.make_node("Squeeze", [resh.output], {"axes": [0, 1]}, name="bias/squeeze")
    biased = g.make_node("Add", [out.output, sq.output], name="biased")
    g.outputs.append(biased.output)
    return Model(g)


def test_keras_batchnorm_and_bias_vectors_fold_to_named_constants():
    passes = [StaticShapes(), FoldConstants()]
    model, (_, result), ctx = run_pass_and_compare(_keras_batchnorm, {"x": rand(2, 4, 3, C)},
                                                    passes)
    assert result.modified
    g = model.graph
    assert [n.op for n in g.nodes] == ["Mul", "Add", "Add"]
    mul = g.find_node("bn/mul_1")
    assert mul.inputs[1].name == "bn/mul" and mul.inputs[1].is_const
    want = GAMMA / np.sqrt(VAR.astype(np.float64) + 1e-3)
    np.testing.assert_allclose(mul.inputs[1].const, want, rtol=1e-6)
    bias = g.find_node("biased").inputs[1]
    assert bias.is_const and bias.shape == (C,) and bias.name == "bias/squeeze"
    assert "Rsqrt x1" in ctx.decisions[-1].detail


def _shape_subgraph():
    """Reshape(x, Concat(Gather(Shape(x), 0), [-1])): the usual exported flatten."""
    g = Graph()
    x = g.add_input(Value("x", shape=(2, 3, 4, 5)))
    relu = g.make_node("Relu", [x], name="relu")
    shape = g.make_node("Shape", [relu.output], name="shape")
    batch = g.make_node("Gather", [shape.output, g.constant(np.int64(0), "zero")], name="batch")
    unsq = g.make_node("Unsqueeze", [batch.output], {"axes": [0]}, name="unsq")
    cat = g.make_node("Concat", [unsq.output, g.constant(np.asarray([-1]), "minus1")],
                      {"axis": 0}, name="target")
    resh = g.make_node("Reshape", [relu.output, cat.output], name="flat")
    size = g.make_node("ConstantOfShape", [g.constant(np.asarray([2, 3]), "cs")],
                       {"value": np.asarray([1.5], np.float32)}, name="ones")
    rng = g.make_node("Range", [g.constant(np.float32(0), "r0"), g.constant(np.float32(3), "r1"),
                                g.constant(np.float32(1), "r2")], name="range")
    cast = g.make_node("Cast", [rng.output], {"to": "float32"}, name="cast")
    mul = g.make_node("Mul", [size.output, cast.output], name="scaled")
    g.outputs += [resh.output, mul.output]
    return Model(g)


def test_shape_subgraphs_fold_and_reshape_gets_a_static_shape():
    passes = [StaticShapes(), FoldConstants()]
    model, (_, result), _ = run_pass_and_compare(_shape_subgraph, {"x": rand(2, 3, 4, 5)}, passes)
    assert result.modified
    g = model.graph
    # 'scaled' is a graph output: it stays a computed tensor, now of two constants
    assert [n.op for n in g.nodes] == ["Relu", "Reshape", "Mul"]
    assert all(v.is_const for v in g.find_node("scaled").inputs)
    flat = g.find_node("flat")
    assert list(flat.inputs[1].const) == [2, -1] and flat.inputs[1].name == "target"
    assert flat.output.shape == (2, 60)


def test_size_guard_leaves_big_float_results_as_nodes():
    g = Graph()
    x = g.add_input(Value("x", shape=(4,)))
    big = g.make_node("Exp", [g.constant(np.ones(1000, np.float32), "big")], name="exp")
    g.outputs.append(g.make_node("Add", [x, g.make_node(
        "Slice", [big.output], {"starts": [0], "ends": [4]}, name="sl").output], name="y").output)
    model = Model(g)
    StaticShapes()(model, PassContext())
    result = FoldConstants(max_bytes=1024)(model, PassContext())
    assert result.modified is False and len(g) == 3
    result = FoldConstants(max_bytes=4096)(model, PassContext())
    assert result.modified and [n.op for n in g.nodes] == ["Add"]


def test_nothing_constant_is_unmodified():
    g = Graph()
    x = g.add_input(Value("x", shape=(2, 3)))
    g.outputs.append(g.make_node("Relu", [x], name="r").output)
    model = Model(g)
    StaticShapes()(model, PassContext())
    assert FoldConstants()(model, PassContext()).modified is False


def test_size_guard_does_not_keep_a_computed_weight_unfolded():
    g = Graph()
    x = g.add_input(Value("x", shape=(2, 6)))
    weight = g.make_node("ConstantOfShape", [g.constant(np.asarray([4, 6]), "wshape")],
                         {"value": np.asarray([0.5], np.float32)}, name="fc/W")
    g.outputs.append(g.make_node("Gemm", [x, weight.output], {"transB": 1}, name="fc").output)
    model = Model(g)
    StaticShapes()(model, PassContext())
    result = FoldConstants(max_bytes=16)(model, PassContext())
    assert result.modified and [n.op for n in g.nodes] == ["Gemm"]
    assert g.find_node("fc").inputs[1].name == "fc/W"
