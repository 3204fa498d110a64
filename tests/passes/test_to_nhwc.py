"""NCHW -> NHWC: structure, modified flag, and numbers (run_core before vs after)."""
from __future__ import annotations

import numpy as np
import pytest

from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.ir import Graph, Model, Value
from nhwc_onnx.options import ConvertOptions
from nhwc_onnx.passes import PassContext
from nhwc_onnx.passes.to_nhwc import ToNHWC
from tests.passes.core_oracles import rand, run_pass_and_compare

N, C, H, W = 2, 6, 7, 5


def _input(g: Graph, shape=(N, C, H, W), layout="NCHW", name="x") -> Value:
    return g.add_input(Value(name, shape=shape, layout=layout))


def _image(g: Graph, x: Value) -> Value:
    """A 1x1 max pool: makes x an image (inputs that never meet a spatial op keep NCHW)."""
    return g.make_node("MaxPool", [x], {"kernel_shape": [1, 1]}, name=f"{x.name}_pool").output


def _ops(model):
    return [n.op for n in model.graph.nodes]


def _formats(model):
    return {n.attrs.get("data_format") for n in model.graph.nodes if "data_format" in n.attrs}


WT = {"w": rand(C, C, 3, 3), "b": rand(1, C, 1, 1), "fc": rand(4, C * H * W),
      "fc_mm": rand(C * H * W, 3), "cb": rand(C, 1, 1), "w1": rand(C, 2, 1, 1),
      "hwio": rand(3, 3, C, 4), "se": rand(C, C), "bn": [rand(C, low=0.5) for _ in range(4)]}


def _feeds(shape=(N, C, H, W)):
    return {"x": rand(*shape)}


def test_conv_chain_with_broadcast_constants_and_flatten_dense():
    def build():
        g = Graph()
        x = _input(g)
        conv = g.make_node("Conv", [x, g.constant(WT["w"], "w")],
                           {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, name="conv")
        add = g.make_node("Add", [conv.output, g.constant(WT["b"], "b")], name="add")
        mul = g.make_node("Mul", [add.output, g.constant(WT["cb"], "cb")], name="mul")
        relu = g.make_node("Relu", [mul.output], name="relu")
        flat = g.make_node("Flatten", [relu.output], name="flat")
        fc = g.make_node("Gemm", [flat.output, g.constant(WT["fc"], "fc")], {"transB": 1},
                         name="fc")
        mm = g.make_node("MatMul", [g.make_node("Flatten", [relu.output], name="flat2").output,
                                    g.constant(WT["fc_mm"], "fc_mm")], name="mm")
        g.outputs += [fc.output, mm.output, relu.output]
        return Model(g)

    model, (result,), ctx = run_pass_and_compare(build, _feeds(), [ToNHWC()])
    assert result.modified
    assert "Transpose" not in _ops(model)
    assert _formats(model) == {"NHWC"}
    g = model.graph
    assert g.inputs[0].shape == (N, H, W, C) and g.inputs[0].layout == "NHWC"
    assert model.io_permutations == {"x": [0, 2, 3, 1], "relu": [0, 2, 3, 1]}
    assert g.find_node("add").inputs[1].shape == (1, 1, 1, C)
    assert g.find_node("mul").inputs[1].shape == (1, 1, C)
    fc_weight = g.find_node("fc").inputs[1]
    assert fc_weight.name == "fc_nhwc" and not np.array_equal(fc_weight.const, WT["fc"])
    assert any(d.kind == "layout" and "H,W,C" in d.detail for d in ctx.decisions)


def test_axis_ops_are_remapped():
    def build():
        g = Graph()
        x = _input(g)
        y = _input(g, name="y", shape=(N, 3, H, W))
        cat = g.make_node("Concat", [_image(g, x), y], {"axis": 1}, name="cat")
        soft = g.make_node("Softmax", [cat.output], {"axis": 1}, name="soft")
        sl = g.make_node("Slice", [soft.output], {"starts": [1, 2], "ends": [8, -1],
                                                  "axes": [1, 2], "steps": [2, 1]}, name="slice")
        mean = g.make_node("ReduceMean", [sl.output], {"axes": [2, 3], "keepdims": 0},
                           name="mean")
        cmean = g.make_node("ReduceMean", [sl.output], {"axes": [1], "keepdims": 1},
                            name="cmean")
        g.outputs += [mean.output, cmean.output]
        return Model(g)

    feeds = {"x": rand(N, C, H, W), "y": rand(N, 3, H, W)}
    model, (_result,), _ = run_pass_and_compare(build, feeds, [ToNHWC()])
    g = model.graph
    assert g.find_node("cat").attrs["axis"] == 3
    assert g.find_node("soft").attrs["axis"] == 3
    assert g.find_node("slice").attrs["axes"] == [3, 1]
    assert g.find_node("mean").attrs["axes"] == [1, 2]
    assert g.find_node("cmean").attrs["axes"] == [3]
    assert "mean" not in model.io_permutations  # (N, C): same order in both layouts
    assert model.io_permutations["cmean"] == [0, 2, 3, 1]


def test_channel_shuffle_keeps_its_transpose_on_nhwc_axes():
    groups = 3

    def build():
        g = Graph()
        x = _input(g)
        r1 = g.make_node("Reshape", [x, g.constant(np.asarray([N, groups, C // groups, H, W]))],
                         name="split_groups")
        t = g.make_node("Transpose", [r1.output], {"perm": [0, 2, 1, 3, 4]}, name="shuffle")
        r2 = g.make_node("Reshape", [t.output, g.constant(np.asarray([N, -1, H, W]))],
                         name="merge_groups")
        conv = g.make_node("Conv", [r2.output, g.constant(WT["w1"], "w1")],
                           {"kernel_shape": [1, 1], "group": 3}, name="conv")
        g.outputs.append(conv.output)
        return Model(g)

    model, _, _ = run_pass_and_compare(build, _feeds(), [ToNHWC()])
    g = model.graph
    assert _ops(model).count("Transpose") == 1
    assert g.find_node("shuffle").attrs["perm"] == [0, 1, 2, 4, 3]
    assert tuple(g.find_node("split_groups").inputs[1].const) == (N, H, W, groups, C // groups)
    assert tuple(g.find_node("merge_groups").inputs[1].const) == (N, H, W, C)
    assert _formats(model) == {"NHWC"}


def _mixing_model():
    g = Graph()
    x = _input(g)
    r = g.make_node("Reshape", [_image(g, x), g.constant(np.asarray([N, C * H, W]))],
                    name="mix_reshape")
    s = g.make_node("Softmax", [r.output], {"axis": -1}, name="soft")
    g.outputs.append(s.output)
    return Model(g)


def test_layout_mixing_reshape_is_refused_naming_the_node():
    with pytest.raises(UnsupportedOpError) as err:
        ToNHWC()(_mixing_model(), PassContext())
    assert "mix_reshape" in str(err.value) and "Transpose" in str(err.value)
    assert [p.node for p in err.value.problems] == ["mix_reshape"]


def test_layout_mixing_reshape_with_allow_transpose_inserts_one_and_warns():
    ctx = PassContext(options=ConvertOptions(allow_transpose=True))
    model, _, ctx = run_pass_and_compare(_mixing_model, _feeds(), [ToNHWC()], ctx)
    assert _ops(model).count("Transpose") == 1
    assert len(ctx.warnings) == 1 and "mix_reshape" in ctx.warnings[0]


def test_nhwc_graph_is_left_alone():
    def build():
        g = Graph()
        x = _input(g, shape=(N, H, W, C), layout="NHWC")
        conv = g.make_node("Conv", [x, g.constant(WT["hwio"], "w")],
                           {"kernel_shape": [3, 3], "data_format": "NHWC",
                            "weight_layout": "HWIO", "auto_pad": "SAME_UPPER"}, name="conv")
        cat = g.make_node("Concat", [conv.output, conv.output], {"axis": 3}, name="cat")
        g.outputs.append(cat.output)
        return Model(g)

    model, (result,), ctx = run_pass_and_compare(build, {"x": rand(N, H, W, C)}, [ToNHWC()])
    assert result.modified is False
    assert model.io_permutations == {} and ctx.decisions == []
    assert model.graph.find_node("cat").attrs["axis"] == 3


def test_source_transposes_around_an_nchw_conv_vanish():
    def build():
        g = Graph()
        x = _input(g, shape=(N, H, W, C), layout="NHWC")
        t1 = g.make_node("Transpose", [x], {"perm": [0, 3, 1, 2]}, name="to_nchw")
        conv = g.make_node("Conv", [t1.output, g.constant(WT["w"], "w")],
                           {"kernel_shape": [3, 3]}, name="conv")
        t2 = g.make_node("Transpose", [conv.output], {"perm": [0, 2, 3, 1]}, name="to_nhwc")
        g.outputs.append(t2.output)
        return Model(g)

    model, (result,), _ = run_pass_and_compare(build, {"x": rand(N, H, W, C)}, [ToNHWC()])
    assert result.modified
    assert _ops(model) == ["Conv"] and model.io_permutations == {}
    assert model.graph.outputs[0].name == "to_nhwc"


def test_squeeze_excite_and_misc_axis_ops():
    def build():
        g = Graph()
        x = _input(g)
        gap = g.make_node("GlobalAveragePool", [x], name="gap")
        flat = g.make_node("Flatten", [gap.output], name="se_flat")
        fc = g.make_node("Gemm", [flat.output, g.constant(WT["se"], "se_w")], name="se_fc")
        sig = g.make_node("Sigmoid", [fc.output], name="se_sig")
        unsq = g.make_node("Unsqueeze", [sig.output], {"axes": [2, 3]}, name="se_unsq")
        mul = g.make_node("Mul", [x, unsq.output], name="se_mul")
        pad = g.make_node("Pad", [mul.output], {"pads": [0, 0, 1, 2, 0, 0, 2, 0]}, name="pad")
        bn = g.make_node("BatchNormalization",
                         [pad.output] + [g.constant(p, f"bn{i}") for i, p in enumerate(WT["bn"])],
                         name="bn")
        rs = g.make_node("Resize", [bn.output], {"scales": [1.0, 1.0, 2.0, 1.5]}, name="up")
        split = g.make_node("Split", [rs.output], {"axis": 1, "split": [2, 4]}, outputs=2,
                            name="split")
        sq = g.make_node("ReduceMax", [split.outputs[1]], {"axes": [1], "keepdims": 1},
                         name="cmax")
        sq2 = g.make_node("Squeeze", [sq.output], {"axes": [1]}, name="squeeze")
        g.outputs += [split.outputs[0], sq2.output]
        return Model(g)

    model, _, _ = run_pass_and_compare(build, _feeds(), [ToNHWC()])
    g = model.graph
    assert "Transpose" not in _ops(model)
    assert g.find_node("pad").attrs["pads"] == [0, 1, 2, 0, 0, 2, 0, 0]
    assert g.find_node("bn").attrs["axis"] == 3
    assert g.find_node("up").attrs["scales"] == [1.0, 2.0, 1.5, 1.0]
    assert g.find_node("split").attrs["axis"] == 3
    assert g.find_node("squeeze").attrs["axes"] == [3]
    assert "squeeze" not in model.io_permutations


def test_reduce_over_height_only_keeps_a_permuted_rank3_output():
    def build():
        g = Graph()
        x = _input(g)
        r = g.make_node("ReduceSum", [_image(g, x)], {"axes": [2], "keepdims": 0}, name="hsum")
        g.outputs.append(r.output)
        return Model(g)

    model, _, _ = run_pass_and_compare(build, _feeds(), [ToNHWC()])
    assert model.io_permutations["hsum"] == [0, 2, 1]  # stored (N, W, C) of source (N, C, W)


def test_rank4_input_that_meets_no_spatial_op_keeps_its_layout():
    def build():
        g = Graph()
        x = _input(g)
        mm = g.make_node("MatMul", [x, g.constant(WT["fc_mm"][:W, :], "m")], name="mm")
        g.outputs.append(mm.output)
        return Model(g)

    model, (result,), _ = run_pass_and_compare(build, _feeds(), [ToNHWC()])
    assert result.modified is False and model.io_permutations == {}
    assert model.graph.inputs[0].shape == (N, C, H, W)


def test_final_transpose_to_nchw_of_an_nhwc_graph_vanishes_and_is_recorded():
    def build():
        g = Graph()
        x = _input(g, shape=(N, H, W, C), layout="NHWC")
        t = g.make_node("Tanh", [x], name="NHWC_output")
        out = g.make_node("Transpose", [t.output], {"perm": [0, 3, 1, 2]}, name="NCHW_output")
        g.outputs.append(out.output)
        return Model(g)

    model, (result,), _ = run_pass_and_compare(build, {"x": rand(N, H, W, C)}, [ToNHWC()])
    assert result.modified and _ops(model) == ["Tanh"]
    assert model.graph.outputs[0].name == "NCHW_output"
    assert model.graph.outputs[0].shape == (N, H, W, C)
    assert model.io_permutations == {"NCHW_output": [0, 2, 3, 1]}


def test_dense_reshaped_into_an_image_gets_its_columns_reordered():
    z, c, h, w = 4, 3, 5, 2
    fc_w, fc_b = rand(c * h * w, z), rand(c * h * w)
    deconv_w = rand(c, 2, 3, 3)

    def build():
        g = Graph()
        x = g.add_input(Value("z", shape=(N, z)))
        fc = g.make_node("Gemm", [x, g.constant(fc_w, "fc/W"), g.constant(fc_b, "fc/b")],
                         {"transB": 1}, name="fc")
        img = g.make_node("Reshape", [fc.output, g.constant(np.asarray([N, c, h, w]))],
                          name="to_image")
        act = g.make_node("Relu", [img.output], name="act")
        up = g.make_node("ConvTranspose", [act.output, g.constant(deconv_w, "up/W")],
                         {"kernel_shape": [3, 3], "strides": [2, 2]}, name="up")
        g.outputs.append(up.output)
        return Model(g)

    model, (result,), ctx = run_pass_and_compare(build, {"z": rand(N, z)}, [ToNHWC()])
    assert result.modified and "Transpose" not in _ops(model)
    g = model.graph
    assert tuple(g.find_node("to_image").inputs[1].const) == (N, h, w, c)
    assert g.find_node("fc").inputs[2].name == "fc/b_nhwc"
    assert model.io_permutations == {"up": [0, 2, 3, 1]}
    assert any("H,W,C so that 'to_image'" in d.detail for d in ctx.decisions)
