"""One conversion run collects the refusals of every stage (frontend, up-front scan, layout,
empty tensors, legalisation) into the one error, the report's ``refused`` list and the count
."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from nhwc_onnx import convert
from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.options import ConvertOptions
from tests.cli_runner import run_cli


def _onnx(tmp_path, nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              [numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    return path


def _gelu_then_layer_norm(tmp_path):
    """A torch-exported GELU (Div/Erf/Add/Mul/Mul, as TorchScript writes nn.GELU) followed
    by LayerNormalization (opset 17)."""
    f = TensorProto.FLOAT
    nodes = [
        helper.make_node("Div", ["x", "sqrt2"], ["/act/Div_output_0"], name="/act/Div"),
        helper.make_node("Erf", ["/act/Div_output_0"], ["/act/Erf_output_0"], name="/act/Erf"),
        helper.make_node("Add", ["/act/Erf_output_0", "one"], ["/act/Add_output_0"],
                         name="/act/Add"),
        helper.make_node("Mul", ["x", "/act/Add_output_0"], ["/act/Mul_output_0"],
                         name="/act/Mul"),
        helper.make_node("Mul", ["/act/Mul_output_0", "half"], ["/act/Mul_1_output_0"],
                         name="/act/Mul_1"),
        helper.make_node("LayerNormalization", ["/act/Mul_1_output_0", "gamma", "beta"], ["y"],
                         name="/norm/LayerNormalization", axis=-1, epsilon=1e-5),
    ]
    inits = [("sqrt2", np.float32(1.4142135)), ("one", np.float32(1.0)),
             ("half", np.float32(0.5)), ("gamma", np.ones(7, np.float32)),
             ("beta", np.zeros(7, np.float32))]
    return _onnx(tmp_path, nodes, [helper.make_tensor_value_info("x", f, [2, 5, 7])],
                 [helper.make_tensor_value_info("y", f, [2, 5, 7])], inits)


def _refusal(path, **options) -> UnsupportedOpError:
    with pytest.raises(UnsupportedOpError) as info:
        convert(path, options=ConvertOptions(exact_cut=False, **options))
    return info.value


def test_gelu_then_layer_norm_names_both_refusals(tmp_path):
    path = _gelu_then_layer_norm(tmp_path)
    exc = _refusal(path)
    assert [(p.node, p.op) for p in exc.problems] == [
        ("/norm/LayerNormalization", "LayerNormalization"), ("/act/Erf", "Erf")]
    assert str(exc).splitlines()[0] == \
        "cannot convert 2 onnx node(s) exactly (Erf x1, LayerNormalization x1):"


def test_the_report_and_the_cut_see_every_refusal(tmp_path):
    path = _gelu_then_layer_norm(tmp_path)
    out, report = tmp_path / "m.onnx", tmp_path / "r.json"
    result = run_cli("convert", path, "-o", out, "--report", report)
    assert result.exit_code == 1 and not out.exists()
    data = json.loads(report.read_text())
    assert [r["node"] for r in data["refused"]] == ["/norm/LayerNormalization", "/act/Erf"]
    assert sorted(data["exact_cut"]["refused_nodes"]) == sorted(
        r["node"] for r in data["refused"])
    assert data["exact_cut"]["outputs"] == ["/act/Div_output_0"]
    assert "cannot convert 2 onnx node(s)" in result.stderr


TRAIN_VAL = """
name: "AlexNetPart"
layer { name: "data" type: "Data" top: "data" top: "label" include { phase: TRAIN }
  transform_param { mirror: true crop_size: 11 } data_param { source: "t" batch_size: 2 } }
layer { name: "data" type: "Data" top: "data" top: "label" include { phase: TEST }
  transform_param { crop_size: 11 } data_param { source: "v" batch_size: 2 } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 stride: 2 } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "norm1" type: "LRN" bottom: "conv1" top: "norm1"
  lrn_param { local_size: 3 alpha: 0.0001 beta: 0.75 } }
layer { name: "pool1" type: "Pooling" bottom: "norm1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "fc8" type: "InnerProduct" bottom: "pool1" top: "fc8"
  inner_product_param { num_output: 5 } }
layer { name: "accuracy" type: "Accuracy" bottom: "fc8" bottom: "label" top: "accuracy"
  include { phase: TEST } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc8" bottom: "label" top: "loss" }
"""


def test_the_passes_judge_what_a_frontend_refusal_reads(tmp_path):
    """A Softmax over H (refused by op selection, after the layout pass) feeding an op
    without a converter: the passes still run on the Softmax."""
    f = TensorProto.FLOAT
    nodes = [helper.make_node("Softmax", ["x"], ["s"], name="softmax_over_h", axis=2),
             helper.make_node("Sin", ["s"], ["y"], name="sin"),
             helper.make_node("Relu", ["x"], ["r"], name="relu")]
    path = _onnx(tmp_path, nodes, [helper.make_tensor_value_info("x", f, [1, 3, 5, 7])],
                 [helper.make_tensor_value_info("y", f, None),
                  helper.make_tensor_value_info("r", f, None)])
    exc = _refusal(path)
    assert [(p.node, p.op) for p in exc.problems] == [("sin", "Sin"),
                                                      ("softmax_over_h", "Softmax")]
    assert "not the last non-trivial axis" in exc.problems[1].reason


def test_keep_layout_may_name_an_output_of_a_refused_node(tmp_path):
    """--keep-layout y, where y is computed by a node the frontend refused (taken out with
    it): no usage error stops the layout pass, so op selection still judges the Softmax."""
    f = TensorProto.FLOAT
    nodes = [helper.make_node("Sin", ["x"], ["y"], name="sin"),
             helper.make_node("Softmax", ["x"], ["s"], name="softmax_over_h", axis=2)]
    path = _onnx(tmp_path, nodes, [helper.make_tensor_value_info("x", f, [1, 3, 5, 7])],
                 [helper.make_tensor_value_info("y", f, None),
                  helper.make_tensor_value_info("s", f, None)])
    exc = _refusal(path, keep_layout=["x", "y", "s"])
    assert [(p.node, p.op) for p in exc.problems] == [("sin", "Sin"),
                                                      ("softmax_over_h", "Softmax")]


def test_caffe_train_val_names_the_lrn_parts_with_the_training_layers(tmp_path):
    path = tmp_path / "train_val.prototxt"
    path.write_text(TRAIN_VAL)
    exc = _refusal(path, weights="random", input_shapes={"data": [2, 3, 11, 11]})
    assert [(p.node, p.op) for p in exc.problems] == [
        ("accuracy", "Accuracy"), ("loss", "SoftmaxWithLoss"), ("norm1/pow", "Pow"),
        ("norm1", "Div")]
    assert "part of source op LRN" in exc.problems[2].reason


def test_a_layout_refusal_no_longer_hides_a_later_one(tmp_path):
    """A Flatten of the NCHW input that no weight product absorbs needs a layout Transpose;
    the Softmax over H on another branch (refused by op selection, which runs after the
    layout pass) was found only after --allow-transpose."""
    f = TensorProto.FLOAT
    nodes = [helper.make_node("Flatten", ["x"], ["flat"], name="flatten"),
             helper.make_node("Softmax", ["x"], ["soft"], name="softmax_over_h", axis=2)]
    path = _onnx(tmp_path, nodes, [helper.make_tensor_value_info("x", f, [1, 3, 5, 7])],
                 [helper.make_tensor_value_info("flat", f, [1, 105]),
                  helper.make_tensor_value_info("soft", f, [1, 3, 5, 7])])
    exc = _refusal(path)
    assert {(p.node, p.op, p.rule) for p in exc.problems} == {
        ("flatten", "Flatten", "layout"), ("softmax_over_h", "Softmax", "")}
    assert "--keep-layout x" in exc.hint and exc.keep_layout_suggestion == ["x"]


def test_an_empty_tensor_and_an_op_selection_refusal_in_one_error(tmp_path):
    f = TensorProto.FLOAT
    nodes = [helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["empty"],
                              name="empty_slice"),
             helper.make_node("Concat", ["x", "empty"], ["joined"], name="join", axis=1),
             helper.make_node("Neg", ["joined"], ["n"], name="neg"),
             helper.make_node("Mul", ["empty", "empty"], ["sq"], name="square_of_nothing"),
             helper.make_node("Softmax", ["x"], ["soft"], name="softmax_over_h", axis=2)]
    inits = [("starts", np.array([2], np.int64)), ("ends", np.array([2], np.int64)),
             ("axes", np.array([2], np.int64))]
    path = _onnx(tmp_path, nodes, [helper.make_tensor_value_info("x", f, [1, 3, 5, 7])],
                 [helper.make_tensor_value_info("sq", f, None),
                  helper.make_tensor_value_info("soft", f, None)], inits)
    exc = _refusal(path)
    assert {p.node for p in exc.problems} == {"softmax_over_h", "empty_slice",
                                              "square_of_nothing"}


def test_tensorflow_refusals_of_the_frontend_and_the_passes(tmp_path):
    """A TF graph: an op without a converter (Cumsum) after a never op (Sqrt), and a
    converter refusal (FloorMod of floats) on another branch."""
    from tests.frontends.tensorflow.tf_helpers import freeze, spec, tf

    t = tf()

    def fn(x):
        return t.math.cumsum(t.sqrt(t.abs(x)), axis=1), t.math.floormod(x, 0.7) + x

    data, _ = freeze(fn, [spec((2, 3, 5, 7))])
    path = tmp_path / "m.pb"
    path.write_bytes(data)
    exc = _refusal(path)
    ops = sorted(p.op for p in exc.problems)
    assert ops == ["Cumsum", "FloorMod", "Sqrt"], str(exc)


@pytest.mark.parametrize("batch", [2, None], ids=["static", "symbolic"])
def test_tensorflow_lists_the_refusals_after_an_op_without_converter(tmp_path, batch):
    """Erf and Rsqrt computed from an Einsum (no converter) are listed as the ONNX frontend
    lists them; the ops between them that convert (Abs, AddV2) are not. (Before, the nodes
    after the Einsum were skipped, and only the Erf of the other branch was listed.)"""
    from tests.frontends.tensorflow.tf_helpers import freeze, spec, tf

    t = tf()
    weight = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)

    def fn(x):
        y = t.math.erf(t.einsum("bhwc,cd->bhwd", x, weight))
        return t.math.rsqrt(t.abs(y) + 1.0) + t.math.erf(x[..., :1])

    data, _ = freeze(fn, [spec((batch, 6, 7, 3))])
    path = tmp_path / "m.pb"
    path.write_bytes(data)
    exc = _refusal(path)
    assert sorted(p.op for p in exc.problems) == ["Einsum", "Erf", "Erf", "Rsqrt"], str(exc)
    assert {p.node for p in exc.problems} == {"einsum/Einsum", "Erf", "Erf_1", "Rsqrt"}


def test_a_model_without_refusals_is_not_changed_by_the_collection(tmp_path):
    f = TensorProto.FLOAT
    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    path = _onnx(tmp_path, nodes, [helper.make_tensor_value_info("x", f, [1, 3, 5, 7])],
                 [helper.make_tensor_value_info("y", f, [1, 4, 5, 7])], [("w", w)])
    result = convert(path)
    assert result.model.graph.op_counts() == {"Conv": 1, "Relu": 1}
    assert [v.name for v in result.model.graph.outputs] == ["y"]


def test_the_cut_needs_one_checking_conversion_after_refusals_at_every_stage(
        tmp_path, monkeypatch):
    """Side branches refused at five stages (frontend, scan, layout, empty tensor,
    legalisation) are all in the first error, so the exact cut is right the first time: one
    conversion to check it."""
    from nhwc_onnx.conversion import convert as conversion

    f = TensorProto.FLOAT
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Sin", ["r"], ["s"], name="frontend"),
        helper.make_node("Erf", ["r"], ["e"], name="scan"),
        helper.make_node("Flatten", ["r"], ["flat"], name="layout"),
        helper.make_node("Slice", ["r", "st", "en", "ax"], ["empty"], name="empty"),
        helper.make_node("Mul", ["empty", "empty"], ["sq"], name="square_of_nothing"),
        helper.make_node("Resize", ["r", "", "scales"], ["big"], name="legalize",
                         mode="linear", coordinate_transformation_mode="align_corners"),
    ]
    inits = [("st", np.array([2], np.int64)), ("en", np.array([2], np.int64)),
             ("ax", np.array([2], np.int64)), ("scales", np.array([1, 1, 2, 2], np.float32))]
    path = _onnx(tmp_path, nodes, [helper.make_tensor_value_info("x", f, [1, 3, 5, 7])],
                 [helper.make_tensor_value_info(n, f, None)
                  for n in ("s", "e", "flat", "sq", "big")], inits)
    calls = []
    original = conversion.convert

    def counting(*args, **kwargs):
        options = kwargs.get("options")
        calls.append(True if options is None else options.exact_cut)
        return original(*args, **kwargs)

    monkeypatch.setattr(conversion, "convert", counting)
    with pytest.raises(UnsupportedOpError) as info:
        conversion.convert(path)
    assert {p.node for p in info.value.problems} == {
        "frontend", "scan", "layout", "empty", "square_of_nothing", "legalize"}
    assert info.value.exact_cut.outputs == ["r"]
    assert calls == [True, False]  # the conversion, then one check of the cut
