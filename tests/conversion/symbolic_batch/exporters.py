"""ONNX graphs with a dynamic batch, written node for node and attribute for attribute as the
exporters users run write them (PyTorch is not installed here): TorchScript (opsets 13 and
17, ``dynamic_axes``), the dynamo exporter (opset 18, ``dynamic_shapes``) and tf2onnx (an NHWC
input and a Transpose, ``unk__<n>`` dims). Every dimension differs (3, 5, 7, 8 ...) so a layout
mix-up cannot hide."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

H, W = 10, 14  # input height and width (odd, distinct)


def _weights(rng, name: str, *shape) -> onnx.TensorProto:
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)


def _ints(name: str, values) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def _const_node(output: str, values, name: str) -> onnx.NodeProto:
    array = np.asarray(values, np.int64)
    return helper.make_node("Constant", [], [output], name=name,
                            value=numpy_helper.from_array(array, ""))


def _model(nodes, inputs, outputs, inits, opset: int, ir_version: int = 8) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "main_graph", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="pytorch")
    model.ir_version = ir_version
    return model


def torchscript(opset: int, *, batch: str = "batch", flatten: str = "view") -> onnx.ModelProto:
    """``torch.onnx.export(Net(), x, dynamic_axes={"input": {0: "batch"}, "output": {0:
    "batch"}}, do_constant_folding=True)`` of conv-bn(folded)-relu-maxpool-conv-relu, then
    ``x.view(x.size(0), -1)`` (flatten="view": Shape -> Gather(0) -> Unsqueeze -> Concat
    -> Reshape) or ``torch.flatten(x, 1)`` (flatten="flatten": Flatten), and a Linear (Gemm)."""
    rng = np.random.default_rng(opset)
    h2, w2 = H // 2, W // 2
    h3, w3 = (h2 + 1) // 2, (w2 + 1) // 2
    features = 6 * h3 * w3
    inits = [_weights(rng, "onnx::Conv_40", 8, 3, 3, 3), _weights(rng, "onnx::Conv_41", 8),
             _weights(rng, "onnx::Conv_43", 6, 8, 3, 3), _weights(rng, "onnx::Conv_44", 6),
             _weights(rng, "fc.weight", 5, features), _weights(rng, "fc.bias", 5)]
    conv = {"dilations": [1, 1], "group": 1, "kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    nodes = [
        helper.make_node("Conv", ["input", "onnx::Conv_40", "onnx::Conv_41"],
                         ["/conv1/Conv_output_0"], name="/conv1/Conv", strides=[1, 1], **conv),
        helper.make_node("Relu", ["/conv1/Conv_output_0"], ["/relu/Relu_output_0"],
                         name="/relu/Relu"),
        helper.make_node("MaxPool", ["/relu/Relu_output_0"], ["/pool/MaxPool_output_0"],
                         name="/pool/MaxPool", ceil_mode=0, kernel_shape=[2, 2],
                         pads=[0, 0, 0, 0], strides=[2, 2],
                         **({"dilations": [1, 1]} if opset >= 12 else {})),
        helper.make_node("Conv", ["/pool/MaxPool_output_0", "onnx::Conv_43", "onnx::Conv_44"],
                         ["/conv2/Conv_output_0"], name="/conv2/Conv", strides=[2, 2], **conv),
        helper.make_node("Relu", ["/conv2/Conv_output_0"], ["/relu_1/Relu_output_0"],
                         name="/relu_1/Relu"),
    ]
    if flatten == "view":
        nodes += [
            helper.make_node("Shape", ["/relu_1/Relu_output_0"], ["/Shape_output_0"],
                             name="/Shape"),
            _const_node("/Constant_output_0", 0, "/Constant"),
            helper.make_node("Gather", ["/Shape_output_0", "/Constant_output_0"],
                             ["/Gather_output_0"], name="/Gather", axis=0),
            _const_node("/Constant_1_output_0", [0], "/Constant_1"),
            helper.make_node("Unsqueeze", ["/Gather_output_0", "/Constant_1_output_0"],
                             ["/Unsqueeze_output_0"], name="/Unsqueeze"),
            _const_node("/Constant_2_output_0", [-1], "/Constant_2"),
            helper.make_node("Concat", ["/Unsqueeze_output_0", "/Constant_2_output_0"],
                             ["/Concat_output_0"], name="/Concat", axis=0),
            helper.make_node("Reshape", ["/relu_1/Relu_output_0", "/Concat_output_0"],
                             ["/Reshape_output_0"], name="/Reshape",
                             **({"allowzero": 0} if opset >= 14 else {})),
        ]
        flat = "/Reshape_output_0"
    else:
        nodes.append(helper.make_node("Flatten", ["/relu_1/Relu_output_0"],
                                      ["/Flatten_output_0"], name="/Flatten", axis=1))
        flat = "/Flatten_output_0"
    nodes.append(helper.make_node("Gemm", [flat, "fc.weight", "fc.bias"], ["output"],
                                  name="/fc/Gemm", alpha=1.0, beta=1.0, transB=1))
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, H, W])]
    outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [batch, 5])]
    return _model(nodes, inputs, outputs, inits, opset, ir_version=7 if opset == 13 else 8)


def dynamo(*, batch: str = "s0") -> onnx.ModelProto:
    """``torch.onnx.export(Net(), (x,), dynamo=True, dynamic_shapes={"x": {0: Dim(...)}})``
    at opset 18: ``x.view(-1, K)`` as a Reshape with ``allowzero=1``, ``x.view(x.size(0),
    -1)`` as Shape(start=0, end=1) -> Concat -> Reshape, a channel mean as ReduceMean with
    its axes as an input (opset 18), a softmax over the classes."""
    rng = np.random.default_rng(18)
    h2, w2 = H // 2, W // 2
    features = 4 * h2 * w2
    inits = [_weights(rng, "conv.weight", 4, 3, 3, 3), _weights(rng, "conv.bias", 4),
             _weights(rng, "fc.weight", 5, features), _weights(rng, "fc.bias", 5),
             _weights(rng, "head.weight", 5, features),
             _ints("val_0", [-1, features]), _ints("val_1", [-1]), _ints("val_2", [2, 3])]
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["conv2d"],
                         name="node_conv2d", auto_pad="NOTSET", dilations=[1, 1], group=1,
                         pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("Relu", ["conv2d"], ["relu"], name="node_relu"),
        helper.make_node("MaxPool", ["relu"], ["max_pool2d"], name="node_max_pool2d",
                         auto_pad="NOTSET", ceil_mode=0, dilations=[1, 1], kernel_shape=[2, 2],
                         pads=[0, 0, 0, 0], storage_order=0, strides=[2, 2]),
        helper.make_node("Reshape", ["max_pool2d", "val_0"], ["view"], name="node_view",
                         allowzero=1),
        helper.make_node("Gemm", ["view", "fc.weight", "fc.bias"], ["linear"],
                         name="node_linear", transB=1),
        helper.make_node("Softmax", ["linear"], ["softmax"], name="node_softmax", axis=1),
        helper.make_node("Shape", ["max_pool2d"], ["sym_size_int"], name="node_sym_size_int",
                         start=0, end=1),
        helper.make_node("Concat", ["sym_size_int", "val_1"], ["val_3"], name="node_Concat_3",
                         axis=0),
        helper.make_node("Reshape", ["max_pool2d", "val_3"], ["view_1"], name="node_view_1",
                         allowzero=1),
        helper.make_node("MatMul", ["view_1", "head_t"], ["matmul"], name="node_matmul"),
        helper.make_node("Transpose", ["head.weight"], ["head_t"], name="node_t", perm=[1, 0]),
        helper.make_node("ReduceMean", ["relu", "val_2"], ["mean"], name="node_mean",
                         keepdims=0),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, H, W])]
    outputs = [helper.make_tensor_value_info("softmax", TensorProto.FLOAT, [batch, 5]),
               helper.make_tensor_value_info("matmul", TensorProto.FLOAT, [batch, 5]),
               helper.make_tensor_value_info("mean", TensorProto.FLOAT, [batch, 4])]
    return _model(nodes, inputs, outputs, inits, 18, ir_version=10)


def tf2onnx() -> onnx.ModelProto:
    """``python -m tf2onnx.convert --saved-model ...`` of a Keras Conv2D-MaxPool-Flatten-Dense
    model: an NHWC input with an ``unk__`` batch and a Transpose to NCHW in front of the
    convolution, back to NHWC before Keras' Flatten (a Reshape to [-1, K])."""
    rng = np.random.default_rng(13)
    h2, w2 = H // 2, W // 2
    features = h2 * w2 * 6
    inits = [_weights(rng, "model/conv2d/Conv2D/ReadVariableOp:0", 6, 3, 3, 3),
             _weights(rng, "model/conv2d/BiasAdd/ReadVariableOp:0", 6),
             _ints("const_fold_opt__17", [-1, features]),
             _weights(rng, "model/dense/MatMul/ReadVariableOp:0", features, 7),
             _weights(rng, "model/dense/BiasAdd/ReadVariableOp:0", 7)]
    nodes = [
        helper.make_node("Transpose", ["input_1"], ["model/conv2d/BiasAdd__6:0"],
                         name="model/conv2d/BiasAdd__6", perm=[0, 3, 1, 2]),
        helper.make_node("Conv", ["model/conv2d/BiasAdd__6:0",
                                  "model/conv2d/Conv2D/ReadVariableOp:0",
                                  "model/conv2d/BiasAdd/ReadVariableOp:0"],
                         ["model/conv2d/BiasAdd:0"], name="model/conv2d/BiasAdd",
                         dilations=[1, 1], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         strides=[1, 1]),
        helper.make_node("Relu", ["model/conv2d/BiasAdd:0"], ["model/conv2d/Relu:0"],
                         name="model/conv2d/Relu"),
        helper.make_node("MaxPool", ["model/conv2d/Relu:0"],
                         ["model/max_pooling2d/MaxPool:0"], name="model/max_pooling2d/MaxPool",
                         kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Transpose", ["model/max_pooling2d/MaxPool:0"],
                         ["model/max_pooling2d/MaxPool__10:0"],
                         name="model/max_pooling2d/MaxPool__10", perm=[0, 2, 3, 1]),
        helper.make_node("Reshape", ["model/max_pooling2d/MaxPool__10:0", "const_fold_opt__17"],
                         ["model/flatten/Reshape:0"], name="model/flatten/Reshape"),
        helper.make_node("MatMul", ["model/flatten/Reshape:0",
                                    "model/dense/MatMul/ReadVariableOp:0"],
                         ["model/dense/MatMul:0"], name="model/dense/MatMul"),
        helper.make_node("Add", ["model/dense/MatMul:0", "model/dense/BiasAdd/ReadVariableOp:0"],
                         ["dense"], name="model/dense/BiasAdd"),
    ]
    inputs = [helper.make_tensor_value_info("input_1", TensorProto.FLOAT,
                                            ["unk__12", H, W, 3])]
    outputs = [helper.make_tensor_value_info("dense", TensorProto.FLOAT, ["unk__13", 7])]
    model = _model(nodes, inputs, outputs, inits, 13)
    model.producer_name = "tf2onnx"
    return model


def single(op_nodes, input_shape, inits=(), *, batch: str = "N", opset: int = 13,
           output: str = "y") -> onnx.ModelProto:
    """A small graph: input ``x`` of ``input_shape`` (axis 0 named ``batch``), the nodes, one
    output (shape left to inference)."""
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, *input_shape])]
    outputs = [onnx.ValueInfoProto(name=output, type=helper.make_tensor_type_proto(
        TensorProto.FLOAT, None))]
    return _model(list(op_nodes), inputs, outputs, list(inits), opset)


def ints(name: str, values) -> onnx.TensorProto:
    return _ints(name, values)
