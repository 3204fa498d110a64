"""Static shapes of the core nodes this frontend emits, so converters that need a rank or a dim
(Squeeze without dims, Split, Resize, ...) can ask. Unknown stays None: the shape inference
pass recomputes everything later; this is only what the frontend itself needs.

Small integer tensors computed from shapes (Shape -> StridedSlice -> Pack -> Reshape, as Keras
freezes Flatten) are also evaluated with the core numpy evaluator, so a Reshape's target shape
is known here without the frontend rewriting the graph.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import NhwcOnnxError
from ...ir import Node
from ...schemas import core as core_eval

KNOWN_LIMIT = 64  # evaluate integer tensors up to this many elements
_SAME_AS_INPUT = frozenset({
    "Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Sqrt", "Rsqrt", "Reciprocal", "Exp", "Log",
    "Square", "Softplus", "Erf", "HardSwish", "Identity", "Dropout", "Floor", "Ceil", "Round",
    "Sign", "Not", "Elu", "LeakyRelu", "HardSigmoid", "Clip", "PRelu", "Cast", "Softmax",
    "LogSoftmax", "BatchNormalization",
})
_BROADCAST = frozenset({
    "Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "SquaredDifference", "Equal", "Less",
    "Greater", "And", "Or", "Sum", "Mean", "Where",
})


def _known(shape) -> bool:
    return shape is not None and all(isinstance(d, int) for d in shape)


def broadcast(shapes: list) -> tuple | None:
    if not all(_known(s) for s in shapes):
        return None
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        return None


def _norm_axes(axes, rank: int) -> list[int]:
    return [a + rank if a < 0 else a for a in axes]


def _hw_axes(fmt: str) -> tuple[int, int, int]:
    return (1, 2, 3) if fmt == "NHWC" else (2, 3, 1)


def _window(node: Node, x: tuple, out_channels: int | None) -> tuple | None:
    fmt = node.attrs.get("data_format", "NCHW")
    h_ax, w_ax, c_ax = _hw_axes(fmt)
    kernel = node.attrs["kernel_shape"]
    strides = node.attrs.get("strides") or [1, 1]
    dil = node.attrs.get("dilations") or [1, 1]
    auto = node.attrs.get("auto_pad", "NOTSET")
    pads = node.attrs.get("pads") or [0, 0, 0, 0]
    out = list(x)
    for j, ax in enumerate((h_ax, w_ax)):
        i, e, s = x[ax], (kernel[j] - 1) * dil[j] + 1, strides[j]
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            out[ax] = -(-i // s)
        elif auto == "VALID":
            out[ax] = max(-(-(i - e + 1) // s), 0)
        else:
            out[ax] = (i + pads[j] + pads[j + 2] - e) // s + 1
    if out_channels is not None:
        out[c_ax] = out_channels
    return tuple(out)


def infer(node: Node, shapes: list, known: list) -> list:
    """Output shapes of ``node`` (a list, None where unknown) from its input shapes/values."""
    op, a = node.op, node.attrs
    x = shapes[0] if shapes else None
    n_out = len(node.outputs)
    try:
        if op in _SAME_AS_INPUT:
            return [x]
        if op in _BROADCAST:
            return [broadcast([s for s in shapes if s is not None] if None not in shapes
                              else [None])]
        if op == "ConstantOfShape" and known[0] is not None:
            return [tuple(int(d) for d in known[0])]
        if x is None or not _known(x):
            if op == "Shape" and x is not None:
                return [(len(x),)]
            return [None] * n_out
        rank = len(x)
        if op == "Conv":
            w = shapes[1]
            m = None if w is None else (w[3] if a.get("weight_layout") == "HWIO" else w[0])
            return [_window(node, x, m)]
        if op in ("MaxPool", "AveragePool"):
            return [_window(node, x, None)]
        if op == "ConvTranspose":
            w = shapes[1]
            fmt = a.get("data_format", "NCHW")
            h_ax, w_ax, c_ax = _hw_axes(fmt)
            out = list(x)
            out[h_ax], out[w_ax] = a["output_shape"]
            out[c_ax] = None if w is None else (w[2] if a.get("weight_layout") == "HWOI" else w[1])
            return [tuple(out)]
        if op in ("GlobalAveragePool", "GlobalMaxPool"):
            h_ax, w_ax, _ = _hw_axes(a.get("data_format", "NCHW"))
            out = list(x)
            out[h_ax] = out[w_ax] = 1
            return [tuple(out)]
        if op == "Resize":
            if a.get("sizes"):
                return [tuple(a["sizes"])]
            return [tuple(math.floor(d * s) for d, s in zip(x, a["scales"]))]
        if op in ("SpaceToDepth", "DepthToSpace"):
            h_ax, w_ax, c_ax = _hw_axes(a.get("data_format", "NCHW"))
            b = a["blocksize"]
            out = list(x)
            if op == "SpaceToDepth":
                out[h_ax], out[w_ax], out[c_ax] = x[h_ax] // b, x[w_ax] // b, x[c_ax] * b * b
            else:
                out[h_ax], out[w_ax], out[c_ax] = x[h_ax] * b, x[w_ax] * b, x[c_ax] // (b * b)
            return [tuple(out)]
        if op == "Flatten":
            ax = a.get("axis", 1)
            ax = ax + rank if ax < 0 else ax
            return [(math.prod(x[:ax]), math.prod(x[ax:]))]
        if op == "Reshape":
            target = known[1]
            if target is None:
                return [None]
            return [tuple(core_eval.reshape_target(x, [int(t) for t in target],
                                                   a.get("allowzero", 0)))]
        if op == "Squeeze":
            axes = set(_norm_axes(a["axes"], rank))
            return [tuple(d for i, d in enumerate(x) if i not in axes)]
        if op == "Unsqueeze":
            out_rank = rank + len(a["axes"])
            axes = set(_norm_axes(a["axes"], out_rank))
            it = iter(x)
            return [tuple(1 if i in axes else next(it) for i in range(out_rank))]
        if op == "Transpose":
            perm = a.get("perm") or list(range(rank))[::-1]
            return [tuple(x[p] for p in perm)]
        if op == "Concat":
            if not all(_known(s) for s in shapes):
                return [None]
            ax = _norm_axes([a["axis"]], rank)[0]
            out = list(x)
            out[ax] = sum(s[ax] for s in shapes)
            return [tuple(out)]
        if op == "Split":
            ax = _norm_axes([a.get("axis", 0)], rank)[0]
            outs = []
            for size in a["split"]:
                out = list(x)
                out[ax] = size
                outs.append(tuple(out))
            return outs
        if op == "Slice":
            idx = core_eval.slice_index(x, a)
            return [tuple(len(range(*s.indices(d))) for s, d in zip(idx, x))]
        if op == "Pad":
            p = a["pads"]
            return [tuple(d + p[i] + p[i + rank] for i, d in enumerate(x))]
        if op.startswith("Reduce") or op == "ArgMax":
            axes = a.get("axes") if op != "ArgMax" else [a.get("axis", 0)]
            axes = set(_norm_axes(axes if axes is not None else range(rank), rank))
            keep = a.get("keepdims", 1)
            return [tuple(1 if i in axes else d for i, d in enumerate(x) if keep or i not in axes)]
        if op == "MatMul":
            y = shapes[1]
            if not _known(y):
                return [None]
            return [_matmul_shape(x, y) if rank >= 2 and len(y) >= 2 else None]
        if op == "Gemm":
            y = shapes[1]
            m = x[1] if a.get("transA") else x[0]
            n = None if y is None else (y[0] if a.get("transB") else y[1])
            return [(m, n)]
        if op == "Shape":
            return [(rank,)]
        if op == "Size":
            return [()]
        if op == "Tile" and known[1] is not None:
            return [tuple(d * int(r) for d, r in zip(x, known[1]))]
        if op == "Expand" and known[1] is not None:
            return [broadcast([x, tuple(int(d) for d in known[1])])]
        if op == "Gather":
            ax = _norm_axes([a.get("axis", 0)], rank)[0]
            ind = shapes[1]
            if ind is None:
                return [None]
            return [tuple(x[:ax]) + tuple(ind) + tuple(x[ax + 1:])]
    except (KeyError, IndexError, TypeError, ValueError):
        return [None] * n_out
    return [None] * n_out


def _matmul_shape(x: tuple, y: tuple) -> tuple:
    batch = broadcast([x[:-2], y[:-2]]) or ()
    return tuple(batch) + (x[-2], y[-1])


def evaluate_small(node: Node, known: list) -> list | None:
    """Values of a node's outputs when every input value is known and small, else None."""
    for value, port in zip(known, node.inputs):
        if port is not None and (value is None or value.size > KNOWN_LIMIT):
            return None
    try:
        with np.errstate(all="ignore"):
            outs = core_eval.evaluate_node(node, known)
    except (NhwcOnnxError, ArithmeticError, LookupError, TypeError, ValueError):
        return None  # an evaluator refusing odd inputs just means "not known here"
    if any(o.size > KNOWN_LIMIT or o.dtype.kind not in "iub" for o in outs):
        return None
    return outs
