"""ONNX source models that the dialect refuses in part, written the way PyTorch's exporter
writes them (NCHW input, Conv with pads, Gemm transB=1, F.normalize as ReduceL2 / Clip /
Expand(Shape) / Div, GELU as x * 0.5 * (1 + erf(x / sqrt 2)), LayerNormalization at opset
17). Dimensions are distinct: batch 2, channels 3, height 11, width 9."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

N, C, H, W = 2, 3, 11, 9
ORT_IR_VERSION = 8


class Builder:
    """Nodes and initializers of one graph, each tensor named once."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []
        self.count = 0
        self.opsets = []  # other domains the graph uses

    def weight(self, *shape, scale=None) -> str:
        scale = scale if scale is not None else 1.0 / np.sqrt(max(1, int(np.prod(shape[1:]))))
        return self.const((self.rng.standard_normal(shape) * scale).astype(np.float32))

    def const(self, array) -> str:
        self.count += 1
        name = f"p{self.count}"
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op: str, inputs, name: str, outputs: int = 1, **attrs):
        outs = [f"{name}_out" if outputs == 1 else f"{name}_out{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=name, **attrs))
        return outs[0] if outputs == 1 else outs

    def conv(self, x: str, cin: int, cout: int, k: int, name: str, stride=1, group=1) -> str:
        pad = k // 2
        return self.op("Conv", [x, self.weight(cout, cin // group, k, k),
                                self.weight(cout, scale=0.1)], name, kernel_shape=[k, k],
                       pads=[pad] * 4, strides=[stride, stride], group=group)

    def linear(self, x: str, fin: int, fout: int, name: str) -> str:
        """torch.nn.Linear on a rank > 2 tensor: MatMul with W^T, then Add of the bias."""
        y = self.op("MatMul", [x, self.weight(fin, fout)], f"{name}/matmul")
        return self.op("Add", [y, self.weight(fout, scale=0.1)], f"{name}/add")

    def gelu(self, x: str, name: str) -> str:
        d = self.op("Div", [x, self.const(np.float32(np.sqrt(2.0)))], f"{name}/div")
        e = self.op("Erf", [d], f"{name}/erf")
        a = self.op("Add", [e, self.const(np.float32(1.0))], f"{name}/add")
        m = self.op("Mul", [x, a], f"{name}/mul")
        return self.op("Mul", [m, self.const(np.float32(0.5))], f"{name}/mul_1")

    def layer_norm(self, x: str, width: int, name: str) -> str:
        return self.op("LayerNormalization", [x, self.weight(width, scale=1.0),
                                              self.weight(width, scale=0.1)], name, axis=-1,
                       epsilon=1e-5)

    def head(self, x: str, channels: int, classes: int, name: str = "head") -> str:
        g = self.op("GlobalAveragePool", [x], f"{name}/gap")
        f = self.op("Flatten", [g], f"{name}/flatten", axis=1)
        return self.op("Gemm", [f, self.weight(classes, channels), self.weight(classes)],
                       f"{name}/fc", transB=1)

    def l2_normalize(self, x: str, name: str = "normalize") -> str:
        n = self.op("ReduceL2", [x], f"{name}/norm", axes=[1], keepdims=1)
        c = self.op("Clip", [n, self.const(np.float32(1e-12))], f"{name}/clip")
        s = self.op("Shape", [x], f"{name}/shape")
        e = self.op("Expand", [c, s], f"{name}/expand")
        return self.op("Div", [x, e], f"{name}/div")

    def save(self, path: Path, inputs, outputs, opset: int = 13) -> Path:
        def info(item):
            name, shape = item
            return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

        graph = helper.make_graph(self.nodes, "model", [info(i) for i in inputs],
                                  [info(o) for o in outputs], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                        *self.opsets])
        model.ir_version = ORT_IR_VERSION
        onnx.checker.check_model(model)
        onnx.save(model, str(path))
        return path


def _rename_output(b: Builder, tensor: str, name: str) -> str:
    """Make the last node write the graph output ``name``."""
    for node in b.nodes:
        for i, o in enumerate(node.output):
            if o == tensor:
                node.output[i] = name
        for i, t in enumerate(node.input):
            if t == tensor:
                node.input[i] = name
    return name


def l2_embedder(path: Path, batch=N) -> Path:
    """A face-embedder: convs, a linear head, then F.normalize (ReduceL2, Div: refused)."""
    b = Builder(1)
    x = b.conv("input", C, 8, 3, "conv1")
    x = b.op("Relu", [x], "relu1")
    x = b.conv(x, 8, 12, 3, "conv2", stride=2)
    x = b.op("Relu", [x], "relu2")
    e = b.head(x, 12, 7)
    _rename_output(b, b.l2_normalize(e), "embedding")
    return b.save(path, [("input", [batch, C, H, W])], [("embedding", [batch, 7])])


def vit_block(path: Path) -> Path:
    """Patch embedding (a strided Conv), tokens (Flatten + Transpose), a pre-norm MLP block
    with LayerNorm and GELU(Erf) and a residual, a final LayerNorm, mean over tokens, a head."""
    b = Builder(2)
    dim = 16
    x = b.conv("input", C, dim, 3, "patch", stride=2)  # N,16,6,5
    s = b.op("Shape", [x], "tokens/shape")
    nc = b.op("Slice", [s, b.const(np.array([0], np.int64)), b.const(np.array([2], np.int64))],
              "tokens/slice")
    target = b.op("Concat", [nc, b.const(np.array([-1], np.int64))], "tokens/concat", axis=0)
    t = b.op("Reshape", [x, target], "tokens/reshape")  # N,16,30
    t = b.op("Transpose", [t], "tokens/transpose", perm=[0, 2, 1])  # N,30,16
    h = b.layer_norm(t, dim, "block/norm1")
    h = b.linear(h, dim, 2 * dim, "block/fc1")
    h = b.gelu(h, "block/gelu")
    h = b.linear(h, 2 * dim, dim, "block/fc2")
    t = b.op("Add", [t, h], "block/residual")
    t = b.layer_norm(t, dim, "norm")
    m = b.op("ReduceMean", [t], "pool", axes=[1], keepdims=0)  # N,16
    out = b.op("Gemm", [m, b.weight(5, dim), b.weight(5)], "head", transB=1)
    _rename_output(b, out, "logits")
    return b.save(path, [("input", [N, C, H, W])], [("logits", [N, 5])], opset=17)


def convnext_block(path: Path) -> Path:
    """A stem Conv, then a ConvNeXt block: depthwise 7x7, permute to NHWC, LayerNorm over
    channels, Linear, GELU(Erf), Linear, permute back, residual; then a head."""
    b = Builder(3)
    dim = 8
    x = b.conv("input", C, dim, 3, "stem")
    d = b.conv(x, dim, dim, 7, "block/dwconv", group=dim)
    p = b.op("Transpose", [d], "block/permute", perm=[0, 2, 3, 1])
    h = b.layer_norm(p, dim, "block/norm")
    h = b.linear(h, dim, 4 * dim, "block/pwconv1")
    h = b.gelu(h, "block/act")
    h = b.linear(h, 4 * dim, dim, "block/pwconv2")
    h = b.op("Transpose", [h], "block/permute_back", perm=[0, 3, 1, 2])
    x = b.op("Add", [x, h], "block/residual")
    out = b.head(x, dim, 5)
    _rename_output(b, out, "logits")
    return b.save(path, [("input", [N, C, H, W])], [("logits", [N, 5])], opset=17)


def conv_lstm(path: Path, cell: str = "LSTM") -> Path:
    """An OCR-style CRNN: convs over (N,1,H,W), height folded into features, the width as
    time (Transpose to T,N,F), an LSTM or GRU (refused), then a linear layer per step."""
    b = Builder(4)
    hidden, feat = 6, 4 * 3
    x = b.conv("input", 1, 4, 3, "conv1")
    x = b.op("Relu", [x], "relu1")
    x = b.op("MaxPool", [x], "pool1", kernel_shape=[4, 1], strides=[4, 1])  # N,4,3,W
    seq = b.op("Reshape", [x, b.const(np.array([N, feat, W], np.int64))], "to_seq")
    seq = b.op("Transpose", [seq], "time_major", perm=[2, 0, 1])  # W,N,12
    gates = 4 if cell == "LSTM" else 3
    outs = b.op(cell, [seq, b.weight(1, gates * hidden, feat),
                       b.weight(1, gates * hidden, hidden),
                       b.weight(1, 2 * gates * hidden, scale=0.1)], "rnn",
                outputs=2 if cell == "GRU" else 3, hidden_size=hidden)
    y = b.op("Squeeze", [outs[0], b.const(np.array([1], np.int64))], "squeeze")  # W,N,6
    y = b.linear(y, hidden, 5, "classifier")
    _rename_output(b, y, "logits")
    return b.save(path, [("input", [N, 1, 12, W])], [("logits", [W, N, 5])])


def log_mel_cnn(path: Path) -> Path:
    """A log-mel front on a spectrogram (N,1,F,T): power (Pow 2), mel filterbank (MatMul over
    frequencies after a Transpose), Log(x + eps), then a CNN classifier."""
    b = Builder(5)
    freq, mels, frames = 12, 10, 9
    p = b.op("Pow", ["input", b.const(np.float32(2.0))], "power")
    p = b.op("Transpose", [p], "to_time", perm=[0, 1, 3, 2])  # N,1,T,F
    fb = np.abs(b.rng.standard_normal((freq, mels))).astype(np.float32)
    m = b.op("MatMul", [p, b.const(fb)], "mel")  # N,1,T,M
    m = b.op("Add", [m, b.const(np.float32(1e-6))], "eps")
    lg = b.op("Log", [m], "log")
    x = b.conv(lg, 1, 6, 3, "conv1")
    x = b.op("Relu", [x], "relu1")
    x = b.conv(x, 6, 8, 3, "conv2", stride=2)
    out = b.head(x, 8, 4)
    _rename_output(b, out, "logits")
    return b.save(path, [("input", [N, 1, freq, frames])], [("logits", [N, 4])])


def lrn_net(path: Path) -> Path:
    """An AlexNet-style net: conv, relu, LRN (refused), pool, conv, relu, LRN, head."""
    b = Builder(6)
    x = b.conv("input", C, 8, 3, "conv1")
    x = b.op("Relu", [x], "relu1")
    x = b.op("LRN", [x], "norm1", size=5, alpha=1e-4, beta=0.75, bias=1.0)
    x = b.op("MaxPool", [x], "pool1", kernel_shape=[2, 2], strides=[2, 2])
    x = b.conv(x, 8, 12, 3, "conv2")
    x = b.op("Relu", [x], "relu2")
    x = b.op("LRN", [x], "norm2", size=3, alpha=1e-4, beta=0.75, bias=2.0)
    out = b.head(x, 12, 6)
    _rename_output(b, out, "prob")
    return b.save(path, [("input", [N, C, H, W])], [("prob", [N, 6])])


def whole_net(path: Path) -> Path:
    """A net the dialect converts whole."""
    b = Builder(7)
    x = b.conv("input", C, 8, 3, "conv1")
    x = b.op("Relu", [x], "relu1")
    out = b.head(x, 8, 4)
    _rename_output(b, out, "logits")
    return b.save(path, [("input", [N, C, H, W])], [("logits", [N, 4])])


def with_symbolic_batch(path: Path, symbol: str = "batch") -> Path:
    """The model at ``path`` with axis 0 of its inputs and outputs named (dynamic_axes)."""
    model = onnx.load(str(path))
    for value in list(model.graph.input) + list(model.graph.output):
        dim = value.type.tensor_type.shape.dim[0]
        if dim.dim_value == N:
            dim.ClearField("dim_value")
            dim.dim_param = symbol
    onnx.save(model, str(path))
    return path


def contrib_gelu_net(path: Path) -> Path:
    """Convs around onnxruntime's contrib op com.microsoft.Gelu (no converter here: another
    domain), as onnxruntime's transformer optimizer writes it."""
    b = Builder(8)
    x = b.conv("input", C, 8, 3, "conv1")
    g = b.op("Gelu", [x], "gelu", domain="com.microsoft")
    y = b.conv(g, 8, 6, 3, "conv2")
    out = b.head(y, 6, 4)
    _rename_output(b, out, "logits")
    b.opsets = [helper.make_opsetid("com.microsoft", 1)]
    return b.save(path, [("input", [N, C, H, W])], [("logits", [N, 4])])
