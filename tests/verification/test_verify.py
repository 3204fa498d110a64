"""nhwc_onnx.verify: the comparison arithmetic and each framework's source runner."""
from __future__ import annotations

import numpy as np
import pytest

import nhwc_onnx
from nhwc_onnx.errors import VerificationError
from nhwc_onnx.options import ConvertOptions
from nhwc_onnx.verification.compare import compare, to_converted_layout, to_source_layout

CAFFE_NET = """
name: "tiny"
input: "data"
input_shape { dim: 2 dim: 3 dim: 9 dim: 7 }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 stride: 2 } }
layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "conv" }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool"
        pooling_param { pool: AVE kernel_size: 2 stride: 2 } }
layer { name: "fc" type: "InnerProduct" bottom: "pool" top: "fc"
        inner_product_param { num_output: 5 } }
"""


def test_compare_reports_errors_relative_to_the_output_scale():
    ref = np.array([[1.0, -4.0], [2.0, 0.5]], np.float32)
    act = ref + np.array([[0.0, 0.002], [0.0, 0.0]], np.float32)
    c = compare("y", ref, act, atol=1e-4, rtol=1e-4)
    assert c.max_abs_error == pytest.approx(0.002, rel=1e-4)
    assert c.max_rel_error == pytest.approx(0.002 / 4.0, rel=1e-4)
    assert not c.within  # 0.002 > 1e-4 + 1e-4 * 4
    assert compare("y", ref, act, atol=0.0, rtol=1e-3).within  # 0.002 <= 1e-3 * 4
    assert 0.99999 < c.cosine <= 1.0


def test_cosine_keeps_the_sign_of_a_negated_tensor():
    ref = np.array([[1.0, -4.0], [2.0, 0.5]], np.float32)
    assert compare("y", ref, -ref).cosine == pytest.approx(-1.0, abs=1e-12)
    orthogonal = compare("y", np.array([1.0, 0.0]), np.array([0.0, 1.0]))
    assert orthogonal.cosine == pytest.approx(0.0, abs=1e-12)


def test_compare_shape_mismatch_and_nan_fail():
    assert not compare("y", np.zeros((2, 3)), np.zeros((3, 2))).within
    ref = np.array([1.0, np.nan])
    assert not compare("y", ref, np.array([1.0, 2.0])).within
    assert compare("y", ref, ref.copy()).within


def test_layout_helpers_are_inverse():
    x = np.arange(2 * 3 * 5 * 7).reshape(2, 3, 5, 7)
    perm = [0, 2, 3, 1]
    ours = to_converted_layout(x, perm)
    assert ours.shape == (2, 5, 7, 3)
    assert ours[1, 4, 6, 2] == x[1, 2, 4, 6]
    np.testing.assert_array_equal(to_source_layout(ours, perm), x)


def test_caffe_with_random_weights_matches_opencv(tmp_path):
    proto = tmp_path / "tiny.prototxt"
    proto.write_text(CAFFE_NET)
    options = ConvertOptions(weights="random", seed=3)
    result = nhwc_onnx.convert(proto, tmp_path / "tiny.onnx", options=options)
    report = nhwc_onnx.verify(proto, result.model, options=options, seed=5)
    assert report.ok, report.to_dict()
    assert [c.name for c in report.outputs] == ["fc"]
    assert report.outputs[0].source_shape == [2, 5]
    assert report.outputs[0].max_rel_error < 1e-5


def test_verification_error_when_the_model_is_wrong(tmp_path):
    proto = tmp_path / "tiny.prototxt"
    proto.write_text(CAFFE_NET)
    options = ConvertOptions(weights="random", seed=3)
    result = nhwc_onnx.convert(proto, None, options=options)
    dense = next(n for n in result.model.graph.nodes if n.op == "Dense")
    bias = dense.inputs[2]
    bias.set_const(bias.const + np.float32(0.5))
    with pytest.raises(VerificationError, match="fc"):
        nhwc_onnx.verify(proto, result.model, options=options, raise_on_failure=True)


@pytest.mark.slow
def test_keras_file_is_verified_against_tensorflow(tmp_path):
    import tensorflow as tf

    keras = tf.keras
    inp = keras.Input((9, 7, 3))
    x = keras.layers.Conv2D(4, 3, strides=2, padding="same", activation="relu")(inp)
    x = keras.layers.DepthwiseConv2D(3, padding="same")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    out = keras.layers.Dense(5)(x)
    path = tmp_path / "m.keras"
    keras.Model(inp, out).save(path)
    result = nhwc_onnx.convert(path, tmp_path / "m.onnx")
    report = nhwc_onnx.verify(path, tmp_path / "m.onnx", seed=1)
    assert report.ok, report.to_dict()
    assert report.outputs[0].source_shape == [1, 5]
    assert result.report.framework == "tf"


@pytest.mark.slow
@pytest.mark.parametrize("aux_channels", [3, 2])  # a list of them: Keras warned / failed
def test_keras_dict_inputs_are_fed_in_the_structure_the_model_takes(tmp_path, aux_channels):
    """Inputs declared as a dict, in an order other than their sorted names: converted,
    verified and checked against the model called by hand, without Keras' warning that the
    structure of its inputs does not match."""
    import subprocess
    import sys

    import tensorflow as tf

    keras = tf.keras
    keras.utils.set_random_seed(3)
    img, aux = keras.Input((5, 4, 3), name="img"), keras.Input((5, 4, aux_channels), name="aux")
    joined = keras.layers.Concatenate()([keras.layers.Conv2D(3, 3, padding="same")(img), aux])
    out = keras.layers.Conv2D(2, 1, name="out")(joined)
    model = keras.Model({"img": img, "aux": aux}, out)
    path = tmp_path / "dict.keras"
    model.save(path)
    converted = tmp_path / "dict.onnx"
    proc = subprocess.run([sys.executable, "-m", "nhwc_onnx.cli", "convert", path, "-o",
                           converted, "--verify", "--batch", "2"],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "verification: MATCH" in proc.stdout
    assert "structure of `inputs`" not in proc.stderr + proc.stdout, proc.stderr
    rng = np.random.default_rng(0)
    feeds = {"img": rng.uniform(-1, 1, (2, 5, 4, 3)).astype(np.float32),
             "aux": rng.uniform(-1, 1, (2, 5, 4, aux_channels)).astype(np.float32)}
    expected = np.asarray(model(feeds, training=False))
    from nhwc_onnx.runtime import run
    from nhwc_onnx.serialize import load

    ours = load(converted)
    names = {v.name: v.name for v in ours.graph.inputs}
    assert set(names) == {"img", "aux"}, names
    got = run(ours, feeds)
    (value,) = got.values()
    np.testing.assert_allclose(value, expected, rtol=1e-4, atol=1e-4)


def _two_output_net(path):
    """x -> conv_a -> ya and x -> conv_b -> yb: two outputs with independent weights."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(15)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), n)
             for n in ("wa", "wb")]
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "wa"], ["ya"], name="conv_a", pads=[1, 1, 1, 1]),
         helper.make_node("Conv", ["x", "wb"], ["yb"], name="conv_b", pads=[1, 1, 1, 1])],
        "two", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 7, 5])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("ya", "yb")], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_one_wrong_output_of_two_makes_the_verdict_a_mismatch(tmp_path):
    from nhwc_onnx.serialize import save
    from tests.cli_runner import run_cli

    src = _two_output_net(tmp_path / "two.onnx")
    result = nhwc_onnx.convert(src, None)
    good = nhwc_onnx.verify(src, result.model)
    assert good.ok and [c.within for c in good.outputs] == [True, True]
    conv_b = next(n for n in result.model.graph.nodes if n.name == "conv_b")
    weight = conv_b.inputs[1]
    weight.set_const(weight.const * np.float32(1.01))
    report = nhwc_onnx.verify(src, result.model)
    assert {c.name: c.within for c in report.outputs} == {"ya": True, "yb": False}
    assert report.ok is False and report.to_dict()["ok"] is False
    out = save(result.model, tmp_path / "two.nhwc.onnx")
    cli_result = run_cli("verify", src, out)
    assert cli_result.exit_code == 3, cli_result.output
    assert "MISMATCH" in cli_result.output
