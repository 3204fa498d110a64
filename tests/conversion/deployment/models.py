"""Small source models as users ship them, for the naming, preprocessing and info tests:
ONNX graphs written as PyTorch's exporter writes them (NCHW input, padded Conv right after
it), a Caffe net with its weights, a Keras model with named inputs and output layers and a
SavedModel whose signature has named keys. Dimensions are distinct (N 2, C 3, H 7, W 5)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

N, C, H, W = 2, 3, 7, 5
ORT_IR_VERSION = 8


def _rand(rng, *shape, scale=0.5):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def onnx_conv_net(path: Path, *, input_name="input", output_name="output", seed=0,
                  batch=N, nhwc_input=False, unsupported=None) -> Path:
    """input -> Conv 3x3 pads 1 (reads the input's border) -> Relu -> Conv 1x1 -> output.

    ``nhwc_input``: the input is N,H,W,C and a Transpose(0,3,1,2) feeds the conv, as tf2onnx
    writes it. ``unsupported``: an op inserted after the Relu (its name is "odd")."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(_rand(rng, 4, C, 3, 3), "w1"),
             numpy_helper.from_array(_rand(rng, 4), "b1"),
             numpy_helper.from_array(_rand(rng, 6, 4, 1, 1), "w2")]
    first = input_name
    nodes = []
    if nhwc_input:
        nodes.append(helper.make_node("Transpose", [input_name], ["nchw"], name="to_nchw",
                                      perm=[0, 3, 1, 2]))
        first = "nchw"
    nodes += [helper.make_node("Conv", [first, "w1", "b1"], ["conv1_out"], name="conv1",
                               kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
              helper.make_node("Relu", ["conv1_out"], ["relu_out"], name="relu")]
    last = "relu_out"
    if unsupported:
        nodes.append(helper.make_node(unsupported, [last], ["odd_out"], name="odd"))
        last = "odd_out"
    nodes.append(helper.make_node("Conv", [last, "w2"], [output_name], name="conv2",
                                  kernel_shape=[1, 1]))
    in_shape = [batch, H, W, C] if nhwc_input else [batch, C, H, W]
    graph = helper.make_graph(
        nodes, "net", [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, in_shape)],
        [helper.make_tensor_value_info(output_name, TensorProto.FLOAT, [batch, 6, H, W])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = ORT_IR_VERSION
    onnx.save(model, path)
    return path


def onnx_two_input_net(path: Path) -> Path:
    """Two image inputs a and b (both 1x3x7x5), y = conv(a) + conv(b), and z = a + 1 (a
    second output)."""
    rng = np.random.default_rng(4)
    inits = [numpy_helper.from_array(_rand(rng, 4, C, 3, 3), "wa"),
             numpy_helper.from_array(_rand(rng, 4, C, 3, 3), "wb"),
             numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "one")]
    nodes = [helper.make_node("Conv", ["a", "wa"], ["ca"], name="conv_a", kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["b", "wb"], ["cb"], name="conv_b", kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["ca", "cb"], ["y"], name="sum"),
             helper.make_node("Add", ["a", "one"], ["z"], name="plus_one")]
    info = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, "two", [info("a", TensorProto.FLOAT, [1, C, H, W]),
                       info("b", TensorProto.FLOAT, [1, C, H, W])],
        [info("y", TensorProto.FLOAT, [1, 4, H, W]), info("z", TensorProto.FLOAT, [1, C, H, W])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = ORT_IR_VERSION
    onnx.save(model, path)
    return path


def run_onnxruntime(path: Path, feeds: dict) -> dict:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


CAFFE_NET = f"""
name: "bgr_net"
input: "data"
input_shape {{ dim: 1 dim: {C} dim: {H} dim: {W} }}
layer {{ name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param {{ num_output: 4 kernel_size: 3 pad: 1 }} }}
layer {{ name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }}
layer {{ name: "fc" type: "InnerProduct" bottom: "conv1" top: "fc"
        inner_product_param {{ num_output: 5 }} }}
layer {{ name: "prob" type: "Softmax" bottom: "fc" top: "prob" }}
"""


def keras_classifier(path: Path, *, duplicate_output=False, dict_outputs=False) -> Path:
    """Input(name="img") 7x5x3 -> Conv2D SAME -> GlobalAveragePooling -> Dense "probs"."""
    import keras

    keras.utils.set_random_seed(1)
    img = keras.Input((H, W, C), name="img")
    x = keras.layers.Conv2D(4, 3, padding="same", name="conv")(img)
    x = keras.layers.GlobalAveragePooling2D(name="pool")(x)
    probs = keras.layers.Dense(5, activation="softmax", name="probs")(x)
    if dict_outputs:
        logits = keras.layers.Dense(2, name="box")(x)
        model = keras.Model(img, {"scores": probs, "boxes": logits})
    elif duplicate_output:
        model = keras.Model(img, [probs, probs])
    else:
        model = keras.Model(img, probs)
    model.save(path)
    return path


def saved_model(path: Path) -> Path:
    """A SavedModel whose serving signature maps 'pixels' to 'scores' (N,4) and 'mask'
    (N,7,5,4): outputs of different shapes, so a wrong pairing cannot pass."""
    import tensorflow as tf

    class Module(tf.Module):
        def __init__(self):
            super().__init__()
            rng = np.random.default_rng(2)
            self.w = tf.Variable(_rand(rng, 3, 3, C, 4))

        @tf.function(input_signature=[tf.TensorSpec([1, H, W, C], tf.float32, name="pixels")])
        def serve(self, pixels):
            y = tf.nn.relu(tf.nn.conv2d(pixels, self.w, 1, "SAME"))
            return {"scores": tf.reduce_mean(y, [1, 2]), "mask": y}

    module = Module()
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    return path
