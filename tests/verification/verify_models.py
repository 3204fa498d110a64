"""Small source models for the verification tests, one per frontend, built in code, with the
tensors each shares with its conversion written down by hand (the expectation of --layers)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from nhwc_onnx.serialize import load, save

# x (2,3,11,7) -> conv_a -> relu -> conv_b (+bias, stride 2) -> relu_b -> Flatten -> two Gemm
# heads. The Flatten reads an NHWC-stored map; read by two Dense layers it stays a tensor of
# its own, holding the features in (H, W, C) order where the source has (C, H, W).
ONNX_SHARED = ["c1", "r1", "c2", "r2", "flat", "y", "y2"]
ONNX_CONV_B = "c2"


def onnx_net(path: Path, *, input_name: str = "x", static: bool = True) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    shapes = (("w1", (8, 3, 3, 3)), ("w2", (16, 8, 3, 3)), ("b2", (16,)), ("wf", (5, 240)),
              ("bf", (5,)), ("wg", (3, 240)))
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.3, n)
             for n, s in shapes]
    nodes = [
        helper.make_node("Conv", [input_name, "w1"], ["c1"], name="conv_a", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv_b", strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu_b"),
        helper.make_node("Flatten", ["r2"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "wf", "bf"], ["y"], name="fc", transB=1),
        helper.make_node("Gemm", ["flat", "wg"], ["y2"], name="fc2", transB=1),
    ]
    dims = [2, 3, 11, 7] if static else ["N", 3, 11, 7]
    graph = helper.make_graph(
        nodes, "net", [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "y2")],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


# data -> conv_a -> bn, scale, relu (all in place: their versions are named after the layers)
# -> conv_b -> pool -> fc. BatchNorm and Scale fold into conv_a, whose output is then the
# Scale's version of the blob.
CAFFE_NET = """
name: "net"
input: "data"
input_shape { dim: 2 dim: 3 dim: 11 dim: 7 }
layer { name: "conv_a" type: "Convolution" bottom: "data" top: "conv_a"
        convolution_param { num_output: 8 kernel_size: 3 pad: 1 } }
layer { name: "bn" type: "BatchNorm" bottom: "conv_a" top: "conv_a" }
layer { name: "scale" type: "Scale" bottom: "conv_a" top: "conv_a"
        scale_param { bias_term: true } }
layer { name: "relu" type: "ReLU" bottom: "conv_a" top: "conv_a" }
layer { name: "conv_b" type: "Convolution" bottom: "conv_a" top: "conv_b"
        convolution_param { num_output: 16 kernel_size: 3 stride: 2 } }
layer { name: "pool" type: "Pooling" bottom: "conv_b" top: "pool"
        pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "fc" type: "InnerProduct" bottom: "pool" top: "fc"
        inner_product_param { num_output: 5 } }
"""
CAFFE_SHARED = ["scale", "relu", "conv_b", "pool", "fc"]
CAFFE_CONV_B = "conv_b"
CAFFE_ARGS = ("--weights", "random", "--seed", "4")


def caffe_net(path: Path) -> Path:
    path.write_text(CAFFE_NET)
    return path


def keras_model(tf):
    """Conv2D -> ReLU -> Conv2D s2 -> GlobalAveragePooling2D -> Dense, seeded weights."""
    keras = tf.keras
    keras.utils.set_random_seed(32)
    inp = keras.Input((11, 9, 3), name="image")
    x = keras.layers.Conv2D(6, 3, padding="same", name="conv_a")(inp)
    x = keras.layers.ReLU(name="relu")(x)
    x = keras.layers.Conv2D(10, 3, strides=2, name="conv_b")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    out = keras.layers.Dense(5, name="fc")(x)
    return keras.Model(inp, out)


def save_tf_formats(tf, model, folder: Path) -> dict[str, Path]:
    """The model as .keras, SavedModel and frozen .pb."""
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    paths = {"keras": folder / "m.keras", "savedmodel": folder / "saved", "pb": folder / "m.pb"}
    model.save(paths["keras"])
    model.export(paths["savedmodel"], verbose=False)
    spec = [tf.TensorSpec(t.shape, t.dtype, name="image") for t in model.inputs]
    function = tf.function(lambda x: model(x, training=False)).get_concrete_function(*spec)
    frozen = convert_variables_to_constants_v2(function)
    paths["pb"].write_bytes(frozen.graph.as_graph_def().SerializeToString())
    return paths


def scale_conv_weight(converted: Path, node_name: str, out: Path, factor: float = 1.5) -> Path:
    """A copy of ``converted`` with the largest weight of the named Conv node scaled."""
    model = load(converted)
    node = next(n for n in model.graph.nodes if n.name == node_name)
    weight = node.inputs[1]
    changed = np.array(weight.const, copy=True)
    changed.flat[int(np.argmax(np.abs(changed)))] *= np.float32(factor)
    weight.set_const(changed)
    save(model, out)
    return out
