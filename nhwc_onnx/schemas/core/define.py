"""How a core op is declared, and the helpers its rules share.

``core_op`` registers one schema in ``CORE_OPS`` with everything the op means: ports,
attributes with defaults, whether it is elementwise, shape inference, element-type rule, numpy
evaluator and its writing as standard ONNX (opset 17; helpers in ``lowering``). The four rules
are required arguments, so an op cannot be declared without them. How the NCHW->NHWC pass
moves the op (its layout rule, and the layout class that follows) is pass logic: it lives in
``passes/layout/table.py``, keyed by core op.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ...errors import InvalidAttributeError
from ..base import CORE_OPS, Attr, AttrKind, InferContext, LowerFn, OpSchema, Port

A = AttrKind
ANY = ("float32", "float16", "float64", "int64", "int32", "int8", "uint8", "bool")

FORMAT = Attr(A.STRING, default="NCHW", allowed=("NCHW", "NHWC"),
              doc="which axes of the rank-4 input are H, W, C")
AUTO_PAD = Attr(A.STRING, default="NOTSET", allowed=("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"))
PADS = Attr(A.INTS, default=None, doc="[h_begin, w_begin, h_end, w_end]")

# impl(attrs_with_defaults, inputs) -> one array or a list of arrays
Impl = Callable[[dict, list], "np.ndarray | list[np.ndarray]"]


def core_op(name: str, doc: str, inputs, outputs=("Y",), attrs=None, dtypes=ANY, *,
            infer, evaluate: Impl, dtype, lower: LowerFn, elementwise: bool = False) -> OpSchema:
    """Register core op ``name``. ``inputs`` are port names, "X?" optional, "data*" variadic.
    ``elementwise``: each output element comes from the same-position (broadcast) elements."""
    ins = []
    for spec in inputs:
        ins.append(Port(spec.rstrip("?*"), optional=spec.endswith("?"),
                        variadic=spec.endswith("*"), dtypes=dtypes))
    outs = [Port(o, dtypes=dtypes) for o in outputs]
    schema = OpSchema(name, "core", doc, ins, outs, dict(attrs or {}), layout=None,
                      infer=infer, infer_dtype=dtype, lower=lower, elementwise=elementwise)
    schema.evaluate = _evaluator(schema, evaluate)
    return CORE_OPS.register(schema)


def _evaluator(schema: OpSchema, impl: Impl):
    def evaluate(node, input_arrays):
        attrs = schema.with_defaults(node.attrs)
        inputs = list(input_arrays)
        while inputs and inputs[-1] is None:
            inputs.pop()
        out = impl(attrs, inputs)
        return list(out) if isinstance(out, list) else [np.asarray(out)]

    return evaluate


# -- element types --------------------------------------------------------------------------------


def dtype_of_inputs(node, in_dtypes: list) -> list:
    """The first known input type, for every output."""
    first = None
    for d in in_dtypes:
        if d is not None:
            first = d
            break
    return [first] * len(node.outputs)


def dtype_bool(node, in_dtypes: list) -> list:
    return ["bool"] * len(node.outputs)


def dtype_int64(node, in_dtypes: list) -> list:
    return ["int64"] * len(node.outputs)


# -- shape inference helpers ----------------------------------------------------------------------


def infer_axis(ctx: InferContext, axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        ctx.fail("axis", f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def prod(dims) -> int | None:
    if any(d is None for d in dims):
        return None
    if all(type(d) is int for d in dims):
        exact = math.prod(dims)
        if -(1 << 63) <= exact < (1 << 63):
            return exact  # what int64 arithmetic gives whenever the product fits in it
    return int(np.prod(dims, dtype=np.int64))


def broadcast(ctx: InferContext, shapes: list[tuple]) -> tuple:
    """numpy broadcasting with unknown dims: a known dim > 1 wins; 1 against unknown is unknown."""
    first = shapes[0]
    if None not in first and all(s == first for s in shapes):
        return tuple(1 if d == 1 else d for d in first)  # the common case, same result
    rank = max(len(s) for s in shapes)
    big: list = [None] * rank  # per axis, the first known dim other than 1
    unknown = [False] * rank
    for s in shapes:
        for axis, d in enumerate(s, rank - len(s)):
            if d is None:
                unknown[axis] = True
            elif d != 1:
                if big[axis] is None:
                    big[axis] = d
                elif big[axis] != d:
                    ctx.fail("broadcast", f"shapes {[list(s) for s in shapes]} do not broadcast")
    return tuple(b if b is not None else (None if u else 1) for b, u in zip(big, unknown))


def same_shape(ctx: InferContext) -> list:
    """Output 0 has the shape of input 0 (elementwise ops)."""
    return [ctx.shape(0)]


def const_ints(ctx: InferContext, index: int) -> list[int] | None:
    value = ctx.consts[index] if index < len(ctx.consts) else None
    return None if value is None else [int(v) for v in np.asarray(value).reshape(-1)]


# -- evaluator helpers ----------------------------------------------------------------------------


def eval_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise InvalidAttributeError(f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def flatten_axis(axis: int, rank: int) -> int:
    """Flatten's axis may be in [-rank, rank]; a negative one counts from the end."""
    if not -rank <= axis <= rank:
        raise InvalidAttributeError(f"Flatten axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def numpy_function(name: str) -> Callable:
    """``np.<name>``, looked up when called: the evaluator tables are built at import, and
    ``check`` imports the schemas without loading numpy (it reads shapes, not values)."""
    return lambda *args, **kwargs: getattr(np, name)(*args, **kwargs)
