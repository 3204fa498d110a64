"""`info` on a model it would refuse and on a dynamic model:
it describes the source - op histogram, inputs and outputs with their shapes (a symbol by its
name, an unknown dim as ?), and what a conversion would refuse (node, op, reason) - and exits
0. Before, it ended with exit 1 and the refusal, or "use --batch" (no option of info)."""
from __future__ import annotations

import json

import onnx
import pytest
from onnx import TensorProto, helper

from tests.cli_runner import run_cli
from tests.conversion.deployment.models import CAFFE_NET, onnx_conv_net


def _info(path, *args) -> tuple[dict, str]:
    as_json = run_cli("info", path, "--format", "json", *args)
    text = run_cli("info", path, *args)
    assert as_json.exit_code == 0, as_json.output
    assert text.exit_code == 0, text.output
    return json.loads(as_json.stdout), text.stdout


def test_a_model_refused_by_a_pass_is_described_with_every_refused_node(tmp_path):
    source = onnx_conv_net(tmp_path / "m.onnx", unsupported="Erf")
    data, text = _info(source)
    assert data["ops"] == {"Conv": 2, "Erf": 1, "Relu": 1}
    assert data["inputs"] == [{"name": "input", "shape": [2, 3, 7, 5], "dtype": "float32"}]
    assert data["outputs"][0]["shape"] == [2, 6, 7, 5]
    conversion = data["conversion"]
    assert conversion["status"] == "refused"
    assert [(r["node"], r["op"]) for r in conversion["refused"]] == [("odd", "Erf")]
    assert "error function" in conversion["refused"][0]["reason"]
    assert "  conversion: refused, 1 node(s):\n    'odd' (Erf): " in text
    assert "  input  input: float32 2 x 3 x 7 x 5" in text


def test_a_model_its_frontend_refuses_is_described(tmp_path):
    source = onnx_conv_net(tmp_path / "m.onnx", unsupported="Hardmax")
    assert run_cli("convert", source, "-o", tmp_path / "c.onnx").exit_code == 1
    data, text = _info(source)
    assert data["ops"] == {"Conv": 2, "Hardmax": 1, "Relu": 1}
    assert data["inputs"] == [{"name": "input", "shape": [2, 3, 7, 5], "dtype": "float32"}]
    assert data["outputs"] == [{"name": "output", "shape": [2, 6, 7, 5], "dtype": "float32"}]
    assert data["parameters"] == 4 * 3 * 9 + 4 + 6 * 4
    assert [(r["node"], r["op"]) for r in data["conversion"]["refused"]] == [("odd", "Hardmax")]
    assert "'odd' (Hardmax)" in text


def test_a_caffe_net_with_a_layer_without_converter_is_described(tmp_path):
    proto = tmp_path / "net.prototxt"
    proto.write_text(CAFFE_NET + 'layer { name: "top1" type: "ArgMax" bottom: "prob" '
                                 'top: "top1" }\n')
    data, text = _info(proto)
    assert "ArgMax x1" in text
    assert data["format"] == "caffe" and data["ops"]["ArgMax"] == 1
    assert data["inputs"] == [{"name": "data", "shape": [1, 3, 7, 5], "dtype": "float32"}]
    assert data["outputs"] == [{"name": "top1", "shape": None, "dtype": None}]  # not computed
    assert "  output top1: ? ?" in text
    assert data["conversion"]["status"] == "refused"
    assert [r["op"] for r in data["conversion"]["refused"]] == ["ArgMax"]


@pytest.mark.slow
def test_a_frozen_graph_with_an_op_without_converter_is_described(tmp_path):
    from tests.frontends.tensorflow.tf_helpers import freeze, spec, tf

    tensorflow = tf()
    data_bytes, _ = freeze(lambda x: tensorflow.math.cumsum(tensorflow.nn.relu(x), axis=3),
                           [spec([1, 7, 5, 3], "image")])
    path = tmp_path / "g.pb"
    path.write_bytes(data_bytes)
    data, text = _info(path)
    assert data["ops"]["Cumsum"] == 1
    assert data["inputs"] == [{"name": "image", "shape": [1, 7, 5, 3], "dtype": "float32"}]
    assert [r["op"] for r in data["conversion"]["refused"]] == ["Cumsum"]
    assert "  input  image: float32 1 x 7 x 5 x 3" in text


def _dynamic_onnx(path, dims):
    info = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                              [info("x", TensorProto.FLOAT, dims)],
                              [info("y", TensorProto.FLOAT, dims)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_a_dynamic_model_shows_its_symbols_and_exits_0(tmp_path):
    source = _dynamic_onnx(tmp_path / "dyn.onnx", ["batch", 3, 7, 5])
    data, text = _info(source)
    assert data["inputs"][0]["shape"] == ["batch", 3, 7, 5]
    assert "  input  x: float32 batch x 3 x 7 x 5" in text
    assert "--batch" not in text.splitlines()[1]  # the description is no refusal
    # a height without value: the conversion needs --input-shape, info describes the file
    unknown = _dynamic_onnx(tmp_path / "unknown.onnx", ["batch", 3, None, 5])
    data, text = _info(unknown)
    assert data["inputs"][0]["shape"] == ["batch", 3, None, 5]
    assert data["parameters"] is None and "weights not read" in text
    assert "  input  x: float32 batch x 3 x ? x 5" in text
    assert data["conversion"]["status"] == "fails"
    assert "--input-shape" in data["conversion"]["reason"]


def test_a_convertible_source_says_so_and_an_unreadable_one_still_exits_2(tmp_path):
    data, text = _info(onnx_conv_net(tmp_path / "m.onnx"))
    assert data["conversion"] == {"status": "converts", "refused": [], "reason": None}
    assert text.rstrip().endswith("conversion: converts")
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"\x08\x01garbage")
    assert run_cli("info", broken).exit_code == 2
