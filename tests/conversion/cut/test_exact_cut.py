"""The exact cut: a refused conversion suggests --outputs; following the suggestion converts,
and the converted cut computes the source runtime's numbers on those outputs (ONNX with
onnxruntime, Caffe with OpenCV, TensorFlow with TensorFlow)."""
from __future__ import annotations

import json
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from nhwc_onnx.conversion.cut import SourceGraph, SourceNode, compute_cut
from nhwc_onnx.runtime import run as run_dialect
from nhwc_onnx.serialize import load
from tests.cli_runner import run_cli

PREFIX = "to convert the part that is exact"


def _convert(*args):
    return run_cli("convert", *args, catch_exceptions=False)


def _suggested(result) -> list[str]:
    """The --outputs list of the error's last line (checked to be exactly one such line)."""
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(PREFIX), result.stderr
    assert sum(PREFIX in line for line in result.stderr.splitlines()) == 1
    return last.split("--outputs ", 1)[1].split(",")


def _refuse_then_follow(tmp_path, source, *extra):
    """Convert (refused, nothing written), then convert the suggested outputs."""
    out = tmp_path / "refused.onnx"
    refused = _convert(source, "-o", out, *extra)
    assert refused.exit_code == 1, refused.stderr
    assert not out.exists()
    outputs = _suggested(refused)
    cut = tmp_path / "cut.onnx"
    followed = _convert(source, "-o", cut, "--outputs", ",".join(outputs), *extra)
    assert followed.exit_code == 0, followed.stderr
    model = load(cut)
    recorded = json.loads(model.metadata["requested_outputs"])
    return outputs, model, recorded


def _nhwc_feeds(model, source_feeds):
    return {name: np.ascontiguousarray(a.transpose(model.io_permutations.get(name, range(a.ndim))))
            for name, a in source_feeds.items()}


def _assert_outputs_match(model, recorded, got, expected_by_source_name):
    """Each converted output equals the source runtime's tensor, in the recorded layout."""
    assert [r["name"] for r in recorded] == [v.name for v in model.graph.outputs]
    for entry in recorded:
        want = expected_by_source_name[entry["source_name"]]
        perm = entry["permutation"] or list(range(want.ndim))
        np.testing.assert_allclose(got[entry["name"]], want.transpose(perm), rtol=1e-4,
                                   atol=1e-4, err_msg=entry["source_name"])


# -- the cut on a topology ------------------------------------------------------------------------


def test_cut_keeps_what_does_not_depend_on_a_refused_node():
    # x -> a -> b(refused) -> c -> y1 ; a -> d -> y2 ; const k -> e(reads k and a) -> f reads b
    g = SourceGraph(
        nodes=[SourceNode("k", "Const", [], ["k"]), SourceNode("a", "Conv", ["x", "k"], ["a"]),
               SourceNode("b", "Odd", ["a", "k"], ["b"]), SourceNode("c", "Relu", ["b"], ["y1"]),
               SourceNode("d", "Relu", ["a"], ["y2"]), SourceNode("e", "Add", ["a", "a"], ["e"]),
               SourceNode("f", "Add", ["e", "y1"], ["y3"])],
        inputs=["x"], outputs=["y1", "y2", "y3"])
    frontier, converted, total = compute_cut(g, {"b"})
    # a (read by b), e (read by f, downstream of b), y2 (an original output); never the const k
    assert frontier == ["a", "e", "y2"]
    assert (converted, total) == (3, 6)
    assert compute_cut(g, {"a"}) == ([], 0, 6)


# -- ONNX ------------------------------------------------------------------------------------------


def _onnx_source(path):
    rng = np.random.default_rng(5)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Sin", ["r"], ["s"], name="sin"),  # no converter
        helper.make_node("Add", ["s", "r"], ["y"], name="add"),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2],
                         name="pool"),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 7, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("p", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return model


def test_onnx_refusal_suggests_a_cut_that_converts_and_matches_onnxruntime(tmp_path):
    import onnxruntime as ort

    source = tmp_path / "model.onnx"
    proto = _onnx_source(source)
    outputs, model, recorded = _refuse_then_follow(tmp_path, source)
    assert outputs == ["r", "p"]
    # onnxruntime on the source, with the internal tensor exposed
    proto.graph.output.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, None))
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((2, 3, 7, 6)).astype(np.float32)
    expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, {"x": x})))
    got = run_dialect(model, _nhwc_feeds(model, {"x": x}))
    assert all(r["permutation"] == [0, 2, 3, 1] for r in recorded)
    _assert_outputs_match(model, recorded, got, expected)


def test_cut_is_in_the_report_and_says_when_nothing_is_exact(tmp_path):
    source = tmp_path / "model.onnx"
    proto = _onnx_source(source)
    report = tmp_path / "report.json"
    refused = _convert(source, "-o", tmp_path / "m.onnx", "--report", report)
    assert refused.exit_code == 1
    data = json.loads(report.read_text())
    assert data["exact_cut"]["outputs"] == ["r", "p"]
    assert [p["node"] for p in data["refused"]] == ["sin"]
    # a refused first node: nothing exact to suggest, and the message says so
    proto.graph.node.insert(0, helper.make_node("Sin", ["x"], ["x_sin"], name="first"))
    proto.graph.node[1].input[0] = "x_sin"
    onnx.save(proto, str(source))
    nothing = _convert(source, "-o", tmp_path / "m.onnx")
    assert nothing.exit_code == 1
    assert nothing.stderr.strip().splitlines()[-1].startswith("no useful exact cut")


# -- Caffe -----------------------------------------------------------------------------------------

CAFFE_NET = """
name: "lrn_net"
layer { name: "data" type: "Input" top: "data"
        input_param { shape { dim: 1 dim: 3 dim: 11 dim: 9 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 5 kernel_size: 3 pad: 1 } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "norm1" type: "LRN" bottom: "conv1" top: "norm1"
        lrn_param { local_size: 3 alpha: 0.0001 beta: 0.75 } }
layer { name: "conv2" type: "Convolution" bottom: "norm1" top: "conv2"
        convolution_param { num_output: 2 kernel_size: 1 } }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
        pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
"""


def test_caffe_refusal_suggests_a_cut_that_converts_and_matches_opencv(tmp_path):
    import cv2

    from nhwc_onnx.frontends.caffe.writer import write_caffemodel

    rng = np.random.default_rng(2)
    proto = tmp_path / "net.prototxt"
    proto.write_text(CAFFE_NET)
    weights = tmp_path / "net.caffemodel"
    write_caffemodel(weights, [
        ("conv1", "Convolution", [rng.standard_normal((5, 3, 3, 3)).astype(np.float32),
                                  rng.standard_normal(5).astype(np.float32)]),
        ("conv2", "Convolution", [rng.standard_normal((2, 5, 1, 1)).astype(np.float32),
                                  rng.standard_normal(2).astype(np.float32)]),
    ])
    outputs, model, recorded = _refuse_then_follow(tmp_path, proto, "--weights", weights)
    assert outputs == ["conv1", "pool1"]  # conv1 after its in-place ReLU, as LRN reads it
    net = cv2.dnn.readNetFromCaffe(str(proto), str(weights))
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    x = np.random.default_rng(0).standard_normal((1, 3, 11, 9)).astype(np.float32)
    net.setInput(x, "data")
    relu1, pool1 = net.forward(["relu1", "pool1"])  # OpenCV names a blob by its last layer
    got = run_dialect(model, _nhwc_feeds(model, {"data": x}))
    _assert_outputs_match(model, recorded, got, {"conv1": relu1, "pool1": pool1})
    assert (relu1 > 0).any() and (relu1 == 0).any()  # the ReLU really is in the cut


# -- TensorFlow ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_tensorflow_refusal_suggests_a_cut_that_converts_and_matches_tensorflow(tmp_path):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    rng = np.random.default_rng(4)
    kernel = tf.constant(rng.standard_normal((3, 3, 3, 4)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec((2, 7, 6, 3), tf.float32, name="x")])
    def fn(x):
        r = tf.nn.relu(tf.nn.conv2d(x, kernel, 1, "SAME"), name="features")
        s = tf.math.sin(r, name="odd")  # no converter
        return tf.identity(s + r, name="y"), tf.nn.max_pool2d(r, 2, 2, "VALID", name="pooled")

    graph_def = fn.get_concrete_function().graph.as_graph_def()
    source = tmp_path / "model.pb"
    source.write_bytes(graph_def.SerializeToString())
    outputs, model, recorded = _refuse_then_follow(tmp_path, source)
    # the internal tensor the refused Sin and the Add after it read, and the function's second
    # output (an Identity)
    assert outputs == ["features", "Identity_1"]
    x = np.random.default_rng(0).standard_normal((2, 7, 6, 3)).astype(np.float32)
    r = tf.nn.relu(tf.nn.conv2d(x, kernel, 1, "SAME")).numpy()
    expected = {"features": r, "Identity_1": tf.nn.max_pool2d(r, 2, 2, "VALID").numpy()}
    got = run_dialect(model, _nhwc_feeds(model, {v.name: x for v in model.graph.inputs}))
    recorded = [{**e, "source_name": e["source_name"].split(":")[0]} for e in recorded]
    _assert_outputs_match(model, recorded, got, expected)


def test_problems_name_source_nodes_pass_nodes_and_tensors():
    from nhwc_onnx.conversion.cut import locate

    g = SourceGraph(nodes=[SourceNode("block/norm", "LRN", ["x"], ["block/norm:0"]),
                           SourceNode("block", "Relu", ["block/norm:0"], ["y:0"])],
                    inputs=["x"], outputs=["y:0"], display={"y:0": "y"})
    # a pass's node named after its source node; a graph output named as a tensor; a stranger
    found, blocked, unknown = locate(g, ["block/norm.scale", "y", "elsewhere"])
    assert found == {"block/norm"} and blocked == {"y:0"} and unknown == ["elsewhere"]


def test_refusal_by_a_dialect_pass_gets_a_checked_cut(tmp_path):
    """Sqrt and Reciprocal convert in the ONNX frontend, but no dialect op computes them
    exactly: the refusal comes from the dialect passes, after the frontend succeeded."""
    import onnxruntime as ort

    rng = np.random.default_rng(7)
    w = rng.standard_normal((4, 3, 1, 1)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Sqrt", ["r"], ["q"], name="root"),
        helper.make_node("Reciprocal", ["q"], ["y"], name="inverse"),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    proto.ir_version = 8
    source = tmp_path / "model.onnx"
    onnx.save(proto, str(source))
    from nhwc_onnx.frameworks import load_source
    from nhwc_onnx.options import ConvertOptions

    load_source(source, "onnx", ConvertOptions())  # the frontend alone accepts it
    outputs, model, recorded = _refuse_then_follow(tmp_path, source)
    assert outputs == ["r"]
    proto.graph.output.extend(helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                              for n in outputs)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((1, 3, 5, 7)).astype(np.float32)
    expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, {"x": x})))
    _assert_outputs_match(model, recorded, run_dialect(model, _nhwc_feeds(model, {"x": x})),
                          expected)


def test_a_cut_refused_by_its_check_moves_up_and_is_marked_unchecked(tmp_path):
    """The conversion refuses only Sin; the first cut (q, the squeezed map) would then be
    refused as a graph output (stored H, W, C, its source order C, H, W needs a layout
    Transpose), which no conversion of the whole model can see: converting the cut finds
    that, and the suggestion moves up to r. A cut is converted once at most (a refusal costs
    at most about two conversions), so r is suggested as unchecked, naming what the check
    found."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Squeeze", ["r", "axes"], ["q"], name="q"),
        helper.make_node("Sin", ["q"], ["y"], name="sin"),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([0], np.int64), "axes")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    proto.ir_version = 8
    source = tmp_path / "model.onnx"
    onnx.save(proto, str(source))
    result = _convert(source, "-o", tmp_path / "m.onnx", "--report", tmp_path / "r.json")
    assert result.exit_code == 1
    *error, last = result.stderr.strip().splitlines()
    assert "cannot convert 1 onnx node(s)" in error[0]  # the first refusal: Sin only
    assert not any("node 'q'" in line for line in error)
    assert last == ("to try the part that may be exact (1 of 3 source nodes; unchecked: "
                    "converting the first cut refused 'q' too; a cut is converted once at "
                    "most): --outputs r"), result.stderr
    cut = json.loads((tmp_path / "r.json").read_text())["exact_cut"]
    assert cut["outputs"] == ["r"] and cut["checked"] is False
    assert cut["reason"].startswith("unchecked: ") and cut["refused_nodes"] == ["q", "sin"]
    followed = _convert(source, "-o", tmp_path / "cut.onnx", "--outputs", "r")
    assert followed.exit_code == 0, followed.stderr


def test_the_cut_is_checked_with_the_same_keep_layout(tmp_path):
    """A graph output that is a bare Flatten of the NCHW input converts only with
    --keep-layout; the cut's checking conversion must use it too, or that output is dropped."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 7])
    flat = helper.make_tensor_value_info("flat", TensorProto.FLOAT, [1, 105])
    grown = helper.make_tensor_value_info("grown", TensorProto.FLOAT, [1, 3, 5, 7])
    graph = helper.make_graph(
        [helper.make_node("Flatten", ["x"], ["flat"], name="flatten"),
         helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Exp", ["r"], ["grown"], name="exp")],
        "keep", [x], [flat, grown])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    source = tmp_path / "keep.onnx"
    onnx.save(model, source)
    outputs = _suggested(_convert(source, "-o", tmp_path / "no.onnx", "--keep-layout", "x"))
    assert sorted(outputs) == ["flat", "r"]
    follow = _convert(source, "-o", tmp_path / "cut.onnx", "--keep-layout", "x",
                      "--outputs", ",".join(outputs))
    assert follow.exit_code == 0, follow.stderr
    feed = np.random.default_rng(3).standard_normal((1, 3, 5, 7)).astype(np.float32)
    cut = load(tmp_path / "cut.onnx")
    got = run_dialect(cut, {"x": feed})
    np.testing.assert_allclose(got["flat"], feed.reshape(1, -1), rtol=0, atol=0)
    perm = cut.io_permutations.get("r", [0, 1, 2, 3])  # 'r' follows the kept input's order
    np.testing.assert_allclose(got["r"], np.maximum(feed, 0).transpose(perm), rtol=0, atol=0)
