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
    Perm,
    identity,
    is_identity,
    pad_sigma,
    permute_const,
    same_bytes,
    stored_shape,
    transpose_between,
)
from ..schemas.core.layout_rules import always_runs, is_spatial, reads_nchw_image
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
        self.blamed: set[str] = set()  # producers of graph outputs that need a Transpose
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


def channels_last(rank: int) -> Perm:
    """The stored layout of a channels-first (NCHW / NCDHW) image: channels moved last."""
    return (0, *range(2, rank), 1)


def channels_first_perm(rank: int) -> list[int]:
    """The perm of a source Transpose that turns a channels-last tensor into channels-first."""
    return [0, rank - 1, *range(1, rank - 1)]


def _perm_of(node: Node) -> list[int] | None:
    perm = node.attrs.get("perm")
    return None if perm is None else [int(a) for a in perm]


def _public_names(v: Value) -> set[str]:
    return {v.name, str(v.meta.get("source_name", v.name))} | (
        {v.meta["source_name"].split(":")[0]} if ":" in str(v.meta.get("source_name", "")) else set())


def keep_layout_names(model: Model, ctx: PassContext) -> set[str]:
    """Graph input/output names (ours or the source's) listed in option ``keep_layout``.

    A name that is no graph input or output is a usage error, raised before any work."""
    wanted = [str(n) for n in (ctx.option("keep_layout") or ()) if str(n)]
    io = model.graph.inputs + model.graph.outputs
    known = set().union(*(_public_names(v) for v in io)) if io else set()
    unknown = [n for n in wanted if n not in known]
    if unknown:
        from ..errors import UsageError
        raise UsageError(f"--keep-layout names {', '.join(repr(n) for n in unknown)}, which "
                         f"is not a graph input or output (they are: "
                         f"{', '.join(sorted(v.name for v in io))})")
    return {v.name for v in io if _public_names(v) & set(wanted)}


def _seed_inputs(state: LayoutState, model: Model, keep: set[str]) -> list[Value]:
    """Store every channels-first image input (rank 4/5 of an NCHW-convention source) NHWC.

    The layout contract (README "Layout at the graph boundary"): the decision does not depend
    on which ops follow. Exceptions, each recorded: an input the user keeps (--keep-layout); one
    the source itself transposes to NCHW first (only read by Transpose(0,3,1,2)): it is NHWC
    already and that Transpose disappears; one read only as a batch of matrices (MatMul).
    Returns the inputs stored NHWC.
    """
    graph = model.graph
    seeded = []
    for v in graph.inputs:
        if (not v.is_const and v.shape is not None and len(v.shape) == 3 and v.uses()
                and v.name not in keep
                and all(_reads_as_1d_map(n, i) for n, i in v.uses())):
            _seed(state, model, v, (0, 2, 1), "graph input N,C,L -> stored N,L,C (a 1-D "
                  "feature map)")
            seeded.append(v)
            continue
        if v.is_const or v.shape is None or len(v.shape) not in (4, 5):
            continue
        uses = v.uses()
        rank = len(v.shape)
        if any(is_spatial(node.op) and index > 0 for node, index in uses):
            continue  # a weight fed at run time keeps its own layout attribute
        if v.layout != NCHW and not (v.layout is None and rank == 4 and any(
                reads_nchw_image(n, i) for n, i in uses)):
            continue  # channels-last by its framework's convention (TF NHWC), or not an image
        if v.name in keep:
            state.ctx.record("layout", v.name, "graph input kept in source axis order "
                             "(--keep-layout)", perm=list(identity(rank)))
            continue
        if uses and all(n.op == "Transpose" and _perm_of(n) == channels_first_perm(rank)
                        for n, _ in uses):
            v.layout = NHWC
            state.ctx.record("layout", v.name, "graph input is NHWC at the source (only read by "
                             "a Transpose to NCHW, which disappears)", perm=list(identity(rank)))
            continue
        if uses and all(n.op == "MatMul" for n, _ in uses):
            state.ctx.record("layout", v.name, "graph input read only as a batch of matrices "
                             "(MatMul): not an image, kept in source axis order",
                             perm=list(identity(rank)))
            continue
        _seed(state, model, v, channels_last(rank), "graph input NCHW -> stored NHWC")
        seeded.append(v)
    return seeded


def _seed(state: LayoutState, model: Model, v: Value, sigma: Perm, why: str) -> None:
    state.set_sig(v, sigma)
    model.io_permutations[v.name] = list(sigma)
    state.ctx.record("layout", v.name, why, perm=list(sigma))
    state.changed = True


def _reads_as_1d_map(node: Node, index: int) -> bool:
    """Whether ``node`` reads its rank-3 input ``index`` as an N,C,L feature map: a 1-D
    conv/pool (lifted to N,C,1,L for a 2-D NCHW op) or a BatchNormalization over C."""
    if index != 0:
        return False
    if node.op == "BatchNormalization":
        return node.attrs.get("axis", 1) in (1, -2)
    if node.op != "Reshape":
        return False
    x, out = node.inputs[0], node.outputs[0]
    if x.shape is None or out.shape is None or len(out.shape) != 4:
        return False
    lifted = tuple(out.shape) == (x.shape[0], x.shape[1], 1, x.shape[2])
    return lifted and bool(out.uses()) and all(reads_nchw_image(n, i) for n, i in out.uses())


def _needs_work(state: LayoutState) -> bool:
    if state.sigma:
        return True
    for node in state.graph.nodes:
        if is_spatial(node.op) and node.attrs.get("data_format", "NCHW") == "NCHW":
            return True
        if node.op == "Transpose":
            return True  # e.g. NHWC -> NCHW at the source, or a Permute before Flatten -> Dense
    return False


def _channels_first_model(model: Model) -> bool:
    """Whether rank-4 tensors follow the NCHW convention (ONNX, Caffe, TF in NCHW)."""
    graph = model.graph
    return (any(v.layout == NCHW for v in graph.inputs + graph.outputs)
            or any(is_spatial(n.op) and n.attrs.get("data_format", "NCHW") == "NCHW"
                   for n in graph.nodes))


def _source_transposed_outputs(model: Model) -> set[int]:
    """Graph outputs the source itself makes channels-last (Transpose(0,2,3,1) as last op)."""
    found = set()
    for v in model.graph.outputs:
        node = v.producer()
        if (node is not None and node.op == "Transpose" and v.rank in (4, 5)
                and _perm_of(node) == list(channels_last(v.rank))):
            found.add(id(v))
    return found


def _settle_outputs(state: LayoutState, model: Model, keep: set[str], nchw: bool,
                    transposed: set[int]) -> None:
    """Give each graph output its contract layout (NHWC image, kept, or not an image)."""
    graph = model.graph
    # With --allow-transpose, an output computed from an NHWC-stored input that ended in source
    # order after an inserted layout Transpose is still an image: it goes back to NHWC as well.
    inserted = state.allow_transpose and state.problems
    from_images = {id(n) for v in graph.inputs if inserted and state.permuted(v)
                   for n in _reached_nodes(v)}
    for i, v in enumerate(list(graph.outputs)):
        if v.is_const or v.shape is None:
            continue
        src = state.src_shape(v)
        rank, sigma = len(src), state.sig(v)
        if v.name in keep:
            target = identity(rank)
        elif rank < 4 and not is_identity(sigma) and tuple(sigma) != (0, 2, 1):
            target = identity(rank)  # not an N,C,L map (e.g. a squeezed batch): source order
        elif rank in (4, 5) and nchw and is_identity(sigma) and id(v) not in transposed:
            if v in graph.inputs or not (same_bytes(src, sigma, channels_last(rank))
                                         or id(v.producer()) in from_images):
                state.ctx.record("layout", v.name, "graph output computed in source axis order "
                                 "(not an image: e.g. a MatMul result); kept as it is",
                                 perm=list(sigma))
                continue
            target = channels_last(rank)  # e.g. [N,C,1,1] logits: a free Reshape
        else:
            continue
        if tuple(target) != tuple(sigma):
            _relayout_output(state, i, v, target)


def _relayout_output(state: LayoutState, index: int, v: Value, target: Perm) -> None:
    """Graph output ``index`` (value ``v``) re-laid out to ``target`` under its own name."""
    graph = state.graph
    src = state.src_shape(v)
    reader = graph.make_node("Identity", [v], name=f"{v.name}/layout")
    wanted = "the source order (--keep-layout)" if is_identity(target) else "NHWC"
    state.coerce(reader, 0, target, f"graph output '{v.name}' is stored with permutation "
                 f"{list(state.sig(v))} of its source axes; {wanted} needs a layout Transpose")
    moved = reader.inputs[0]
    graph.remove_node(reader)
    if state.problems and state.problems[-1].node == reader.name and v.producer() is not None:
        state.blamed.add(v.producer().name)  # so the hint can name the inputs behind it
    if moved is v:
        return
    name, meta = v.name, dict(v.meta)
    v.name = graph.unique_name(f"{name}/stored")
    moved.name = name
    moved.meta.update(meta)
    graph.outputs[index] = moved
    state.src[id(moved)] = tuple(src)
    state.set_sig(moved, target)


def _finish(state: LayoutState, model: Model, nchw: bool, transposed: set[int]) -> None:
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
        _tag(state, v, nchw, id(v) in transposed)


def _tag(state: LayoutState, v: Value, nchw: bool, nhwc_at_source: bool) -> None:
    """Layout tag (written as dimension denotations) only where it is true."""
    rank = len(v.shape) if v.shape is not None else 0
    if not v.is_const and rank == 3 and tuple(state.sig(v)) == (0, 2, 1):
        v.layout = NHWC  # an N,C,L map stored N,L,C
        return
    if v.is_const or rank not in (4, 5):
        if v.layout == NCHW:
            v.layout = None
        return
    sigma = state.sig(v)
    if tuple(sigma) == channels_last(rank) or nhwc_at_source:
        v.layout = NHWC
    elif is_identity(sigma) and (v.layout == NHWC or (v.layout is None and not nchw)):
        v.layout = NHWC if rank == 4 or v.layout == NHWC else None
    else:
        v.layout = None


class ToNHWC(Pass):
    name = "to_nhwc"

    def __init__(self, infer_shapes: bool = True):
        # False when the caller knows every shape is current (the pipeline: shapes were just
        # inferred, and Cleanup only removes nodes), saving one inference over the graph.
        self.infer_shapes = infer_shapes

    def call(self, model: Model, ctx: PassContext) -> PassResult:
        graph = model.graph
        if self.infer_shapes:
            infer_graph(graph)
        state = LayoutState(model, ctx)
        keep = keep_layout_names(model, ctx)
        nchw = _channels_first_model(model)
        transposed = _source_transposed_outputs(model)
        seeded = _seed_inputs(state, model, keep)
        graph.toposort()
        if _needs_work(state):
            for node in graph.nodes:
                if node.graph is graph and node.domain == CORE and node.op in CORE_OPS:
                    _visit(state, node)
        _settle_outputs(state, model, keep, nchw, transposed)
        if state.problems and not state.allow_transpose:
            names = _inputs_behind_problems(state, seeded)
            error = UnsupportedOpError(_unique(state.problems), "NCHW->NHWC",
                                       hint=_keep_layout_hint(names))
            error.keep_layout_suggestion = names
            raise error
        _finish(state, model, nchw, transposed)
        return PassResult(state.changed)


def _visit(state: LayoutState, node: Node) -> None:
    """Apply the node's layout rule (declared with its core op) when it has work to do."""
    rule = CORE_OPS[node.op].layout_rule
    if not always_runs(rule) and not any(state.permuted(v) for v in node.inputs):
        return  # nothing permuted reaches this node: it stays as it is
    rule(state, node)


def _inputs_behind_problems(state: LayoutState, seeded: list[Value]) -> list[str]:
    """The NHWC-stored graph inputs from which a refused node is computed."""
    bad = {p.node for p in state.problems} | state.blamed
    return [v.name for v in seeded if any(n.name in bad for n in _reached_nodes(v))]


def _keep_layout_hint(names: list[str]) -> str:
    if not names:
        return ""
    return (f"graph input(s) {', '.join(names)} are NCHW images by the source's convention and "
            "are stored NHWC; if one is not an image, keep it in source order with "
            f"--keep-layout {','.join(names)} (or allow the Transposes with --allow-transpose)")


def _reached_nodes(v: Value) -> list[Node]:
    seen: dict[int, Node] = {}
    todo = [v]
    while todo:
        for node, _ in todo.pop().uses():
            if id(node) not in seen:
                seen[id(node)] = node
                todo.extend(node.outputs)
    return list(seen.values())


def _unique(problems: list[NodeProblem]) -> list[NodeProblem]:
    seen, out = set(), []
    for p in problems:
        if (p.node, p.reason) not in seen:
            seen.add((p.node, p.reason))
            out.append(p)
    return out
