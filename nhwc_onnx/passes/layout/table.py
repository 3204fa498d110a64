"""Each core op's NCHW -> NHWC layout rule, and the layout class that follows from it.

The one place that says how the ``to_nhwc`` walk moves each core op to the stored layout;
``tests/passes/test_layout_table.py`` checks that every core op has its rule here.
"""
from __future__ import annotations

from ...schemas.base import CORE_OPS, LayoutClass
from . import moves, rules
from .walk import LayoutRule


def _each(rule: LayoutRule, *ops: str) -> dict[str, LayoutRule]:
    return dict.fromkeys(ops, rule)


LAYOUT_RULES: dict[str, LayoutRule] = {
    # Elementwise (declared so with the op: Relu, Add, Cast, Where ...): any layout works
    # once the operands agree.
    **_each(rules.elementwise, *(s.name for s in CORE_OPS.all() if s.elementwise)),
    # A rank-4 image in their data_format: switch it to NHWC.
    **_each(rules.spatial,
            "AveragePool", "Conv", "ConvTranspose", "DepthToSpace", "GlobalAveragePool",
            "GlobalMaxPool", "MaxPool", "SpaceToDepth"),
    # An axis attribute, or an argument listing one value per axis, follows the stored order.
    **_each(rules.single_axis, "BatchNormalization", "Split"),
    **_each(rules.softmax_axis, "LogSoftmax", "Softmax"),
    **_each(rules.reduce_axes,
            "ArgMax", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum",
            "Squeeze"),
    **_each(rules.tile_expand, "Expand", "Tile"),
    "Concat": rules.concat,
    "Unsqueeze": rules.unsqueeze,
    "Slice": rules.slice_axes,
    "Pad": rules.pad,
    "Resize": rules.resize,
    "Gather": rules.gather,
    # Operands read in source axis order.
    **_each(rules.identity_only, "ConstantOfShape", "Gemm", "MatMul", "Range"),
    "Shape": rules.shape,
    "Size": rules.size,
    # Axes moved between positions.
    "Transpose": moves.transpose,
    "Flatten": moves.reshape,
    "Reshape": moves.reshape_always,
}


def layout_class(op: str) -> LayoutClass:
    """The layout class of core op ``op``: its layout rule's."""
    return LAYOUT_RULES[op].layout_class
