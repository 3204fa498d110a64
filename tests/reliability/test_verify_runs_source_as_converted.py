"""Verification runs the source the way the conversion was cut and
reshaped, a Caffe net's reference gets the conversion's weights and the blobs it converted
(without writing a file, without OpenCV's log lines), and a closed stderr does not end
`verify`.

- ONNX (and TensorFlow) sources with --batch, --input-shape and --inputs naming an internal
    tensor: the source used to be fed the new shape without the override ("internal error
    ... INVALID_ARGUMENT Got: 2 Expected: 1") or the internal tensor without the cut
    ("Required inputs (['input']) are missing").
- Caffe --outputs with --weights random (OpenCV's "!blobs.empty()" plus its [ERROR] lines),
    the cut an AlexNet refusal suggests, a top of a multi-top layer (Slice), a net whose
    input is a Data layer's top, a layer OpenCV lacks (one message, exit 2), and the
    nhwc_onnx_verify_<pid>_<seed>.caffemodel left in the temp folder.
- `verify SRC CONV 2>&-` exited 1 silently.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from rel_limits import child_env, limit_memory, run_cli_limited

import nhwc_onnx
from nhwc_onnx.options import ConvertOptions

# -- #2: the source runs with the conversion's overrides and cut ------------------------------


def _static_onnx(path, batch: int = 1):
    """input (batch,3,11,7) -> conv_a -> relu (r1) -> conv_b -> relu_b: a static exporter
    model, every shape declared (value_info too, as exporters write it)."""
    rng = np.random.default_rng(7)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in (("w1", (8, 3, 3, 3)), ("w2", (16, 8, 3, 3)), ("b2", (16,)))]
    nodes = [helper.make_node("Conv", ["input", "w1"], ["c1"], name="conv_a", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu"),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv_b", strides=[2, 2]),
             helper.make_node("Relu", ["c2"], ["y"], name="relu_b")]
    graph = helper.make_graph(
        nodes, "net", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                     [batch, 3, 11, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 16, 5, 3])], inits,
        value_info=[helper.make_tensor_value_info("r1", TensorProto.FLOAT, [batch, 8, 11, 7])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("args, shape", [
    (("--batch", "2"), [2, 16, 5, 3]),
    (("--input-shape", "input=1,3,13,17"), [1, 16, 6, 8]),
    (("--inputs", "r1", "--input-shape", "r1=1,8,9,9"), [1, 16, 4, 4]),
    (("--inputs", "r1", "--input-shape", "r1=3,8,9,9", "--outputs", "c2"), [3, 16, 4, 4]),
])
def test_onnx_source_runs_with_the_overrides_and_the_cut(run_cli, tmp_path, args, shape):
    src = _static_onnx(tmp_path / "m.onnx")
    out = tmp_path / "m.nhwc.onnx"
    result = run_cli("convert", src, "-o", out, *args, "--verify")
    assert result.exit_code == 0, result.output
    assert "verification: MATCH" in result.stdout
    report = run_cli("verify", src, out, *args, "--layers", "--format", "json")
    assert report.exit_code == 0, report.output
    data = json.loads(report.stdout)
    assert data["outputs"][0]["source_shape"] == shape
    assert data["layers"] and all(e["ok"] for e in data["layers"])
    assert "input" not in {e["source_name"] for e in data["layers"]}


def test_pinned_constant_inputs_are_constants_in_the_source_run_too(tmp_path):
    """A pinned graph input (the run state's constant_inputs) is a constant in both models."""
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "s"], ["y"], name="mul")], "pinned",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 7]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 3, 1, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "p.onnx")
    options = ConvertOptions().running(
        constant_inputs={"s": np.array([2, 3, 5], np.float32).reshape(1, 3, 1, 1)})
    converted = nhwc_onnx.convert(tmp_path / "p.onnx", options=options).model
    report = nhwc_onnx.verify(tmp_path / "p.onnx", converted, options)
    assert report.ok and report.outputs[0].max_abs_error == 0


@pytest.mark.slow
def test_tensorflow_source_runs_with_the_overrides_and_the_cut(run_cli, tmp_path):
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    keras = tf.keras
    keras.utils.set_random_seed(2)
    inp = keras.Input((11, 7, 3), batch_size=1, name="x")
    x = keras.layers.Conv2D(4, 3, padding="same", name="c1")(inp)
    x = keras.layers.ReLU(name="r1")(x)
    model = keras.Model(inp, keras.layers.Conv2D(5, 3, strides=2, name="c2")(x))
    model.save(tmp_path / "t.keras")
    function = tf.function(lambda v: model(v, training=False)).get_concrete_function(
        tf.TensorSpec((1, 11, 7, 3), tf.float32, name="x"))
    frozen = convert_variables_to_constants_v2(function).graph.as_graph_def()
    (tmp_path / "t.pb").write_bytes(frozen.SerializeToString())
    relu = next(n.name for n in frozen.node if n.op == "Relu")
    cases = [(tmp_path / "t.pb", ("--input-shape", "x=2,13,9,3")),  # the placeholder is static
             (tmp_path / "t.keras", ("--inputs", relu, "--input-shape", f"{relu}=1,11,7,4"))]
    for src, args in cases:
        result = run_cli("convert", src, "-o", tmp_path / "out.onnx", *args, "--verify")
        assert result.exit_code == 0, result.output
        assert "verification: MATCH" in result.stdout


# -- #3: the Caffe reference ------------------------------------------------------------------

CHAIN = """
name: "chain"
input: "data"
input_shape { dim: 1 dim: 3 dim: 19 dim: 17 }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 8 kernel_size: 3 stride: 2 } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
        pooling_param { pool: MAX kernel_size: 3 stride: 2 } }
layer { name: "conv2" type: "Convolution" bottom: "pool1" top: "conv2"
        convolution_param { num_output: 16 kernel_size: 3 pad: 1 } }
layer { name: "relu2" type: "ReLU" bottom: "conv2" top: "conv2" }
layer { name: "fc" type: "InnerProduct" bottom: "conv2" top: "fc"
        inner_product_param { num_output: 5 } }
"""

ALEXNET_HEAD = """
name: "alexnet"
layer { name: "data" type: "Input" top: "data"
        input_param { shape: { dim: 1 dim: 3 dim: 67 dim: 67 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 16 kernel_size: 11 stride: 4 } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "norm1" type: "LRN" bottom: "conv1" top: "norm1"
        lrn_param { local_size: 5 alpha: 0.0001 beta: 0.75 } }
layer { name: "pool1" type: "Pooling" bottom: "norm1" top: "pool1"
        pooling_param { pool: MAX kernel_size: 3 stride: 2 } }
layer { name: "conv2" type: "Convolution" bottom: "pool1" top: "conv2"
        convolution_param { num_output: 32 pad: 2 kernel_size: 5 group: 2 } }
layer { name: "relu2" type: "ReLU" bottom: "conv2" top: "conv2" }
layer { name: "fc8" type: "InnerProduct" bottom: "conv2" top: "fc8"
        inner_product_param { num_output: 10 } }
layer { name: "prob" type: "Softmax" bottom: "fc8" top: "prob" }
"""

SLICE_NET = """
name: "slices"
layer { name: "data" type: "Data" top: "data" top: "label"
        transform_param { crop_size: 9 } data_param { batch_size: 2 } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 6 kernel_size: 3 } }
layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "conv" }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "slice" type: "Slice" bottom: "conv" top: "a" top: "b"
        slice_param { axis: 1 slice_point: 2 } }
layer { name: "pa" type: "Pooling" bottom: "a" top: "pa"
        pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "pb" type: "Pooling" bottom: "b" top: "pb"
        pooling_param { pool: AVE kernel_size: 2 stride: 2 } }
layer { name: "cat" type: "Concat" bottom: "pa" bottom: "pb" top: "cat" }
"""


def _no_opencv_noise(proc) -> None:
    text = proc.stdout + proc.stderr
    assert "[ERROR" not in text and "[ WARN" not in text and "OpenCV(" not in text, text
    assert "internal error" not in text, text


@pytest.mark.slow
def test_caffe_cut_with_random_weights_verifies_quietly_and_leaves_no_file(tmp_path):
    src = tmp_path / "chain.prototxt"
    src.write_text(CHAIN)
    temp = tmp_path / "tmp"
    temp.mkdir()
    proc = run_cli_limited(["convert", src, "-o", tmp_path / "cut.onnx", "--weights", "random",
                            "--outputs", "pool1", "--verify"], timeout=300, TMPDIR=str(temp))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verification: MATCH" in proc.stdout
    _no_opencv_noise(proc)
    proc = run_cli_limited(["verify", src, tmp_path / "cut.onnx", "--weights", "random",
                            "--outputs", "pool1", "--layers"], timeout=300, TMPDIR=str(temp))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _no_opencv_noise(proc)
    left = [p.name for p in temp.iterdir() if "nhwc" in p.name or p.suffix == ".caffemodel"]
    assert left == []  # was nhwc_onnx_verify_<pid>_<seed>.caffemodel


@pytest.mark.slow
def test_the_cut_an_alexnet_refusal_suggests_verifies(tmp_path):
    src = tmp_path / "alexnet.prototxt"
    src.write_text(ALEXNET_HEAD)
    refused = run_cli_limited(["convert", src, "-o", tmp_path / "a.onnx", "--weights",
                               "random"], timeout=300)
    assert refused.returncode == 1, refused.stderr
    cut = re.search(r"--outputs (\S+)", refused.stderr).group(1)
    proc = run_cli_limited(["convert", src, "-o", tmp_path / "a.onnx", "--weights", "random",
                            "--outputs", cut, "--verify"], timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verification: MATCH" in proc.stdout
    _no_opencv_noise(proc)


def test_caffe_top_of_a_multi_top_layer_and_a_data_layer_input(run_cli, tmp_path):
    src = tmp_path / "slices.prototxt"
    src.write_text(SLICE_NET)
    args = ("--weights", "random", "--input-shape", "data=2,3,9,9")
    result = run_cli("convert", src, "-o", tmp_path / "all.onnx", *args, "--verify")
    assert result.exit_code == 0, result.output  # the input is a Data layer's top
    for top in ("a", "b"):
        out = tmp_path / f"{top}.onnx"
        result = run_cli("convert", src, "-o", out, *args, "--outputs", top, "--verify")
        assert result.exit_code == 0, result.output
        assert f"ok  {top}: shape (2, {2 if top == 'a' else 4}, 7, 7)" in result.stdout
    report = run_cli("verify", src, tmp_path / "all.onnx", *args, "--layers", "--format",
                     "json")
    assert report.exit_code == 0, report.output
    layers = json.loads(report.stdout)["layers"]
    assert [e["converted_name"] for e in layers] == ["bn", "relu", "a", "pa", "b", "pb", "cat"]
    assert all(e["ok"] for e in layers)


def test_a_layer_opencv_cannot_run_is_one_message_exit_2(tmp_path):
    src = tmp_path / "up.prototxt"
    src.write_text("""
name: "up"
input: "data"
input_shape { dim: 1 dim: 3 dim: 5 dim: 7 }
layer { name: "up" type: "Upsample" bottom: "data" top: "up" upsample_param { scale: 2 } }
""")
    proc = run_cli_limited(["convert", src, "-o", tmp_path / "up.onnx", "--verify"],
                           timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("Error: OpenCV cannot run the Caffe net")
    assert "Upsample" in errors[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "up.onnx").exists() and "[ERROR" not in proc.stderr


# -- #8: a closed stderr ----------------------------------------------------------------------


def test_verify_with_stderr_closed_reports_and_exits_0(tmp_path):
    src = _static_onnx(tmp_path / "m.onnx")
    out = tmp_path / "m.nhwc.onnx"
    assert nhwc_onnx.convert(src, out).output

    def closed_stderr() -> None:
        limit_memory()
        os.close(2)

    proc = subprocess.run([sys.executable, "-m", "nhwc_onnx.cli", "verify", str(src), str(out)],
                          stdout=subprocess.PIPE, stderr=None, text=True, timeout=300,
                          preexec_fn=closed_stderr, env=child_env(), check=False)
    assert proc.returncode == 0
    assert "verification: MATCH" in proc.stdout


# -- the source runtimes' own refusals are one message, exit 2 ---------------------------------


def test_runtime_refusals_are_source_runtime_errors(tmp_path):
    from nhwc_onnx.errors import EXIT_UNREADABLE, SourceRuntimeError
    from nhwc_onnx.frontends.onnx.reference import SourceReference as OnnxReference

    src = _static_onnx(tmp_path / "m.onnx")
    reference = OnnxReference(str(src), ConvertOptions())
    with pytest.raises(SourceRuntimeError, match="onnxruntime cannot run") as caught:
        reference.run({"input": np.zeros((1, 3, 11, 7), np.float64)}, ["y"])  # not float32
    assert caught.value.exit_code == EXIT_UNREADABLE


@pytest.mark.slow
def test_tensorflow_refusing_the_feeds_is_a_source_runtime_error(tmp_path):
    import tensorflow as tf

    from nhwc_onnx.errors import SourceRuntimeError
    from nhwc_onnx.frontends.tensorflow.reference import SourceReference as TfReference

    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, (1, 4, 4, 3), name="x")
        tf.reshape(x, [1, 48], name="flat")  # a fixed shape, as frozen graphs often have
    (tmp_path / "r.pb").write_bytes(graph.as_graph_def().SerializeToString())
    reference = TfReference(str(tmp_path / "r.pb"), ConvertOptions())
    assert reference.run({"x": np.ones((1, 4, 4, 3), np.float32)}, ["flat"])["flat"].shape == \
        (1, 48)
    with pytest.raises(SourceRuntimeError, match="TensorFlow cannot run the source"):
        reference.run({"x": np.ones((2, 4, 4, 3), np.float32)}, ["flat"])
