"""Near misses of the layout contract's boundary rules (nhwc_onnx/passes/layout/boundary.py).

Each exception to "every image input/output is NHWC" fires on one exact pattern. For each, a
case that matches and cases that almost do (another perm, another shape, one more reader, a
similar name) must come out differently: the numbers against onnxruntime, and also the op
counts, the recorded I/O permutations, the layout tags and the decisions, since a rule that
fires wrongly can keep the numbers right while the record lies about what happened.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from nhwc_onnx.errors import UnsupportedOpError
from tests.frontends.onnx.onnx_helpers import make_model
from tests.passes.layout.test_contract_onnx import check_against_ort, dialect, transposes

NHWC = [0, 2, 3, 1]
NLC = [0, 2, 1]
AT_SOURCE = "NHWC at the source"
STORED_NHWC = "graph input NCHW -> stored NHWC"
SOURCE_ORDER = "graph output computed in source axis order"


def notes(ctx, name: str) -> list[str]:
    """The layout decisions recorded for node or value ``name``."""
    return [d.detail for d in ctx.decisions if d.kind == "layout" and d.node == name]


def weights(*shape) -> np.ndarray:
    """Random weights of ``shape``, the same whichever tests run before."""
    return np.random.default_rng(list(shape)).standard_normal(shape).astype(np.float32)


# -- tf2onnx: an NHWC input the source transposes to NCHW first -------------------------------

X_NHWC = [2, 5, 7, 3]


def _transposed_input_into_conv(perm):
    t = [X_NHWC[p] for p in perm]
    return make_model([helper.make_node("Transpose", ["x"], ["t"], perm=perm),
                       helper.make_node("Conv", ["t", "w"], ["y"])],
                      [("x", X_NHWC)], [("y", [2, 4, t[2], t[3]])], {"w": weights(4, t[1], 1, 1)})


def test_input_transposed_by_0312_is_nhwc_at_the_source_and_the_transpose_goes():
    ours, ctx = check_against_ort(_transposed_input_into_conv([0, 3, 1, 2]),
                                  {"x": None, "y": NHWC})
    assert transposes(ours) == 0 and dict(ours.graph.op_counts()) == {"Conv": 1}
    assert ours.graph.inputs[0].layout == "NHWC" and list(ours.graph.inputs[0].shape) == X_NHWC
    assert len(notes(ctx, "x")) == 1 and AT_SOURCE in notes(ctx, "x")[0]
    assert any("removed" in n for n in notes(ctx, "Transpose_t"))


@pytest.mark.parametrize("perm", [[0, 3, 2, 1], [0, 1, 3, 2], [0, 2, 1, 3]])
def test_input_transposed_by_another_perm_is_an_nchw_image_and_the_transpose_stays(perm):
    ours, ctx = check_against_ort(_transposed_input_into_conv(perm), {"x": NHWC, "y": NHWC})
    assert transposes(ours) == 1  # the source's own data movement, on the stored axes
    assert notes(ctx, "x") == [STORED_NHWC]
    assert not any("removed" in n for n in notes(ctx, "Transpose_t"))
    assert any("on the stored layout" in n for n in notes(ctx, "Transpose_t"))


def test_input_read_by_the_0312_transpose_and_by_another_op_is_an_nchw_image():
    model = make_model([helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
                        helper.make_node("Conv", ["t", "w"], ["y"]),
                        helper.make_node("Relu", ["x"], ["z"])],
                       [("x", X_NHWC)], [("y", [2, 4, 5, 7]), ("z", X_NHWC)],
                       {"w": weights(4, 3, 1, 1)})
    ours, ctx = check_against_ort(model, {"x": NHWC, "y": NHWC, "z": NHWC})
    assert transposes(ours) == 1
    assert notes(ctx, "x") == [STORED_NHWC]


@pytest.mark.parametrize("perm, at_source", [([0, 4, 1, 2, 3], True), ([0, 4, 1, 3, 2], False),
                                             ([0, 1, 4, 2, 3], False)])
def test_rank5_input_transposed_to_ncdhw_only_by_04123(perm, at_source):
    shape = [2, 4, 5, 6, 3]
    model = make_model([helper.make_node("Transpose", ["x"], ["t"], perm=perm),
                        helper.make_node("Relu", ["t"], ["y"])],
                       [("x", shape)], [("y", [shape[p] for p in perm])])
    ndhwc = [0, 2, 3, 4, 1]
    ours, ctx = check_against_ort(model, {"x": None if at_source else ndhwc, "y": ndhwc})
    assert transposes(ours) == (0 if at_source else 1)
    assert (AT_SOURCE in " ".join(notes(ctx, "x"))) is at_source


# -- tf2onnx: an output the source transposes back to NHWC ----------------------------------


def test_output_transposed_by_0231_after_an_nchw_conv_is_nhwc_and_the_transpose_goes():
    model = make_model([helper.make_node("Conv", ["x", "w"], ["c"]),
                        helper.make_node("Transpose", ["c"], ["y"], perm=[0, 2, 3, 1])],
                       [("x", [2, 3, 5, 7])], [("y", [2, 5, 7, 4])], {"w": weights(4, 3, 1, 1)})
    ours, ctx = check_against_ort(model, {"x": NHWC, "y": None})
    assert transposes(ours) == 0 and ours.graph.outputs[0].layout == "NHWC"
    assert notes(ctx, "y") == [] and any("removed" in n for n in notes(ctx, "Transpose_y"))


MATMUL_OUT = [2, 3, 5, 4]


@pytest.mark.parametrize("perm, nhwc", [([0, 2, 3, 1], True), ([0, 3, 2, 1], False),
                                        ([0, 2, 1, 3], False), ([0, 1, 3, 2], False)])
def test_output_transpose_is_the_sources_own_nhwc_only_with_perm_0231(perm, nhwc):
    """A batch-of-matrices result the source transposes: with (0,2,3,1) it is channels-last by
    the source's own hand (tagged NHWC, nothing to record). With any other perm the result is
    a rank-4 output of an NCHW source, so an image, and the source's Transpose moves the data
    anyway: its perm is remapped to give the output NHWC, recorded, at no cost."""
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["c"]),
                        helper.make_node("Transpose", ["c"], ["y"], perm=perm)],
                       [("a", [2, 3, 5, 7]), ("b", [2, 3, 7, 4])],
                       [("y", [MATMUL_OUT[p] for p in perm])])
    ours, ctx = check_against_ort(model, {"a": None, "b": None, "y": None if nhwc else NHWC})
    assert transposes(ours) == 1
    assert ours.io_permutations == ({} if nhwc else {"y": NHWC})
    assert ours.graph.outputs[0].layout == "NHWC"
    assert (notes(ctx, "y") == []) is nhwc
    remapped = [n for n in notes(ctx, "Transpose_y") if "as its readers want it" in n]
    assert (remapped == []) is nhwc


# -- a rank-4 input read only as a batch of matrices ------------------------------------------


def test_input_read_by_matmul_and_by_another_op_is_an_image():
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"]),
                        helper.make_node("Relu", ["a"], ["z"])],
                       [("a", [2, 3, 5, 7]), ("b", [2, 3, 7, 4])],
                       [("y", [2, 3, 5, 4]), ("z", [2, 3, 5, 7])])
    with pytest.raises(UnsupportedOpError, match="'MatMul_y'") as refused:
        dialect(model)
    assert refused.value.keep_layout_suggestion == ["a"]
    allowed, ctx = check_against_ort(model, {"a": NHWC, "b": None, "y": NHWC, "z": NHWC},
                                     allow_transpose=True)
    assert transposes(allowed) == 2
    assert notes(ctx, "a") == [STORED_NHWC]
    assert "batch of matrices" in notes(ctx, "b")[0]
    kept, ctx = check_against_ort(model, {"a": None, "b": None, "y": None, "z": None},
                                  keep_layout=["a"])
    assert transposes(kept) == 0 and "--keep-layout" in notes(ctx, "a")[0]


# -- rank 3: only an N,C,L map read by 1-D convolutions is stored N,L,C -----------------------

W1D = weights(4, 3, 1, 3)


def _lifted(shape, *extra_nodes, outputs=(("y", [2, 4, 1, 9]),), weight=W1D):
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]),
             helper.make_node("Conv", ["r", "w"], ["y"]), *extra_nodes]
    return make_model(nodes, [("x", [2, 3, 11])], list(outputs),
                      {"s": np.array(shape, np.int64), "w": weight})


def test_rank3_input_lifted_to_nc1l_for_a_conv_is_stored_nlc():
    ours, ctx = check_against_ort(_lifted([2, 3, 1, 11]), {"x": NLC, "y": NHWC})
    assert transposes(ours) == 0 and ours.graph.inputs[0].layout == "NHWC"
    assert "N,C,L" in notes(ctx, "x")[0]


def test_rank3_input_lifted_to_n1cl_is_no_ncl_map():
    ours, ctx = check_against_ort(_lifted([2, 1, 3, 11], weight=weights(4, 1, 3, 3)),
                                  {"x": None, "y": NHWC})
    assert transposes(ours) == 0
    assert ours.graph.inputs[0].layout is None and notes(ctx, "x") == []


def test_rank3_input_lifted_for_a_conv_and_also_read_as_it_is_is_no_ncl_map():
    model = _lifted([2, 3, 1, 11], helper.make_node("Relu", ["x"], ["z"]),
                    outputs=(("y", [2, 4, 1, 9]), ("z", [2, 3, 11])))
    with pytest.raises(UnsupportedOpError, match="'Conv_y'"):
        dialect(model)
    ours, ctx = check_against_ort(model, {"x": None, "y": NHWC, "z": None}, allow_transpose=True)
    assert transposes(ours) == 1 and notes(ctx, "x") == []


def test_rank3_input_lifted_but_read_by_no_conv_keeps_its_order():
    model = make_model([helper.make_node("Reshape", ["x", "s"], ["r"]),
                        helper.make_node("Relu", ["r"], ["y"])],
                       [("x", [2, 3, 11])], [("y", [2, 3, 1, 11])],
                       {"s": np.array([2, 3, 1, 11], np.int64)})
    ours, ctx = check_against_ort(model, {"x": None, "y": None})
    assert transposes(ours) == 0 and notes(ctx, "x") == []


@pytest.mark.parametrize("shape, axis, perms", [
    ([2, 3, 1, 5], 2, {"x": NHWC, "y": NLC}),  # (N, C, W): an N,C,L map, stored N,L,C
    ([1, 1, 4, 5], 0, {"x": NHWC, "y": None}),  # (C=1, H, W): no N,C,L map, same bytes
])
def test_squeezed_rank3_output_is_nlc_only_when_it_is_an_ncl_map(shape, axis, perms):
    out = shape[:axis] + shape[axis + 1:]
    model = make_model([helper.make_node("Squeeze", ["x", "axes"], ["y"])], [("x", shape)],
                       [("y", out)], {"axes": np.array([axis], np.int64)})
    ours, ctx = check_against_ort(model, perms)
    assert transposes(ours) == 0
    y = ours.graph.outputs[0]
    if perms["y"]:
        assert y.layout == "NHWC" and list(y.shape) == [2, 5, 3]
        assert notes(ctx, "y") == [
            "graph output stored with permutation [0, 2, 1] of its source axes"]
    else:
        assert y.layout is None and list(y.shape) == out and notes(ctx, "y") == []


# -- --keep-layout names exactly the tensors it lists -----------------------------------------


def test_keep_layout_keeps_only_the_named_input():
    model = make_model([helper.make_node("Relu", ["x"], ["y"]),
                        helper.make_node("Relu", ["x_1"], ["z"])],
                       [("x", [2, 3, 5, 7]), ("x_1", [2, 3, 5, 7])],
                       [("y", [2, 3, 5, 7]), ("z", [2, 3, 5, 7])])
    ours, ctx = check_against_ort(model, {"x": None, "x_1": NHWC, "y": None, "z": NHWC},
                                  keep_layout=["x"])
    assert transposes(ours) == 0
    assert notes(ctx, "x") == ["graph input kept in source axis order (--keep-layout)"]
    assert notes(ctx, "x_1") == [STORED_NHWC]
    assert [v.layout for v in ours.graph.inputs] == [None, "NHWC"]


def test_keep_layout_of_an_output_leaves_the_input_nhwc():
    model = make_model([helper.make_node("Relu", ["x"], ["y"]),
                        helper.make_node("Relu", ["x"], ["z"])],
                       [("x", [2, 3, 1, 1])], [("y", [2, 3, 1, 1]), ("z", [2, 3, 1, 1])])
    ours, ctx = check_against_ort(model, {"x": NHWC, "y": None, "z": NHWC}, keep_layout=["y"])
    assert transposes(ours) == 0  # [N,C,1,1] has the same bytes in both orders: a Reshape
    assert notes(ctx, "x") == [STORED_NHWC]
    assert [list(v.shape) for v in ours.graph.outputs] == [[2, 3, 1, 1], [2, 1, 1, 3]]


# -- an output in source order is given back NHWC when that costs no Transpose ----------------


@pytest.mark.parametrize("shape, constant_weight, nhwc", [
    ([2, 4, 1, 1], True, True), ([2, 4, 3, 1], True, True), ([2, 4, 1, 3], True, True),
    ([2, 4, 1, 1], False, True), ([2, 4, 3, 1], False, False), ([2, 4, 1, 3], False, False)])
def test_dense_output_reshaped_to_rank4_is_nhwc_when_one_pixel_or_a_constant_weight(
        shape, constant_weight, nhwc):
    """One pixel: the same bytes in both orders, a Reshape. More: the constant Dense weight's
    columns are reordered to H,W,C; a weight fed at run time cannot be, so the output stays in
    source order, said so in the report."""
    k = int(np.prod(shape[1:]))
    inits = {"w0": weights(6, 3, 1, 1), "s": np.array(shape, np.int64)}
    inputs = [("x", [2, 3, 5, 7])]
    if constant_weight:
        inits["w"] = weights(6, k)
    else:
        inputs.append(("w", [6, k]))
    model = make_model([helper.make_node("Conv", ["x", "w0"], ["c"]),
                        helper.make_node("GlobalAveragePool", ["c"], ["g"]),
                        helper.make_node("Flatten", ["g"], ["f"]),
                        helper.make_node("Gemm", ["f", "w"], ["d"]),
                        helper.make_node("Reshape", ["d", "s"], ["y"])],
                       inputs, [("y", shape)], inits)
    perms = {"x": NHWC, "y": NHWC if nhwc else None} | ({} if constant_weight else {"w": None})
    ours, ctx = check_against_ort(model, perms)
    assert transposes(ours) == 0
    y = ours.graph.outputs[0]
    assert y.layout == ("NHWC" if nhwc else None)
    assert list(y.shape) == ([shape[0], *shape[2:], shape[1]] if nhwc else shape)
    assert (SOURCE_ORDER in " ".join(notes(ctx, "y"))) is not nhwc
    reordered = any("reordered from C,H,W" in n for n in notes(ctx, "Gemm_d"))
    assert reordered is (constant_weight and shape != [2, 4, 1, 1])
