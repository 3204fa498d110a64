"""Exported idioms the layout walk turns NHWC without a Transpose of its own: PyTorch's opset-9
PixelShuffle (and the opset-11 DepthToSpace), older PyTorch 1-D pools (Unsqueeze -> 2-D pool ->
Squeeze), an opset < 13 Softmax(axis=1) over a whole C x H x W map, and rank-4 outputs built
from lower-rank values. Each against onnxruntime with NHWC (N,L,C) I/O and the recorded
permutations, at batch 1 and 3, plus a near miss that must come out differently."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.ir import Graph, Model, Value
from nhwc_onnx.passes.base import PassContext
from nhwc_onnx.passes.layout.table import LAYOUT_RULES
from nhwc_onnx.passes.layout.walk import LayoutWalk
from nhwc_onnx.passes.static_shapes import infer_graph
from nhwc_onnx.passes.to_nhwc import _visit as visit
from tests.core_reference import run_core
from tests.frontends.onnx.onnx_helpers import make_model
from tests.passes.layout.exported_heads import NHWC, NLC, pixel_shuffle, pool_1d, weights
from tests.passes.layout.test_boundary_near_miss import SOURCE_ORDER, notes
from tests.passes.layout.test_contract_onnx import check_against_ort, dialect, transposes


def layout_notes(ctx) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for d in ctx.decisions:
        if d.kind == "layout":
            found.setdefault(d.node, []).append(d.detail)
    return found


# -- PixelShuffle -------------------------------------------------------------------------------


@pytest.mark.parametrize("batch", [1, 3])
def test_opset9_pixel_shuffle_output_is_nhwc_with_its_own_transpose_remapped(batch):
    ours, ctx = check_against_ort(pixel_shuffle(batch, 9), {"x": NHWC, "y": NHWC})
    assert ours.graph.op_counts() == {"Conv": 1, "Reshape": 2, "Transpose": 1}
    assert list(ours.graph.outputs[0].shape) == [batch, 10, 14, 3]
    assert ours.graph.outputs[0].layout == "NHWC"
    # The Transpose stores its (N, C, H, r, W, r) result as N,H,r,W,r,C: the last Reshape then
    # makes N,H*r,W*r,C from the same bytes.
    assert notes(ctx, "/Transpose") == [
        ("Transpose perm [0, 1, 4, 2, 5, 3] -> [0, 1, 4, 2, 5, 3] on the stored layout, storing "
         "its result with permutation [0, 2, 3, 4, 5, 1] as its readers want it")]
    assert notes(ctx, "/Reshape_1") == [(f"Reshape rewritten on stored axes: [{batch}, 3, 5, "
                                         f"2, 7, 2] -> [{batch}, 3, 10, 14] keeps layout "
                                         "[0, 2, 3, 1]")]
    assert notes(ctx, "y") == [("graph output stored with permutation [0, 2, 3, 1] of its "
                                "source axes")]


@pytest.mark.parametrize("batch", [1, 3])
def test_opset11_depth_to_space_still_converts(batch):
    ours, ctx = check_against_ort(pixel_shuffle(batch, 11), {"x": NHWC, "y": NHWC})
    assert list(ours.graph.outputs[0].shape) == [batch, 10, 14, 3]
    assert not any("as its readers want it" in n for ns in layout_notes(ctx).values()
                   for n in ns)


def test_pixel_shuffle_viewed_rows_first_is_refused_naming_the_last_reshape():
    """Near miss: PyTorch 0.4 viewed the channels as (r, r, C) instead of (C, r, r). The last
    view then mixes the channel with H and W: no order of the Transpose's result makes it an
    NHWC map, so the Transpose keeps its input's layout and the Reshape is refused."""
    model = pixel_shuffle(1, 9, first_view=[-1, 2, 2, 3, 5, 7])
    with pytest.raises(UnsupportedOpError) as refused:
        dialect(model)
    assert [(p.node, p.op) for p in refused.value.problems] == [("/Reshape_1", "Reshape")]
    assert "mixes the channel axis" in refused.value.problems[0].reason
    ours, ctx = check_against_ort(model, {"x": NHWC, "y": NHWC}, allow_transpose=True)
    assert transposes(ours) == 3  # the source's own and two inserted
    assert notes(ctx, "/Transpose") == [
        "Transpose perm [0, 1, 4, 2, 5, 3] -> [0, 2, 5, 3, 1, 4] on the stored layout"]


# -- 1-D pooling: Unsqueeze -> 2-D pool with a (k, 1) window -> Squeeze --------------------------


@pytest.mark.parametrize("op", ["AveragePool", "MaxPool"])
@pytest.mark.parametrize("axis", [3, 2])
@pytest.mark.parametrize("batch", [1, 3])
def test_unsqueezed_1d_pool_has_nlc_io_and_no_transpose(op, axis, batch):
    ours, ctx = check_against_ort(pool_1d(op, batch, axis=axis), {"x": NLC, "y": NLC})
    assert transposes(ours) == 0 and ours.graph.op_counts()[op] == 1
    assert [list(v.shape) for v in ours.graph.inputs] == [[batch, 11, 3]]
    assert [list(v.shape) for v in ours.graph.outputs] == [[batch, 5, 3]]
    assert notes(ctx, "x") == ["graph input N,C,L -> stored N,L,C (a 1-D feature map)"]
    # The unsqueezed map is NHWC as it is: no Reshape added between Unsqueeze and pool.
    pool = next(n for n in ours.graph.nodes if n.op == op)
    assert list(pool.inputs[0].shape) == ([batch, 11, 1, 3] if axis == 3 else [batch, 1, 11, 3])
    assert pool.inputs[0].producer().name == "Unsqueeze_u"


def test_a_map_unsqueezed_in_front_of_its_channels_is_no_1d_map():
    """Near miss: Unsqueeze at axis 1 makes (N, 1, C, L), a one-channel image whose H is the
    source's C; the input is not an N,C,L map and keeps its order (the pool reads the
    one-channel image through a free Reshape)."""
    nodes = [helper.make_node("Unsqueeze", ["x"], ["u"], axes=[1]),
             helper.make_node("AveragePool", ["u"], ["p"], kernel_shape=[1, 3], strides=[1, 2],
                              pads=[0, 0, 0, 0]),
             helper.make_node("Squeeze", ["p"], ["y"], axes=[1])]
    model = make_model(nodes, [("x", [3, 3, 11])], [("y", [3, 3, 5])], opset=11)
    ours, ctx = check_against_ort(model, {"x": None, "y": None})
    assert transposes(ours) == 0 and ours.io_permutations == {}
    assert notes(ctx, "x") == [] and list(ours.graph.inputs[0].shape) == [3, 3, 11]


# -- Softmax(axis=1) before opset 13: one softmax over C x H x W ---------------------------------


def _conv_softmax(axis: int, batch: int):
    return make_model([helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1]),
                       helper.make_node("Softmax", ["c"], ["y"], axis=axis)],
                      [("x", [batch, 2, 5, 7])], [("y", [batch, 4, 5, 7])],
                      {"w": weights(4, 2, 1, 1)}, opset=11)


@pytest.mark.parametrize("batch", [1, 3])
def test_opset11_softmax_over_a_whole_map_converts_on_the_stored_order(batch):
    ours, ctx = check_against_ort(_conv_softmax(1, batch), {"x": NHWC, "y": NHWC})
    assert ours.graph.op_counts() == {"Conv": 1, "Flatten": 1, "Softmax": 1, "Reshape": 1}
    assert notes(ctx, "Softmax_y/coerce_2d") == [
        (f"Flatten of [{batch}, 4, 5, 7] into rows of 140 for a softmax over the whole row: "
         "computed on the stored order (permutation [0, 2, 3, 1]), which the softmax does not "
         "depend on")]


@pytest.mark.parametrize("batch, refused_at", [
    (3, ("Softmax_y/coerce_2d", "Flatten")),  # rows of one (n, c) would interleave
    (1, ("Softmax_y/softmax", "Softmax"))])  # rows stored as columns: the axis is not last
def test_opset11_softmax_over_h_and_w_is_refused(batch, refused_at):
    """Near miss: axis=2 normalises each channel's H x W block; stored NHWC the block is not
    contiguous, so its rows would need a layout Transpose."""
    with pytest.raises(UnsupportedOpError) as refused:
        dialect(_conv_softmax(2, batch))
    assert [(p.node, p.op) for p in refused.value.problems] == [refused_at]


def _rows_softmax(shape):
    """Core graph: an (N, C, H, W) map viewed as rows (N, C, H*W), a softmax over the rows,
    viewed back."""
    n, c, h, w = shape
    g = Graph()
    x = g.add_input(Value("x", shape=shape))
    rows = g.make_node("Reshape", [x, g.constant(np.array([n, c, h * w]), "rows/shape")],
                       name="rows")
    soft = g.make_node("Softmax", [rows.output], {"axis": 2}, name="soft")
    g.outputs.append(g.make_node("Reshape", [soft.output, g.constant(np.array(shape),
                                                                     "back/shape")],
                                 name="back").output)
    infer_graph(g)
    return Model(g)


@pytest.mark.parametrize("shape, sigma, converts", [
    ((2, 3, 4, 5), (0, 1, 3, 2), True),  # the block H x W stored W,H: the softmax does not care
    ((2, 3, 4, 5), (0, 2, 1, 3), False),  # the block is split by C: its rows are not contiguous
    ((2, 1, 4, 5), (0, 1, 3, 2), True)])  # one channel: the NHWC output would be the same bytes
def test_a_softmax_over_a_block_reads_it_in_any_order_inside_the_block(shape, sigma, converts):
    """The rule on its own, on stored layouts no boundary seeds (set by hand), with the output
    wanted NHWC: once the view back is rewritten to the stored order, nothing re-lays it out."""
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    want = run_core(_rows_softmax(shape), {"x": x})["back"]
    model, ctx = _rows_softmax(shape), PassContext()
    walk = LayoutWalk(model, ctx, LAYOUT_RULES)
    walk.set_sig(model.graph.inputs[0], sigma)
    walk.output_layouts = {id(model.graph.outputs[0]): (0, 2, 3, 1)}
    for node in list(model.graph.nodes):
        visit(walk, node)
    assert [p.node for p in walk.problems] == ([] if converts else ["rows"])
    assert (walk.sig(model.graph.outputs[0]) == sigma) is converts
    if converts:
        got = run_core(model, {"x": np.ascontiguousarray(x.transpose(sigma))})["back"]
        np.testing.assert_allclose(got, want.transpose(sigma), rtol=1e-6, atol=1e-7)


# -- rank-4 outputs built from lower-rank values -------------------------------------------------

N, Z, C, H, W = 3, 4, 3, 5, 2


def _shape(*dims):
    return helper.make_node("Constant", [], [f"shape{len(dims)}_{'_'.join(map(str, dims))}"],
                            value=helper.make_tensor("v", 7, [len(dims)], list(dims)))


def _decoder(constant_weight: bool):
    """Dense -> view (N, C, H, W) -> Relu: a GAN/decoder output."""
    shape = _shape(N, C, H, W)
    inits = {"fc.bias": weights(C * H * W)}
    inputs = [("z", [N, Z])]
    if constant_weight:
        inits["fc.weight"] = weights(C * H * W, Z)
    else:
        inputs.append(("fc.weight", [C * H * W, Z]))
    return make_model([helper.make_node("Gemm", ["z", "fc.weight", "fc.bias"], ["d"], transB=1),
                       shape, helper.make_node("Reshape", ["d", shape.output[0]], ["img"]),
                       helper.make_node("Relu", ["img"], ["y"])],
                      inputs, [("y", [N, C, H, W])], inits)


def test_dense_reshaped_into_an_output_map_is_nhwc_with_its_permutation_recorded():
    """No NCHW input or conv at all: the rank-4 output is still an NCHW image by ONNX's
    convention, given back NHWC by reordering the Dense columns (it was labelled NHWC while
    stored NCHW)."""
    ours, ctx = check_against_ort(_decoder(True), {"z": None, "y": NHWC})
    assert ours.graph.op_counts() == {"Dense": 1, "Reshape": 1, "Relu": 1}
    assert ours.graph.outputs[0].layout == "NHWC"
    assert list(ours.graph.outputs[0].shape) == [N, H, W, C]
    assert any("reordered from C,H,W to H,W,C" in n for n in notes(ctx, "Gemm_d"))


def test_an_output_map_of_a_run_time_dense_weight_stays_in_source_order_untagged():
    """Near miss: the weight is an input, so nothing can absorb the order: the output is
    recorded as computed in source order and carries no NHWC label."""
    ours, ctx = check_against_ort(_decoder(False), {"z": None, "fc.weight": None, "y": None})
    assert ours.graph.outputs[0].layout is None
    assert list(ours.graph.outputs[0].shape) == [N, C, H, W]
    assert len(notes(ctx, "y")) == 1 and SOURCE_ORDER in notes(ctx, "y")[0]


def _broadcast(kind: str, lift: str = "Unsqueeze"):
    """(N, C) lifted to (N, C, 1, 1) (Unsqueeze or Reshape) and repeated over H x W: Expand,
    Tile or both joined."""
    if lift == "Unsqueeze":
        nodes = [_shape(2, 3), helper.make_node("Unsqueeze", ["z", "shape2_2_3"], ["u"])]
    else:
        nodes = [_shape(N, C, 1, 1), helper.make_node("Reshape", ["z", f"shape4_{N}_{C}_1_1"],
                                                      ["u"])]
    parts = []
    if kind in ("Expand", "Concat"):
        nodes += [_shape(N, C, H, W),
                  helper.make_node("Expand", ["u", f"shape4_{N}_{C}_{H}_{W}"], ["e"])]
        parts.append("e")
    if kind in ("Tile", "Concat"):
        nodes += [_shape(1, 1, H, W), helper.make_node("Tile", ["u", f"shape4_1_1_{H}_{W}"],
                                                       ["t"])]
        parts.append("t")
    nodes.append(helper.make_node("Concat", parts, ["y"], axis=1) if len(parts) > 1 else
                 helper.make_node("Relu", parts, ["y"]))
    return make_model(nodes, [("z", [N, C])], [("y", [N, C * len(parts), H, W])], opset=13)


@pytest.mark.parametrize("kind", ["Expand", "Tile", "Concat"])
@pytest.mark.parametrize("lift", ["Unsqueeze", "Reshape"])
def test_a_map_broadcast_from_a_vector_is_an_nhwc_output(kind, lift):
    ours, ctx = check_against_ort(_broadcast(kind, lift), {"z": None, "y": NHWC})
    assert transposes(ours) == 0 and ours.graph.outputs[0].layout == "NHWC"
    assert notes(ctx, f"{lift}_u") == [
        ("Unsqueeze stores its result" if lift == "Unsqueeze" else
         f"Reshape to [{N}, {C}, 1, 1] stores its result")
        + " with permutation [0, 2, 3, 1], as its readers want it (the same bytes)"]
    assert ours.io_permutations == {"y": NHWC}


def test_a_vector_reshaped_into_a_multi_pixel_map_stays_in_source_order():
    """Near miss: (N, C*H*W) viewed as (N, C, H, W) is in NCHW order and no weight or source
    Transpose can reorder it: kept in source order, recorded with the reason, not labelled."""
    shape = _shape(N, C, H, W)
    model = make_model([shape, helper.make_node("Reshape", ["z", shape.output[0]], ["m"]),
                        helper.make_node("Relu", ["m"], ["y"])],
                       [("z", [N, C * H * W])], [("y", [N, C, H, W])], opset=13)
    ours, ctx = check_against_ort(model, {"z": None, "y": None})
    assert ours.graph.outputs[0].layout is None and ours.io_permutations == {}
    assert notes(ctx, "y") == [(f"{SOURCE_ORDER} (not an image: e.g. a MatMul result, or a map "
                                "built in source order from lower-rank values, which only a "
                                "layout Transpose could make NHWC); kept as it is")]
