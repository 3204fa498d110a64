"""Near misses of the layout walk's exceptions (nhwc_onnx/passes/layout/): which inputs count as
images, and when fully-connected weights absorb a layout instead of a Transpose. Each rule has a
case that matches and one that almost does; both are checked for their numbers (the core graph
before and after the pass, or onnxruntime on the source) and for what was recorded."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.ir import Graph, Model, Value
from nhwc_onnx.options import ConvertOptions
from nhwc_onnx.passes import PassContext
from nhwc_onnx.passes.to_nhwc import ToNHWC
from tests.frontends.onnx.onnx_helpers import make_model
from tests.passes.core_oracles import rand, run_pass_and_compare
from tests.passes.layout.test_boundary_near_miss import NHWC, STORED_NHWC, notes, weights
from tests.passes.layout.test_contract_onnx import check_against_ort, dialect, transposes


def to_nhwc(build, feeds, **options):
    model, _results, ctx = run_pass_and_compare(build, feeds, [ToNHWC()],
                                                PassContext(options=ConvertOptions(**options)))
    return model, ctx


# -- an input of no declared layout is an image when an NCHW image reader reads it -------------


@pytest.mark.parametrize("scales, layout, image", [
    ([1, 1, 2, 3], None, True),  # F.interpolate on an NCHW map
    ([1, 2, 3, 1], None, False),  # scales H and W of an NHWC tensor
    ([1, 1, 1, 1], None, False),  # resizes nothing
    ([1, 1, 2, 3], "NHWC", False),  # declared NHWC by its framework
])
def test_input_is_an_nchw_image_only_when_a_resize_scales_its_last_two_axes(scales, layout,
                                                                           image):
    def build():
        g = Graph()
        x = g.add_input(Value("x", shape=(2, 3, 5, 7), layout=layout))
        g.outputs.append(g.make_node("Resize", [x], {"scales": scales, "mode": "nearest"},
                                     name="up").output)
        return Model(g)

    model, ctx = to_nhwc(build, {"x": rand(2, 3, 5, 7)})
    assert [n.op for n in model.graph.nodes] == ["Resize"]
    assert model.io_permutations == ({"x": NHWC, "up": NHWC} if image else {})
    assert notes(ctx, "x") == ([STORED_NHWC] if image else [])
    assert model.graph.inputs[0].shape == ((2, 5, 7, 3) if image else (2, 3, 5, 7))


def test_an_input_fed_as_a_conv_weight_keeps_its_layout_while_the_data_input_is_nhwc():
    def build():
        g = Graph()
        x = g.add_input(Value("x", shape=(2, 3, 5, 7), layout="NCHW"))
        w = g.add_input(Value("w", shape=(4, 3, 1, 1), layout="NCHW"))
        g.outputs.append(g.make_node("Conv", [x, w], {"kernel_shape": [1, 1]},
                                     name="conv").output)
        return Model(g)

    model, ctx = to_nhwc(build, {"x": rand(2, 3, 5, 7), "w": rand(4, 3, 1, 1)})
    assert model.io_permutations == {"x": NHWC, "conv": NHWC}
    assert notes(ctx, "x") == [STORED_NHWC] and notes(ctx, "w") == []
    assert [v.shape for v in model.graph.inputs] == [(2, 5, 7, 3), (4, 3, 1, 1)]


# -- fully-connected weights absorb the order of a flattened map ------------------------------


def _permute_flatten_dense(weight_is_constant: bool):
    """Keras Permute -> Flatten -> Dense, exported to ONNX."""
    inits = {"w0": weights(4, 3, 1, 1)}
    inputs = [("x", [2, 3, 5, 7])]
    if weight_is_constant:
        inits["wd"] = weights(140, 6)
    else:
        inputs.append(("wd", [140, 6]))
    return make_model([helper.make_node("Conv", ["x", "w0"], ["c"]),
                       helper.make_node("Transpose", ["c"], ["p"], perm=[0, 1, 3, 2]),
                       helper.make_node("Flatten", ["p"], ["f"]),
                       helper.make_node("Gemm", ["f", "wd"], ["y"])],
                      inputs, [("y", [2, 6])], inits)


def test_permute_flatten_dense_with_a_constant_weight_needs_no_transpose():
    ours, ctx = check_against_ort(_permute_flatten_dense(True), {"x": NHWC, "y": None})
    assert dict(ours.graph.op_counts()) == {"Conv": 1, "Dense": 1}
    assert any("removed" in n for n in notes(ctx, "Transpose_p"))
    assert any("weight of Gemm 'Gemm_y' permuted" in n for n in notes(ctx, "Gemm_y"))


def test_permute_flatten_dense_with_a_weight_fed_at_run_time_moves_the_data_with_the_permute():
    """No weight can absorb the order, but the source's Permute moves the data anyway: its perm
    is remapped to take the NHWC-stored map straight to the order the Flatten reads."""
    ours, ctx = check_against_ort(_permute_flatten_dense(False), {"x": NHWC, "wd": None,
                                                                  "y": None})
    assert transposes(ours) == 1  # the source's Permute, on stored axes; none inserted
    assert notes(ctx, "Transpose_p") == [
        ("Transpose perm [0, 1, 3, 2] -> [0, 3, 2, 1] on the stored layout, storing its result "
         "with permutation [0, 1, 2, 3] as its readers want it")]
    assert notes(ctx, "Gemm_y") == []


def test_flatten_dense_with_a_weight_fed_at_run_time_and_no_permute_is_refused():
    """The near miss of the above: no source Transpose to remap, no constant weight."""
    model = make_model([helper.make_node("Conv", ["x", "w0"], ["c"]),
                        helper.make_node("Flatten", ["c"], ["f"]),
                        helper.make_node("Gemm", ["f", "wd"], ["y"])],
                       [("x", [2, 3, 5, 7]), ("wd", [140, 6])], [("y", [2, 6])],
                       {"w0": weights(4, 3, 1, 1)})
    with pytest.raises(UnsupportedOpError, match="'Flatten_f'.*not a 2-D constant") as refused:
        dialect(model)
    assert [p.node for p in refused.value.problems] == ["Flatten_f"]
    ours, _ = check_against_ort(model, {"x": NHWC, "wd": None, "y": None},
                                allow_transpose=True)
    assert transposes(ours) == 1  # inserted


Z, C, H, W = 4, 3, 5, 2


def _dense_to_image(reader: str):
    rng = np.random.default_rng(31)
    fc_w = rng.standard_normal((C * H * W, Z)).astype(np.float32)
    fc_b = rng.standard_normal(C * H * W).astype(np.float32)
    up_w = rng.standard_normal((C, 2, 3, 3)).astype(np.float32)

    def build():
        g = Graph()
        z = g.add_input(Value("z", shape=(2, Z)))
        fc = g.make_node("Gemm", [z, g.constant(fc_w, "fc/W"), g.constant(fc_b, "fc/b")],
                         {"transB": 1}, name="fc")
        img = g.make_node("Reshape", [fc.output, g.constant(np.asarray([2, C, H, W]))],
                          name="to_image")
        out = g.make_node("Relu", [img.output], name="act")
        if reader == "ConvTranspose":
            out = g.make_node("ConvTranspose", [out.output, g.constant(up_w, "up/W")],
                              {"kernel_shape": [3, 3], "strides": [2, 2]}, name="up")
        else:  # an image branch elsewhere, so that the layout walk runs
            x = g.add_input(Value("x", shape=(2, 3, 5, 7), layout="NCHW"))
            g.outputs.append(g.make_node("MaxPool", [x], {"kernel_shape": [1, 1]},
                                         name="pool").output)
        g.outputs.append(out.output)
        return Model(g)

    return build


def test_dense_reshaped_into_a_map_that_a_conv_reads_gets_its_columns_reordered():
    model, ctx = to_nhwc(_dense_to_image("ConvTranspose"), {"z": rand(2, Z)})
    assert "Transpose" not in [n.op for n in model.graph.nodes]
    assert tuple(model.graph.find_node("to_image").inputs[1].const) == (2, H, W, C)
    assert any("reordered from C,H,W to H,W,C" in n for n in notes(ctx, "fc"))


def test_dense_reshaped_into_an_image_output_gets_its_columns_reordered():
    """A rank-4 output of an NCHW-convention source is an image: NHWC, at no cost here."""
    model, ctx = to_nhwc(_dense_to_image("Relu"), {"z": rand(2, Z), "x": rand(2, 3, 5, 7)})
    assert sorted(n.op for n in model.graph.nodes) == ["Gemm", "MaxPool", "Relu", "Reshape"]
    assert tuple(model.graph.find_node("to_image").inputs[1].const) == (2, H, W, C)
    assert any("reordered from C,H,W to H,W,C" in n for n in notes(ctx, "fc"))
    assert model.io_permutations == {"x": NHWC, "pool": NHWC, "act": NHWC}


def test_dense_reshaped_into_a_map_kept_in_source_order_keeps_its_columns():
    model, ctx = to_nhwc(_dense_to_image("Relu"), {"z": rand(2, Z), "x": rand(2, 3, 5, 7)},
                         keep_layout=["act"])
    assert sorted(n.op for n in model.graph.nodes) == ["Gemm", "MaxPool", "Relu", "Reshape"]
    assert tuple(model.graph.find_node("to_image").inputs[1].const) == (2, C, H, W)
    assert model.graph.find_node("fc").inputs[1].name == "fc/W"
    assert notes(ctx, "fc") == []
    assert model.io_permutations == {"x": NHWC, "pool": NHWC}


def test_dense_reshaped_into_an_nhwc_map_resized_along_w_keeps_its_columns():
    """TensorFlow: Dense -> Reshape to (N, H, W, C) -> a resize of W only (scales 1,1,s,1, which
    an NCHW map resized along H and W would also show) -> Transpose to NCHW at the end. The
    map is NHWC by its framework's tag, so no NCHW image reads the Dense output."""
    fc_w = np.random.default_rng(32).standard_normal((Z, H * W * C)).astype(np.float32)

    def build():
        g = Graph()
        z = g.add_input(Value("z", shape=(2, Z)))
        fc = g.make_node("MatMul", [z, g.constant(fc_w, "fc/W")], name="fc")
        img = g.make_node("Reshape", [fc.output, g.constant(np.asarray([2, H, W, C]))],
                          name="to_image")
        img.output.layout = "NHWC"  # as the TensorFlow frontend tags it
        up = g.make_node("Resize", [img.output], {"scales": [1, 1, 2, 1], "mode": "nearest"},
                         name="up")
        g.outputs.append(g.make_node("Transpose", [up.output], {"perm": [0, 3, 1, 2]},
                                     name="NCHW_output").output)
        return Model(g)

    model, ctx = to_nhwc(build, {"z": rand(2, Z)})
    assert [n.op for n in model.graph.nodes] == ["MatMul", "Reshape", "Resize"]
    assert model.graph.find_node("fc").inputs[1].name == "fc/W"
    assert notes(ctx, "fc") == []
    assert model.io_permutations == {"NCHW_output": NHWC}  # the final Transpose undone
