"""Keras layers frozen to GraphDefs: the core model (numpy reference) vs TensorFlow, and, once
the pass pipeline exists, the NHWC dialect model (onnxruntime) vs TensorFlow."""
from __future__ import annotations

import numpy as np
import pytest

from tests.core_reference import run_core
from tests.frontends.tensorflow.tf_helpers import close, freeze_keras, load_bytes, rand, run_dialect

SHAPE = (2, 7, 5, 3)


def _layers():
    import keras

    L = keras.layers
    return {
        "conv_transpose_same": [L.Conv2DTranspose(4, 3, strides=2, padding="same")],
        "conv_transpose_valid": [L.Conv2DTranspose(2, (2, 3), strides=(2, 1), padding="valid")],
        "upsampling_nearest": [L.UpSampling2D((2, 3), interpolation="nearest")],
        "upsampling_bilinear": [L.UpSampling2D((3, 2), interpolation="bilinear")],
        "zero_padding": [L.ZeroPadding2D(((1, 2), (0, 3)))],
        "cropping": [L.Cropping2D(((1, 2), (2, 0)))],
        "separable_conv": [L.SeparableConv2D(5, 3, padding="same", depth_multiplier=2)],
        "depthwise_conv": [L.DepthwiseConv2D((3, 2), strides=2, padding="valid")],
        "leaky_relu": [L.LeakyReLU(negative_slope=0.15)],
        "prelu": [L.PReLU(alpha_initializer=keras.initializers.RandomUniform(0.1, 0.5))],
        "elu": [L.ELU(alpha=1.0)],
        "flatten_dense": [L.Flatten(), L.Dense(6)],
        "global_max_pool": [L.GlobalMaxPooling2D()],
        "global_avg_pool_keepdims": [L.GlobalAveragePooling2D(keepdims=True)],
        "avg_pool_same": [L.AveragePooling2D((3, 2), strides=2, padding="same")],
        "avg_pool_valid": [L.AveragePooling2D((2, 3), strides=(1, 2), padding="valid")],
        "max_pool_same": [L.MaxPooling2D(3, strides=2, padding="same")],
        "reshape": [L.Reshape((5, 7, 3))],
        "batch_norm": [L.BatchNormalization(
            moving_mean_initializer=keras.initializers.RandomUniform(-0.5, 0.5),
            moving_variance_initializer=keras.initializers.RandomUniform(0.5, 1.5),
            gamma_initializer=keras.initializers.RandomUniform(0.5, 1.5),
            beta_initializer=keras.initializers.RandomUniform(-0.5, 0.5))],
        "conv_relu6": [L.Conv2D(4, 3, padding="same", dilation_rate=2), L.ReLU(6.0)],
    }


def build_model(case: str):
    import keras

    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input(SHAPE[1:])] + _layers()[case])
    return model


def build_graph_model(case: str):
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(4)
    L = keras.layers
    x = keras.Input(SHAPE[1:])
    a = L.Conv2D(4, 1)(x)
    b = L.Conv2D(4, 3, padding="same")(x)
    if case == "concatenate":
        y = L.Concatenate()([a, x, b])
    elif case == "add":
        y = L.Add()([a, b])
    elif case == "multiply":
        y = L.Multiply()([a, b])
    else:  # space_to_depth on an even-sized crop
        y = L.Lambda(lambda t: tf.nn.space_to_depth(t[:, :6, :4, :], 2))(x)
    return keras.Model(x, y)


LAYER_CASES = sorted(_layers_names := [
    "conv_transpose_same", "conv_transpose_valid", "upsampling_nearest", "upsampling_bilinear",
    "zero_padding", "cropping", "separable_conv", "depthwise_conv", "leaky_relu", "prelu", "elu",
    "flatten_dense", "global_max_pool", "global_avg_pool_keepdims", "avg_pool_same",
    "avg_pool_valid", "max_pool_same", "reshape", "batch_norm", "conv_relu6"])
GRAPH_CASES = ["concatenate", "add", "multiply", "space_to_depth"]


def convert_and_compare(tmp_path, model):
    x = rand(*SHAPE, seed=11)
    data, frozen = freeze_keras(model, SHAPE)
    core = load_bytes(tmp_path, data, outputs=[t.name for t in frozen.outputs])
    want = model(x, training=False)
    want = np.asarray(want)
    got = run_core(core, {"x": x})[core.graph.outputs[0].name]
    close(got, want)
    return core, x, want


@pytest.mark.parametrize("case", LAYER_CASES)
def test_keras_layer_core(tmp_path, case):
    convert_and_compare(tmp_path, build_model(case))


@pytest.mark.parametrize("case", GRAPH_CASES)
def test_keras_merge_core(tmp_path, case):
    convert_and_compare(tmp_path, build_graph_model(case))


@pytest.mark.parametrize("case", LAYER_CASES + GRAPH_CASES)
def test_keras_to_dialect(tmp_path, case):
    model = build_model(case) if case in LAYER_CASES else build_graph_model(case)
    core, x, want = convert_and_compare(tmp_path, model)
    got = run_dialect(core, {"x": x})
    close(got[0], want)
    assert "Transpose" not in core.graph.op_counts()
    assert all(n.domain == "nhwc" for n in core.graph)
