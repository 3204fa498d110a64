"""The layout contract at the graph boundary (docs/layout.md), ONNX:
every rank-4 input/output is NHWC whatever ops follow, with zero layout Transposes; numbers
checked against onnxruntime on the source model."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from nhwc_onnx.errors import UnsupportedOpError, UsageError
from nhwc_onnx.options import ConvertOptions
from nhwc_onnx.passes.base import PassContext
from nhwc_onnx.passes.pipeline import to_dialect
from nhwc_onnx.runtime import run
from tests.frontends.onnx.onnx_helpers import convert, make_model, random_feeds, run_ort

NHWC = [0, 2, 3, 1]
SHAPE = [2, 3, 5, 7]  # N, C, H, W: distinct sizes


def dialect(model: onnx.ModelProto, **options):
    core = convert(model)
    ctx = PassContext(options=ConvertOptions(**options))
    to_dialect(core, ctx)
    return core, ctx


def check_against_ort(model: onnx.ModelProto, perms: dict, **options):
    """Convert, check the recorded I/O permutations, run on NHWC feeds, compare with ort."""
    feeds = random_feeds(model)
    want = run_ort(model, feeds)
    ours, ctx = dialect(model, **options)
    got_perms = {v.name: ours.io_permutations.get(v.name)
                 for v in ours.graph.inputs + ours.graph.outputs}
    assert got_perms == perms
    stored = {k: np.ascontiguousarray(a.transpose(perms[k]) if perms.get(k) else a)
              for k, a in feeds.items()}
    got = run(ours, stored)
    for name, ref in want.items():
        perm = perms.get(name)
        back = got[name].transpose(np.argsort(perm)) if perm else got[name]
        np.testing.assert_allclose(back, ref, rtol=1e-4, atol=1e-4, err_msg=name)
    return ours, ctx


def transposes(model) -> int:
    return model.graph.op_counts().get("Transpose", 0)


def test_elementwise_only_graph_has_nhwc_io():
    model = make_model([helper.make_node("Relu", ["x"], ["r"]),
                        helper.make_node("Add", ["r", "x"], ["y"])],
                       [("x", SHAPE)], [("y", SHAPE)])
    ours, _ = check_against_ort(model, {"x": NHWC, "y": NHWC})
    assert [list(v.shape) for v in ours.graph.inputs] == [[2, 5, 7, 3]]
    assert ours.graph.inputs[0].layout == "NHWC" and ours.graph.outputs[0].layout == "NHWC"


def test_per_channel_affine_permutes_its_constants():
    rng = np.random.default_rng(3)
    model = make_model([helper.make_node("Mul", ["x", "scale"], ["s"]),
                        helper.make_node("Add", ["s", "bias"], ["y"])],
                       [("x", SHAPE)], [("y", SHAPE)],
                       {"scale": rng.standard_normal((1, 3, 1, 1)).astype(np.float32),
                        "bias": rng.standard_normal((1, 3, 1, 1)).astype(np.float32)})
    ours, _ = check_against_ort(model, {"x": NHWC, "y": NHWC})
    assert transposes(ours) == 0


def test_softmax_over_channels_converts_as_last_axis_softmax():
    model = make_model([helper.make_node("Softmax", ["x"], ["y"], axis=1)],
                       [("x", SHAPE)], [("y", SHAPE)])
    ours, _ = check_against_ort(model, {"x": NHWC, "y": NHWC})
    assert ours.graph.op_counts() == {"Softmax": 1}


def test_concat_on_channels():
    model = make_model([helper.make_node("Concat", ["a", "b"], ["y"], axis=1)],
                       [("a", SHAPE), ("b", [2, 4, 5, 7])], [("y", [2, 7, 5, 7])])
    check_against_ort(model, {"a": NHWC, "b": NHWC, "y": NHWC})


def test_resize_only_graph_with_nchw_factors():
    scales = np.array([1, 1, 3, 2], np.float32)
    model = make_model([helper.make_node("Resize", ["x", "", "scales"], ["y"],
                                         mode="nearest")],
                       [("x", SHAPE)], [("y", [2, 3, 15, 14])], {"scales": scales})
    ours, _ = check_against_ort(model, {"x": NHWC, "y": NHWC})
    assert transposes(ours) == 0


def test_gemm_only_graph_keeps_rank2_io():
    rng = np.random.default_rng(4)
    model = make_model([helper.make_node("Gemm", ["x", "w", "b"], ["y"])],
                       [("x", [2, 6])], [("y", [2, 4])],
                       {"w": rng.standard_normal((6, 4)).astype(np.float32),
                        "b": rng.standard_normal(4).astype(np.float32)})
    check_against_ort(model, {"x": None, "y": None})


def test_squeezenet_style_nc11_output_comes_out_n11c():
    rng = np.random.default_rng(5)
    model = make_model([helper.make_node("Conv", ["x", "w"], ["c"]),
                        helper.make_node("GlobalAveragePool", ["c"], ["g"]),
                        helper.make_node("Flatten", ["g"], ["f"]),
                        helper.make_node("Gemm", ["f", "w2"], ["d"]),
                        helper.make_node("Reshape", ["d", "shape"], ["y"])],
                       [("x", SHAPE)], [("y", [2, 4, 1, 1])],
                       {"w": rng.standard_normal((6, 3, 1, 1)).astype(np.float32),
                        "w2": rng.standard_normal((6, 4)).astype(np.float32),
                        "shape": np.array([2, 4, 1, 1], np.int64)})
    ours, _ = check_against_ort(model, {"x": NHWC, "y": NHWC})
    assert list(ours.graph.outputs[0].shape) == [2, 1, 1, 4]
    assert ours.graph.outputs[0].name == "y"


def test_keras_export_with_boundary_transposes_has_none_left():
    """tf2onnx/keras2onnx style: NHWC input -> Transpose(0,3,1,2) -> NCHW ops ->
    Transpose(0,2,3,1) -> NHWC output."""
    rng = np.random.default_rng(6)
    model = make_model([helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
                        helper.make_node("Conv", ["t", "w"], ["c"], pads=[1, 1, 1, 1]),
                        helper.make_node("Relu", ["c"], ["r"]),
                        helper.make_node("Transpose", ["r"], ["y"], perm=[0, 2, 3, 1])],
                       [("x", [2, 5, 7, 3])], [("y", [2, 5, 7, 4])],
                       {"w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32)})
    ours, ctx = check_against_ort(model, {"x": None, "y": None})
    assert transposes(ours) == 0
    assert ours.graph.inputs[0].layout == "NHWC" and ours.graph.outputs[0].layout == "NHWC"
    assert any("NHWC at the source" in d.detail for d in ctx.decisions)


def test_batch_of_matrices_input_keeps_its_order():
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                       [("a", [2, 3, 5, 7]), ("b", [2, 3, 7, 4])], [("y", [2, 3, 5, 4])])
    ours, ctx = check_against_ort(model, {"a": None, "b": None, "y": None})
    assert all(v.layout is None for v in ours.graph.inputs + ours.graph.outputs)
    kept = [d for d in ctx.decisions if "batch of matrices" in d.detail]
    assert len(kept) == 2


def test_bare_flatten_output_is_refused_naming_the_input_and_the_flag():
    model = make_model([helper.make_node("Flatten", ["x"], ["y"])],
                       [("x", SHAPE)], [("y", [2, 105])])
    with pytest.raises(UnsupportedOpError) as err:
        dialect(model)
    assert "--keep-layout x" in str(err.value)
    assert err.value.keep_layout_suggestion == ["x"]


def test_keep_layout_keeps_the_input_in_source_order():
    model = make_model([helper.make_node("Flatten", ["x"], ["y"])],
                       [("x", SHAPE)], [("y", [2, 105])])
    _ours, ctx = check_against_ort(model, {"x": None, "y": None}, keep_layout=["x"])
    assert any("--keep-layout" in d.detail for d in ctx.decisions)


def test_keep_layout_of_an_output_puts_it_back_in_source_order():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])],
                       [("x", SHAPE)], [("y", [2, 3, 1, 1])]) if False else make_model(
        [helper.make_node("Relu", ["x"], ["y"])], [("x", [2, 3, 1, 1])], [("y", [2, 3, 1, 1])])
    ours, _ = check_against_ort(model, {"x": NHWC, "y": None}, keep_layout=["y"])
    assert transposes(ours) == 0 and list(ours.graph.outputs[0].shape) == [2, 3, 1, 1]


def test_keep_layout_of_an_unknown_name_is_a_usage_error():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", SHAPE)], [("y", SHAPE)])
    with pytest.raises(UsageError, match="'nope'"):
        dialect(model, keep_layout=["nope"])


def test_softmax_on_a_spatial_axis_needs_allow_transpose_and_then_converts():
    model = make_model([helper.make_node("Softmax", ["x"], ["y"], axis=3)],
                       [("x", SHAPE)], [("y", SHAPE)])
    with pytest.raises(UnsupportedOpError, match="Softmax") as refused:
        dialect(model)
    assert refused.value.keep_layout_suggestion == ["x"]  # a layout refusal, with the way out
    kept, _ = check_against_ort(model, {"x": None, "y": None}, keep_layout=["x"])
    assert transposes(kept) == 0
    ours, ctx = check_against_ort(model, {"x": NHWC, "y": NHWC}, allow_transpose=True)
    assert transposes(ours) == 2
    assert len([w for w in ctx.warnings if "inserted Transpose" in w]) == 2


def test_rank5_input_becomes_ndhwc():
    rng = np.random.default_rng(7)
    model = make_model([helper.make_node("Mul", ["x", "scale"], ["y"])],
                       [("x", [2, 3, 4, 5, 6])], [("y", [2, 3, 4, 5, 6])],
                       {"scale": rng.standard_normal((3, 1, 1, 1)).astype(np.float32)})
    ours, _ = check_against_ort(model, {"x": [0, 2, 3, 4, 1], "y": [0, 2, 3, 4, 1]})
    assert list(ours.graph.inputs[0].shape) == [2, 4, 5, 6, 3]


def test_convert_writes_the_permutations_and_verify_maps_them(tmp_path):
    from nhwc_onnx.api import convert as api_convert
    from nhwc_onnx.api import verify
    from nhwc_onnx.serialize import load

    source = tmp_path / "affine.onnx"
    rng = np.random.default_rng(8)
    onnx.save(make_model([helper.make_node("Mul", ["x", "scale"], ["y"])], [("x", SHAPE)],
                         [("y", SHAPE)],
                         {"scale": rng.standard_normal((1, 3, 1, 1)).astype(np.float32)}),
              source)
    result = api_convert(source, tmp_path / "out.onnx")
    assert result.report.io_permutations == {"x": NHWC, "y": NHWC}
    written = load(tmp_path / "out.onnx")
    assert written.io_permutations == {"x": NHWC, "y": NHWC}
    assert verify(source, tmp_path / "out.onnx").ok


def test_cli_keep_layout(tmp_path):
    from tests.cli_runner import run_cli

    source = tmp_path / "flat.onnx"
    onnx.save(make_model([helper.make_node("Flatten", ["x"], ["y"])], [("x", SHAPE)],
                         [("y", [2, 105])]), source)
    refused = run_cli("convert", str(source), "-o", str(tmp_path / "a.onnx"))
    assert refused.exit_code == 1 and "--keep-layout x" in refused.output
    assert not (tmp_path / "a.onnx").exists()
    kept = run_cli("convert", str(source), "-o", str(tmp_path / "b.onnx"),
                                     "--keep-layout", "x", "--verify")
    assert kept.exit_code == 0, kept.output
    unknown = run_cli("convert", str(source), "-o", str(tmp_path / "c.onnx"),
                                        "--keep-layout", "x,nope")
    assert unknown.exit_code == 2 and "'nope'" in unknown.output


def test_softmax_on_an_inner_axis_moves_it_last_only_with_allow_transpose():
    """Softmax over H (axis 2): not last in NCHW nor in NHWC; Transpose there and back."""
    model = make_model([helper.make_node("Softmax", ["x"], ["y"], axis=2)],
                       [("x", SHAPE)], [("y", SHAPE)])
    with pytest.raises(UnsupportedOpError, match="not the last"):
        dialect(model)
    ours, ctx = check_against_ort(model, {"x": NHWC, "y": NHWC}, allow_transpose=True)
    assert transposes(ours) == 2
    assert len([w for w in ctx.warnings if "inserted Transpose" in w]) == 2


def _conv1d_model(*nodes, inits=None, out_shape=(2, 4, 9)):
    rng = np.random.default_rng(9)
    inits = {"w": rng.standard_normal((4, 3, 3)).astype(np.float32),
             "b": rng.standard_normal(4).astype(np.float32), **(inits or {})}
    return make_model(list(nodes), [("x", [2, 3, 11])], [("y", list(out_shape))], inits)


NLC = [0, 2, 1]


def test_conv1d_input_and_output_become_nlc():
    model = _conv1d_model(helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 2],
                                           strides=[1], dilations=[2]),
                          helper.make_node("Relu", ["c"], ["y"]), out_shape=(2, 4, 10))
    ours, _ = check_against_ort(model, {"x": NLC, "y": NLC})
    assert transposes(ours) == 0 and list(ours.graph.inputs[0].shape) == [2, 11, 3]
    assert ours.graph.inputs[0].layout == "NHWC"  # denoted N,L,C


@pytest.mark.parametrize("op, attrs, out_len", [
    ("MaxPool", {"kernel_shape": [3], "strides": [2]}, 5),
    ("AveragePool", {"kernel_shape": [2], "pads": [1, 0], "count_include_pad": 1}, 11),
])
def test_pool1d_on_ncl(op, attrs, out_len):
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)],
                       [("x", [2, 3, 11])], [("y", [2, 3, out_len])])
    ours, _ = check_against_ort(model, {"x": NLC, "y": NLC})
    assert transposes(ours) == 0


def test_batchnorm_over_ncl_channels():
    rng = np.random.default_rng(10)
    params = {k: rng.uniform(0.5, 1.5, 3).astype(np.float32) for k in ("s", "b", "m", "v")}
    model = make_model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"],
                                         ["y"])],
                       [("x", [2, 3, 11])], [("y", [2, 3, 11])], params)
    check_against_ort(model, {"x": NLC, "y": NLC})


def test_other_rank3_tensors_keep_their_shape():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])],
                       [("x", [2, 3, 11])], [("y", [2, 3, 11])])
    ours, _ = check_against_ort(model, {"x": None, "y": None})
    assert ours.graph.inputs[0].layout is None


def test_conv3d_is_refused_cleanly():
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"])],
                       [("x", [1, 2, 3, 4, 5])], [("y", [1, 1, 3, 4, 5])],
                       {"w": np.ones((1, 2, 1, 1, 1), np.float32)})
    from nhwc_onnx.errors import NhwcOnnxError

    with pytest.raises(NhwcOnnxError, match="3-D"):
        dialect(model)


def test_rank3_source_transpose_stays_a_transpose():
    """A (N, A, B) -> (N, B, A) Transpose of a non-image rank-3 tensor is data movement the
    source asks for: the output keeps its source shape (no N,L,C relabelling)."""
    model = make_model([helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 1])],
                       [("x", [2, 3, 4])], [("y", [2, 4, 3])])
    ours, _ = check_against_ort(model, {"x": None, "y": None})
    assert transposes(ours) == 1


def test_squeezed_batch_output_is_not_relabelled():
    """[1,C,H,W] -> Squeeze(0) -> (C,H,W): a rank-3 output that is no N,C,L map keeps its
    source order; from an NHWC-stored input that needs a Transpose, so the refusal names the
    input, which converts kept."""
    model = make_model([helper.make_node("Squeeze", ["x", "axes"], ["y"])],
                       [("x", [1, 3, 4, 5])], [("y", [3, 4, 5])],
                       {"axes": np.array([0], np.int64)})
    with pytest.raises(UnsupportedOpError) as refused:
        dialect(model)
    assert refused.value.keep_layout_suggestion == ["x"]
    check_against_ort(model, {"x": None, "y": None}, keep_layout=["x"])


def test_pnet_like_keras_export_has_no_transpose_and_identity_permutations():
    """An MTCNN P-net shaped tf2onnx export: NHWC input, Transpose to NCHW, Conv/PRelu/MaxPool,
    two heads (a Softmax over channels, a box regression), each Transposed back to NHWC."""
    rng = np.random.default_rng(11)
    f32 = np.float32
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
             helper.make_node("Conv", ["t", "w1", "b1"], ["c1"]),
             helper.make_node("PRelu", ["c1", "slope"], ["p1"]),
             helper.make_node("MaxPool", ["p1"], ["m1"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["m1", "w2", "b2"], ["cls"]),
             helper.make_node("Softmax", ["cls"], ["prob"], axis=1),
             helper.make_node("Transpose", ["prob"], ["prob_nhwc"], perm=[0, 2, 3, 1]),
             helper.make_node("Conv", ["m1", "w3", "b3"], ["box"]),
             helper.make_node("Transpose", ["box"], ["box_nhwc"], perm=[0, 2, 3, 1])]
    inits = {"w1": rng.standard_normal((5, 3, 3, 3)).astype(f32),
             "b1": rng.standard_normal(5).astype(f32),
             "slope": rng.uniform(0, 0.5, (5, 1, 1)).astype(f32),
             "w2": rng.standard_normal((2, 5, 1, 1)).astype(f32),
             "b2": rng.standard_normal(2).astype(f32),
             "w3": rng.standard_normal((4, 5, 1, 1)).astype(f32),
             "b3": rng.standard_normal(4).astype(f32)}
    model = make_model(nodes, [("x", [1, 13, 11, 3])],
                       [("prob_nhwc", [1, 5, 4, 2]), ("box_nhwc", [1, 5, 4, 4])], inits)
    ours, _ = check_against_ort(model, {"x": None, "prob_nhwc": None, "box_nhwc": None})
    assert transposes(ours) == 0
    assert all(v.layout == "NHWC" for v in ours.graph.inputs + ours.graph.outputs)
