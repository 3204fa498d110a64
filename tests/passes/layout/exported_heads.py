"""Detector and upsampler heads written node for node as PyTorch's exporters write them.

YOLOv8 (ultralytics ``Detect`` + ``DFL``, export mode): per level, box and class convolutions
concatenated on channels and viewed as ``(N, 4*16 + nc, H*W)``; the levels concatenated on
anchors; split into box and class rows; the DFL head views the box rows as ``(N, 4, 16, A)``,
transposes to ``(N, 16, 4, A)``, softmaxes over the 16 bins, reduces them with a fixed 1x1 Conv
(weights 0..15) and views the result as ``(N, 4, A)``; dist2bbox turns the distances into
centre/size boxes against constant anchor points and strides; the class rows go through a
Sigmoid; boxes and scores are concatenated into ``(N, 4 + nc, A)``.

TorchScript (``torch.onnx.export``) names nodes by module scope (``/model.22/dfl/Reshape``),
writes shapes and split sizes as ``Constant`` nodes, a Softmax over a non-last axis before
opset 13 as Transpose + Softmax(last) + Transpose, ``chunk`` at opset 13+ as Slices whose ends
come from ``Shape -> Gather`` arithmetic (prim::ConstantChunk), and ``x.view(bs, no, -1)`` with
the batch taken from ``Shape -> Gather -> Unsqueeze -> Concat``. The dynamo exporter (opset 18)
names values after the aten ops (``view``, ``transpose_1`` ...), writes ``Reshape`` with
``allowzero=1`` and every Conv attribute, and constants as initializers.

PixelShuffle: opset 9 is ``Reshape(-1, C, r, r, H, W) -> Transpose(0,1,4,2,5,3) ->
Reshape(-1, C, H*r, W*r)``; opset 11+ is ``DepthToSpace(mode=CRD)``.
"""
from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

from tests.frontends.onnx.onnx_helpers import make_model

REG_MAX = 16
NC = 5  # classes
LEVELS = ((4, 6, 8), (2, 3, 16), (1, 2, 32))  # (H, W, stride) per level: distinct sizes
CHANNELS = (6, 7, 9)  # input channels per level
ANCHORS = sum(h * w for h, w, _ in LEVELS)  # 32
NHWC, NLC = [0, 2, 3, 1], [0, 2, 1]
# The dynamo exporter names a value after the aten op that made it.
_ATEN = {"Reshape": "view", "Transpose": "transpose", "Softmax": "_softmax",
         "Conv": "convolution", "Concat": "cat", "Split": "split_with_sizes",
         "Sigmoid": "sigmoid", "Sub": "sub", "Add": "add", "Div": "div", "Mul": "mul"}


def weights(*shape, seed=0) -> np.ndarray:
    return (np.random.default_rng([seed, *shape]).standard_normal(shape) * 0.3).astype(
        np.float32)


def _constant(nodes: list, name: str, array) -> str:
    nodes.append(helper.make_node("Constant", [], [name], name=name.replace("_output_0", ""),
                                  value=numpy_helper.from_array(np.asarray(array))))
    return name


def _anchor_points():
    points, strides = [], []
    for h, w, s in LEVELS:
        ys, xs = np.meshgrid(np.arange(h) + 0.5, np.arange(w) + 0.5, indexing="ij")
        points.append(np.stack([xs.reshape(-1), ys.reshape(-1)]))
        strides.append(np.full(h * w, s))
    return (np.concatenate(points, 1)[None].astype(np.float32),
            np.concatenate(strides)[None].astype(np.float32))


class _Writer:
    """Emit nodes named as the exporter names them."""

    def __init__(self, style: str, opset: int, batch: int):
        self.style, self.opset, self.batch = style, opset, batch
        self.nodes: list = []
        self.inits: dict = {}
        self.count: dict[str, int] = {}

    def name(self, scope: str, op: str) -> str:
        key = f"{scope}/{op}" if self.style == "torchscript" else _ATEN.get(op, op.lower())
        n = self.count.get(key, 0)
        self.count[key] = n + 1
        return f"{key}_{n}" if n else key

    def op(self, op: str, inputs: list, scope: str = "/model.22", outputs: int = 1, **attrs):
        name = self.name(scope, op)
        if self.style == "torchscript":  # node /model.22/dfl/Reshape -> .../Reshape_output_0
            node_name, outs = name, [f"{name}_output_{i}" for i in range(outputs)]
        else:  # value view_1 made by node node_view_1; several outputs: getitem_...
            node_name = f"node_{name}"
            outs = [name] if outputs == 1 else [f"getitem_{name}_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=node_name, **attrs))
        return outs[0] if outputs == 1 else outs

    def const(self, array, scope: str = "/model.22") -> str:
        if self.style == "torchscript":
            name = self.name(scope, "Constant")
            return _constant(self.nodes, f"{name}_output_0", array)
        name = f"val_{len(self.inits)}"
        self.inits[name] = np.asarray(array)
        return name

    def conv(self, x: str, w: np.ndarray, b: np.ndarray | None, scope: str, pad: int = 0):
        wname = scope.strip("/").replace("/", ".") + ".weight"
        self.inits[wname] = w
        inputs = [x, wname]
        if b is not None:
            self.inits[wname[:-6] + "bias"] = b
            inputs.append(wname[:-6] + "bias")
        k = w.shape[2]
        return self.op("Conv", inputs, scope, dilations=[1, 1], group=1, kernel_shape=[k, k],
                       pads=[pad] * 4, strides=[1, 1])

    def view(self, x: str, shape: list[int], scope: str = "/model.22", batch_from: str = ""):
        """x.view(*shape); TorchScript takes a leading ``bs`` from Shape -> Gather."""
        if batch_from and self.style == "torchscript" and self.opset >= 13:
            size = self.op("Shape", [batch_from], scope)
            bs = self.op("Gather", [size, self.const(np.array(0, np.int64), scope)], scope,
                         axis=0)
            bs = self.op("Unsqueeze", [bs, self.const(np.array([0], np.int64), scope)], scope)
            shape_input = self.op("Concat", [bs, self.const(np.array(shape[1:], np.int64),
                                                            scope)], scope, axis=0)
        else:
            shape_input = self.const(np.array(shape, np.int64), scope)
        extra = {"allowzero": 1} if self.style == "dynamo" else {}
        return self.op("Reshape", [x, shape_input], scope, **extra)

    def split(self, x: str, sizes: list[int], scope: str = "/model.22"):
        """Tensor.split(sizes, 1) (opset 11: attribute; 13+: input)."""
        if self.opset < 13:
            return self.op("Split", [x], scope, outputs=len(sizes), axis=1, split=sizes)
        return self.op("Split", [x, self.const(np.array(sizes, np.int64), scope)], scope,
                       outputs=len(sizes), axis=1)

    def chunk2(self, x: str, scope: str = "/model.22"):
        """Tensor.chunk(2, 1): TorchScript 13+ writes prim::ConstantChunk as Slices whose ends
        come from the axis size; opset 11 and dynamo write a Split."""
        if self.style != "torchscript" or self.opset < 13:
            return self.split(x, [2, 2], scope)
        size = self.op("Shape", [x], scope)
        axis = self.const(np.array([1], np.int64), scope)
        dim = self.op("Gather", [size, axis], scope, axis=0)
        shifted = self.op("Add", [dim, self.const(np.array([1], np.int64), scope)], scope)
        step = self.op("Div", [shifted, self.const(np.array([2], np.int64), scope)], scope)
        start = self.const(np.array([0], np.int64), scope)
        parts = []
        for i in (1, 2):
            end = self.op("Mul", [step, self.const(np.array([i], np.int64), scope)], scope)
            parts.append(self.op("Slice", [x, start, end, axis], scope))
            start = end
        return parts


def yolov8_head(batch: int = 1, opset: int = 17, style: str = "torchscript",
                dfl_perm=(0, 2, 1, 3), dfl_softmax_axis: int = 1, dfl_kernel: int = 1):
    """The YOLOv8 Detect head on three NCHW feature maps ``p3, p4, p5``; output ``output0``
    of shape (N, 4 + NC, ANCHORS). ``dfl_*`` change one step of the DFL for near misses."""
    wr = _Writer(style, opset, batch)
    no = 4 * REG_MAX + NC
    flat, inputs = [], []
    for i, ((h, w, _), c) in enumerate(zip(LEVELS, CHANNELS)):
        x = f"p{i + 3}"
        inputs.append((x, [batch, c, h, w]))
        box = wr.conv(x, weights(4 * REG_MAX, c, 1, 1, seed=i), weights(4 * REG_MAX, seed=i),
                      f"/model.22/cv2.{i}/cv2.{i}.2")
        cls = wr.conv(x, weights(NC, c, 3, 3, seed=i), weights(NC, seed=i),
                      f"/model.22/cv3.{i}/cv3.{i}.2", pad=1)
        cat = wr.op("Concat", [box, cls], axis=1)
        flat.append(wr.view(cat, [batch, no, -1], batch_from=cat))
    x_cat = wr.op("Concat", flat, axis=2)
    box, cls = wr.split(x_cat, [4 * REG_MAX, NC])
    # DFL: conv(x.view(b, 4, c1, a).transpose(2, 1).softmax(1)).view(b, 4, a)
    dfl = "/model.22/dfl"
    view = wr.view(box, [batch, 4, REG_MAX, ANCHORS], dfl)
    bins = wr.op("Transpose", [view], dfl, perm=list(dfl_perm))
    if opset < 13 and dfl_softmax_axis != 3:  # the exporter moves the axis last and back
        swap = list(range(4))
        swap[dfl_softmax_axis], swap[3] = 3, dfl_softmax_axis
        moved = wr.op("Transpose", [bins], dfl, perm=swap)
        soft = wr.op("Transpose", [wr.op("Softmax", [moved], dfl, axis=3)], dfl, perm=swap)
    else:
        soft = wr.op("Softmax", [bins], dfl, axis=dfl_softmax_axis)
    bins_in = [batch, 4, REG_MAX, ANCHORS][list(dfl_perm)[1]]  # what the 1x1 Conv sums
    kernel = np.zeros((1, bins_in, dfl_kernel, dfl_kernel), np.float32)
    kernel[0, :, dfl_kernel // 2, dfl_kernel // 2] = np.arange(bins_in)
    distance = wr.view(wr.conv(soft, kernel, None, f"{dfl}/conv", pad=dfl_kernel // 2),
                       [batch, 4, ANCHORS], dfl)
    # dist2bbox(distance, anchors, xywh=True, dim=1) * strides
    anchors, strides = _anchor_points()
    wr.inits["anchors"], wr.inits["strides"] = anchors, strides
    lt, rb = wr.chunk2(distance)
    x1y1 = wr.op("Sub", ["anchors", lt])
    x2y2 = wr.op("Add", ["anchors", rb])
    centre = wr.op("Div", [wr.op("Add", [x1y1, x2y2]), wr.const(np.array(2.0, np.float32))])
    size = wr.op("Sub", [x2y2, x1y1])
    dbox = wr.op("Mul", [wr.op("Concat", [centre, size], axis=1), "strides"])
    scores = wr.op("Sigmoid", [cls])
    wr.op("Concat", [dbox, scores], axis=1)
    wr.nodes[-1].output[0] = "output0"
    return make_model(wr.nodes, inputs, [("output0", [batch, 4 + NC, ANCHORS])], wr.inits,
                      opset=opset)


def pixel_shuffle(batch: int = 1, opset: int = 9, r: int = 2, c: int = 3, h: int = 5,
                  w: int = 7, first_view=None, perm=(0, 1, 4, 2, 5, 3)):
    """Conv (4 -> c*r*r channels) then nn.PixelShuffle(r) as the exporter writes it; output
    ``y`` (N, c, h*r, w*r). ``first_view``/``perm`` change a step for near misses."""
    wr = _Writer("torchscript", opset, batch)
    x = wr.conv("x", weights(c * r * r, 4, 3, 3), weights(c * r * r), "/conv", pad=1)
    if opset >= 11:
        y = wr.op("DepthToSpace", [x], "", blocksize=r, mode="CRD")
    else:
        view = wr.op("Reshape", [x, wr.const(np.array(first_view or [-1, c, r, r, h, w],
                                                     np.int64), "")], "")
        moved = wr.op("Transpose", [view], "", perm=list(perm))
        y = wr.op("Reshape", [moved, wr.const(np.array([-1, c, h * r, w * r], np.int64), "")],
                  "")
    wr.nodes[-1].output[0] = "y"
    del y
    return make_model(wr.nodes, [("x", [batch, 4, h, w])], [("y", [batch, c, h * r, w * r])],
                      wr.inits, opset=opset)


def pool_1d(op: str = "AveragePool", batch: int = 1, c: int = 3, length: int = 11,
            k: int = 3, s: int = 2, axis: int = 3, opset: int = 11):
    """Older PyTorch's F.avg_pool1d / F.max_pool1d: Unsqueeze the N,C,L map at ``axis``, a 2-D
    pool with a (k, 1) (or (1, k)) window, Squeeze the axis again."""
    out = (length - k) // s + 1
    window, stride = ([k, 1], [s, 1]) if axis == 3 else ([1, k], [1, s])
    nodes = [helper.make_node("Unsqueeze", ["x"], ["u"], axes=[axis]),
             helper.make_node(op, ["u"], ["p"], kernel_shape=window, strides=stride,
                              pads=[0, 0, 0, 0]),
             helper.make_node("Squeeze", ["p"], ["y"], axes=[axis])]
    return make_model(nodes, [("x", [batch, c, length])], [("y", [batch, c, out])],
                      opset=opset)
