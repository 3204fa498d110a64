"""Static shapes: apply --input-shape/--batch overrides, then infer every value's shape and type.

Later passes (padding proofs, layout, op selection) need every dimension known. A graph input
whose dimensions are still unknown after the overrides is an error naming that input and the
options that fix it.
"""
from __future__ import annotations

import math

from ..errors import (
    InvalidAttributeError,
    InvalidModelError,
    NodeProblem,
    UnsupportedOpError,
    UsageError,
)
from ..ir import CORE, Graph, Model, Value
from ..ir.input_shapes import SYMBOLIC, input_shape
from ..schemas.base import CORE_OPS, DIALECT_OPS, InferContext, RuleError
from ..schemas.core import MAX_EVAL_ELEMENTS, infer_dtypes
from .base import Pass, PassContext, PassResult


def _fmt(shape) -> str:
    if shape is None:
        return "unknown"
    return "(" + ",".join("?" if d is None or d == SYMBOLIC else str(d) for d in shape) + ")"


def _hint(name: str, shape) -> str:
    example = ",".join(("-1" if i == 0 else f"D{i}") if not d else str(d)
                       for i, d in enumerate(shape or (None, 224, 224, 3)))
    return (f"give it with --input-shape {name}={example} (each D a size, in the source "
            "model's layout; -1 keeps the batch symbolic) or fix the batch with --batch N")


def apply_input_overrides(graph: Graph, ctx: PassContext) -> bool:
    """Set graph-input shapes from the options' ``input_shapes`` (name -> dims) and
    ``batch``, by the rule of ``ir.input_shapes`` (the frontends applied it already; an IR
    graph built in code gets it here)."""
    changed = False
    overrides = ctx.options.input_shapes
    by_name = {v.name: v for v in graph.inputs if not v.is_const}
    # TensorFlow tensor names: 'x' and 'x:0' name the same input.
    aliases = {name.split(":")[0]: v for name, v in by_name.items()}
    for raw_name, given in overrides.items():
        raw_name = str(raw_name)
        value = (by_name.get(raw_name) or aliases.get(raw_name)
                 or by_name.get(raw_name.split(":")[0]))
        if value is None:
            known = ", ".join(sorted(by_name)) or "none"
            raise UsageError(
                f"--input-shape names '{raw_name}', which is not a graph input (inputs: {known})"
            )
        dims = [int(d) for d in given]
        if any(d <= 0 for d in dims[1:]) or (dims and dims[0] <= 0 and dims[0] != SYMBOLIC):
            raise InvalidAttributeError(f"--input-shape {raw_name}: dimensions must be positive")
        if dims and dims[0] == SYMBOLIC:  # the batch the frontend gave it (a probe) stays
            dims[0] = value.shape[0] if value.shape and isinstance(value.shape[0], int) \
                and value.shape[0] > 0 else SYMBOLIC
        for old, new in zip(value.shape or (), dims):
            if old is not None and new != SYMBOLIC and old != new:
                ctx.warn(f"input '{value.name}': overriding declared shape {_fmt(value.shape)} "
                         f"with {_fmt(dims)}")
                break
        new_shape = input_shape(value.shape, dims, name=raw_name)  # also the rank rule
        if new_shape != value.shape:
            ctx.record("input_shape", value.name, f"shape set to {_fmt(dims)}", shape=dims)
            value.shape = new_shape
            changed = True
    batch = ctx.options.batch
    if batch is not None:
        # --batch N: axis 0 of every graph input (the frontends did it for theirs already).
        for value in by_name.values():
            if not value.shape:
                continue
            new_shape = input_shape(value.shape, None, batch)
            if new_shape != value.shape:
                value.shape = new_shape
                ctx.record("input_shape", value.name, f"batch set to {batch}", batch=batch)
                changed = True
    return changed


def check_inputs_static(graph: Graph) -> None:
    bad = [v for v in graph.inputs
           if not v.is_const and (v.shape is None or not v.static or any(d == 0 for d in v.shape))]
    if bad:
        lines = [f"input '{v.name}' has shape {_fmt(v.shape)}"
                 + (" (a zero-size dimension)" if v.static else "")
                 + f": {_hint(v.name, v.shape)}" for v in bad]
        raise InvalidModelError("unknown input dimensions; " + "; ".join(lines))


def _merge(declared, inferred):
    """Inferred dims win; a dim inference cannot know keeps its declared value."""
    if inferred is None:
        return declared
    if declared is None or len(declared) != len(inferred):
        return tuple(inferred)
    if None not in inferred:
        return tuple(map(int, inferred))  # the usual case; the same as below
    return tuple(d if i is None else int(i) for d, i in zip(declared, inferred))


def infer_graph(graph: Graph) -> bool:
    """Infer shape and dtype of every node output in topological order; say if any changed.

    A broken rule is an InvalidModelError naming the node.
    """
    changed = False
    graph.toposort()
    for node in graph.nodes:
        core = node.domain == CORE
        schema = (CORE_OPS if core else DIALECT_OPS).get(node.op)
        if schema is None or schema.infer is None:
            continue
        inputs = node.inputs
        shapes = [None if v is None else v.shape for v in inputs]
        consts = [None if v is None else v.const for v in inputs]
        ictx = InferContext(node, schema.with_defaults(node.attrs), shapes, consts)
        try:
            outs = schema.infer(ictx)
        except RuleError as err:
            raise InvalidModelError(
                f"node '{node.name}' ({node.op}): {err.message}"
                + (f" (expected {err.expected}, found {err.found})" if err.expected or err.found
                   else "")
            ) from err
        except (ValueError, ArithmeticError, IndexError, TypeError) as exc:
            # Inference runs on the model's own attribute values (a 0 stride, a NaN scale):
            # a node it cannot even shape is a malformed node.
            raise InvalidModelError(
                f"node '{node.name}' ({node.op}): malformed node, its output shape cannot be "
                f"computed ({exc!r})") from exc
        dtypes = infer_dtypes(node, [None if v is None else v.dtype for v in inputs])
        for value, shape, dtype in zip(node.outputs, outs, dtypes):
            old_shape = value.shape
            new_shape = _merge(old_shape, shape)
            _refuse_absurd(node, new_shape)
            if new_shape != old_shape:
                value.shape = new_shape
                changed = True
            if core and dtype is not None and dtype != value.dtype:
                value.dtype = dtype
                changed = True
    return changed


def _refuse_absurd(node, shape) -> None:
    """A shape past the evaluators' limit would make later passes allocate or loop for ever
    (index plans, nearest-neighbour maps): the model is broken, say where."""
    if shape is None or None in shape:
        return
    count = math.prod(int(d) for d in shape)
    if count > MAX_EVAL_ELEMENTS:
        raise InvalidModelError(
            f"node '{node.name}' ({node.op}): output shape {_fmt(shape)} has {count} elements "
            f"(limit {MAX_EVAL_ELEMENTS}); refused as absurd")


def refuse_empty_tensors(graph: Graph, ctx: PassContext) -> None:
    """A computed tensor with no elements (Expand to a 0 dim, an empty Slice) that something
    reads has no dialect form: one refusal listing every producer. Unread empty tensors (an
    empty Split piece) are left to the passes that drop them."""
    problems = []
    outputs = {id(v) for v in graph.outputs}
    for node in graph.nodes:
        for value in node.outputs:
            if value.is_const or value.shape is None or not value.static \
                    or all(int(d) for d in value.shape):
                continue
            if value.uses() or id(value) in outputs:
                problems.append(NodeProblem(
                    node.name, node.op, f"output '{value.name}' is empty (shape "
                    f"{_fmt(value.shape)}); empty tensors have no dialect form"))
    if problems:
        ctx.refuse_stage(UnsupportedOpError(problems))


def unknown_values(graph: Graph) -> list[Value]:
    return [v for v in graph.values() if not v.is_const and not v.static]


class StaticShapes(Pass):
    """Shape inference over core ops; with ``require_static`` every value must end up known."""

    name = "static_shapes"

    def __init__(self, apply_overrides: bool = True, require_static: bool = False):
        self.apply_overrides = apply_overrides
        self.require_static = require_static

    def call(self, model: Model, ctx: PassContext) -> PassResult:
        graph = model.graph
        changed = apply_input_overrides(graph, ctx) if self.apply_overrides else False
        check_inputs_static(graph)
        changed |= infer_graph(graph)
        if self.require_static:
            missing = unknown_values(graph)
            if missing:
                shown = ", ".join(f"'{v.name}' {_fmt(v.shape)}" for v in missing[:8])
                raise InvalidModelError(
                    f"{len(missing)} tensor(s) have shapes that cannot be computed statically: "
                    f"{shown}; shapes computed at run time are not supported"
                )
            refuse_empty_tensors(graph, ctx)
        return PassResult(changed)
