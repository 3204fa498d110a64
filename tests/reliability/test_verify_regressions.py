"""verify and verify --bisect for every source format: through the CLI
in-process, and the two regressions once more as real processes.

The TensorFlow model is the one of the issue: Input(19,23,3) -> Conv2D(32,3,same) -> BatchNorm
-> ReLU -> Conv2D(64,3,s2) -> GlobalAveragePooling2D -> Dense(10), random weights, saved as
.keras, .h5, a SavedModel and a frozen .pb. Its weights take both storage paths of the
GraphDef reader (large tensor_content lifted out of the message, small values inline), which
is what made the old reference run TensorFlow on empty weights.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from rel_limits import run_limited

from nhwc_onnx.serialize import load, save

pytestmark = pytest.mark.slow

TF_FORMATS = ("keras", "h5", "savedmodel", "pb")


def _issue_model(tf):
    keras = tf.keras
    keras.utils.set_random_seed(18)
    inp = keras.Input((19, 23, 3), name="image")
    x = keras.layers.Conv2D(32, 3, padding="same", name="conv_a")(inp)
    x = keras.layers.BatchNormalization(name="bn")(x)
    x = keras.layers.ReLU(name="relu")(x)
    x = keras.layers.Conv2D(64, 3, strides=2, name="conv_b")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    out = keras.layers.Dense(10, name="fc")(x)
    model = keras.Model(inp, out)
    rng = np.random.default_rng(18)
    weights = []
    for var in model.weights:
        w = rng.standard_normal(var.shape).astype(np.float32) * 0.3
        if "variance" in var.path:
            w = np.abs(w) + 0.5
        weights.append(w)
    model.set_weights(weights)
    return model


def _save_all(tf, model, folder: Path) -> dict[str, Path]:
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    paths = {"keras": folder / "m.keras", "h5": folder / "m.h5",
             "savedmodel": folder / "saved", "pb": folder / "m.pb"}
    model.save(paths["keras"])
    model.save(paths["h5"])
    model.export(paths["savedmodel"], verbose=False)
    spec = [tf.TensorSpec(t.shape, t.dtype, name="image") for t in model.inputs]
    function = tf.function(lambda x: model(x, training=False)).get_concrete_function(*spec)
    frozen = convert_variables_to_constants_v2(function)
    paths["pb"].write_bytes(frozen.graph.as_graph_def().SerializeToString())
    return paths


@pytest.fixture
def invoke(run_cli):
    return run_cli


@pytest.fixture(scope="module")
def tf_sources(tmp_path_factory):
    import tensorflow as tf

    folder = tmp_path_factory.mktemp("tf_sources")
    return _save_all(tf, _issue_model(tf), folder)


@pytest.fixture(scope="module")
def converted(tf_sources, tmp_path_factory):
    """Each TF source converted once (no --verify: the tests below verify separately)."""
    from tests.cli_runner import run_cli

    folder = tmp_path_factory.mktemp("converted")
    outs = {}
    for fmt, src in tf_sources.items():
        out = folder / f"{fmt}.onnx"
        result = run_cli("convert", src, "-o", out)
        assert result.exit_code == 0, result.output + result.stderr
        outs[fmt] = out
    return outs


def test_the_weights_take_both_storage_paths(tf_sources):
    """The premise of the tests below: some weights are lifted out, some stay inline."""
    from nhwc_onnx.frontends.tensorflow import savedmodel
    from nhwc_onnx.frontends.tensorflow.reader import read_graphdef
    from nhwc_onnx.options import ConvertOptions

    for fmt, src in tf_sources.items():
        if fmt == "pb":
            graph_def, _ = read_graphdef(src)
        else:
            graph_def, *_ = savedmodel.load_frozen(str(src), ConvertOptions())
        tensors = [n.attr["value"].tensor for n in graph_def.node if n.op == "Const"]
        lifted = [t for t in tensors if t.external_length > 0]
        inline = [t for t in tensors if t.external_length == 0 and
                  (t.tensor_content or t.float_val)]
        assert len(lifted) >= 3 and len(inline) >= 3, fmt


@pytest.mark.parametrize("fmt", TF_FORMATS)
def test_verify_matches_a_correct_conversion(invoke, tf_sources, converted, fmt):
    result = invoke("verify", tf_sources[fmt], converted[fmt], "--format", "json")
    assert result.exit_code == 0, result.output + result.stderr
    report = json.loads(result.output)
    assert report["ok"] is True
    # every TF source here declares an open batch: kept symbolic, compared at 1, 3 and 17
    assert report["batches"] == [1, 3, 17]
    assert [(o["batch"], o["source_shape"]) for o in report["outputs"]] == [
        (1, [1, 10]), (3, [3, 10]), (17, [17, 10])]
    assert max(o["max_abs_error"] for o in report["outputs"]) < 1e-4


def test_verify_reference_is_the_keras_model_itself(tf_sources, converted):
    """Independent of verify: the converted model agrees with model(x, training=False)."""
    import keras

    from nhwc_onnx.runtime import run

    model = keras.models.load_model(tf_sources["keras"], compile=False)
    x = np.random.default_rng(5).uniform(-1, 1, (1, 19, 23, 3)).astype(np.float32)
    ours = load(converted["keras"])
    [value] = run(ours, {ours.graph.inputs[0].name: x}).values()
    np.testing.assert_allclose(value, np.asarray(model(x, training=False)), atol=1e-4)


def _corrupt(out: Path, node_name: str) -> None:
    """Add 3 to one weight of the named node of a converted model."""
    model = load(out)
    node = next(n for n in model.graph.nodes if n.name == node_name)
    weight = max((v for v in node.inputs if v is not None and v.const is not None),
                 key=lambda v: v.const.size)
    bad = weight.const.copy()
    bad.flat[bad.size // 2] += 3.0
    weight.set_const(bad)
    save(model, out)


def _bisect(invoke, src, out, *extra):
    result = invoke("verify", src, out, "--bisect", "--format", "json", *extra)
    assert result.exit_code == 3, result.output + result.stderr
    report = json.loads(result.output)
    assert report["ok"] is False
    return report["first_divergence"]


@pytest.mark.parametrize("fmt", TF_FORMATS)
def test_bisect_names_the_corrupted_node_of_a_tf_source(invoke, tf_sources, converted, fmt,
                                                        tmp_path):
    out = tmp_path / "bad.onnx"
    out.write_bytes(converted[fmt].read_bytes())
    node = next(n.name for n in load(out).graph.nodes if n.op == "Conv" and "conv_b" in n.name)
    _corrupt(out, node)
    plain = invoke("verify", tf_sources[fmt], out)
    assert plain.exit_code == 3 and "MISMATCH" in plain.output
    divergence = _bisect(invoke, tf_sources[fmt], out)
    assert divergence["node"] == node
    assert divergence["source_op"] == "Conv2D"


CAFFE_NET = """
name: "net"
input: "data"
input_shape { dim: 2 dim: 3 dim: 11 dim: 7 }
layer { name: "conv_a" type: "Convolution" bottom: "data" top: "conv_a"
        convolution_param { num_output: 8 kernel_size: 3 pad: 1 } }
layer { name: "relu" type: "ReLU" bottom: "conv_a" top: "relu" }
layer { name: "conv_b" type: "Convolution" bottom: "relu" top: "conv_b"
        convolution_param { num_output: 16 kernel_size: 3 stride: 2 } }
layer { name: "pool" type: "Pooling" bottom: "conv_b" top: "pool"
        pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "fc" type: "InnerProduct" bottom: "pool" top: "fc"
        inner_product_param { num_output: 5 } }
"""


def test_bisect_names_the_corrupted_node_of_a_caffe_source(invoke, tmp_path):
    src = tmp_path / "net.prototxt"
    src.write_text(CAFFE_NET)
    out = tmp_path / "net.onnx"
    args = ("--weights", "random", "--seed", "4")
    result = invoke("convert", src, "-o", out, "--verify", *args)
    assert result.exit_code == 0, result.output + result.stderr
    node = next(n.name for n in load(out).graph.nodes if n.op == "Conv" and "conv_b" in n.name)
    _corrupt(out, node)
    assert _bisect(invoke, src, out, *args)["node"] == node


def _onnx_net(path: Path) -> Path:
    rng = np.random.default_rng(7)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in (("w1", (8, 3, 3, 3)), ("w2", (16, 8, 3, 3)), ("b2", (16,)))]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv_a", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv_b", strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["y"], name="relu_b"),
    ]
    graph = helper.make_graph(
        nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 11, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_bisect_names_the_corrupted_node_of_an_onnx_source(invoke, tmp_path):
    src = _onnx_net(tmp_path / "net.onnx")
    out = tmp_path / "net.nhwc.onnx"
    result = invoke("convert", src, "-o", out, "--verify")
    assert result.exit_code == 0, result.output + result.stderr
    _corrupt(out, "conv_b")
    assert _bisect(invoke, src, out)["node"] == "conv_b"


def _two_way_model(tf):
    """Two inputs of one shape and two outputs of one shape, listed in an order unlike their
    creation: pairing them by position instead of by name gives different numbers."""
    keras = tf.keras
    keras.utils.set_random_seed(3)
    a = keras.Input((5, 7, 3), name="zeta")
    b = keras.Input((5, 7, 3), name="alpha")
    left = keras.layers.Conv2D(4, 3, padding="same", name="left")(a)
    right = keras.layers.Conv2D(4, 1, name="right")(keras.layers.Multiply()([a, b]))
    first = keras.layers.Dense(6, name="first")(keras.layers.Flatten()(left))
    second = keras.layers.Dense(6, name="second")(keras.layers.Flatten()(right))
    return keras.Model([a, b], [second, first])


@pytest.mark.parametrize("fmt", ("keras", "savedmodel"))
def test_verify_pairs_several_inputs_and_outputs_by_name(invoke, tmp_path, fmt):
    import tensorflow as tf

    model = _two_way_model(tf)
    src = tmp_path / ("m.keras" if fmt == "keras" else "saved")
    if fmt == "keras":
        model.save(src)
    else:
        model.export(src, verbose=False)
    out = tmp_path / "m.onnx"
    result = invoke("convert", src, "-o", out, "--verify")
    assert result.exit_code == 0, result.output + result.stderr
    assert "verification: MATCH" in result.output
    assert len(load(out).graph.outputs) == 2 and len(load(out).graph.inputs) == 2
    # one output wrong, the other right: the verdict is a mismatch naming only that output
    node = next(n.name for n in load(out).graph.nodes if "second" in n.name)
    _corrupt(out, node)
    bad = invoke("verify", src, out, "--format", "json")
    assert bad.exit_code == 3, bad.output + bad.stderr
    report = json.loads(bad.output)
    assert report["batches"] == [1, 3, 17]  # Keras' batch is symbolic: compared at each size
    for batch in (1, 3, 17):
        outputs = [o for o in report["outputs"] if o["batch"] == batch]
        assert sorted(o["within"] for o in outputs) == [False, True]


# -- the same regressions as real processes (the internal error of #12 ended the process) -------


@pytest.mark.parametrize("fmt", ["keras", "savedmodel"])
def test_process_convert_verify_of_a_keras_or_savedmodel_source_matches(tf_sources, tmp_path,
                                                                        fmt):
    out = tmp_path / "out.onnx"
    proc = run_limited(["-m", "nhwc_onnx.cli", "convert", str(tf_sources[fmt]), "-o", str(out),
                        "--verify"], timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verification: MATCH" in proc.stdout
    assert out.is_file()


def test_process_verify_bisect_on_a_pb_names_the_corrupted_node(tf_sources, converted,
                                                                tmp_path):
    out = tmp_path / "bad.onnx"
    out.write_bytes(converted["pb"].read_bytes())
    node = next(n.name for n in load(out).graph.nodes if n.op == "Conv" and "conv_b" in n.name)
    _corrupt(out, node)
    proc = run_limited(["-m", "nhwc_onnx.cli", "verify", str(tf_sources["pb"]), str(out),
                        "--bisect"], timeout=300)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert f"first divergence: node '{node}'" in proc.stdout
    assert "internal error" not in proc.stdout + proc.stderr
