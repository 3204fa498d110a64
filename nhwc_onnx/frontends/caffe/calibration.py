"""Random weights that exercise the net (``--weights random``): calibrated like a trained
network's, so that outputs depend on the input and a verification of them means something.

Plain random weights make outputs that hardly move: activations shrink or grow layer after
layer, and BatchNorm statistics that do not match the activations flatten them further (a
10-class softmax came out within 0.05 of uniform). So, while the net converts, a forward pass
runs on seeded random inputs (uniform in [-1, 1), what verification feeds), layer by layer,
through the core ops' own numpy evaluators:

- each Convolution, Deconvolution and InnerProduct weight is rescaled so that the layer's
  output before its bias has unit root-mean-square on those inputs;
- a classifier's logits (the layer feeding a Softmax, through Flatten/Reshape/Dropout) get a
  root-mean-square of ``LOGIT_RMS`` instead, a spread of a few units like a trained
  classifier's, far from uniform without being one-hot;
- BatchNorm statistics are the mean and variance of the layer's input in that forward pass
  (scale factor 1), so it normalises as in a trained net.

Everything is seeded and deterministic: verification regenerates the same weights for the
source's own runtime. The weight arrays are scaled in place: they are the very arrays the
converted graph holds and the .caffemodel handed to OpenCV is written from.
"""
from __future__ import annotations

import numpy as np

from ...errors import NhwcOnnxError
from ...ir import Node, Value
from ...schemas.core import evaluate_node
from . import caffe_pb2 as pb

LOGIT_RMS = 3.0
# The forward pass stops (the remaining layers keep plain seeded random weights) before a node
# whose output has more elements than this, or once this many multiply-adds are spent: VGG16
# at 224 x 224 needs 2^33.9 and its largest map 2^21.6; a 10-s budget on the numpy evaluator.
MAX_ELEMENTS = 1 << 24
MAX_WORK = 1 << 34
WEIGHTED = {"Convolution", "ConvolutionDepthwise", "DepthwiseConvolution", "Deconvolution",
            "InnerProduct"}
_PASS_THROUGH = {"Flatten", "Reshape", "Dropout", "Split"}  # between logits and a Softmax
_INPUT_STREAM = 1  # the inputs' random stream, apart from the weights' (seeded by seed alone)


def logit_layers(layers: list[pb.LayerParameter]) -> set[str]:
    """Names of the weighted layers whose top a Softmax reads (through shape-only layers)."""
    feeder: dict[str, list[pb.LayerParameter | None]] = {}  # layer -> writer of each bottom
    writer: dict[str, pb.LayerParameter] = {}  # blob -> its latest writer so far
    found = set()
    for layer in layers:
        feeder[layer.name] = [writer.get(b) for b in layer.bottom]
        if layer.type == "Softmax" and feeder[layer.name]:
            source = feeder[layer.name][0]
            while source is not None and source.type in _PASS_THROUGH:
                source = (feeder.get(source.name) or [None])[0]
            if source is not None and source.type in WEIGHTED:
                found.add(source.name)
        for top in layer.top:
            writer[top] = layer
    return found


class Calibration:
    """The forward pass of a net being converted, evaluated lazily as layers are added."""

    def __init__(self, builder, seed: int, logits: set[str]):
        self.builder = builder
        self.logits = logits
        self._rng = np.random.default_rng((seed, _INPUT_STREAM))
        self._values: dict[int, tuple[Value, np.ndarray]] = {}  # id -> (value, array)
        self._done: set[str] = set()  # layers rescaled (layers sharing a name share weights)
        self.failed = False  # an evaluation failed: the remaining layers stay uncalibrated
        self.work = 0  # multiply-adds spent so far

    def batchnorm_blobs(self, layer: pb.LayerParameter, channels: int
                        ) -> list[np.ndarray] | None:
        """Mean, variance and scale factor 1 of the BatchNorm's input in the forward pass."""
        x = self._bottom(layer)
        if x is None or x.ndim < 2 or x.shape[1] != channels:
            return None
        axes = tuple(a for a in range(x.ndim) if a != 1)
        x64 = x.astype(np.float64)
        return [x64.mean(axis=axes).astype(np.float32), x64.var(axis=axes).astype(np.float32),
                np.ones(1, np.float32)]

    def after_layer(self, layer: pb.LayerParameter, nodes: list[Node],
                    blobs: list[np.ndarray] | None) -> None:
        """Rescale a weighted layer just converted (``nodes``: the nodes it became)."""
        if (self.failed or layer.type not in WEIGHTED or not blobs or layer.name in self._done
                or not layer.top):
            return
        self._done.add(layer.name)
        tops = [self.builder.blobs.get(top) for top in layer.top]
        found = [self._evaluate(top) for top in tops]  # with the weights as generated
        values = [v for v in found if v is not None]
        if len(values) != len(found):
            return
        axis = 1 if layer.type != "InnerProduct" else values[0].ndim - 1
        shape = [1] * values[0].ndim
        shape[axis] = -1
        bias = (blobs[1].astype(np.float64).reshape(shape)
                if len(blobs) > 1 and blobs[1].size == values[0].shape[axis] else 0.0)
        pre = values[0].astype(np.float64) - bias
        rms = float(np.sqrt(np.mean(np.square(pre)))) if pre.size else 0.0
        if not rms > 0 or not np.isfinite(rms):
            return
        factor = (LOGIT_RMS if layer.name in self.logits else 1.0) / rms
        blobs[0] *= np.float32(factor)
        # The layer's tops with the new weights, without evaluating it again: they are linear
        # in the weights (its helper nodes' values are dropped; nothing later reads them).
        for node in nodes:
            for out in node.outputs:
                self._values.pop(id(out), None)
        for top, value in zip(tops, values):
            scaled = (value.astype(np.float64) - bias) * factor + bias
            self._values[id(top)] = (top, scaled.astype(np.float32))

    def release(self) -> None:
        """Free the activations no later layer can read: a value that is no longer the
        latest version of a blob and whose readers have all been evaluated."""
        current = {id(v) for v in self.builder.blobs.values()}
        for key, (value, _) in list(self._values.items()):
            if key in current:
                continue
            if all(id(out) in self._values for node, _ in value.uses() for out in node.outputs):
                del self._values[key]

    def _bottom(self, layer: pb.LayerParameter) -> np.ndarray | None:
        if self.failed or not layer.bottom:
            return None
        return self._evaluate(self.builder.blobs.get(layer.bottom[0]))

    def _evaluate(self, value: Value | None) -> np.ndarray | None:
        if value is None:
            return None
        try:
            return self._value(value)
        except (NhwcOnnxError, ArithmeticError, ValueError, TypeError, IndexError,
                MemoryError, _OverBudget):
            self.failed = True  # deterministic: verification fails at the same place
            return None

    def _value(self, value: Value) -> np.ndarray:
        """The value in the forward pass: its producer chain evaluated once, in order (an
        explicit stack: deep nets would exhaust recursion)."""
        stack = [value]
        while stack:
            current = stack[-1]
            if current.is_const or id(current) in self._values:
                stack.pop()
                continue
            node = current.producer()
            if node is None:  # a graph input
                self._values[id(current)] = (current, self._rng.uniform(
                    -1.0, 1.0, size=current.shape).astype(np.float32))
                stack.pop()
                continue
            pending = [v for v in node.inputs
                       if v is not None and not v.is_const and id(v) not in self._values]
            if pending:
                stack.extend(pending)
                continue
            arrays = [None if v is None else v.const if v.is_const else self._values[id(v)][1]
                      for v in node.inputs]
            self.work += _cost(node, arrays)
            if self.work > MAX_WORK:
                raise _OverBudget(node.name)
            for out, array in zip(node.outputs, evaluate_node(node, arrays)):
                self._values[id(out)] = (out, array)
            stack.pop()
        return value.const if value.const is not None else self._values[id(value)][1]


class _OverBudget(Exception):
    """The forward pass would cost more than the calibration may spend."""


def _cost(node: Node, arrays: list) -> int:
    """Multiply-adds of one node (its output's elements for anything but the products);
    more than the budget when an output would exceed ``MAX_ELEMENTS``."""
    outputs = [v.shape for v in node.outputs]
    if any(shape is None or not all(isinstance(d, int) for d in shape) for shape in outputs):
        return MAX_WORK + 1  # unknown sizes: nothing to bound the work by
    elements = max((int(np.prod(shape, dtype=np.float64)) for shape in outputs
                    if shape is not None), default=0)  # none is None (returned above)
    if elements > MAX_ELEMENTS:
        return MAX_WORK + 1
    if node.op in ("Conv", "ConvTranspose") and len(arrays) > 1 and arrays[1] is not None:
        # Conv (OIHW): each output sums I*H*W products; ConvTranspose (IOHW): each input
        # element feeds O*H*W outputs
        fan = int(np.prod(arrays[1].shape[1:]))
        return (elements if node.op == "Conv" else int(arrays[0].size)) * max(fan, 1)
    if node.op == "Gemm" and arrays[0] is not None and arrays[0].ndim == 2:
        return elements * int(arrays[0].shape[0 if node.attrs.get("transA") else 1])
    return elements
