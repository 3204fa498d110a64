"""The state of the NCHW -> NHWC walk, and what a layout rule is.

``LayoutWalk`` holds each value's source shape and layout (see ``perm``) while the ``to_nhwc``
pass visits the graph in topological order, and the rewrites rules share (new constants, a
permuted constant input, ``coerce``). A ``LayoutRule`` is the function the walk calls for the
nodes of one core op, with the layout class it implies.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from ...errors import NodeProblem
from ...ir import Model, Node, Value
from ...schemas.base import LayoutClass
from ..base import PassContext
from .perm import (
    Perm,
    identity,
    is_identity,
    pad_sigma,
    permute_const,
    same_bytes,
    stored_shape,
    transpose_between,
)


class LayoutRule:
    """How the walk moves one core op to the stored layout: ``apply(walk, node)`` rewrites the
    node (axis attributes, constants, data_format) and sets the layout of its outputs, or
    records through ``walk.coerce`` that a layout Transpose would be needed.

    ``layout_class`` says what the rule does, in tflite2onnx's terms (an op's layout class is
    its rule's); ``always_runs``: the walk calls it even when no permuted value reaches the node;
    ``keeps_layout``: the rule stores the node's result in its (first permuted) operand's layout
    (elementwise ops, Concat, Slice, Softmax ...), which the look-ahead of ``demand`` follows.
    """

    __slots__ = ("always_runs", "apply", "keeps_layout", "layout_class")

    def __init__(self, apply: Callable[[LayoutWalk, Node], None], layout_class: LayoutClass,
                 always_runs: bool = False, keeps_layout: bool = False):
        self.apply = apply
        self.layout_class = layout_class
        self.always_runs = always_runs
        self.keeps_layout = keeps_layout

    def __call__(self, walk: LayoutWalk, node: Node) -> None:
        self.apply(walk, node)

    def __repr__(self) -> str:
        return f"LayoutRule({self.apply.__name__}, {self.layout_class.value})"


def layout_rule(layout_class: LayoutClass, always_runs: bool = False,
                keeps_layout: bool = False):
    """Declare a function ``fn(walk, node)`` as a layout rule of ``layout_class``."""
    return lambda fn: LayoutRule(fn, layout_class, always_runs, keeps_layout)


class LayoutWalk:
    """Layouts of the values while the pass walks the graph, and the rewrites it makes."""

    def __init__(self, model: Model, ctx: PassContext, rules: Mapping[str, LayoutRule]):
        self.model = model
        self.rules = rules  # core op -> its rule (passes.layout.table.LAYOUT_RULES)
        self.graph = model.graph
        self.ctx = ctx
        self.allow_transpose = ctx.options.allow_transpose
        self.src: dict[int, tuple] = {}
        self.sigma: dict[int, Perm] = {}
        self.problems: list[NodeProblem] = []
        self.cache: dict[tuple, Value] = {}
        self.changed = False
        self.vanishing: list[Node] = []  # Transposes that became identities
        self.blamed: set[str] = set()  # producers of graph outputs that need a Transpose
        self.done: set[int] = set()  # nodes the walk has passed: their outputs' layouts are set
        self.settled: set[int] = set()  # nodes a rule already rewrote ahead of the walk
        # Graph outputs the boundary contract wants in a given layout (NHWC images).
        self.output_layouts: dict[int, Perm] = {}
        # Whether rank-4 tensors follow the NCHW convention (``boundary.channels_first_model``):
        # in a channels-last source (TensorFlow's NHWC) the source order is the image order.
        self.channels_first = True
        for v in self.graph.values():
            if v.shape is not None:
                self.src[id(v)] = tuple(v.shape)

    # -- queries --------------------------------------------------------------------------------
    def src_shape(self, v: Value | None) -> tuple:
        # rules pass a validated node's inputs: the ones they read are there
        assert v is not None, "a layout rule read an absent input"
        return self.src.get(id(v), tuple(v.shape or ()))

    def sig(self, v: Value | None) -> Perm:
        assert v is not None, "a layout rule read an absent input"
        return self.sigma.get(id(v)) or identity(len(self.src_shape(v)))

    def settled_layout(self, v: Value) -> bool:
        """Whether ``v``'s layout is final: a graph input or constant, or made by a node the
        walk has passed (or a rule has set it)."""
        producer = v.producer()
        return producer is None or id(producer) in self.done or id(v) in self.sigma

    def permuted(self, v: Value | None) -> bool:
        return v is not None and not v.is_const and not is_identity(self.sig(v))

    def set_sig(self, v: Value, sigma) -> None:
        sigma = tuple(sigma)
        if is_identity(sigma):
            self.sigma.pop(id(v), None)
        else:
            self.sigma[id(v)] = sigma

    # -- rewrites -------------------------------------------------------------------------------
    def constant(self, array: np.ndarray, name: str) -> Value:
        self.changed = True
        return self.graph.constant(np.asarray(array), name)

    def replace_const_input(self, node: Node, index: int, array: np.ndarray, tag: str) -> None:
        old = node.inputs[index]
        assert old is not None  # the constant being replaced
        key = ("const", id(old), tag)
        if key not in self.cache:
            self.cache[key] = self.constant(array, f"{old.name}_nhwc")
        node.set_input(index, self.cache[key])

    def coerce(self, node: Node, index: int, sigma_to: Perm, why: str = "") -> bool:
        """Make input ``index`` arrive in layout ``sigma_to`` (its rank may be lower: broadcast).

        Constants are permuted; a tensor with the same bytes is reshaped; anything else needs a
        Transpose, which is recorded as a problem (and inserted so the walk can go on).
        """
        v = node.inputs[index]
        if v is None:
            return True
        rank = len(sigma_to)
        if v.const is not None:
            if not is_identity(sigma_to) and v.const.ndim <= rank:
                new = permute_const(v.const, rank, sigma_to)
                if new.shape != v.const.shape or not np.array_equal(new, v.const):
                    self.replace_const_input(node, index, new, str(sigma_to))
            return True
        src = self.src_shape(v)
        if len(src) > rank:
            return self._transpose(node, index, v, self.sig(v), identity(len(src)), why)
        sigma_from = pad_sigma(self.sig(v), rank)
        if tuple(sigma_from) == tuple(sigma_to):
            return True
        padded = (1,) * (rank - len(src)) + tuple(src)
        key = (id(v), tuple(sigma_to))
        if key in self.cache:
            node.set_input(index, self.cache[key])
            return True
        if same_bytes(padded, sigma_from, sigma_to):
            shape = np.asarray(stored_shape(padded, sigma_to), np.int64)
            reshape = self.graph.make_node(
                "Reshape", [v, self.constant(shape, f"{v.name}/nhwc_shape")],
                name=f"{v.name}/nhwc_reshape")
            self._adopt(reshape.output, padded, sigma_to, v.dtype)
            self.cache[key] = reshape.output
            node.set_input(index, reshape.output)
            return True
        return self._transpose(node, index, v, sigma_from, sigma_to, why, padded)

    def _transpose(self, node, index, v, sigma_from, sigma_to, why, padded=None) -> bool:
        reason = why or (f"reads '{v.name}' in a layout that differs from how it is stored "
                         f"(a layout Transpose would be needed)")
        self.problems.append(NodeProblem(node.name, node.op, reason, "layout"))
        src = self.src_shape(v)
        source = v
        if padded is not None and len(padded) != len(src):
            shape = np.asarray(stored_shape(padded, sigma_from), np.int64)
            pad = self.graph.make_node("Reshape", [v, self.constant(shape, f"{v.name}/rank")],
                                       name=f"{v.name}/broadcast_rank")
            self._adopt(pad.output, padded, sigma_from, v.dtype)
            source, src = pad.output, padded
        perm = list(transpose_between(sigma_from, sigma_to))
        t = self.graph.make_node("Transpose", [source], {"perm": perm},
                                 name=f"{node.name}/layout_transpose")
        self._adopt(t.output, src, sigma_to, v.dtype)
        node.set_input(index, t.output)
        if self.allow_transpose:
            self.ctx.warn(f"inserted Transpose '{t.name}' (perm {perm}) before node "
                          f"'{node.name}' ({node.op}): {reason}")
            self.ctx.record("layout", node.name, f"inserted Transpose {perm}", perm=perm)
        return False

    def _adopt(self, value: Value, src_shape, sigma, dtype) -> None:
        value.dtype = dtype
        self.src[id(value)] = tuple(src_shape)
        self.set_sig(value, sigma)
        self.changed = True
