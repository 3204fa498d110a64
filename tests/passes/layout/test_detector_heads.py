"""Detector heads as ultralytics exports them (tests/passes/layout/exported_heads.py): NHWC (N,L,C)
graph I/O with zero added Transposes, numbers against onnxruntime, at batch 1 and 3.

The YOLOv8 DFL head transposes a viewed (N, 4, 16, A) map and reads it with a 1x1 Conv. Stored
N,A,4,16 after the free view of the N,A,64 box rows, the Transpose's result is wanted by the
pointwise Conv in exactly that order (channel last; which spatial axis comes first does not
matter to a 1x1 stride-1 Conv), so the Transpose vanishes and the boxes come out N,A,4 - the
order the class scores are stored in - and the final Concat joins them as stored.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.passes.base import PassContext
from nhwc_onnx.passes.to_nhwc import ToNHWC
from tests.core_reference import run_core
from tests.frontends.onnx.onnx_helpers import convert, make_model, random_feeds, run_ort
from tests.passes.layout.exported_heads import ANCHORS, NC, NHWC, NLC, weights, yolov8_head
from tests.passes.layout.test_boundary_near_miss import notes
from tests.passes.layout.test_contract_onnx import check_against_ort, dialect, transposes

PERMS = {"p3": NHWC, "p4": NHWC, "p5": NHWC, "output0": NLC}
EXPORTS = [("torchscript", 11), ("torchscript", 13), ("torchscript", 17), ("dynamo", 18)]
DFL = "/model.22/dfl"


def _dfl_transpose(style: str, index: int = 0) -> str:
    """The name the exporter gives the DFL's index-th Transpose (the head's first ones)."""
    suffix = f"_{index}" if index else ""
    return f"{DFL}/Transpose{suffix}" if style == "torchscript" else f"node_transpose{suffix}"


@pytest.mark.parametrize("style, opset", EXPORTS)
@pytest.mark.parametrize("batch", [1, 3])
def test_yolov8_head_converts_with_nhwc_io_and_no_transpose(style, opset, batch):
    ours, ctx = check_against_ort(yolov8_head(batch, opset, style), PERMS)
    assert transposes(ours) == 0
    counts = ours.graph.op_counts()
    assert counts["Conv"] == 7 and counts["Softmax"] == 1 and counts["Sigmoid"] == 1
    out = ours.graph.outputs[0]
    assert list(out.shape) == [batch, ANCHORS, 4 + NC] and out.layout == "NHWC"  # N,L,C
    assert [list(v.shape) for v in ours.graph.inputs] == [[batch, 4, 6, 6], [batch, 2, 3, 7],
                                                          [batch, 1, 2, 9]]
    # Every DFL Transpose vanished (opset 11 writes three: the DFL's and the two the exporter
    # puts around a Softmax over a non-last axis) and the 1x1 Conv reads the stored order.
    count = 3 if opset < 13 else 1
    for i in range(count):
        assert any(n.startswith("Transpose ") and "removed" in n
                   for n in notes(ctx, _dfl_transpose(style, i))), i
    pointwise = [(d.node, d.detail) for d in ctx.decisions if d.detail.startswith("1x1 Conv")]
    dfl_conv = f"{DFL}/conv/Conv" if style == "torchscript" else "node_convolution_6"
    assert len(pointwise) == 1 and pointwise[0][0] == dfl_conv
    assert "[0, 3, 2, 1]" in pointwise[0][1]
    assert notes(ctx, "output0") == [("graph output stored with permutation [0, 2, 1] of its "
                                      "source axes")]


def test_the_dfl_conv_reads_the_bins_stored_anchor_major():
    """The 1x1 Conv reads (N, 16, 4, A) stored N,A,4,16 as it is: an NHWC image whose H is the
    source's W (anchors) and W the source's H (box sides)."""
    ours, _ = check_against_ort(yolov8_head(3, 17), PERMS)
    conv = ours.graph.find_node(f"{DFL}/conv/Conv")
    assert conv is not None and list(conv.inputs[0].shape) == [3, ANCHORS, 4, 16]


def test_dfl_with_a_3x3_conv_is_refused_at_the_concat_of_boxes_and_scores():
    """Near miss: a 3x3 Conv (same size, padded) needs its input NHWC (N,4,A,16): the DFL
    Transpose stays, remapped to move the stored N,A,4,16 there, and the boxes come out N,4,A
    while the scores are stored N,A,C - joining them needs a layout Transpose."""
    model = yolov8_head(1, 17, dfl_kernel=3)
    last = model.graph.node[-1]
    with pytest.raises(UnsupportedOpError) as refused:
        dialect(model)
    assert [(p.node, p.op) for p in refused.value.problems] == [(last.name, "Concat")]
    assert "stored in different layouts" in refused.value.problems[0].reason
    ours, ctx = check_against_ort(model, PERMS, allow_transpose=True)
    assert transposes(ours) == 2  # the DFL's own (remapped) and one inserted for the Concat
    assert notes(ctx, f"{DFL}/Transpose") == [
        ("Transpose perm [0, 2, 1, 3] -> [0, 2, 1, 3] on the stored layout, storing its result "
         "with permutation [0, 2, 3, 1] as its readers want it")]


def test_dfl_softmax_over_the_coordinates_is_refused():
    """Near miss: a softmax over axis 2 (the 4 box sides) instead of the 16 bins. The dialect's
    Softmax normalises the last stored axis, so the sides would have to be stored last while
    the 1x1 Conv wants the bins last: the Transpose's result is not stored as the Conv wants,
    and the Conv (and then the Concat of boxes and scores) would need a layout Transpose."""
    model = yolov8_head(1, 17, dfl_softmax_axis=2)
    with pytest.raises(UnsupportedOpError) as refused:
        dialect(model)
    assert [(p.node, p.op) for p in refused.value.problems] == [
        (f"{DFL}/conv/Conv", "Conv"), (model.graph.node[-1].name, "Concat")]


# -- the rule on its own: a 1x1 Conv reads any stored order whose last axis is the channel ----

H, W = 3, 5


def _bins_reduced(batch: int, pads=(0, 0, 0, 0)):
    """A DFL-like reduction: (N, 8, H, W) viewed (N, 2, 4, H*W), transposed to (N, 4, 2, H*W),
    summed over the 4 by a 1x1 Conv (optionally padded, then cropped back), viewed (N, 2, H*W)
    and joined with the map viewed (N, 8, H*W) - stored N,H*W,8."""
    a = H * W
    inits = {"w0": weights(8, 6, 1, 1), "w1": weights(1, 4, 1, 1),
             "s1": np.array([batch, 2, 4, a], np.int64), "s2": np.array([batch, 2, a], np.int64),
             "s3": np.array([batch, 8, a], np.int64)}
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c"], kernel_shape=[1, 1]),
             helper.make_node("Reshape", ["c", "s1"], ["v"]),
             helper.make_node("Transpose", ["v"], ["t"], perm=[0, 2, 1, 3]),
             helper.make_node("Conv", ["t", "w1"], ["d"], kernel_shape=[1, 1], pads=list(pads))]
    if any(pads):  # crop the padded border away again
        top, left = pads[0], pads[1]
        inits.update({"starts": np.array([top, left], np.int64),
                      "ends": np.array([top + 2, left + a], np.int64),
                      "axes": np.array([2, 3], np.int64)})
        nodes.append(helper.make_node("Slice", ["d", "starts", "ends", "axes"], ["d_crop"]))
    nodes += [helper.make_node("Reshape", [nodes[-1].output[0], "s2"], ["r"]),
              helper.make_node("Reshape", ["c", "s3"], ["f"]),
              helper.make_node("Concat", ["r", "f"], ["y"], axis=1)]
    return make_model(nodes, [("x", [batch, 6, H, W])], [("y", [batch, 10, a])], inits)


@pytest.mark.parametrize("batch", [1, 3])
def test_a_1x1_conv_reads_its_input_stored_w_major(batch):
    ours, ctx = check_against_ort(_bins_reduced(batch), {"x": NHWC, "y": NLC})
    assert transposes(ours) == 0
    assert notes(ctx, "Conv_d") == [
        ("1x1 Conv reads 't' stored with permutation [0, 3, 2, 1] (channel last) as it is: it "
         "computes each position on its own, whichever order they are stored in")]
    assert any("removed" in n for n in notes(ctx, "Transpose_t"))


def test_a_padded_1x1_conv_reads_nhwc_only():
    """Near miss: padding only W adds positions along one axis, so the Conv must know which
    stored axis is W: it reads NHWC, the bins come out N,2,A and the join with the N,A,8 map
    needs a layout Transpose."""
    model = _bins_reduced(1, pads=(0, 1, 0, 1))
    with pytest.raises(UnsupportedOpError) as refused:
        dialect(model)
    assert [(p.node, p.op) for p in refused.value.problems] == [("Concat_y", "Concat")]
    ours, ctx = check_against_ort(model, {"x": NHWC, "y": NLC}, allow_transpose=True)
    assert notes(ctx, "Conv_d") == [] and transposes(ours) == 2


def test_a_1x1_conv_reading_a_matmul_result_is_refused():
    """Near miss: a MatMul result is stored in source order, N,C,H,W - its channel is not
    last, so the 1x1 Conv cannot read it as it is."""
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["m"]),
                        helper.make_node("Conv", ["m", "w"], ["y"], kernel_shape=[1, 1])],
                       [("a", [2, 3, 5, 7]), ("b", [2, 3, 7, 4])], [("y", [2, 6, 5, 4])],
                       {"w": weights(6, 3, 1, 1)})
    with pytest.raises(UnsupportedOpError) as refused:
        dialect(model)
    assert [(p.node, p.op) for p in refused.value.problems] == [("Conv_y", "Conv")]
    assert "not an NCHW feature map" in refused.value.problems[0].reason


# -- YOLOv5: view (N, na, no, H, W) -> permute(0, 1, 3, 4, 2) -> ... -> view (N, na*H*W, no) --


def _yolov5_head(batch: int):
    na, nc, levels = 3, 2, ((4, 6, 8), (2, 3, 16))
    no, nodes, inits, inputs, rows = nc + 5, [], {}, [], []
    for i, (h, w, stride) in enumerate(levels):
        x, c, p = f"p{i}", 6 + i, f"/model.24/m.{i}"
        inputs.append((x, [batch, c, h, w]))
        inits.update({f"{p}.weight": weights(na * no, c, 1, 1, seed=i),
                      f"{p}.bias": weights(na * no, seed=i)})
        ys, xs = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
        inits[f"grid{i}"] = np.broadcast_to(np.stack([xs, ys], -1) - 0.5,
                                            (1, na, h, w, 2)).astype(np.float32)
        inits[f"anchor_grid{i}"] = np.broadcast_to(
            np.abs(weights(1, na, 1, 1, 2, seed=i)) * 20, (1, na, h, w, 2)).astype(np.float32)
        inits[f"shape{i}"] = np.array([batch, na, no, h, w], np.int64)
        inits[f"rows{i}"] = np.array([batch, na * h * w, no], np.int64)
        inits[f"stride{i}"] = np.array(float(stride), np.float32)
        inits["two"] = np.array(2.0, np.float32)
        nodes += [
            helper.make_node("Conv", [x, f"{p}.weight", f"{p}.bias"], [f"c{i}"],
                             kernel_shape=[1, 1], pads=[0, 0, 0, 0], strides=[1, 1]),
            helper.make_node("Reshape", [f"c{i}", f"shape{i}"], [f"v{i}"]),
            helper.make_node("Transpose", [f"v{i}"], [f"t{i}"], perm=[0, 1, 3, 4, 2]),
            helper.make_node("Sigmoid", [f"t{i}"], [f"s{i}"]),
            helper.make_node("Split", [f"s{i}"], [f"xy{i}", f"wh{i}", f"conf{i}"], axis=4,
                             split=[2, 2, nc + 1]),
            helper.make_node("Mul", [f"xy{i}", "two"], [f"xy2{i}"]),
            helper.make_node("Add", [f"xy2{i}", f"grid{i}"], [f"xyg{i}"]),
            helper.make_node("Mul", [f"xyg{i}", f"stride{i}"], [f"xyo{i}"]),
            helper.make_node("Mul", [f"wh{i}", "two"], [f"wh2{i}"]),
            helper.make_node("Pow", [f"wh2{i}", "two"], [f"whp{i}"]),
            helper.make_node("Mul", [f"whp{i}", f"anchor_grid{i}"], [f"who{i}"]),
            helper.make_node("Concat", [f"xyo{i}", f"who{i}", f"conf{i}"], [f"y{i}"], axis=4),
            helper.make_node("Reshape", [f"y{i}", f"rows{i}"], [f"z{i}"])]
        rows.append(f"z{i}")
    nodes.append(helper.make_node("Concat", rows, ["output"], axis=1))
    total = sum(na * h * w for h, w, _ in levels)
    return make_model(nodes, inputs, [("output", [batch, total, no])], inits, opset=12)


@pytest.mark.parametrize("batch", [1, 3])
def test_yolov5_head_layout_keeps_its_own_permute_and_anchors_attrs_output(batch):
    """The permute's result is wanted in source order by the final view to (N, anchors,
    attrs) - a rank-3 tensor that is no N,C,L map and keeps its order - so the Permute is
    remapped to move the stored N,H,W,na*no map there: one Transpose per level, the source's
    own. Checked on the core graph, then through the dialect conversion (Pow(x, 2) is x * x)."""
    model = _yolov5_head(batch)
    feeds = random_feeds(model)
    want = run_ort(model, feeds)["output"]
    core = convert(model)
    ctx = PassContext()
    ToNHWC()(core, ctx)
    assert core.io_permutations == {"p0": NHWC, "p1": NHWC}
    got = run_core(core, {k: np.ascontiguousarray(a.transpose(NHWC)) for k, a in feeds.items()})
    np.testing.assert_allclose(got["output"], want, rtol=1e-4, atol=1e-4)
    assert core.graph.op_counts()["Transpose"] == 2
    assert notes(ctx, "Transpose_t0") == [
        ("Transpose perm [0, 1, 3, 4, 2] -> [0, 3, 1, 2, 4] on the stored layout, storing its "
         "result with permutation [0, 1, 2, 3, 4] as its readers want it")]
    # the whole dialect conversion: the head's Pow(x, 2) is x * x, the layout stays as above
    ours, ctx = check_against_ort(model, {"p0": NHWC, "p1": NHWC, "output": None})
    assert transposes(ours) == 2
    assert [d.node for d in ctx.decisions if d.data.get("op") == "Pow"] == ["Pow_whp0", "Pow_whp1"]
