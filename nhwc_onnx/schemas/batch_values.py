"""Values computed from a symbolic batch's size, tracked while constants fold.

A probe conversion (``nhwc_onnx.conversion.symbolic_batch``) gives an open batch a size, so
``Shape`` or ``Size`` of a tensor that carries it folds to a number such as 11. That number is not a
constant of the model: it is N. Every folded value computed from it carries, per element, its
slope in N (``value = slope * N + offset``, where ``offset = value - slope * probe``), NaN
where the element is no affine function of N (a Min, a comparison, a rounding division, a
range). Slopes are carried exactly through the shape arithmetic exporters write (Shape,
Gather, Slice, Concat, Unsqueeze, Cast, Add/Sub/Mul/Div by constants ...), as symbolic shape
inference does; a value is tagged only when some slope is not 0. The passes' constant folding
tags the core graph's values; the ONNX and TensorFlow frontends tag the values they fold
themselves to read attributes.

Two probe conversions agree on a value that happens to be equal at both sizes (``min(N, 5)``
is 5 at 11 and at 13), so their agreement proves nothing here. After folding, every reader of
a tagged value is a finding (``Model.batch_findings``) unless the dialect spells the batch
there itself: index 0 of a Reshape target that is exactly N (slope 1, offset 0) while the
Reshape's data carries the batch at axis 0 (written as 0, "copy axis 0"), or of Resize sizes.
A frontend taking a tagged value as any other attribute (a Slice bound, paddings) is a
finding too. ``symbolic_batch.finish`` refuses the findings both probe conversions make: a
real dimension equal to one probe size is tagged only there.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import NhwcOnnxError, NodeProblem
from ..ir import Graph, Node, Value

SLOPE = "batch_slope"  # Value.meta: float64 array shaped as the constant; NaN: not affine in N
ORIGIN = "batch_origin"  # Value.meta: (node, op) that made some element no affine function of N
SOURCE = "batch_source"  # Value.meta: (node, op) of the Shape/Size that read the batch's size
REMEDY = "convert with --batch N for a fixed batch"

# Ops that only move or repeat elements: the slopes move with them. The inputs listed are
# indices or shapes, which must not depend on the batch themselves.
_MOVES = {"Identity": (), "Gather": (1,), "Slice": (), "Unsqueeze": (), "Squeeze": (),
          "Concat": (), "Reshape": (1,), "Flatten": (), "Transpose": (), "Expand": (1,),
          "Tile": (1,), "Split": ()}
_SUMS = {"Add", "Sub", "Sum", "Neg"}


def probe_size(graph: Graph) -> int | None:
    """The size an open batch has in this probe conversion (None: the batch is fixed)."""
    sizes = {v.shape[0] for v in graph.inputs if "batch_symbol" in v.meta and v.shape}
    return sizes.pop() if len(sizes) == 1 else None


def _const(value: Value) -> np.ndarray | None:
    return value.const


def _shape_of(array: np.ndarray | None) -> tuple:
    """numpy's shape of an array or of None (``()``: numpy reads None as a 0-d object)."""
    return () if array is None else np.shape(array)


def tag_folded(node: Node, arrays: list[np.ndarray], probe: int,
               array_of: Callable[[Value], np.ndarray | None] = _const) -> list[dict]:
    """The meta entries of the outputs of core ``node``, folded to ``arrays`` (one dict per
    output, empty when it does not depend on the batch). Read before the node leaves the
    graph. ``array_of``: an input's value (a frontend knows values that are no constants
    yet)."""
    from .core import evaluate_node

    if node.op in ("Shape", "Size"):
        x = node.inputs[0]
        slopes = None if x is None or x.is_const else shape_slopes(x.shape, probe, node.op)
        return [tags(slopes, [], _who(node))] if slopes is not None else [{}]
    metas = [{} if v is None else v.meta for v in node.inputs]
    if not any(SLOPE in m for m in metas):
        return [{} for _ in arrays]
    cast = np.dtype(node.attrs["to"]).kind if node.op == "Cast" else ""
    ins = Inputs(node.op, [None if v is None else array_of(v) for v in node.inputs],
                 [m.get(SLOPE) for m in metas], lambda xs: evaluate_node(node, xs),
                 _MOVES.get(node.op, ()), cast,
                 whole=not node.attrs.get("axes") or (
                     node.inputs[0] is not None
                     and len(_shape_of(array_of(node.inputs[0]))) == 1))
    return [tags(slope, metas, _who(node)) for slope in propagate(ins, arrays, probe)]


def tags(slope: np.ndarray | None, metas: list[dict], who: tuple[str, str]) -> dict:
    """The meta entries of a value of ``slope`` computed by ``who`` from inputs whose meta
    entries are ``metas`` (none: ``who`` reads the batch's size)."""
    if slope is None or not np.any(slope != 0):  # NaN != 0 too
        return {}
    entry = {SLOPE: slope,
             SOURCE: next((m[SOURCE] for m in metas if SOURCE in m), who)}
    if np.isnan(slope).any():
        entry[ORIGIN] = next((m[ORIGIN] for m in metas if ORIGIN in m), who)
    return entry


class Inputs:
    """One node's inputs as the slope rules see them, whichever graph the node is in."""

    def __init__(self, op: str, arrays: list, slopes: list, evaluate: Callable,
                 fixed: tuple[int, ...] = (), cast_kind: str = "", whole: bool = True):
        self.op = op
        self.arrays = arrays  # each input's value (None: absent)
        self.slopes = slopes  # each input's slope in N (None: it does not depend on N)
        self.tagged = [s is not None for s in slopes]
        self.evaluate = evaluate  # input arrays -> output arrays, by the node's own rules
        self.fixed = fixed  # the inputs of an op that moves elements that are indices/shapes
        self.cast_kind = cast_kind  # Cast: the numpy kind of its target type
        self.whole = whole  # ReduceProd: over every element

    def slope(self, i: int) -> np.ndarray:
        if self.slopes[i] is not None:
            return self.slopes[i]
        return np.zeros(np.shape(self.arrays[i]), dtype=np.float64)

    def offset(self, i: int, probe: int) -> np.ndarray:
        return np.asarray(self.arrays[i], dtype=np.float64) - self.slope(i) * probe


def copy_tags(source: Value, target: Value) -> Value:
    """``target`` (a constant made of ``source``'s value) depends on the batch as it does."""
    target.meta.update({k: source.meta[k] for k in (SLOPE, SOURCE, ORIGIN)
                        if k in source.meta})
    return target


def tag_quotient(target: Value, a: Value, b: Value, a_array, b_array, probe: int,
                 remainder: bool, who: tuple[str, str]) -> None:
    """Tag ``target`` = a // b (or a mod b) of integers known before running the graph."""
    if SLOPE not in a.meta and SLOPE not in b.meta:
        return
    slope = np.full(_shape_of(target.const), np.nan)
    if SLOPE not in b.meta:
        a_slope = a.meta[SLOPE]
        offset = np.asarray(a_array, dtype=np.float64) - a_slope * probe
        quotient = divided_slope(a_slope, offset, b_array, integer=True)
        # a mod b is 0 where b divides a at every batch size, else no affine function of N
        slope = np.where(np.isnan(quotient), np.nan, 0.0) if remainder else quotient
        slope = np.broadcast_to(slope, _shape_of(target.const)).astype(np.float64)
    if not np.any(slope != 0):
        return
    target.meta[SLOPE] = slope
    target.meta[SOURCE] = (a.meta.get(SOURCE) or b.meta[SOURCE])
    if np.isnan(slope).any():
        target.meta[ORIGIN] = a.meta.get(ORIGIN) or b.meta.get(ORIGIN) or who


def attribute_finding(name: str, meta: dict, array, probe: int, node: str, op: str,
                      what: str) -> NodeProblem | None:
    """A value computed from the batch's size that a frontend takes as an attribute (a
    Slice bound, an axis, paddings ...): the attribute would be a number of one batch."""
    if SLOPE not in meta:
        return None
    source_name, source_op = meta[SOURCE]
    by = f"by '{meta[ORIGIN][0]}' ({meta[ORIGIN][1]}) " if ORIGIN in meta else ""
    return NodeProblem(
        node, op, f"takes {what} '{name}' = {describe(meta[SLOPE], array, probe)}, computed "
        f"{by}from the batch's size (read by '{source_name}' ({source_op})): an attribute "
        f"holds one number, not one per batch size; {REMEDY}", "batch")


def _who(node: Node) -> tuple[str, str]:
    return node.name, node.doc or node.op


def shape_slopes(shape, probe: int, op: str) -> np.ndarray | None:
    """Slopes of Shape (or Size) of a computed tensor of ``shape``: its dimensions equal to
    the probe size are taken as the batch."""
    if not shape:
        return None
    batch_axes = [d == probe for d in shape]
    if not any(batch_axes):
        return None
    if op == "Shape":
        return np.asarray(batch_axes, dtype=np.float64)
    if sum(batch_axes) > 1:  # N * N * ...: no affine function of N
        return np.asarray(np.nan)
    rest = [d for d, is_batch in zip(shape, batch_axes) if not is_batch]
    return np.asarray(float(np.prod(rest, dtype=np.float64)))


def propagate(ins: Inputs, arrays: list[np.ndarray], probe: int) -> list[np.ndarray | None]:
    """Slopes of the outputs (``arrays``) of a node some of whose inputs depend on the batch."""
    tagged, op = ins.tagged, ins.op
    unknown: list[np.ndarray | None] = [np.full(np.shape(a), np.nan) for a in arrays]
    count = range(len(ins.arrays))
    try:
        if op in _MOVES:
            if any(tagged[i] for i in ins.fixed if i < len(tagged)):
                return unknown
            moved = [None if ins.arrays[i] is None else
                     ins.arrays[i] if i in ins.fixed else ins.slope(i) for i in count]
            return [np.asarray(s, dtype=np.float64) for s in ins.evaluate(moved)]
        if op in _SUMS:
            return [np.asarray(s, dtype=np.float64)
                    for s in ins.evaluate([ins.slope(i) for i in count])]
        if op == "Cast":
            return [_cast_slope(ins, probe, ins.cast_kind)]
        if op == "Mul" and sum(tagged) == 1:
            scale = ins.arrays[1] if tagged[0] else ins.arrays[0]
            slope = ins.slope(0 if tagged[0] else 1)
            with np.errstate(invalid="ignore"):
                return [np.asarray(slope * np.asarray(scale, dtype=np.float64))]
        if op == "Div" and tagged == [True, False]:
            return [divided_slope(ins.slope(0), ins.offset(0, probe), ins.arrays[1],
                                  np.dtype(ins.arrays[0].dtype).kind in "iu")]
        if op == "ReduceProd":
            return [_product_slope(ins, probe, arrays[0])]
    except (NhwcOnnxError, ValueError, TypeError, ArithmeticError, LookupError):
        return unknown  # an evaluator refusing slopes: no affine form known, so none claimed
    return unknown


def _cast_slope(ins: Inputs, probe: int, kind: str) -> np.ndarray:
    slope = ins.slope(0)
    if kind == "f":
        return slope
    if kind in "iu":
        offset = ins.offset(0, probe)
        exact = np.isfinite(slope) & (slope == np.round(slope)) & (offset == np.round(offset))
        return np.where(exact, slope, np.nan)
    return np.full(np.shape(slope), np.nan)  # bool: a comparison with 0


def divided_slope(slope: np.ndarray, offset: np.ndarray, divisor, integer: bool
                  ) -> np.ndarray:
    """The slope of (slope * N + offset) / divisor; an integer division rounds, so it is
    affine only when the divisor divides both."""
    divisor = np.asarray(divisor, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        result = np.asarray(slope / divisor)
        if integer:
            exact = (np.fmod(slope, divisor) == 0) & (np.fmod(offset, divisor) == 0)
            result = np.where(exact, result, np.nan)
    return result


def _product_slope(ins: Inputs, probe: int, out: np.ndarray) -> np.ndarray:
    """A product of a shape's entries one of which is k*N: k times the others."""
    slope = ins.slope(0).reshape(-1)
    values = np.asarray(ins.arrays[0], dtype=np.float64).reshape(-1)
    batch = np.flatnonzero(slope != 0)
    if not ins.whole or len(batch) != 1 or np.isnan(slope[batch[0]]) or \
            ins.offset(0, probe).reshape(-1)[batch[0]] != 0:
        return np.full(np.shape(out), np.nan)
    return np.full(np.shape(out), slope[batch[0]] * np.prod(np.delete(values, batch[0])))


# -- the readers of batch-dependent constants, once folding is done ----------------------------


def findings(graph: Graph, probe: int) -> list[NodeProblem]:
    """Every node that reads a value computed from the batch's size where the dialect cannot
    spell it (see the module docstring); one problem per node."""
    found: dict[str, NodeProblem] = {}
    live = _live(graph)
    products = _per_sample_products(graph, probe)
    for value in graph.constants():
        if SLOPE not in value.meta:
            continue
        for node, index in value.uses():
            if id(node) not in live or _spells_the_batch(value, node, index, probe) or \
                    (index == 1 and id(node) in products):
                continue
            problem = _problem(value, node, index, probe)
            found.setdefault(problem.node, problem)
    return list(found.values())


def _per_sample_products(graph: Graph, probe: int) -> set[int]:
    """ids of the Reshapes that fold the batch into the rows of a product by a constant
    matrix (and a constant bias) and split the rows back as they were: TensorFlow's Tensordot
    of a Dense on a rank >= 3 tensor. As a whole the pair is per sample (a 1x1 convolution);
    the two probe conversions still judge how it is converted."""
    found: set[int] = set()
    for first in graph.nodes:
        x = first.inputs[0] if first.op == "Reshape" and first.inputs else None
        if x is None or x.is_const or not x.shape or len(x.shape) < 3 or x.shape[0] != probe:
            continue
        rows = first.outputs[0]
        if tuple(rows.shape or ()) != (int(np.prod(x.shape[:-1])), x.shape[-1]):
            continue
        product = _sole_reader(rows)
        weight = product.inputs[1] if product is not None and product.op == "MatMul" else None
        if product is None or weight is None or product.inputs[0] is not rows \
                or weight.const is None or weight.const.ndim != 2:
            continue
        last = _sole_reader(product.outputs[0])
        if last is not None and last.op == "Add" and any(
                v is not None and v.const is not None and v.const.size == weight.const.shape[1]
                for v in last.inputs):
            last = _sole_reader(last.outputs[0])
        if last is not None and last.op == "Reshape" and \
                tuple(last.outputs[0].shape or ()) == (*x.shape[:-1], weight.const.shape[1]):
            found |= {id(first), id(last)}
    return found


def _sole_reader(value: Value) -> Node | None:
    readers = value.consumers()
    return readers[0] if len(readers) == 1 else None


def _live(graph: Graph) -> set[int]:
    """ids of the nodes some graph output depends on (the others are dropped as dead code)."""
    live: set[int] = set()
    stack = [v.producer() for v in graph.outputs]
    while stack:
        node = stack.pop()
        if node is None or id(node) in live:
            continue
        live.add(id(node))
        stack.extend(v.producer() for v in node.inputs if v is not None)
    return live


def _spells_the_batch(value: Value, node: Node, index: int, probe: int) -> bool:
    """Index 0 of a Reshape target that is N itself, the rest free of N, on data whose axis 0
    is the batch."""
    if node.op != "Reshape" or index != 1 or value.const is None or value.const.ndim != 1 \
            or not value.const.size:
        return False
    data = node.inputs[0]
    return bool(is_the_batch_at_0(value.meta[SLOPE], value.const, probe) and data is not None
                and not data.is_const and data.shape and data.shape[0] == probe)


def is_the_batch_at_0(slope: np.ndarray, array, probe: int) -> bool:
    """A 1-D shape whose entry 0 is N itself and whose other entries do not depend on N."""
    array = np.asarray(array)
    return bool(array.ndim == 1 and array.size and slope[0] == 1 and int(array[0]) == probe
                and not np.any(slope[1:] != 0))


def describe(slope: np.ndarray, array, probe: int) -> str:
    """A value in terms of N: 'N', '[N, 3, -1]', '3*N + 1'; 'f(N)' where no affine form."""
    slopes = np.asarray(slope).reshape(-1)
    offsets = np.asarray(array, dtype=np.float64).reshape(-1) - slopes * probe
    terms = [_term(s, o) for s, o in zip(slopes[:8], offsets[:8])]
    more = ", ..." if slopes.size > 8 else ""
    return terms[0] if np.ndim(array) == 0 else f"[{', '.join(terms)}{more}]"


def _term(slope: float, offset: float) -> str:
    if np.isnan(slope):
        return "f(N)"

    def number(x: float) -> str:
        return str(int(x)) if float(x).is_integer() else f"{x:g}"
    if slope == 0:
        return number(offset)
    text = "N" if slope == 1 else "-N" if slope == -1 else f"{number(slope)}*N"
    if offset:
        text += f" {'+' if offset > 0 else '-'} {number(abs(offset))}"
    return text


def _problem(value: Value, reader: Node, index: int, probe: int) -> NodeProblem:
    source_name, source_op = value.meta[SOURCE]
    read = f"the batch's size, read by '{source_name}' ({source_op})"
    if ORIGIN in value.meta:
        name, op = value.meta[ORIGIN]
        return NodeProblem(
            name, op, f"computes a number from {read} that is no affine function of it "
            f"('{reader.name}' reads it): its value changes with the batch size, so it cannot "
            f"be folded into a constant; {REMEDY}", "batch")
    how = ("as its target shape (only index 0 may be the batch, copied by 0)"
           if reader.op == "Reshape" and index == 1 else f"as input {index}")
    return NodeProblem(
        reader.name, reader.doc or reader.op,
        f"reads '{value.name}' = {describe(value.meta[SLOPE], value.const, probe)}, computed "
        f"from {read}, {how}: a number that changes with the batch size cannot be folded into a "
        f"constant; {REMEDY}",
        "batch")
