"""Constant folding with the core numpy evaluators.

A node whose inputs are all constants is evaluated once and its outputs become constants that
keep the node's output names (so ``bn/Rsqrt`` stays a readable weight name). ``Shape``/``Size``
of a tensor whose shape is static fold too, which then lets whole shape subgraphs (Gather,
Slice, Concat, Unsqueeze, Cast, ConstantOfShape, Range ...) fold. Shapes are re-inferred between
rounds so a Reshape whose target just became constant gets its static output shape.
Size guard: an output larger than ``FoldConstants(max_bytes)`` (default 256 MiB) is left as a
node, unless every reader takes it as a weight (the converted model stores it either way); the
size is judged from the inferred shape before evaluating, and after evaluating for outputs whose
shape was unknown (integer, shape-like, results then always fold).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidModelError
from ..ir import CORE, Graph, Model, Node
from ..schemas import batch_values
from ..schemas.base import CORE_OPS
from ..schemas.core import evaluate_node
from .base import Pass, PassContext, PassResult
from .static_shapes import infer_graph

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
SHAPE_OF_STATIC = {"Shape", "Size"}
# Ops whose inputs after the first are parameters (weights, biases, statistics, slopes).
PARAMETER_INPUTS = {"Conv", "ConvTranspose", "Gemm", "MatMul", "BatchNormalization", "PRelu"}


def _only_parameter(value) -> bool:
    uses = value.uses()
    return bool(uses) and all(node.op in PARAMETER_INPUTS and index >= 1 for node, index in uses)


def _foldable(node: Node, graph_outputs: set[int]) -> bool:
    if node.domain != CORE:
        return False
    schema = CORE_OPS.get(node.op)
    if schema is None or schema.evaluate is None:
        return False
    present = [v for v in node.inputs if v is not None]
    if not present:
        return False
    if node.op in SHAPE_OF_STATIC:
        if not present[0].static:
            return False
    else:
        for v in present:
            if v.const is None:  # most nodes stop here: read before the outputs are looked at
                return False
    # A graph output stays a computed tensor.
    return not any(id(v) in graph_outputs for v in node.outputs)


_ITEMSIZES: dict[str | None, int] = {}


def _too_big_to_try(node: Node, max_bytes: int) -> bool:
    """Judge the size from the inferred output shapes before numpy allocates anything: an
    over-budget output stays a node (weights excepted, which the model stores either way)."""
    for value in node.outputs:
        if value.shape is None or not value.static or _only_parameter(value):
            continue
        itemsize = _ITEMSIZES.get(value.dtype)
        if itemsize is None:
            try:
                itemsize = np.dtype(value.dtype).itemsize
            except TypeError:
                itemsize = 8
            _ITEMSIZES[value.dtype] = itemsize
        if math.prod(value.shape) * itemsize > max_bytes:  # static: Python ints
            return True
    return False


def _evaluate(node: Node) -> list[np.ndarray]:
    if node.op in SHAPE_OF_STATIC:
        x = node.inputs[0]
        assert x is not None and x.shape is not None  # evaluated only on a static input
        shape = x.shape
        if node.op == "Shape":
            return [np.asarray(shape, dtype=np.int64)]
        return [np.asarray(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)]
    try:
        return evaluate_node(node, [None if v is None else v.const for v in node.inputs])
    except (ValueError, ArithmeticError, IndexError, TypeError) as exc:
        # Every input is the model's own constant data: numpy refusing it is a broken model.
        raise InvalidModelError(f"node '{node.name}' ({node.op}): malformed node, it cannot be "
                                f"computed from its constant inputs ({exc!r})") from exc


def fold_round(graph: Graph, max_bytes: int, folded: dict[str, int],
               probe: int | None = None) -> bool:
    """One pass over the graph; ``probe``: the size of an open batch in this probe conversion,
    whose values are then tagged as they fold (``batch_values``)."""
    changed = False
    graph.toposort()
    outputs = {id(v) for v in graph.outputs}
    for node in graph.nodes:
        if not _foldable(node, outputs) or _too_big_to_try(node, max_bytes):
            continue
        arrays = _evaluate(node)
        too_big = any(
            a.nbytes > max_bytes and not np.issubdtype(a.dtype, np.integer)
            and not _only_parameter(v) for a, v in zip(arrays, node.outputs)
        )
        if too_big:
            continue
        values = list(node.outputs)
        tags = batch_values.tag_folded(node, arrays, probe) if probe else [{}] * len(values)
        graph.remove_node(node)
        for value, array, tag in zip(values, arrays, tags):
            value.set_const(np.array(array, order="C"))  # keeps 0-d arrays 0-d
            # a frontend that tagged it already named the source node
            value.meta.update({k: w for k, w in tag.items()
                               if k == batch_values.SLOPE or k not in value.meta})
        folded[node.op] = folded.get(node.op, 0) + 1
        changed = True
    return changed


class FoldConstants(Pass):
    name = "fold_constants"

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES):
        self.max_bytes = max_bytes  # a folded output larger than this stays a node

    def call(self, model: Model, ctx: PassContext) -> PassResult:
        graph = model.graph
        max_bytes = self.max_bytes
        folded: dict[str, int] = {}
        modified = False
        probe = batch_values.probe_size(graph)
        while fold_round(graph, max_bytes, folded, probe):
            modified = True
            infer_graph(graph)
        if probe is not None:
            model.batch_findings += batch_values.findings(graph, probe)
        if folded:
            summary = ", ".join(f"{op} x{n}" for op, n in sorted(folded.items()))
            ctx.record("fold_constants", "", f"folded {sum(folded.values())} node(s): {summary}",
                       counts=folded)
        return PassResult(modified)
