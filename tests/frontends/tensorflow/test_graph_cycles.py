"""A GraphDef with a cycle TensorFlow cannot import (a node with a control input
on itself, ``^y`` on ``y``) converted, then ``verify`` ended in "internal error (ValueError: 1
nodes in a cycle)". Any cycle - data or control inputs, on the outputs' path or not - is now
refused at load, naming the nodes; a TensorFlow 1 while loop (the one cycle TensorFlow
accepts, through NextIteration) still converts when the outputs do not need it."""
from __future__ import annotations

import numpy as np
import pytest

from nhwc_onnx.errors import EXIT_INVALID, InvalidModelError, UnsupportedOpError
from nhwc_onnx.frontends.tensorflow.proto import tf_graph_pb2 as pb
from tests.frontends.tensorflow.tf_helpers import close, load_bytes, rand

FLOAT = pb.AttrValue(type=pb.DT_FLOAT)
INT32 = pb.AttrValue(type=pb.DT_INT32)


def _node(graph, name, op, inputs=(), **attrs):
    node = graph.node.add(name=name, op=op)
    node.input.extend(inputs)
    for key, value in attrs.items():
        node.attr[key].CopyFrom(value)
    return node


def _graph() -> pb.GraphDef:
    """x (2, 3) -> r = Relu(x) -> y = Relu(r) -> out = Sigmoid(y)."""
    graph = pb.GraphDef()
    shape = pb.AttrValue()
    for d in (2, 3):
        shape.shape.dim.add(size=d)
    _node(graph, "x", "Placeholder", dtype=FLOAT, shape=shape)
    _node(graph, "r", "Relu", ["x"], T=FLOAT)
    _node(graph, "y", "Relu", ["r"], T=FLOAT)
    _node(graph, "out", "Sigmoid", ["y"], T=FLOAT)
    return graph


def _add_inputs(graph: pb.GraphDef, name: str, *inputs: str) -> pb.GraphDef:
    (node,) = [n for n in graph.node if n.name == name]
    node.input.extend(inputs)
    return graph


def _int_const(graph, name, value):
    tensor = pb.AttrValue()
    tensor.tensor.dtype = pb.DT_INT32
    tensor.tensor.int_val.append(value)
    _node(graph, name, "Const", dtype=INT32, value=tensor)


def _while_loop(graph: pb.GraphDef) -> pb.GraphDef:
    """A TensorFlow 1 while loop counting to 5 (TensorFlow imports and runs this graph):
    its one cycle goes through NextIteration -> Merge."""
    frame = pb.AttrValue(s=b"loop")
    constant = pb.AttrValue(b=True)
    _int_const(graph, "i0", 0)
    _int_const(graph, "lim", 5)
    _int_const(graph, "one", 1)
    _node(graph, "loop/enter", "Enter", ["i0"], T=INT32, frame_name=frame)
    _node(graph, "loop/lim", "Enter", ["lim"], T=INT32, frame_name=frame, is_constant=constant)
    _node(graph, "loop/one", "Enter", ["one"], T=INT32, frame_name=frame, is_constant=constant)
    _node(graph, "loop/merge", "Merge", ["loop/enter", "loop/next"], T=INT32, N=pb.AttrValue(i=2))
    _node(graph, "loop/less", "Less", ["loop/merge", "loop/lim"], T=INT32)
    _node(graph, "loop/cond", "LoopCond", ["loop/less"])
    _node(graph, "loop/switch", "Switch", ["loop/merge", "loop/cond"], T=INT32)
    _node(graph, "loop/body", "Identity", ["loop/switch:1"], T=INT32)
    _node(graph, "loop/add", "AddV2", ["loop/body", "loop/one"], T=INT32)
    _node(graph, "loop/next", "NextIteration", ["loop/add"], T=INT32)
    _node(graph, "loop/exit", "Exit", ["loop/switch"], T=INT32)
    return graph


CYCLES = {
    # name: (graph, the cycle as the error spells it)
    "control input on itself": (lambda: _add_inputs(_graph(), "y", "^y"), "'y' -> '^y'"),
    "data input on itself": (lambda: _add_inputs(_graph(), "out", "out"), "'out' -> 'out'"),
    "two nodes through control inputs": (
        lambda: _add_inputs(_add_inputs(_graph(), "r", "^y"), "y", "^r"), "'r' -> '^y' -> 'r'"),
    "data edge closed by a control input": (lambda: _add_inputs(_graph(), "r", "^out"),
                                            "'r' -> '^out' -> 'y' -> 'r'"),
}


@pytest.mark.parametrize("case", CYCLES)
def test_a_cycle_is_refused_at_load_naming_its_nodes(case, tmp_path):
    build, spelled = CYCLES[case]
    with pytest.raises(InvalidModelError) as info:
        load_bytes(tmp_path, build().SerializeToString(), outputs=["out"])
    assert f"the graph has a cycle: {spelled}" in str(info.value)


def test_cycles_off_the_path_are_refused_even_when_outputs_avoid_them(tmp_path):
    """A cycle between two nodes no output needs: TensorFlow cannot import the graph, so the
    converted model could never be verified against it."""
    graph = _graph()
    _node(graph, "a", "Relu", ["x", "^b"], T=FLOAT)
    _node(graph, "b", "Relu", ["a"], T=FLOAT)
    with pytest.raises(InvalidModelError) as info:
        load_bytes(tmp_path, graph.SerializeToString(), outputs=["out"])
    assert "the graph has a cycle: 'a' -> '^b' -> 'a'" in str(info.value)


def test_every_cycle_is_named(tmp_path):
    graph = _add_inputs(_add_inputs(_graph(), "y", "^y"), "out", "^out")
    with pytest.raises(InvalidModelError) as info:
        load_bytes(tmp_path, graph.SerializeToString())
    assert "'y' -> '^y'" in str(info.value) and "1 more node(s) on other cycles: 'out'" in \
        str(info.value)


def test_self_control_input_no_longer_converts(tmp_path):
    """The issue's case through the command line: refused before anything is written."""
    from tests.cli_runner import run_cli

    source = tmp_path / "self.pb"
    source.write_bytes(_add_inputs(_graph(), "y", "^y").SerializeToString())
    result = run_cli("convert", source, "-o", tmp_path / "m.onnx")
    assert result.exit_code == EXIT_INVALID, result.output
    err = result.stderr.strip()
    assert err.startswith("Error: ") and "cycle: 'y' -> '^y'" in err, err
    assert "internal error" not in err and not (tmp_path / "m.onnx").exists()


def test_while_loop_off_the_path_still_converts(tmp_path):
    """The NextIteration -> Merge back edge is not a cycle TensorFlow refuses: a loop the
    outputs do not read (even through a control input) is pruned, as before."""
    for graph in (_while_loop(_graph()), _add_inputs(_while_loop(_graph()), "y", "^loop/exit")):
        model = load_bytes(tmp_path, graph.SerializeToString(), outputs=["out"])
        x = rand(2, 3)
        from tests.core_reference import run_core

        (got,) = run_core(model, {"x": x}).values()
        close(got, 1 / (1 + np.exp(-np.maximum(x, 0))))


def test_while_loop_on_the_path_is_refused_as_unsupported(tmp_path):
    graph = _while_loop(_graph())
    _node(graph, "count", "Cast", ["loop/exit"], SrcT=INT32, DstT=FLOAT)
    _add_inputs(graph, "out", "count")
    graph.node[[n.name for n in graph.node].index("out")].op = "AddV2"
    with pytest.raises(UnsupportedOpError, match="while loops are not supported"):
        load_bytes(tmp_path, graph.SerializeToString(), outputs=["out"])
