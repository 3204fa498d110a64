"""NCHW -> NHWC: store every NCHW feature map as NHWC without inserting layout Transposes.

Each value gets a layout (see ``schemas.core.layout_perm``): the permutation from its source
axes to the axes we store. Graph inputs tagged NCHW (rank 4) start as NHWC; then each core op's
layout rule (declared with the op, see ``schemas.core.layout_rules``) rewrites it: spatial ops
switch their ``data_format``; transparent ops pass the layout on and constants that broadcast
against a permuted tensor are permuted once; axis attributes are remapped; Reshape/Flatten keep
their meaning when the stored bytes allow it (channel shuffle, H=W=1) or when they feed a
fully-connected layer whose weight rows can be permuted instead. Anything else needs a real
Transpose: one UnsupportedOpError lists every such node, unless option ``allow_transpose``
is set, in which case a Transpose is inserted with a warning per node.
"""
from __future__ import annotations

import numpy as np

from ..errors import NodeProblem, UnsupportedOpError
from ..ir import CORE, NCHW, NHWC, Model, Node, Value
from ..schemas.base import CORE_OPS
from ..schemas.core.layout_perm import (
    NHWC as NHWC_PERM,
)
from ..schemas.core.layout_perm import (
    Perm,
    identity,
    is_identity,
    pad_sigma,
    permute_const,
    same_bytes,
    stored_shape,
    transpose_between,
)
from ..schemas.core.layout_rules import always_runs, downstream, is_spatial, reads_nchw_image
from .base import Pass, PassContext, PassResult
from .static_shapes import infer_graph


class LayoutState:
    """Layouts of the values while the pass walks the graph, and the rewrites it makes."""

    def __init__(self, model: Model, ctx: PassContext):
        self.model = model
        self.graph = model.graph
        self.ctx = ctx
        self.allow_transpose = bool(ctx.option("allow_transpose"))
        self.src: dict[int, tuple] = {}
        self.sigma: dict[int, Perm] = {}
        self.problems: list[NodeProblem] = []
        self.cache: dict[tuple, Value] = {}
        self.changed = False
        self.vanishing: list[Node] = []  # Transposes that became identities
        for v in self.graph.values():
            if v.shape is not None:
                self.src[id(v)] = tuple(v.shape)

    # -- queries --------------------------------------------------------------------------------
    def src_shape(self, v: Value) -> tuple:
        return self.src.get(id(v), tuple(v.shape or ()))

    def sig(self, v: Value) -> Perm:
        return self.sigma.get(id(v)) or identity(len(self.src_shape(v)))

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
        if v.is_const:
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


def _seed_inputs(state: LayoutState, model: Model) -> None:
    """Decide which rank-4 graph inputs are NCHW images, to be stored NHWC.

    A tagged input is an image when an NCHW Conv/pool reads it or anything computed from it,
    or when it meets such an input's data (e.g. concatenated with it). One that meets neither
    (a MatMul operand) has no image layout and is left as it is. An untagged input is an image
    only when an NCHW spatial op reads it directly.
    """
    graph = model.graph
    candidates, images = [], []
    reach: dict[int, set[int]] = {}
    for v in graph.inputs:
        if v.is_const or v.shape is None or len(v.shape) != 4:
            continue
        if any(is_spatial(node.op) and index > 0 for node, index in v.uses()):
            continue  # a weight fed at run time keeps its own layout attribute
        if v.layout == NCHW:
            reach[id(v)], spatial = downstream(v)
            (images if spatial else candidates).append(v)
        elif v.layout is None and any(reads_nchw_image(n, i) for n, i in v.uses()):
            images.append(v)
            reach[id(v)] = downstream(v)[0]
    image_nodes: set[int] = set()
    for v in images:
        image_nodes |= reach[id(v)]
    images += [v for v in candidates if reach[id(v)] & image_nodes]
    for v in images:
        state.set_sig(v, NHWC_PERM)
        model.io_permutations[v.name] = list(NHWC_PERM)
        state.ctx.record("layout", v.name, "graph input NCHW -> stored NHWC",
                         perm=list(NHWC_PERM))
        state.changed = True


def _needs_work(state: LayoutState) -> bool:
    if state.sigma:
        return True
    for node in state.graph.nodes:
        if is_spatial(node.op) and node.attrs.get("data_format", "NCHW") == "NCHW":
            return True
        if node.op == "Transpose" and list(node.attrs.get("perm") or []) == [0, 3, 1, 2]:
            return True  # the source turns an NHWC tensor into NCHW: that tensor stays NHWC
    return False


def _finish(state: LayoutState, model: Model) -> None:
    graph = model.graph
    for node in state.vanishing:
        graph.bypass(node, 0)  # kept (as an identity perm) only to preserve a graph output name
    for v in graph.outputs:
        sigma = state.sig(v)
        if not v.is_const and not is_identity(sigma):
            model.io_permutations[v.name] = list(sigma)
            state.ctx.record("layout", v.name, f"graph output stored with permutation "
                             f"{list(sigma)} of its source axes", perm=list(sigma))
    for v in graph.values():
        if id(v) in state.sigma and not v.is_const:
            v.shape = stored_shape(state.src_shape(v), state.sigma[id(v)])
        if not v.is_const and v.shape is not None and len(v.shape) == 4:
            v.layout = NHWC
        elif v.layout == NCHW:
            v.layout = None


class ToNHWC(Pass):
    name = "to_nhwc"

    def call(self, model: Model, ctx: PassContext) -> PassResult:
        graph = model.graph
        infer_graph(graph)
        state = LayoutState(model, ctx)
        _seed_inputs(state, model)
        if not _needs_work(state):
            for v in graph.values():
                if not v.is_const and v.shape is not None and len(v.shape) == 4:
                    v.layout = NHWC
            return PassResult(False)
        graph.toposort()
        for node in graph.nodes:
            if node.graph is graph and node.domain == CORE and node.op in CORE_OPS:
                _visit(state, node)
        if state.problems and not state.allow_transpose:
            raise UnsupportedOpError(_unique(state.problems), "NCHW->NHWC")
        _finish(state, model)
        return PassResult(state.changed)


def _visit(state: LayoutState, node: Node) -> None:
    """Apply the node's layout rule (declared with its core op) when it has work to do."""
    rule = CORE_OPS[node.op].layout_rule
    if not always_runs(rule) and not any(state.permuted(v) for v in node.inputs):
        return  # nothing permuted reaches this node: it stays as it is
    rule(state, node)


def _unique(problems: list[NodeProblem]) -> list[NodeProblem]:
    seen, out = set(), []
    for p in problems:
        if (p.node, p.reason) not in seen:
            seen.add((p.node, p.reason))
            out.append(p)
    return out
