"""Core ops written as standard ONNX (opset 17): what every core op's ``lower`` shares.

A core op is the ONNX op of its name with every parameter an attribute (``schemas.core``), so
most lowerings are that op with the node's attributes (``as_onnx``), the ones opset 17 takes
as inputs made constants (``int64``, ``scalar_like``). A spatial op in ``data_format`` NHWC runs
between two Transposes (``in_nchw``). What a lowering cannot honour is refused by ``refuse``,
naming the node, its op and the attribute: never written as something else.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np

from ...errors import NodeProblem, UnsupportedOpError
from ..base import CORE_OPS, Lowerer, LowerFn

TO_NCHW = [0, 3, 1, 2]
TO_NHWC = [0, 2, 3, 1]


def core_attrs(node) -> dict[str, Any]:
    """The node's attributes with its schema's defaults filled in."""
    return CORE_OPS[node.op].with_defaults(node.attrs)


def refuse(node, attribute: str, why: str) -> NoReturn:
    """This node cannot be written as standard ONNX: say which attribute and why."""
    raise UnsupportedOpError([NodeProblem(
        node.name, node.op, f"attribute '{attribute}': {why}; no standard ONNX (opset 17) "
        "computes it", "lower")])


def as_onnx(*passed: str) -> LowerFn:
    """The ONNX op of the node's name with the attributes ``passed`` (defaults filled in;
    one left unset stays unset)."""

    def lower(node, L: Lowerer, inputs: list, outputs: list) -> None:
        attrs = core_attrs(node)
        L.op(node.op, inputs, outputs=outputs,
             **{name: plain(attrs[name]) for name in passed if attrs.get(name) is not None})

    return lower


def plain(value: Any) -> Any:
    """An attribute value as onnx.helper takes it (Python numbers, lists of them)."""
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    return value


def int64(L: Lowerer, values: Sequence[int], hint: str) -> str:
    """A 1-D int64 constant (axes, pads, starts, sizes ...)."""
    return L.const(np.array([int(v) for v in values], np.int64), hint)


def scalar_like(L: Lowerer, node, index: int, value: float, hint: str) -> str:
    """A 0-d constant ``value`` in the element type of the node's input ``index`` (as the
    evaluator casts its attribute)."""
    dtype = node.inputs[index].dtype or "float32"
    return L.const(np.asarray(value, dtype=np.dtype(dtype)), hint)


def as_int64(L: Lowerer, node, index: int, name: str) -> str:
    """Input ``index`` (a shape-like tensor) as int64, the type opset 17 wants there."""
    value = node.inputs[index]
    if value.const is not None and value.dtype != "int64":
        return L.const(np.asarray(value.const).astype(np.int64), "int64")
    if value.dtype == "int64":
        return name
    return L.op("Cast", [name], to=7)[0]  # TensorProto.INT64


def known(dim: Any) -> bool:
    """A dimension of static size (not None, not a symbolic batch's name)."""
    return isinstance(dim, (int, np.integer)) and not isinstance(dim, bool)


def spatial_hw(node, data_format: str) -> tuple[Any, Any]:
    """(H, W) of the node's rank-4 input 0, each None when not static."""
    shape = node.inputs[0].shape
    if shape is None or len(shape) != 4:
        return None, None
    h, w = (shape[1], shape[2]) if data_format == "NHWC" else (shape[2], shape[3])
    return (h if known(h) else None), (w if known(w) else None)


def in_nchw(L: Lowerer, data_format: str, x: str, out: str,
            body: Callable[[str, Any], list[str]]) -> None:
    """``body(x, outputs)`` (an NCHW tensor in, its last op writing ``outputs``: a name list
    or a count) applied to ``x``; NHWC data is transposed to NCHW before and back after."""
    if data_format != "NHWC":
        body(x, [out])
        return
    (x_nchw,) = L.op("Transpose", [x], perm=TO_NCHW)
    (y_nchw,) = body(x_nchw, 1)
    L.op("Transpose", [y_nchw], outputs=[out], perm=TO_NHWC)


def constant_or(L: Lowerer, node, index: int, name: str,
                arrange: Callable[[np.ndarray], np.ndarray], runtime: Callable[[str], str]) -> str:
    """Input ``index`` rearranged: a constant once, now (``arrange``); else at run time."""
    value = node.inputs[index]
    if value.const is not None:
        return L.const(arrange(np.asarray(value.const)), "weight")
    return runtime(name)
