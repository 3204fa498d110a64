"""Small graph-editing helpers shared by the core -> dialect passes.

A rewritten node keeps its name and its output Values (so consumers, graph outputs and their
public names stay put): ``become`` changes op, domain, attributes and inputs in place. Helper
nodes put before it get readable names derived from it (``conv1/pad``).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import NodeProblem
from ..ir import CORE, DIALECT, NHWC, DeferredArray, Graph, Node, Value


def become(node: Node, op: str, inputs: Sequence[Value | None], attrs: dict[str, Any] | None = None,
           domain: str = DIALECT) -> Node:
    """Turn ``node`` into another op in place, keeping its name and outputs."""
    node.op = op
    node.domain = domain
    node.attrs = dict(attrs or {})
    node.set_inputs(list(inputs))
    return node


def emit(graph: Graph, op: str, inputs: Sequence[Value | None], attrs: dict[str, Any] | None,
         name: str, shape: Sequence[int], domain: str = DIALECT, doc: str = "") -> Value:
    """Add one node (named from ``name``) with one fresh output tensor; returns the tensor."""
    out = Value(graph.unique_name(name), "float32", shape, layout=NHWC if len(shape) == 4 else None)
    graph.make_node(op, list(inputs), attrs, name=name, outputs=[out], domain=domain, doc=doc)
    return out


def const(graph: Graph, array: Any, name: str, dtype: Any = np.float32) -> Value:
    # asarray keeps 0-d arrays 0-d and does not copy a weight that already has the type (a
    # transposed view stays a view; the serializer writes it in C order). A deferred weight
    # of that type stays deferred (a folded weight is computed by the writer).
    if isinstance(array, DeferredArray) and np.dtype(dtype).name == array.dtype_name:
        return graph.constant(array, name)  # type: ignore[arg-type]  # an ndarray stand-in
    return graph.constant(np.asarray(array, dtype=dtype), name)


def const_of(value: Value | None) -> np.ndarray | None:
    """The constant's values (a DeferredArray as it is: numpy reads it when used)."""
    if value is None or not value.is_const:
        return None
    c = value.const
    return c if isinstance(c, DeferredArray) else np.asarray(c)


def sole_consumer(graph: Graph, value: Value) -> Node | None:
    """The only node reading ``value`` (once), when it is not also a graph output."""
    uses = value.uses()
    if len(uses) != 1 or any(v is value for v in graph.outputs):
        return None
    return uses[0][0]


def channel_vector(array: np.ndarray | None, channels: int | None, rank: int | None
                   ) -> np.ndarray | None:
    """The 1-D per-channel (last axis) vector a broadcast constant stands for, else None.

    Accepts shapes (C,), (1, C), (1, 1, 1, C) ... that broadcast only along the last axis of a
    rank-``rank`` tensor, and scalars / all-ones shapes (the same value on every channel).
    """
    if array is None or channels is None or rank is None or array.ndim > rank:
        return None
    if array.dtype.kind not in "fiu":
        return None
    shape = array.shape
    if any(d != 1 for d in shape[:-1]):
        return None
    if array.ndim == 0 or shape[-1] == 1:
        return np.full(channels, float(array.reshape(-1)[0]) if array.size else 0.0)
    if shape[-1] != channels:
        return None
    return array.reshape(-1).astype(np.float64)


def problem(node: Node, reason: str, rule: str = "") -> NodeProblem:
    # A frontend may expand one source op into several core ops (ONNX LRN -> Mul, Conv, Pow,
    # Div): name the source op too, so the user recognises the node.
    if node.doc and node.doc != node.op:
        reason = f"{reason} (part of source op {node.doc})"
    return NodeProblem(node.name, node.op, reason, rule)


def int_pair(node: Node, name: str, default: int) -> list[int]:
    """A two-element int attribute (strides, dilations ...); absent or empty: the default."""
    value = node.attrs.get(name)
    return [int(v) for v in value] if value else [default, default]


def affine_batchnorm(graph: Graph, node: Node, x: Value, scale: np.ndarray, bias: np.ndarray,
                     domain: str = DIALECT) -> Node:
    """Turn ``node`` into y = x*scale + bias per channel: BatchNormalization with mean 0,
    var 1, epsilon 0 (the core op also names its channel axis, the last)."""
    c = scale.shape[0]
    attrs: dict[str, Any] = {"epsilon": 0.0}
    if domain == CORE:
        attrs["axis"] = -1
    return become(node, "BatchNormalization",
                  [x, const(graph, scale, f"{node.name}/scale"),
                   const(graph, bias, f"{node.name}/B"),
                   const(graph, np.zeros(c), f"{node.name}/mean"),
                   const(graph, np.ones(c), f"{node.name}/var")], attrs, domain=domain)


def shape_of(value: Value | None) -> tuple | None:
    return None if value is None or value.shape is None else tuple(value.shape)


def present(value: Value | None) -> Value:
    """An input a handler knows is there: a required input of a validated node."""
    assert value is not None, "a required input is missing"
    return value


def dims(value: Value | None) -> tuple:
    """The shape of a value a handler knows: an input or output of a validated node whose
    shapes static_shapes inferred (``apply_handlers`` runs a handler only when ready)."""
    assert value is not None and value.shape is not None, "a handler's value has no shape"
    return value.shape


def positive_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def append_after(graph: Graph, node: Node, op: str, extra_inputs: Sequence[Value | None],
                 attrs: dict[str, Any] | None, suffix: str, domain: str = DIALECT,
                 shape: Sequence[int] | None = None) -> Node:
    """Insert ``op`` right after ``node``: it takes over node's output tensor (name, consumers,
    graph-output role); ``node`` now writes a fresh intermediate tensor."""
    old = node.outputs[0]
    inner = old.shape if shape is None else tuple(shape)
    fresh = Value(graph.unique_name(f"{node.name}/{suffix}_in"), "float32", inner, old.layout)
    graph.move_output(fresh, node)
    return graph.make_node(op, [fresh, *extra_inputs], attrs, name=f"{node.name}/{suffix}",
                           outputs=[old], domain=domain)


def refuse(ctx, node: Node, reason: str, rule: str = "") -> bool:
    """Leave ``node`` unconverted and say why; legalisation reports it in the one final error.

    Recorded as a "select" decision (no dialect form), or with ``rule`` "padding" as a
    "padding" one (no exact dialect padding for the node's windows)."""
    if rule == "padding":
        kind, detail = "padding", f"no exact dialect padding (left for legalisation): {reason}"
    else:
        kind, detail = "select", f"{node.op}: {reason}"
    extra = {"rule": rule} if rule else {}
    ctx.record(kind, node.name, detail, refused=True, op=node.op, reason=reason, **extra)
    ctx.refusals[node] = problem(node, reason, rule)
    return False


def apply_handlers(graph: Graph, ctx, handlers: dict, ready) -> list[tuple[Node, str]]:
    """Run each core node's handler in topological order where ``ready(node)``; a handler
    returns True when it rewrote the node. Returns (node, its op before the rewrite) pairs, and
    drops whatever the rewrites left unused."""
    graph.toposort()
    done = []
    for node in graph.nodes:
        if node.graph is None or node.domain != CORE:
            continue
        handler = handlers.get(node.op)
        if handler is None or not ready(node):
            continue
        op = node.op
        if handler(graph, node, ctx):
            done.append((node, op))
    if done:
        remove_dead(graph)
    return done


def remove_dead(graph: Graph) -> int:
    """Drop nodes whose outputs nobody reads (patterns leave their inner nodes behind)."""
    graph.toposort()
    removed = 0
    for node in reversed(graph.nodes):
        if any(v.uses() or any(v is o for o in graph.outputs) for v in node.outputs):
            continue
        graph.remove_node(node)
        removed += 1
    return removed
