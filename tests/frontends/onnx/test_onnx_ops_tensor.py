"""Shape and data-movement converters, in each opset's attribute / input form, vs onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.frontends.onnx.onnx_helpers import assert_matches_ort, convert, make_model

X = [2, 3, 7, 5]
I64 = np.int64


@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_unsqueeze_attr_vs_input(opset):
    if opset < 13:
        nodes = [helper.make_node("Unsqueeze", ["x"], ["u"], axes=[0, 3]),
                 helper.make_node("Squeeze", ["u"], ["y"], axes=[0, -3])]
        inits = {}
    else:
        nodes = [helper.make_node("Unsqueeze", ["x", "ua"], ["u"]),
                 helper.make_node("Squeeze", ["u", "sa"], ["y"])]
        inits = {"ua": np.array([0, 3], I64), "sa": np.array([0, -3], I64)}
    model = make_model(nodes, [("x", X)], [("y", X)], inits, opset=opset)
    assert_matches_ort(model)
    squeeze = next(n for n in convert(model).graph.nodes if n.op == "Squeeze")
    assert squeeze.attrs["axes"] == [0, -3]


def test_squeeze_without_axes_uses_static_shape():
    model = make_model([helper.make_node("Squeeze", ["x"], ["y"])], [("x", [2, 1, 7, 1])],
                       [("y", [2, 7])])
    assert_matches_ort(model)


@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("op", ["ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                                "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"])
def test_reduce_attr_vs_input(op, opset):
    if opset < 18:
        node = helper.make_node(op, ["x"], ["y"], axes=[1, -1], keepdims=0)
        inits = {}
    else:
        node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)
        inits = {"axes": np.array([1, -1], I64)}
    model = make_model([node], [("x", X)], [("y", None)], inits, opset=opset)
    assert_matches_ort(model)


@pytest.mark.parametrize("opset", [11, 13])
def test_reduce_sum_and_log_sum(opset):
    node = (helper.make_node("ReduceSum", ["x"], ["s"], axes=[2]) if opset < 13 else
            helper.make_node("ReduceSum", ["x", "axes"], ["s"]))
    nodes = [helper.make_node("Abs", ["x"], ["a"]),
             helper.make_node("ReduceLogSum", ["a"], ["y"], axes=[2, 3]), node]
    model = make_model(nodes, [("x", X)], [("y", None), ("s", None)],
                       {"axes": np.array([2], I64)} if opset >= 13 else {}, opset=opset)
    assert_matches_ort(model)


@pytest.mark.parametrize("opset,mode", [(2, "constant"), (11, "constant"), (11, "reflect"),
                                        (13, "edge"), (18, "constant")])
def test_pad_forms(opset, mode):
    pads = [0, 1, 2, 0, 0, 2, 1, 3]
    if opset < 11:
        node = helper.make_node("Pad", ["x"], ["y"], pads=pads, mode=mode, value=1.5)
        inits = {}
    elif opset < 18:
        node = helper.make_node("Pad", ["x", "pads", "v"], ["y"], mode=mode)
        inits = {"pads": np.array(pads, I64), "v": np.array(1.5, np.float32)}
    else:
        node = helper.make_node("Pad", ["x", "pads", "v", "axes"], ["y"], mode=mode)
        inits = {"pads": np.array([1, 2, 2, 1, 3, 0], I64), "v": np.array(1.5, np.float32),
                 "axes": np.array([1, 2, -1], I64)}
    model = make_model([node], [("x", X)], [("y", None)], inits, opset=opset)
    model.ir_version = 3 if opset < 9 else model.ir_version
    assert_matches_ort(model)


@pytest.mark.parametrize("opset", [9, 10, 13])
def test_slice_forms(opset):
    if opset < 10:
        node = helper.make_node("Slice", ["x"], ["y"], starts=[1, -4], ends=[3, 1000],
                                axes=[1, 2])
        inits = {}
    else:
        node = helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"])
        inits = {"s": np.array([1, 6, -1], I64), "e": np.array([3, 0, -100], I64),
                 "a": np.array([1, 2, 3], I64), "st": np.array([1, -2, -2], I64)}
    model = make_model([node], [("x", X)], [("y", None)], inits, opset=opset)
    assert_matches_ort(model)


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_split_forms(opset):
    outs = ["a", "b", "c"]
    if opset < 13:
        node = helper.make_node("Split", ["x"], outs, axis=2, split=[2, 4, 1])
        inits = {}
    elif opset < 18:
        node = helper.make_node("Split", ["x", "sp"], outs, axis=2)
        inits = {"sp": np.array([2, 4, 1], I64)}
    else:
        node = helper.make_node("Split", ["x"], outs, axis=2, num_outputs=3)
        inits = {}
    model = make_model([node], [("x", X)], [(o, None) for o in outs], inits, opset=opset)
    assert_matches_ort(model)


def test_split_equal_parts_without_sizes():
    node = helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1)
    model = make_model([node], [("x", X)], [(o, None) for o in "abc"], opset=11)
    assert_matches_ort(model)


def test_reshape_flatten_transpose_concat():
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3]),
             helper.make_node("Flatten", ["t"], ["f"], axis=2),
             helper.make_node("Transpose", ["f"], ["g"]),
             helper.make_node("Concat", ["g", "g"], ["y"], axis=-1)]
    model = make_model(nodes, [("x", X)], [("y", None)],
                       {"shape": np.array([0, 7, -1, 5], I64)})
    assert_matches_ort(model)


def test_gather_cast_shape_ops():
    nodes = [helper.make_node("Gather", ["x", "idx"], ["g"], axis=1),
             helper.make_node("Shape", ["g"], ["s"]),
             helper.make_node("Cast", ["s"], ["sf"], to=1),
             helper.make_node("ConstantOfShape", ["s"], ["c"],
                              value=helper.make_tensor("v", 1, [1], [0.5])),
             helper.make_node("Add", ["g", "c"], ["y"]),
             helper.make_node("Range", ["r0", "r1", "r2"], ["r"]),
             helper.make_node("Expand", ["x", "es"], ["e"]),
             helper.make_node("Tile", ["x", "reps"], ["tl"])]
    model = make_model(nodes, [("x", X)], [("y", None), ("sf", None), ("r", None), ("e", None),
                                          ("tl", None)],
                       {"idx": np.array([[2, 0], [1, 1]], I64), "r0": np.array(1.0, np.float32),
                        "r1": np.array(5.0, np.float32), "r2": np.array(1.5, np.float32),
                        "es": np.array([3, 2, 1, 1, 1], I64), "reps": np.array([1, 2, 1, 3], I64)})
    assert_matches_ort(model)


def test_shape_start_end_opset15():
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1, end=-1),
             helper.make_node("Cast", ["s"], ["y"], to=1)]
    model = make_model(nodes, [("x", X)], [("y", None)], opset=15)
    assert_matches_ort(model)


def test_constant_node_and_argmax():
    value = np.random.default_rng(0).standard_normal((3, 1, 5)).astype(np.float32)
    nodes = [helper.make_node("Constant", [], ["k"], value=helper.make_tensor(
                 "k", 1, value.shape, value.ravel())),
             helper.make_node("Mul", ["x", "k"], ["m"]),
             helper.make_node("ArgMax", ["m"], ["i"], axis=2, keepdims=0),
             helper.make_node("Cast", ["i"], ["y"], to=1)]
    model = make_model(nodes, [("x", X)], [("m", None), ("y", None)])
    assert_matches_ort(model)


def test_non_float_graph_inputs_and_outputs_are_refused_with_reason():
    from nhwc_onnx.errors import UnsupportedOpError

    nodes = [helper.make_node("ArgMax", ["x"], ["y"], axis=1)]
    model = make_model(nodes, [helper.make_tensor_value_info("x", 6, X)],
                       [helper.make_tensor_value_info("y", 7, None)])
    with pytest.raises(UnsupportedOpError) as info:
        convert(model)
    assert {p.node for p in info.value.problems} == {"x", "y"}
    assert "float32 only" in str(info.value)


def test_slice_starts_from_shape_subgraph_are_folded():
    """Slice starts computed by Shape -> Gather -> Div become the attribute's numbers."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "two"], ["h"], axis=0),
             helper.make_node("Div", ["h", "two"], ["half"]),
             helper.make_node("Unsqueeze", ["half", "zero"], ["start"]),
             helper.make_node("Slice", ["x", "start", "big", "two1"], ["y"])]
    model = make_model(nodes, [("x", X)], [("y", None)],
                       {"two": np.array(2, I64), "zero": np.array([0], I64),
                        "big": np.array([1 << 40], I64), "two1": np.array([2], I64)})
    assert_matches_ort(model)
    core = convert(model)
    slice_node = next(n for n in core.graph.nodes if n.op == "Slice")
    assert slice_node.attrs["starts"] == [3]
