"""Small valid source models of every format, built in code (bytes, no files read).

Each is a short convolutional net with dimensions that all differ (N=2, C=3, H=7, W=5), so a
mix-up of axes shows. The TensorFlow graph is built with the converter's own GraphDef proto
module: no TensorFlow import, so the fuzzer can build thousands of variants quickly.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from nhwc_onnx.frontends.caffe.writer import write_caffemodel
from nhwc_onnx.frontends.tensorflow.proto import tf_graph_pb2

N, C, H, W = 2, 3, 7, 5
TF_FLOAT, TF_INT32 = 1, 3


# -- ONNX -----------------------------------------------------------------------------------


def onnx_model() -> onnx.ModelProto:
    """Conv -> BatchNorm -> Relu -> MaxPool -> Reshape -> Gemm -> Softmax, NCHW, opset 13."""
    rng = np.random.default_rng(11)

    def f32(name, *shape):
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    inits = [
        f32("conv.w", 4, C, 3, 3), f32("conv.b", 4),
        f32("bn.scale", 4), f32("bn.bias", 4), f32("bn.mean", 4),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, 4).astype(np.float32), "bn.var"),
        numpy_helper.from_array(np.array([N, -1], np.int64), "flat.shape"),
        f32("fc.w", 6, 4 * 3 * 2), f32("fc.b", 6),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "conv.w", "conv.b"], ["c"], name="conv",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "bn.scale", "bn.bias", "bn.mean",
                                                "bn.var"], ["b"], name="bn", epsilon=1e-5),
        helper.make_node("Relu", ["b"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Reshape", ["p", "flat.shape"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc.w", "fc.b"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["y"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "rel_onnx", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, C, H, W])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, 6])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="reliability-tests")
    model.ir_version = 8
    return model


def onnx_bytes() -> bytes:
    return onnx_model().SerializeToString()


# -- TensorFlow -----------------------------------------------------------------------------


def _tf_const(graph, name: str, array: np.ndarray) -> None:
    node = graph.node.add(name=name, op="Const")
    dtype = TF_INT32 if array.dtype == np.int32 else TF_FLOAT
    node.attr["dtype"].type = dtype
    tensor = node.attr["value"].tensor
    tensor.dtype = dtype
    for d in array.shape:
        tensor.tensor_shape.dim.add(size=d)
    tensor.tensor_content = array.astype("<i4" if dtype == TF_INT32 else "<f4").tobytes()


def _tf_node(graph, name: str, op: str, inputs: list[str], **attrs):
    node = graph.node.add(name=name, op=op)
    node.input.extend(inputs)
    node.attr["T"].type = TF_FLOAT
    for key, value in attrs.items():
        if isinstance(value, str):
            node.attr[key].s = value.encode()
        elif isinstance(value, list):
            node.attr[key].list.i.extend(value)
        elif isinstance(value, bool):
            node.attr[key].b = value
        elif isinstance(value, float):
            node.attr[key].f = value
        elif isinstance(value, int):
            node.attr[key].i = value
    return node


def tf_graphdef() -> tf_graph_pb2.GraphDef:
    """Placeholder -> Conv2D(SAME) -> BiasAdd -> Relu -> MaxPool -> Reshape -> MatMul ->
    Softmax, NHWC, frozen (weights as Const nodes)."""
    rng = np.random.default_rng(12)
    g = tf_graph_pb2.GraphDef()
    x = g.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = TF_FLOAT
    for d in (N, H, W, C):
        x.attr["shape"].shape.dim.add(size=d)
    _tf_const(g, "conv/w", rng.standard_normal((3, 3, C, 4)).astype(np.float32))
    _tf_const(g, "conv/b", rng.standard_normal(4).astype(np.float32))
    _tf_node(g, "conv", "Conv2D", ["x", "conv/w"], strides=[1, 1, 1, 1], padding="SAME",
             data_format="NHWC")
    _tf_node(g, "bias", "BiasAdd", ["conv", "conv/b"], data_format="NHWC")
    _tf_node(g, "relu", "Relu", ["bias"])
    _tf_node(g, "pool", "MaxPool", ["relu"], ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1],
             padding="VALID", data_format="NHWC")
    _tf_const(g, "flat/shape", np.array([N, -1], np.int32))
    reshape = _tf_node(g, "flat", "Reshape", ["pool", "flat/shape"])
    reshape.attr["Tshape"].type = TF_INT32
    _tf_const(g, "fc/w", rng.standard_normal((4 * 3 * 2, 6)).astype(np.float32))
    _tf_node(g, "fc", "MatMul", ["flat", "fc/w"], transpose_a=False, transpose_b=False)
    _tf_node(g, "y", "Softmax", ["fc"])
    return g


def tf_zoo_graphdef() -> tf_graph_pb2.GraphDef:
    """More op types for the fuzzer: FusedBatchNormV3, Relu6, DepthwiseConv2dNative, Pad,
    MaxPool, ConcatV2, ResizeBilinear, SpaceToDepth, Mean, StridedSlice, MatMul, Softmax."""
    rng = np.random.default_rng(14)
    g = tf_graph_pb2.GraphDef()
    x = g.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = TF_FLOAT
    for d in (N, 8, 6, C):
        x.attr["shape"].shape.dim.add(size=d)

    def const(name, array):
        _tf_const(g, name, np.asarray(array))

    const("conv/w", rng.standard_normal((3, 3, C, 4)).astype(np.float32))
    _tf_node(g, "conv", "Conv2D", ["x", "conv/w"], strides=[1, 1, 1, 1], padding="SAME",
             data_format="NHWC")
    for name, lo in (("scale", 0.5), ("offset", -0.5), ("mean", -0.5), ("var", 0.5)):
        const(f"bn/{name}", rng.uniform(lo, lo + 1.0, 4).astype(np.float32))
    bn = _tf_node(g, "bn", "FusedBatchNormV3", ["conv", "bn/scale", "bn/offset", "bn/mean",
                                                 "bn/var"], epsilon=0.001, data_format="NHWC",
                  is_training=False)
    bn.attr["U"].type = TF_FLOAT
    _tf_node(g, "relu6", "Relu6", ["bn"])
    const("dw/w", rng.standard_normal((3, 3, 4, 1)).astype(np.float32))
    _tf_node(g, "dw", "DepthwiseConv2dNative", ["relu6", "dw/w"], strides=[1, 1, 1, 1],
             padding="SAME", data_format="NHWC")
    const("pad/p", np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32))
    pad = _tf_node(g, "pad", "Pad", ["dw", "pad/p"])
    pad.attr["Tpaddings"].type = TF_INT32
    _tf_node(g, "pool", "MaxPool", ["pad"], ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1],
             padding="VALID", data_format="NHWC")
    const("cat/axis", np.array(3, np.int32))
    cat = _tf_node(g, "cat", "ConcatV2", ["relu6", "pool", "cat/axis"], N=2)
    cat.attr["Tidx"].type = TF_INT32
    const("up/size", np.array([16, 12], np.int32))
    _tf_node(g, "up", "ResizeBilinear", ["cat", "up/size"], align_corners=False,
             half_pixel_centers=True)
    _tf_node(g, "s2d", "SpaceToDepth", ["up"], block_size=2, data_format="NHWC")
    const("mean/axes", np.array([1, 2], np.int32))
    mean = _tf_node(g, "mean", "Mean", ["s2d", "mean/axes"], keep_dims=False)
    mean.attr["Tidx"].type = TF_INT32
    for name, value in (("begin", [0, 0]), ("end", [N, 16]), ("strides", [1, 1])):
        const(f"slice/{name}", np.array(value, np.int32))
    sl = _tf_node(g, "slice", "StridedSlice", ["mean", "slice/begin", "slice/end",
                                                "slice/strides"], begin_mask=0, end_mask=0)
    sl.attr["Index"].type = TF_INT32
    const("fc/w", rng.standard_normal((16, 5)).astype(np.float32))
    _tf_node(g, "fc", "MatMul", ["slice", "fc/w"], transpose_a=False, transpose_b=False)
    _tf_node(g, "y", "Softmax", ["fc"])
    return g


def tf_bytes() -> bytes:
    return tf_graphdef().SerializeToString()


def tf_text() -> str:
    from google.protobuf import text_format

    return text_format.MessageToString(tf_graphdef())


# -- Caffe ----------------------------------------------------------------------------------

CAFFE_PROTOTXT = f"""\
name: "rel_caffe"
layer {{ name: "data" type: "Input" top: "data"
  input_param {{ shape {{ dim: {N} dim: {C} dim: {H} dim: {W} }} }} }}
layer {{ name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param {{ num_output: 4 kernel_size: 3 pad: 1 }} }}
layer {{ name: "relu" type: "ReLU" bottom: "conv" top: "conv" }}
layer {{ name: "pool" type: "Pooling" bottom: "conv" top: "pool"
  pooling_param {{ pool: MAX kernel_size: 2 stride: 2 }} }}
layer {{ name: "fc" type: "InnerProduct" bottom: "pool" top: "fc"
  inner_product_param {{ num_output: 6 }} }}
layer {{ name: "prob" type: "Softmax" bottom: "fc" top: "prob" }}
"""
# More layer types for the fuzzer (converted with --weights random).
CAFFE_ZOO_PROTOTXT = f"""\
name: "rel_caffe_zoo"
input: "data"
input_shape {{ dim: {N} dim: {C} dim: 8 dim: 6 }}
layer {{ name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param {{ num_output: 4 kernel_size: 3 pad: 1 bias_term: false }} }}
layer {{ name: "bn1" type: "BatchNorm" bottom: "conv1" top: "conv1"
  batch_norm_param {{ use_global_stats: true eps: 0.001 }} }}
layer {{ name: "scale1" type: "Scale" bottom: "conv1" top: "conv1" \
scale_param {{ bias_term: true }} }}
layer {{ name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }}
layer {{ name: "dw" type: "Convolution" bottom: "conv1" top: "dw"
  convolution_param {{ num_output: 4 group: 4 kernel_size: 3 pad: 1 }} }}
layer {{ name: "prelu" type: "PReLU" bottom: "dw" top: "dw" }}
layer {{ name: "sum" type: "Eltwise" bottom: "conv1" bottom: "dw" top: "sum"
  eltwise_param {{ operation: SUM coeff: 1 coeff: -0.5 }} }}
layer {{ name: "cat" type: "Concat" bottom: "conv1" bottom: "sum" top: "cat" \
concat_param {{ axis: 1 }} }}
layer {{ name: "slice" type: "Slice" bottom: "cat" top: "s1" top: "s2"
  slice_param {{ axis: 1 slice_point: 3 }} }}
layer {{ name: "sig" type: "Sigmoid" bottom: "s1" top: "s1" }}
layer {{ name: "pow" type: "Power" bottom: "s2" top: "s2" \
power_param {{ power: 2 scale: 0.5 shift: 1 }} }}
layer {{ name: "cat2" type: "Concat" bottom: "s1" bottom: "s2" top: "cat2" }}
layer {{ name: "up" type: "Deconvolution" bottom: "cat2" top: "up"
  convolution_param {{ num_output: 4 kernel_size: 2 stride: 2 }} }}
layer {{ name: "pool" type: "Pooling" bottom: "up" top: "pool"
  pooling_param {{ pool: AVE kernel_size: 2 stride: 2 }} }}
layer {{ name: "drop" type: "Dropout" bottom: "pool" top: "pool" \
dropout_param {{ dropout_ratio: 0.5 }} }}
layer {{ name: "perm" type: "Permute" bottom: "pool" top: "perm" \
permute_param {{ order: 0 order: 2 order: 3 order: 1 }} }}
layer {{ name: "flat" type: "Flatten" bottom: "perm" top: "flat" }}
layer {{ name: "fc" type: "InnerProduct" bottom: "flat" top: "fc" \
inner_product_param {{ num_output: 5 }} }}
layer {{ name: "prob" type: "Softmax" bottom: "fc" top: "prob" }}
"""

# Caffe pools in ceil mode: 7x5 -> 4x3, so the InnerProduct sees 4*4*3 = 48 values.
CAFFE_FC_IN = 4 * 4 * 3


def caffe_layers(seed: int = 13) -> list[tuple[str, str, list[np.ndarray]]]:
    rng = np.random.default_rng(seed)
    return [
        ("conv", "Convolution", [rng.standard_normal((4, C, 3, 3)), rng.standard_normal(4)]),
        ("fc", "InnerProduct", [rng.standard_normal((6, CAFFE_FC_IN)), rng.standard_normal(6)]),
    ]


def caffemodel_bytes(layers=None, tmp_dir: Path | None = None) -> bytes:
    """The binary .caffemodel of ``layers`` (default: the weights of CAFFE_PROTOTXT)."""
    import tempfile

    with tempfile.TemporaryDirectory(dir=tmp_dir) as d:
        path = Path(d) / "w.caffemodel"
        write_caffemodel(path, caffe_layers() if layers is None else layers, net_name="rel")
        return path.read_bytes()


# -- writing ----------------------------------------------------------------------------------


def write_source(folder: Path, fmt: str) -> tuple[Path, list[str]]:
    """Write the valid model of ``fmt`` into ``folder``: (source path, extra CLI args)."""
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "onnx":
        path = folder / "model.onnx"
        path.write_bytes(onnx_bytes())
        return path, []
    if fmt == "tf":
        path = folder / "model.pb"
        path.write_bytes(tf_bytes())
        return path, []
    if fmt == "caffe":
        path = folder / "deploy.prototxt"
        path.write_text(CAFFE_PROTOTXT)
        weights = folder / "weights.caffemodel"
        weights.write_bytes(caffemodel_bytes())
        return path, ["--weights", str(weights)]
    raise ValueError(fmt)
