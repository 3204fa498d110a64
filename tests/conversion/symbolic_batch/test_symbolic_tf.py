"""TensorFlow sources with an open batch keep it symbolic: a Keras model (batch None) saved as
.keras and .h5, a SavedModel whose signature is ``TensorSpec([None, ...])``, a frozen graph
with a ``[-1, H, W, C]`` placeholder, ``Reshape(x, [-1, K])`` and a ``tf.shape(x)[0]`` stack.
One converted file against TensorFlow itself at batch 1 and at batch 3. And the batch rule
for every frontend: ``--batch N`` sets axis 0 of every graph input, a fixed TensorFlow or
Caffe batch included."""
from __future__ import annotations

import os

import numpy as np
import pytest

import nhwc_onnx
from nhwc_onnx.options import ConvertOptions
from nhwc_onnx.serialize import load
from tests.conversion.symbolic_batch.helpers import BATCHES, run_converted, run_frozen_graph

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
H, W, C = 10, 14, 3
TOL = 1e-4


def _close(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(1.0, float(np.abs(want).max()))
    assert float(np.abs(got.astype(np.float64) - want).max()) / scale <= TOL


def _x(batch: int) -> np.ndarray:
    return np.random.default_rng(batch).uniform(-1, 1, (batch, H, W, C)).astype(np.float32)


def _keras_model():
    import keras

    keras.utils.set_random_seed(5)
    x = keras.Input((H, W, C), name="img")
    h = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(x)
    h = keras.layers.MaxPooling2D()(h)
    h = keras.layers.Reshape(((H // 2) * (W // 2), 8))(h)  # Keras' Reshape, both ways
    h = keras.layers.Reshape((H // 2, W // 2, 8))(h)
    h = keras.layers.Conv2D(6, 3, strides=2, padding="valid")(h)
    h = keras.layers.AveragePooling2D(2, padding="same")(h)
    h = keras.layers.Flatten()(h)
    return keras.Model(x, keras.layers.Dense(7, name="probs")(h))


def _converted_matches(source, out, run_source) -> None:
    model = load(out)
    assert model.graph.inputs[0].shape == ("N", H, W, C)  # TensorFlow names no batch: N
    assert all(v.shape[0] == "N" for v in model.graph.outputs)
    assert nhwc_onnx.check(out) == {str(out): []}
    name = model.graph.inputs[0].name
    for batch in BATCHES:
        x = _x(batch)
        got = run_converted(out, {name: x})
        [output] = got.values()
        _close(output, run_source(x))


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".keras", ".h5"])
def test_a_keras_model_with_batch_none_keeps_it(tmp_path, suffix):
    model = _keras_model()
    source = tmp_path / f"m{suffix}"
    model.save(source)
    out = tmp_path / "m.onnx"
    result = nhwc_onnx.convert(source, out)
    assert result.report.batch["dim_param"] == "N"
    _converted_matches(source, out, lambda x: model(x, training=False))


@pytest.mark.slow
def test_a_saved_model_signature_with_tensorspec_none_keeps_it(tmp_path):
    import tensorflow as tf

    rng = np.random.default_rng(2)

    class Net(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(rng.standard_normal((3, 3, C, 5)).astype(np.float32))
            self.d = tf.Variable(rng.standard_normal((5, 4)).astype(np.float32))

        @tf.function(input_signature=[tf.TensorSpec([None, H, W, C], tf.float32,
                                                    name="pixels")])
        def serve(self, pixels):
            h = tf.nn.relu(tf.nn.conv2d(pixels, self.w, 1, "SAME"))
            return {"scores": tf.matmul(tf.reduce_mean(h, axis=[1, 2]), self.d)}

    net = Net()
    source = tmp_path / "saved"
    tf.saved_model.save(net, str(source), signatures={"serving_default": net.serve})
    out = tmp_path / "m.onnx"
    nhwc_onnx.convert(source, out)
    served = tf.saved_model.load(str(source)).signatures["serving_default"]
    _converted_matches(source, out, lambda x: served(pixels=tf.constant(x))["scores"])


def _frozen_graph(batch: int | None = None, stack: bool = True) -> bytes:
    """A placeholder [batch or -1, H, W, C]; a conv; ``tf.reshape(h, [-1, K])``; and
    ``tf.reshape(h, tf.stack([tf.shape(h)[0], -1]))``, each to a MatMul; their sum. (With a
    fixed batch TensorFlow folds ``tf.shape(h)[0]`` into the graph as that number: ``stack``
    False leaves it out.)"""
    import tensorflow as tf

    rng = np.random.default_rng(4)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [batch, H, W, C], name="x")
        w = tf.constant(rng.standard_normal((3, 3, C, 4)).astype(np.float32))
        h = tf.nn.relu(tf.nn.conv2d(x, w, [1, 2, 2, 1], "SAME"))
        k = (H // 2) * (W // 2) * 4
        flat = tf.reshape(h, [-1, k])
        stacked = tf.reshape(h, tf.stack([tf.shape(h)[0], -1])) if stack else flat
        d1 = tf.constant(rng.standard_normal((k, 6)).astype(np.float32))
        d2 = tf.constant(rng.standard_normal((k, 6)).astype(np.float32))
        tf.add(tf.matmul(flat, d1), tf.matmul(stacked, d2), name="y")
    return graph.as_graph_def().SerializeToString()


@pytest.mark.slow
def test_a_frozen_graph_with_a_minus_one_placeholder_keeps_it(tmp_path):
    data = _frozen_graph()
    source = tmp_path / "m.pb"
    source.write_bytes(data)
    out = tmp_path / "m.onnx"
    result = nhwc_onnx.convert(source, out)
    assert result.report.batch == {"dim_param": "N", "inputs": ["x"], "outputs": ["y"]}
    assert sorted(result.report.target_ops) == ["Add", "Conv", "Dense", "Relu", "Reshape"]
    _converted_matches(source, out, lambda x: run_frozen_graph(data, x))


@pytest.mark.slow
def test_batch_sets_a_fixed_tensorflow_batch_too(tmp_path):
    """The one rule: a placeholder [2, H, W, C] converted with --batch 3 takes batch 3 (it
    used to be left at 2 with a warning); without --batch it stays 2."""
    data = _frozen_graph(batch=2, stack=False)
    source = tmp_path / "fixed.pb"
    source.write_bytes(data)
    kept = nhwc_onnx.convert(source, tmp_path / "kept.onnx")
    assert kept.model.graph.inputs[0].shape == (2, H, W, C) and kept.report.batch is None
    out = tmp_path / "three.onnx"
    result = nhwc_onnx.convert(source, out, ConvertOptions(batch=3))
    assert result.model.graph.inputs[0].shape == (3, H, W, C)
    assert result.report.warnings == []
    x = _x(3)
    [got] = run_converted(out, {"x": x}).values()
    _close(got, run_frozen_graph(_frozen_graph(stack=False), x))  # same weights, open batch, at 3


def test_a_caffe_net_has_a_fixed_batch_that_batch_replaces(tmp_path):
    """Caffe declares sizes: no symbolic batch; --batch N replaces the declared one (and
    OpenCV, Caffe's runtime here, agrees at that batch)."""
    import cv2

    from nhwc_onnx.frontends.caffe.writer import write_caffemodel

    prototxt = tmp_path / "net.prototxt"
    prototxt.write_text(
        'name: "net"\ninput: "data"\ninput_shape { dim: 2 dim: 3 dim: 9 dim: 11 }\n'
        'layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"\n'
        '  convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }\n'
        'layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }\n'
        'layer { name: "fc" type: "InnerProduct" bottom: "conv" top: "fc"\n'
        '  inner_product_param { num_output: 5 } }\n')
    rng = np.random.default_rng(3)
    blobs = [("conv", "Convolution", [rng.standard_normal((4, 3, 3, 3)), rng.standard_normal(4)]),
             ("fc", "InnerProduct", [rng.standard_normal((5, 4 * 9 * 11)),
                                     rng.standard_normal(5)])]
    caffemodel = tmp_path / "net.caffemodel"
    write_caffemodel(caffemodel, [(n, t, [b.astype(np.float32) for b in bs])
                                  for n, t, bs in blobs])
    options = ConvertOptions(weights=str(caffemodel))
    declared = nhwc_onnx.convert(prototxt, tmp_path / "a.onnx", options)
    assert declared.model.graph.inputs[0].shape == (2, 9, 11, 3)
    assert declared.report.batch is None
    out = tmp_path / "b.onnx"
    three = nhwc_onnx.convert(prototxt, out, options.replace(batch=3))
    assert three.model.graph.inputs[0].shape == (3, 9, 11, 3)
    x = np.random.default_rng(0).uniform(-1, 1, (3, 3, 9, 11)).astype(np.float32)
    net = cv2.dnn.readNetFromCaffe(str(prototxt), str(caffemodel))
    net.setInput(x)
    want = net.forward("fc")
    [got] = run_converted(out, {"data": x}).values()
    _close(got, want)
    # --input-shape data=-1,... opens the declared batch: the same net, symbolic
    opened = tmp_path / "c.onnx"
    result = nhwc_onnx.convert(prototxt, opened, options.replace(
        input_shapes={"data": [-1, 3, 9, 11]}))
    assert result.model.graph.inputs[0].shape == ("N", 9, 11, 3)
    assert result.report.batch == {"dim_param": "N", "inputs": ["data"], "outputs": ["fc"]}
    [got] = run_converted(opened, {"data": x}).values()
    _close(got, want)
