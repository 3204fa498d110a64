"""Running one core node's rules: shape inference (for frontends while they build, and the
static-shapes pass), numpy evaluation (constant folding, reference executor) and element types,
through the rules each core op declares."""
from __future__ import annotations

import math

import numpy as np

from ...errors import InvalidAttributeError, InvalidModelError
from ...ir import Node, Value
from ..base import CORE_OPS, InferContext, RuleError

# A tensor above this many elements (8 GiB of float32) is an absurd shape, not a model.
MAX_EVAL_ELEMENTS = 1 << 31
# Ops whose output size comes from input values or attributes, not from the inputs' sizes:
# their size is checked before numpy is asked to allocate it.
SIZED_BY_VALUES = {"ConstantOfShape", "Range", "Expand", "Tile", "Pad", "Resize"}


def infer_node_shapes(node, shapes: list, consts: list) -> list:
    """Output shapes of core ``node`` from its inputs' shapes and constant values (None where
    unknown). A broken rule raises RuleError."""
    schema = CORE_OPS[node.op]
    assert schema.infer is not None  # every core op declares one (define.core_op)
    return schema.infer(InferContext(node, schema.with_defaults(node.attrs), list(shapes),
                                     list(consts)))


def infer_output_shapes(op: str, attrs: dict, shapes: list, n_outputs: int = 1) -> list:
    """Output shapes of core op ``op`` before its node exists (a frontend sizing the tops it
    is about to create). ``shapes`` has None for an absent optional input."""
    inputs = [None if s is None else Value(f"in{i}", shape=tuple(s)) for i, s in enumerate(shapes)]
    probe = Node(op, inputs, [Value(f"out{i}") for i in range(n_outputs)], dict(attrs), name=op)
    return infer_node_shapes(probe, [None if s is None else tuple(s) for s in shapes],
                             [None] * len(shapes))


def output_elements(node, input_arrays: list) -> int | None:
    """Elements of the node's largest output, from shape inference on the arrays (None:
    not known without evaluating)."""
    schema = CORE_OPS.get(node.op)
    if schema is None or schema.infer is None:
        return None
    arrays = [None if a is None else np.asarray(a) for a in input_arrays]
    try:
        shapes = infer_node_shapes(node, [None if a is None else tuple(a.shape) for a in arrays],
                                   arrays)
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


def infer_dtypes(node, in_dtypes: list[str | None]) -> list[str | None]:
    """Element type of each output of a core node from its inputs' types."""
    infer_dtype = CORE_OPS[node.op].infer_dtype
    assert infer_dtype is not None  # every core op declares one (define.core_op)
    return infer_dtype(node, in_dtypes)
