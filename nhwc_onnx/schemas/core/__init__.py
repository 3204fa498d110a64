"""The core op set: what every frontend emits (domain ``core``), one module per family.

Each core op is declared once (``define.core_op``) with its ports, attributes and defaults,
shape inference, element-type rule and numpy evaluator. How the NCHW->NHWC pass moves it (its
layout rule and layout class) is the passes' (``passes/layout/table.py``).

Core ops keep the full meaning of the source. Semantics are those of the standard ONNX operator
of the same name (opset 13+ forms, with every parameter an attribute once it is constant), plus
the extensions written below. Frontends never decide SAME/VALID, fold, or pick dialect ops: the
passes do.

Conventions shared by all core ops
- ``data_format`` ("NCHW" or "NHWC") on spatial ops says which axes of the rank-4 input are
  H, W and C. Spatial attributes (kernel_shape, strides, dilations, pads) always list H then W.
- ``pads`` on Conv/Pool/ConvTranspose is explicit per side: [h_begin, w_begin, h_end, w_end].
- ``auto_pad``: "NOTSET" (use ``pads``), "SAME_UPPER" (TensorFlow SAME: the odd pixel at the
  end), "SAME_LOWER" (odd pixel at the begin), "VALID". The static-shapes pass resolves
  SAME_* into explicit pads once input shapes are known.
- Axis attributes (``axis``, ``axes``, ``perm``) are in the source's own axis order; the
  NCHW->NHWC pass remaps them. A negative axis counts from the end.
- Elementwise binary ops broadcast like numpy.
"""
from __future__ import annotations

from ..base import attr
from . import elementwise, shape_ops, spatial, tensor  # noqa: F401  (register the core ops)
from .define import flatten_axis
from .evaluate import (
    MAX_EVAL_ELEMENTS,
    SIZED_BY_VALUES,
    evaluate_node,
    infer_dtypes,
    infer_node_shapes,
    infer_output_shapes,
    output_elements,
)
from .tensor import reshape_target, slice_bounds, slice_index

__all__ = [
    "MAX_EVAL_ELEMENTS", "SIZED_BY_VALUES", "attr", "evaluate_node", "flatten_axis",
    "infer_dtypes", "infer_node_shapes", "infer_output_shapes", "output_elements",
    "reshape_target", "slice_bounds", "slice_index",
]
