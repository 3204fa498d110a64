"""A symbolic batch in a dialect graph: the rules every op obeys per sample, and shape
inference with the batch as a name.

A dialect model may leave axis 0 (the batch) of its graph inputs symbolic: a ``dim_param``
such as ``N``. Every op then computes each sample on its own, so its output carries the batch
at axis 0 and nowhere else (README, "The batch rule"). Shape inference stays
numeric: the graph is inferred twice, with the batch at two probe sizes, and a dimension that
is one probe in the first run and the other in the second is the batch; anything else that
differs mixes the batch with other axes. ``PER_SAMPLE`` declares, per dialect op, what of
its attributes addresses axis 0 (a Softmax over axis 0 keeps every shape but mixes samples).

Imported only for a graph with a symbolic dimension (``check`` of static models never loads
it).
"""
from __future__ import annotations

from collections.abc import Callable

# The converter's two probe sizes, which the symbolic checks of validate() use too
from ..ir.input_shapes import PROBES


def at_probe(shape, size: int):
    """``shape`` with every named dimension replaced by ``size``."""
    if shape is None:
        return None
    return tuple(size if isinstance(d, str) else d for d in shape)


# -- what each op does with axis 0 of a batch-carrying input ------------------------------------
# A rule gets the node and the indices of its inputs that carry the batch; it returns why the
# node mixes samples, or None. Ops absent from the table below never address axis 0.


def _axis_attr(name: str, what: str) -> Callable:
    def rule(node, carried: set[int]) -> str | None:
        return what if 0 in carried and int(node.attrs.get(name, 1)) == 0 else None
    return rule


def _axes_attr(name: str, what: str) -> Callable:
    def rule(node, carried: set[int]) -> str | None:
        axes = node.attrs.get(name) or ()
        return what if 0 in carried and 0 in [int(a) for a in axes] else None
    return rule


def _concat(node, carried: set[int]) -> str | None:
    return "joins its inputs along axis 0, the batch" if carried and \
        int(node.attrs.get("axis", -1)) == 0 else None


def _transpose(node, carried: set[int]) -> str | None:
    perm = [int(p) for p in node.attrs.get("perm") or ()]
    return (f"moves the batch (axis 0) with perm {perm}" if 0 in carried and perm
            and perm[0] != 0 else None)


def _pad(node, carried: set[int]) -> str | None:
    pads = [int(p) for p in node.attrs.get("pads") or ()]
    return "pads axis 0, the batch" if 0 in carried and any(pads[:2]) else None


def _upsampling(node, carried: set[int]) -> str | None:
    size = [int(s) for s in node.attrs.get("size") or ()]
    return "repeats along axis 0, the batch" if 0 in carried and size and size[0] != 1 \
        else None


def _reshape(node, carried: set[int]) -> str | None:
    if 0 not in carried:
        return None
    shape = node.inputs[1].const if len(node.inputs) > 1 and node.inputs[1] is not None \
        else None
    if shape is None or not len(shape):
        return None  # the shape rules say what is wrong with it
    first = int(shape[0])
    return None if first in (0, -1) else (
        f"sets axis 0 to {first}: the batch is copied only by 0 (or inferred by -1)")


def _gemm(node, carried: set[int]) -> str | None:
    if 1 in carried:
        return "multiplies by a matrix B that carries the batch"
    if 0 in carried and int(node.attrs.get("transA", 0)):
        return "transposes A, which carries the batch (transA = 1)"
    return None


def _matmul(node, carried: set[int]) -> str | None:
    if 1 not in carried:
        return None
    a, b = (v.shape if v is not None else None for v in node.inputs[:2])
    if 0 in carried and a is not None and b is not None and len(a) >= 3 and len(b) >= 3:
        return None  # a batch of matrix products, sample by sample
    return "multiplies by a matrix B that carries the batch"


PER_SAMPLE: dict[str, Callable | None] = {
    # Elementwise, channel and spatial ops: each sample alone, whatever their attributes.
    **{op: None for op in (
        "Abs", "Add", "AddBias", "AveragePool", "BatchNormalization", "Constant", "Conv",
        "ConvTranspose", "Dense", "DepthwiseConv2d", "Elu", "GlobalAveragePool",
        "GlobalMaxPool", "LeakyRelu", "Max", "MaxPool", "Mul", "PRelu", "Relu", "Relu6",
        "Scale", "Sigmoid", "SpaceToDepth", "Sum", "Tanh")},
    "Concat": _concat,
    "Flatten": _axis_attr("axis", "flattens from axis 0, folding the batch into its rows"),
    "Gemm": _gemm,
    "MatMul": _matmul,
    "Pad": _pad,
    "ReduceMean": _axes_attr("axes", "averages over axis 0, the batch"),
    "Reshape": _reshape,
    "Slice": _axes_attr("axes", "slices axis 0, the batch"),
    "Softmax": _axis_attr("axis", "normalises from axis 0, across the batch"),
    "Squeeze": _axes_attr("axes", "removes axis 0, the batch"),
    "Transpose": _transpose,
    "UpSampling2D": _upsampling,
}


def mixes_samples(node, carried: set[int]) -> str | None:
    """Why ``node`` mixes samples, given which of its inputs carry the batch; None if not."""
    rule = PER_SAMPLE.get(node.op)
    return rule(node, carried) if rule is not None else None


# -- merging the two probe runs -----------------------------------------------------------------


def merged_shape(first, second, symbol: str):
    """The symbolic shape of a value inferred as ``first`` at PROBES[0] and ``second`` at
    PROBES[1]; None when they differ other than by the batch at axis 0 (or either is
    unknown)."""
    if first is None or second is None or len(first) != len(second):
        return None
    out = []
    for axis, (a, b) in enumerate(zip(first, second)):
        if a == b:
            out.append(a)
        elif axis == 0 and (a, b) == PROBES:
            out.append(symbol)
        else:
            return None
    return tuple(out)


def describe_difference(first, second) -> str:
    def text(shape):
        return "(" + ",".join("?" if d is None else str(d) for d in shape) + ")" \
            if shape is not None else "unknown"
    return f"{text(first)} at batch {PROBES[0]} but {text(second)} at batch {PROBES[1]}"
