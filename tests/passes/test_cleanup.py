"""Clean-up pass: pass-through removal, dead code, graph output names."""
from __future__ import annotations

import numpy as np

from nhwc_onnx.ir import Graph, Model, Value
from nhwc_onnx.passes import PassContext
from nhwc_onnx.passes.cleanup import Cleanup
from tests.passes.core_oracles import rand, run_pass_and_compare

B = rand(3)


def _build():
    g = Graph()
    x = g.add_input(Value("x", shape=(2, 3)))
    ident = g.make_node("Identity", [x], name="ident")
    relu = g.make_node("Relu", [ident.output], name="relu")
    drop = g.make_node("Dropout", [relu.output], name="drop")
    add = g.make_node("Add", [drop.output, g.constant(B, "b")], name="add")
    out = g.make_node("Identity", [add.output], name="logits")  # graph output name to keep
    g.make_node("Exp", [relu.output], name="dead_exp")
    dead2 = g.make_node("Neg", [x], name="dead_neg")
    g.make_node("Abs", [dead2.output], name="dead_abs")
    g.outputs.append(out.output)
    return Model(g)


def test_removes_pass_through_and_dead_nodes_keeping_output_names():
    model, (result,), ctx = run_pass_and_compare(_build, {"x": rand(2, 3)}, [Cleanup()])
    assert result.modified
    g = model.graph
    assert [n.op for n in g.nodes] == ["Relu", "Add"]
    assert g.outputs[0].name == "logits" and g.outputs[0].producer().name == "add"
    assert g.find_node("relu").inputs[0] is g.inputs[0]
    assert ctx.decisions[0].data == {"pass_through": 3, "dead": 3}


def test_identity_between_input_and_output_is_kept():
    g = Graph()
    x = g.add_input(Value("x", shape=(2,)))
    g.outputs.append(g.make_node("Identity", [x], name="y").output)
    model = Model(g)
    result = Cleanup()(model, PassContext())
    assert result.modified is False
    assert [n.op for n in g.nodes] == ["Identity"] and g.outputs[0].name == "y"


def test_clean_graph_is_unchanged():
    g = Graph()
    x = g.add_input(Value("x", shape=(2,)))
    g.outputs.append(g.make_node("Relu", [x], name="r").output)
    model = Model(g)
    assert Cleanup()(model, PassContext()).modified is False
    assert len(g) == 1
    assert np.all(g.outputs[0].producer().inputs[0] is x)


def _empty_piece_graph():
    """x (2, 5) split into [5, 0] along axis 1; the empty piece is concatenated back."""
    g = Graph()
    x = g.add_input(Value("x", shape=(2, 5)))
    split = g.make_node("Split", [x], {"axis": 1, "split": [5, 0]}, name="split",
                        outputs=[Value("full", shape=(2, 5)), Value("empty", shape=(2, 0))])
    relu = g.make_node("Relu", [split.outputs[0]], name="relu")
    cat = g.make_node("Concat", [relu.output, split.outputs[1]], {"axis": 1}, name="cat")
    g.outputs.append(cat.output)
    return Model(g)


def test_empty_concat_inputs_are_dropped():
    x = rand(2, 5)
    model, (result,), ctx = run_pass_and_compare(_empty_piece_graph, {"x": x}, [Cleanup()])
    assert result.modified
    cat = model.graph.outputs[0].producer()
    assert all(0 not in v.shape for v in cat.inputs)
    assert {"empty_concat_inputs": 1} in [d.data for d in ctx.decisions]
