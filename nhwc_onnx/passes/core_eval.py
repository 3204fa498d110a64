"""Numpy evaluators for every core op, attached as ``CORE_OPS[op].evaluate``.

``evaluate(node, input_arrays) -> list of output arrays`` follows the semantics written in
``nhwc_onnx.schemas.core_ops`` (ONNX-13 with constant parameters as attributes). Absent optional
inputs arrive as None. Used by constant folding and by the reference executor
(``nhwc_onnx.passes.reference.run_core``).
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..errors import InvalidAttributeError, InvalidModelError
from ..schemas.base import CORE_OPS, InferContext, RuleError
from . import core_eval_spatial as sp

# evaluator(attrs_with_defaults, inputs) -> one array or a list of arrays
Impl = Callable[[dict, list], "np.ndarray | list[np.ndarray]"]
_IMPLS: dict[str, Impl] = {}


def _impl(*names: str):
    def deco(fn: Impl) -> Impl:
        for name in names:
            _IMPLS[name] = fn
        return fn

    return deco


def _unary(name: str, fn: Callable[[np.ndarray], np.ndarray]) -> None:
    _IMPLS[name] = lambda attrs, xs: np.asarray(fn(xs[0])).astype(xs[0].dtype)


def _axis(axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise InvalidAttributeError(f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))


# -- elementwise --------------------------------------------------------------------------------
_unary("Relu", lambda x: np.maximum(x, 0))
_unary("Sigmoid", lambda x: 1.0 / (1.0 + np.exp(-x.astype(np.float64))))
_unary("Tanh", np.tanh)
_unary("Abs", np.abs)
_unary("Neg", np.negative)
_unary("Sqrt", np.sqrt)
_unary("Rsqrt", lambda x: 1.0 / np.sqrt(x.astype(np.float64)))
_unary("Reciprocal", lambda x: 1.0 / x.astype(np.float64))
_unary("Exp", np.exp)
_unary("Log", np.log)
_unary("Square", lambda x: x * x)
_unary("Softplus", lambda x: np.logaddexp(0.0, x.astype(np.float64)))
_unary("Erf", _erf)
_unary("HardSwish", lambda x: x * np.clip(x.astype(np.float64) / 6.0 + 0.5, 0.0, 1.0))
_unary("Identity", lambda x: x)
_unary("Dropout", lambda x: x)
_unary("Floor", np.floor)
_unary("Ceil", np.ceil)
_unary("Round", np.round)  # half to even, as ONNX Round
_unary("Sign", np.sign)
_unary("Not", np.logical_not)


@_impl("Elu")
def _elu(attrs, xs):
    x = xs[0].astype(np.float64)
    return np.where(x > 0, x, attrs["alpha"] * np.expm1(np.minimum(x, 0))).astype(xs[0].dtype)


@_impl("LeakyRelu")
def _leaky(attrs, xs):
    x = xs[0]
    return np.where(x >= 0, x, x * np.asarray(attrs["alpha"], x.dtype)).astype(x.dtype)


@_impl("HardSigmoid")
def _hard_sigmoid(attrs, xs):
    x = xs[0].astype(np.float64)
    return np.clip(attrs["alpha"] * x + attrs["beta"], 0.0, 1.0).astype(xs[0].dtype)


@_impl("Clip")
def _clip(attrs, xs):
    y = xs[0]
    if attrs.get("min") is not None:
        y = np.maximum(y, np.asarray(attrs["min"], y.dtype))
    if attrs.get("max") is not None:
        y = np.minimum(y, np.asarray(attrs["max"], y.dtype))
    return y.astype(xs[0].dtype)


@_impl("PRelu")
def _prelu(attrs, xs):
    x, slope = xs
    return np.where(x >= 0, x, x * slope).astype(x.dtype)


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.integer):
        return np.trunc(a.astype(np.float64) / b).astype(a.dtype)  # ONNX integer Div truncates
    return a / b


_BINARY: dict[str, Callable] = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": _divide,
    "Max": np.maximum, "Min": np.minimum, "SquaredDifference": lambda a, b: (a - b) * (a - b),
    "Equal": np.equal, "Less": np.less, "Greater": np.greater,
    "And": np.logical_and, "Or": np.logical_or,
}
_BOOL_RESULT = {"Equal", "Less", "Greater", "And", "Or"}

for _name, _fn in _BINARY.items():
    def _binary(attrs, xs, _fn=_fn, _name=_name):
        out = np.asarray(_fn(xs[0], xs[1]))
        return out if _name in _BOOL_RESULT else out.astype(np.result_type(xs[0], xs[1]))

    _IMPLS[_name] = _binary


@_impl("Pow")
def _pow(attrs, xs):
    return np.power(xs[0].astype(np.float64), xs[1].astype(np.float64)).astype(xs[0].dtype)


def _sum(attrs, xs):
    out = xs[0]
    for x in xs[1:]:
        out = out + x
    return np.asarray(out)


_IMPLS["Sum"] = _sum
_IMPLS["Mean"] = lambda attrs, xs: (_sum(attrs, xs) / len(xs)).astype(xs[0].dtype)


@_impl("Where")
def _where(attrs, xs):
    return np.where(xs[0], xs[1], xs[2])


# -- linear algebra -----------------------------------------------------------------------------


@_impl("MatMul")
def _matmul(attrs, xs):
    a, b = xs
    return np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.result_type(a, b))


@_impl("Gemm")
def _gemm(attrs, xs):
    a, b = xs[0], xs[1]
    c = xs[2] if len(xs) > 2 else None
    a64 = a.astype(np.float64).T if attrs["transA"] else a.astype(np.float64)
    b64 = b.astype(np.float64).T if attrs["transB"] else b.astype(np.float64)
    y = attrs["alpha"] * (a64 @ b64)
    if c is not None:
        y = y + attrs["beta"] * c.astype(np.float64)
    return y.astype(a.dtype)


# -- spatial ------------------------------------------------------------------------------------
_IMPLS["Conv"] = lambda attrs, xs: sp.conv(attrs, xs[0], xs[1], xs[2] if len(xs) > 2 else None)
_IMPLS["ConvTranspose"] = lambda attrs, xs: sp.conv_transpose(
    attrs, xs[0], xs[1], xs[2] if len(xs) > 2 else None)
_IMPLS["MaxPool"] = lambda attrs, xs: sp.pool(attrs, xs[0], "max")
_IMPLS["AveragePool"] = lambda attrs, xs: sp.pool(attrs, xs[0], "avg")
_IMPLS["GlobalMaxPool"] = lambda attrs, xs: sp.global_pool(attrs, xs[0], "max")
_IMPLS["GlobalAveragePool"] = lambda attrs, xs: sp.global_pool(attrs, xs[0], "avg")
_IMPLS["Resize"] = lambda attrs, xs: sp.resize(attrs, xs[0])
_IMPLS["DepthToSpace"] = lambda attrs, xs: sp.depth_to_space(attrs, xs[0])
_IMPLS["SpaceToDepth"] = lambda attrs, xs: sp.space_to_depth(attrs, xs[0])


@_impl("BatchNormalization")
def _batchnorm(attrs, xs):
    x, scale, bias, mean, var = xs
    axis = _axis(attrs["axis"], x.ndim)
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]

    def col(v):
        return v.astype(np.float64).reshape(shape)

    y = (x.astype(np.float64) - col(mean)) / np.sqrt(col(var) + attrs["epsilon"])
    return (y * col(scale) + col(bias)).astype(x.dtype)


# -- shape and data movement --------------------------------------------------------------------


def flatten_axis(axis: int, rank: int) -> int:
    """Flatten's axis may be in [-rank, rank]; a negative one counts from the end."""
    if not -rank <= axis <= rank:
        raise InvalidAttributeError(f"Flatten axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


@_impl("Flatten")
def _flatten(attrs, xs):
    x = xs[0]
    axis = flatten_axis(attrs["axis"], x.ndim)
    rows = int(np.prod(x.shape[:axis], dtype=np.int64))
    return x.reshape(rows, -1) if x.size else x.reshape(rows, int(np.prod(x.shape[axis:])))


def reshape_target(in_shape, shape, allowzero: int) -> list[int]:
    """Resolve Reshape's 0 and -1 against a known input shape."""
    dims = [int(d) for d in shape]
    if not allowzero:
        for i, d in enumerate(dims):
            if d == 0:
                if i >= len(in_shape):
                    raise InvalidAttributeError(f"Reshape: 0 at axis {i} has no input dim to copy")
                dims[i] = int(in_shape[i])
    if dims.count(-1) > 1:
        raise InvalidAttributeError(f"Reshape: more than one -1 in {list(shape)}")
    total = int(np.prod(in_shape, dtype=np.int64))
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
        if known == 0 or total % known:
            raise InvalidAttributeError(f"Reshape: cannot reshape {list(in_shape)} to {list(shape)}")
        dims[dims.index(-1)] = total // known
    if int(np.prod(dims, dtype=np.int64)) != total:
        raise InvalidAttributeError(f"Reshape: cannot reshape {list(in_shape)} to {list(shape)}")
    return dims


@_impl("Reshape")
def _reshape(attrs, xs):
    return xs[0].reshape(reshape_target(xs[0].shape, xs[1], attrs["allowzero"]))


@_impl("Squeeze")
def _squeeze(attrs, xs):
    x = xs[0]
    axes = tuple(_axis(a, x.ndim) for a in attrs["axes"])
    if any(x.shape[a] != 1 for a in axes):
        raise InvalidAttributeError(f"Squeeze: axes {list(axes)} of {list(x.shape)} are not all 1")
    return np.squeeze(x, axis=axes)


@_impl("Unsqueeze")
def _unsqueeze(attrs, xs):
    x = xs[0]
    rank = x.ndim + len(attrs["axes"])
    axes = sorted(_axis(a, rank) for a in attrs["axes"])
    return np.expand_dims(x, tuple(axes))


@_impl("Transpose")
def _transpose(attrs, xs):
    perm = attrs.get("perm")
    return np.transpose(xs[0], None if perm is None else tuple(perm))


@_impl("Concat")
def _concat(attrs, xs):
    return np.concatenate(xs, axis=_axis(attrs["axis"], xs[0].ndim))


@_impl("Split")
def _split(attrs, xs):
    x = xs[0]
    axis = _axis(attrs["axis"], x.ndim)
    sizes = list(attrs["split"])
    if sum(sizes) != x.shape[axis]:
        raise InvalidAttributeError(f"Split sizes {sizes} do not add up to {x.shape[axis]}")
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


def slice_bounds(dim: int, start: int, end: int, step: int) -> tuple[int, int | None]:
    """ONNX Slice clamping: (start, end) for a Python slice (end None = past the beginning)."""
    if step == 0:
        raise InvalidAttributeError("Slice step must not be 0")
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return min(max(start, 0), dim), min(max(end, 0), dim)
    start = min(max(start, 0), dim - 1)
    end = min(max(end, -1), dim - 1)
    return start, (None if end < 0 else end)


def slice_index(shape, attrs) -> tuple[slice, ...]:
    starts, ends = list(attrs["starts"]), list(attrs["ends"])
    axes = attrs.get("axes")
    axes = list(range(len(starts))) if axes is None else list(axes)
    steps = attrs.get("steps")
    steps = [1] * len(starts) if steps is None else list(steps)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise InvalidAttributeError("Slice starts/ends/axes/steps have different lengths")
    index = [slice(None)] * len(shape)
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = _axis(a, len(shape))
        lo, hi = slice_bounds(int(shape[a]), int(s), int(e), int(st))
        index[a] = slice(lo, hi, int(st))
    return tuple(index)


@_impl("Slice")
def _slice(attrs, xs):
    return xs[0][slice_index(xs[0].shape, attrs)]


@_impl("Pad")
def _pad(attrs, xs):
    x = xs[0]
    pads = list(attrs["pads"])
    if len(pads) != 2 * x.ndim:
        raise InvalidAttributeError(f"Pad needs {2 * x.ndim} pads, found {len(pads)}")
    begin, end = pads[: x.ndim], pads[x.ndim:]
    crop = tuple(slice(max(-b, 0), x.shape[i] - max(-e, 0)) for i, (b, e) in
                 enumerate(zip(begin, end)))
    x = x[crop]
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
    mode = attrs["mode"]
    if mode == "constant":
        return np.pad(x, widths, constant_values=np.asarray(attrs["value"], x.dtype))
    return np.pad(x, widths, mode=mode if mode in ("reflect", "symmetric") else "edge")


_REDUCE = {"ReduceMean": np.mean, "ReduceMax": np.max, "ReduceMin": np.min,
           "ReduceSum": np.sum, "ReduceProd": np.prod}
for _name, _fn in _REDUCE.items():
    def _reduce(attrs, xs, _fn=_fn):
        x = xs[0]
        axes = attrs.get("axes")
        axes = tuple(range(x.ndim)) if axes is None else tuple(_axis(a, x.ndim) for a in axes)
        wide = x.astype(np.float64) if np.issubdtype(x.dtype, np.floating) else x
        return np.asarray(_fn(wide, axis=axes, keepdims=bool(attrs["keepdims"]))).astype(x.dtype)

    _IMPLS[_name] = _reduce


def _softmax_impl(attrs, xs, log: bool):
    x = xs[0]
    axis = _axis(attrs["axis"], x.ndim)
    z = x.astype(np.float64) - np.max(x, axis=axis, keepdims=True)
    lse = np.log(np.sum(np.exp(z), axis=axis, keepdims=True))
    return (z - lse if log else np.exp(z - lse)).astype(x.dtype)


_IMPLS["Softmax"] = lambda attrs, xs: _softmax_impl(attrs, xs, False)
_IMPLS["LogSoftmax"] = lambda attrs, xs: _softmax_impl(attrs, xs, True)


@_impl("ArgMax")
def _argmax(attrs, xs):
    axis = _axis(attrs["axis"], xs[0].ndim)
    out = np.argmax(xs[0], axis=axis)
    return (np.expand_dims(out, axis) if attrs["keepdims"] else out).astype(np.int64)


# -- shape computation --------------------------------------------------------------------------
_IMPLS["Shape"] = lambda attrs, xs: np.asarray(xs[0].shape, dtype=np.int64)
_IMPLS["Size"] = lambda attrs, xs: np.asarray(xs[0].size, dtype=np.int64)


@_impl("Gather")
def _gather(attrs, xs):
    data, idx = xs
    axis = _axis(attrs["axis"], data.ndim)
    idx = np.asarray(idx).astype(np.int64)
    dim = data.shape[axis]
    if np.any((idx < -dim) | (idx >= dim)):
        raise InvalidAttributeError(f"Gather: index out of range for axis size {dim}")
    return np.take(data, np.where(idx < 0, idx + dim, idx), axis=axis)


@_impl("Cast")
def _cast(attrs, xs):
    return xs[0].astype(np.dtype(attrs["to"]))


@_impl("ConstantOfShape")
def _constant_of_shape(attrs, xs):
    value = attrs.get("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value)
    dims = np.asarray(xs[0])
    if dims.ndim != 1 or dims.dtype.kind not in "iu" or (dims.size and dims.min() < 0):
        raise InvalidAttributeError(f"ConstantOfShape: the shape must be a 1-D list of integers "
                                    f">= 0, found {dims.tolist()} ({dims.dtype})")
    return np.full([int(d) for d in dims], value.reshape(-1)[0], dtype=value.dtype)


@_impl("Range")
def _range(attrs, xs):
    start, limit, delta = (np.asarray(x).reshape(()) for x in xs)
    return np.arange(start, limit, delta).astype(start.dtype)


@_impl("Expand")
def _expand(attrs, xs):
    x = xs[0]
    target = np.broadcast_shapes(x.shape, tuple(int(d) for d in xs[1]))
    return np.array(np.broadcast_to(x, target))


@_impl("Tile")
def _tile(attrs, xs):
    return np.tile(xs[0], [int(r) for r in xs[1]])


# -- attach -------------------------------------------------------------------------------------


def _make_evaluate(impl: Impl):
    def evaluate(node, input_arrays):
        schema = CORE_OPS[node.op]
        attrs = schema.with_defaults(node.attrs)
        inputs = list(input_arrays)
        while inputs and inputs[-1] is None:
            inputs.pop()
        out = impl(attrs, inputs)
        return list(out) if isinstance(out, list) else [np.asarray(out)]

    return evaluate


# A tensor above this many elements (8 GiB of float32) is an absurd shape, not a model.
MAX_EVAL_ELEMENTS = 1 << 31
# Ops whose output size comes from input values or attributes, not from the inputs' sizes:
# their size is checked before numpy is asked to allocate it.
SIZED_BY_VALUES = {"ConstantOfShape", "Range", "Expand", "Tile", "Pad", "Resize"}


def output_elements(node, input_arrays: list) -> int | None:
    """Elements of the node's largest output, from shape inference on the arrays (None:
    not known without evaluating)."""
    from . import core_infer  # noqa: F401  (attaches CORE_OPS[op].infer; imports this module)

    schema = CORE_OPS.get(node.op)
    if schema is None or schema.infer is None:
        return None
    arrays = [None if a is None else np.asarray(a) for a in input_arrays]
    ictx = InferContext(node, schema.with_defaults(node.attrs),
                        [None if a is None else tuple(a.shape) for a in arrays], arrays)
    try:
        shapes = schema.infer(ictx)
    except (RuleError, InvalidAttributeError, ArithmeticError, LookupError, TypeError,
            ValueError):
        return None  # the evaluator reports what is wrong with these inputs
    counts = [math.prod(int(d) for d in shape) for shape in shapes
              if shape is not None and all(d is not None for d in shape)]
    return max(counts) if counts else None


def evaluate_node(node, input_arrays: list, max_elements: int = MAX_EVAL_ELEMENTS
                  ) -> list[np.ndarray]:
    """Evaluate one core node on numpy arrays (absent optional inputs as None).

    An output of more than ``max_elements`` is refused before anything is allocated."""
    schema = CORE_OPS.get(node.op)
    if schema is None or schema.evaluate is None:
        raise InvalidAttributeError(f"no numpy evaluator for op '{node.op}' (node '{node.name}')")
    if node.op in SIZED_BY_VALUES:
        count = output_elements(node, input_arrays)
        if count is not None and count > max_elements:
            raise InvalidModelError(
                f"node '{node.name}' ({node.op}): its output would have {count} elements "
                f"(limit {max_elements}); refused as absurd")
    try:
        return schema.evaluate(node, input_arrays)
    except InvalidAttributeError as exc:
        if f"'{node.name}'" in str(exc):
            raise
        raise InvalidAttributeError(f"node '{node.name}' ({node.op}): {exc}") from exc


def attach() -> None:
    for schema in CORE_OPS.all():
        impl = _IMPLS.get(schema.name)
        if impl is not None and schema.evaluate is None:
            schema.evaluate = _make_evaluate(impl)


def missing_evaluators() -> list[str]:
    return [name for name in CORE_OPS.names() if name not in _IMPLS]


attach()
