"""Core shape inference agrees with the evaluators (themselves checked against onnxruntime/TF)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nhwc_onnx.ir import Node, Value
from nhwc_onnx.schemas import CORE_OPS, RuleError
from nhwc_onnx.schemas import core as core_schemas
from nhwc_onnx.schemas.base import InferContext
from tests.passes.core_oracles import eval_core, rand, run_onnx


def infer(op, inputs, attrs=None, n_out=1):
    """inputs: arrays (constants) or shape tuples (activations, possibly with None dims)."""
    values, shapes, consts = [], [], []
    for i, item in enumerate(inputs):
        if isinstance(item, (np.ndarray, np.generic)):
            item = np.asarray(item)
            values.append(Value(f"in{i}", const=item))
            shapes.append(tuple(item.shape))
            consts.append(item)
        else:
            values.append(Value(f"in{i}", shape=item))
            shapes.append(None if item is None else tuple(item))
            consts.append(None)
    node = Node(op, values, [Value(f"o{i}") for i in range(n_out)], attrs or {}, name="n")
    schema = CORE_OPS[op]
    return schema.infer(InferContext(node, schema.with_defaults(node.attrs), shapes, consts))


def agree(op, arrays, attrs=None, n_out=1, const_inputs=()):
    """Inference on shapes (constants where listed) == shapes of the evaluated outputs."""
    got = eval_core(op, arrays, attrs, n_out)
    got = got if n_out > 1 else [got]
    ins = [a if i in const_inputs else tuple(a.shape) for i, a in enumerate(arrays)]
    want = [tuple(g.shape) for g in got]
    assert [tuple(s) for s in infer(op, ins, attrs, n_out)] == want


@settings(max_examples=60, deadline=None)
@given(
    size=st.tuples(st.integers(1, 12), st.integers(1, 12)),
    kernel=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    strides=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    dil=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    pads=st.lists(st.integers(0, 2), min_size=4, max_size=4),
    auto_pad=st.sampled_from(["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]),
    ceil_mode=st.integers(0, 1),
    fmt=st.sampled_from(["NCHW", "NHWC"]),
)
def test_conv_and_pool_sizes_match_evaluation(size, kernel, strides, dil, pads, auto_pad,
                                              ceil_mode, fmt):
    h, w = size
    shape = (2, 3, h, w) if fmt == "NCHW" else (2, h, w, 3)
    x = rand(*shape)
    base = {"kernel_shape": list(kernel), "strides": list(strides), "auto_pad": auto_pad,
                "data_format": fmt}
    if auto_pad == "NOTSET":
        base["pads"] = pads
    conv = dict(base, dilations=list(dil))
    wt = rand(4, 3, *kernel)
    pool = dict(base, ceil_mode=ceil_mode, dilations=list(dil))
    for op, args, attrs in (("Conv", [x, wt], conv), ("MaxPool", [x], pool)):
        try:
            shapes = infer(op, [tuple(a.shape) for a in args], attrs)
        except RuleError:
            continue  # the window does not fit: the evaluator has nothing to compare
        assert tuple(shapes[0]) == eval_core(op, args, attrs).shape


@pytest.mark.parametrize("case", [
    {"k": (3, 2), "s": (2, 3), "pads": [1, 0, 0, 1], "op": (1, 0), "group": 1},
    {"k": (2, 3), "s": (1, 2), "pads": [0, 1, 1, 0], "op": (0, 1), "group": 2},
])
def test_conv_transpose_sizes(case):
    x, wt = rand(2, 4, 5, 3), rand(4, 3, *case["k"])
    attrs = {"kernel_shape": list(case["k"]), "strides": list(case["s"]), "pads": case["pads"],
                 "output_padding": list(case["op"]), "group": case["group"]}
    assert tuple(infer("ConvTranspose", [x.shape, wt.shape], attrs)[0]) == \
        run_onnx("ConvTranspose", [x, wt], attrs).shape
    same = {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER",
                "data_format": "NHWC", "weight_layout": "HWOI", "output_shape": [9, 7]}
    assert infer("ConvTranspose", [(1, 5, 4, 2), (3, 3, 6, 2)], same)[0] == (1, 9, 7, 6)


def test_other_ops_match_evaluation():
    x = rand(2, 3, 4, 5)
    agree("GlobalAveragePool", [x], {"data_format": "NHWC"})
    agree("Resize", [x], {"scales": [1, 1, 1.5, 2.5]})
    agree("DepthToSpace", [rand(2, 12, 3, 5)], {"blocksize": 2})
    agree("SpaceToDepth", [rand(2, 6, 4, 3)], {"blocksize": 2, "data_format": "NHWC"})
    agree("Add", [rand(2, 1, 4, 1), rand(3, 1, 5)])
    agree("Where", [rand(4, 1) > 0, rand(2, 1, 5), rand(5)])
    agree("MatMul", [rand(2, 3, 4), rand(4, 5)])
    agree("MatMul", [rand(4), rand(3, 4, 5)])
    agree("MatMul", [rand(2, 3, 4), rand(4)])
    agree("Gemm", [rand(4, 3), rand(5, 4)], {"transA": 1, "transB": 1})
    agree("Flatten", [x], {"axis": -2})
    agree("Reshape", [x, np.asarray([0, -1, 5], np.int64)], const_inputs=(1,))
    agree("Squeeze", [rand(2, 1, 3, 1)], {"axes": [-1, 1]})
    agree("Unsqueeze", [rand(2, 3)], {"axes": [0, -1]})
    agree("Transpose", [x], {"perm": [0, 2, 3, 1]})
    agree("Transpose", [x])
    agree("Concat", [rand(2, 3), rand(2, 5)], {"axis": -1})
    agree("Split", [rand(2, 9)], {"axis": 1, "split": [2, 7]}, n_out=2)
    agree("Slice", [x], {"starts": [-1, 1], "ends": [-100, 100], "axes": [3, 1], "steps": [-2, 1]})
    agree("Pad", [x], {"pads": [0, 1, -1, 2, 0, 0, 2, 1]})
    agree("ReduceMean", [x], {"axes": [1, 2], "keepdims": 0})
    agree("ReduceSum", [x])
    agree("ArgMax", [x], {"axis": 2, "keepdims": 0})
    agree("Shape", [x])
    agree("Size", [x])
    agree("Gather", [x, np.asarray([[0, 1]], np.int64)], {"axis": 1})
    agree("ConstantOfShape", [np.asarray([2, 3], np.int64)], const_inputs=(0,))
    agree("Range", [np.int64(1), np.int64(10), np.int64(4)], const_inputs=(0, 1, 2))
    agree("Range", [np.float32(1), np.float32(-2), np.float32(-0.7)], const_inputs=(0, 1, 2))
    agree("Expand", [rand(3, 1), np.asarray([2, 1, 4], np.int64)], const_inputs=(1,))
    agree("Tile", [rand(3, 1), np.asarray([2, 3], np.int64)], const_inputs=(1,))
    agree("BatchNormalization", [x, rand(5), rand(5), rand(5), rand(5, low=0.1)],
          {"axis": -1})
    agree("PRelu", [x, rand(5)])


def test_unknown_dims_propagate():
    assert infer("Relu", [(None, 3, 4)]) == [(None, 3, 4)]
    assert infer("Conv", [(None, 3, 8, None), (4, 3, 3, 3)], {"kernel_shape": [3, 3]}) == \
        [(None, 4, 6, None)]
    assert infer("Add", [(None, 3, 1), (4,)]) == [(None, 3, 4)]
    assert infer("Add", [(None, 1), (1, 1)]) == [(None, 1)]
    assert infer("Flatten", [(None, 3, 4)]) == [(None, 12)]
    assert infer("Reshape", [(None, 3, 4), np.asarray([0, -1], np.int64)]) == [(None, 12)]
    assert infer("Reshape", [(None, 3, 4), np.asarray([-1, 12], np.int64)]) == [(None, 12)]
    assert infer("Reshape", [(2, 3, 4), (3,)]) == [(None, None, None)]
    assert infer("Concat", [(None, 3), (2, None)], {"axis": 1}) == [(2, None)]
    assert infer("ConstantOfShape", [(2,)]) == [(None, None)]


@pytest.mark.parametrize("op,inputs,attrs,rule", [
    ("Conv", [(1, 3, 5, 5), (4, 2, 3, 3)], {"kernel_shape": [3, 3]}, "channels"),
    ("Conv", [(1, 3, 2, 5), (4, 3, 3, 3)], {"kernel_shape": [3, 3]}, "shape"),
    ("Add", [(2, 3), (4,)], None, "broadcast"),
    ("Concat", [(2, 3), (3, 3)], {"axis": 1}, "shape"),
    ("Squeeze", [(2, 3)], {"axes": [1]}, "axes"),
    ("Reshape", [(2, 3), np.asarray([4, -1], np.int64)], None, "shape"),
    ("Softmax", [(2, 3)], {"axis": 2}, "axis"),
    ("MaxPool", [(1, 3, 5)], {"kernel_shape": [2, 2]}, "rank"),
])
def test_broken_rules_raise(op, inputs, attrs, rule):
    with pytest.raises(RuleError) as err:
        infer(op, inputs, attrs)
    assert err.value.rule == rule


def test_dtypes():
    n = Node("Shape", [Value("x")], [Value("y")])
    assert core_schemas.infer_dtypes(n, ["float32"]) == ["int64"]
    n = Node("Cast", [Value("x")], [Value("y")], {"to": "int32"})
    assert core_schemas.infer_dtypes(n, ["float32"]) == ["int32"]
    n = Node("Less", [Value("a"), Value("b")], [Value("y")])
    assert core_schemas.infer_dtypes(n, ["float32", "float32"]) == ["bool"]
