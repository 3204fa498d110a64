"""Static shapes of the core nodes this frontend emits, so converters that need a rank or a dim
(Squeeze without dims, Split, Resize, ...) can ask. The shapes come from each core op's own
inference (``nhwc_onnx.schemas.core``); the TensorFlow-specific part is only what is kept: a
shape that is not fully known, or that the op's rules reject, is recorded as unknown (None) and
left to the shape inference pass, which reports a broken rule by node.

Small integer tensors computed from shapes (Shape -> StridedSlice -> Pack -> Reshape, as Keras
freezes Flatten) are also evaluated with the core numpy evaluator, so a Reshape's target shape
is known here without the frontend rewriting the graph.
"""
from __future__ import annotations

import numpy as np

from ...errors import NhwcOnnxError
from ...ir import Node
from ...schemas import RuleError
from ...schemas.core import evaluate_node, infer_node_shapes

KNOWN_LIMIT = 64  # evaluate integer tensors up to this many elements


def _known(shape) -> bool:
    return shape is not None and all(isinstance(d, (int, np.integer)) for d in shape)


def infer(node: Node, shapes: list, known: list) -> list:
    """Output shapes of ``node`` (a list, None where unknown) from its input shapes/values."""
    try:
        outs = infer_node_shapes(node, shapes, known)
    except (RuleError, NhwcOnnxError, ArithmeticError, LookupError, TypeError, ValueError):
        return [None] * len(node.outputs)
    return [tuple(int(d) for d in s) if _known(s) else None for s in outs]


def evaluate_small(node: Node, known: list) -> list | None:
    """Values of a node's outputs when every input value is known and small, else None."""
    for value, port in zip(known, node.inputs):
        if port is not None and (value is None or value.size > KNOWN_LIMIT):
            return None
    try:
        with np.errstate(all="ignore"):
            outs = evaluate_node(node, known)
    except (NhwcOnnxError, ArithmeticError, LookupError, TypeError, ValueError):
        return None  # an evaluator refusing odd inputs just means "not known here"
    if any(o.size > KNOWN_LIMIT or o.dtype.kind not in "iub" for o in outs):
        return None
    return outs
