"""NCHW -> NHWC: store every NCHW feature map as NHWC without inserting layout Transposes.

Each value gets a layout (see ``layout.perm``): the permutation from its source axes to the
axes we store. Graph inputs that are channels-first images start channels-last (the boundary
contract and its exceptions: ``layout.boundary``); then the walk (``layout.walk.LayoutWalk``)
applies each core op's layout rule (``layout.table.LAYOUT_RULES``): spatial ops switch their
``data_format``; transparent ops pass the layout on and constants that broadcast against a
permuted tensor are permuted once; axis attributes are remapped; Reshape/Flatten keep their
meaning when the stored bytes allow it (channel shuffle, H=W=1) or when they feed a
fully-connected layer whose weight rows can be permuted instead. Anything else needs a real
Transpose: one UnsupportedOpError lists every such node, unless option ``allow_transpose``
is set, in which case a Transpose is inserted with a warning per node.
"""
from __future__ import annotations

from ..errors import NodeProblem, UnsupportedOpError
from ..ir import CORE, NCHW, NHWC, Model, Node, Value
from ..schemas.base import CORE_OPS
from .base import Pass, PassContext, PassResult
from .layout.boundary import (
    channels_first_model,
    image_output_layouts,
    keep_layout_names,
    reached_nodes,
    seed_inputs,
    settle_outputs,
    source_transposed_outputs,
)
from .layout.images import is_spatial
from .layout.perm import channels_last, is_identity, stored_shape
from .layout.table import LAYOUT_RULES
from .layout.walk import LayoutWalk
from .static_shapes import infer_graph


def _needs_work(state: LayoutWalk) -> bool:
    if state.sigma or state.output_layouts:
        return True  # NHWC-stored inputs, or image outputs to be given back NHWC
    for node in state.graph.nodes:
        if is_spatial(node.op) and node.attrs.get("data_format", "NCHW") == "NCHW":
            return True
        if node.op == "Transpose":
            return True  # e.g. NHWC -> NCHW at the source, or a Permute before Flatten -> Dense
    return False


def _finish(state: LayoutWalk, model: Model, nchw: bool, transposed: set[int]) -> None:
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


def _tag(state: LayoutWalk, v: Value, nchw: bool, nhwc_at_source: bool) -> None:
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
        state = LayoutWalk(model, ctx, LAYOUT_RULES)
        keep = keep_layout_names(model, ctx)
        nchw = channels_first_model(model)
        state.channels_first = nchw
        transposed = source_transposed_outputs(model)
        seeded = seed_inputs(state, model, keep)
        state.output_layouts = image_output_layouts(model, keep, nchw, transposed)
        graph.toposort()
        if _needs_work(state):
            for node in graph.nodes:
                if node.graph is graph and node.domain == CORE and node.op in CORE_OPS:
                    _visit(state, node)
        settle_outputs(state, model, keep, nchw, transposed)
        if state.problems and not state.allow_transpose:
            names = _inputs_behind_problems(state, seeded)
            error = UnsupportedOpError(_unique(state.problems), "NCHW->NHWC",
                                       hint=_keep_layout_hint(names))
            error.keep_layout_suggestion = names
            ctx.refuse_stage(error)  # raised, or kept while the later passes judge the rest
        _finish(state, model, nchw, transposed)
        return PassResult(state.changed)


def _visit(state: LayoutWalk, node: Node) -> None:
    """Apply the node's layout rule when it has work to do."""
    rule = LAYOUT_RULES[node.op]
    if id(node) not in state.settled and (rule.always_runs
                                          or any(state.permuted(v) for v in node.inputs)):
        rule(state, node)  # (otherwise nothing permuted reaches it: it stays as it is)
    state.done.add(id(node))


def _inputs_behind_problems(state: LayoutWalk, seeded: list[Value]) -> list[str]:
    """The NHWC-stored graph inputs from which a refused node is computed."""
    bad = {p.node for p in state.problems} | state.blamed
    return [v.name for v in seeded if any(n.name in bad for n in reached_nodes(v))]


def _keep_layout_hint(names: list[str]) -> str:
    if not names:
        return ""
    return (f"graph input(s) {', '.join(names)} are NCHW images by the source's convention and "
            "are stored NHWC; if one is not an image, keep it in source order with "
            f"--keep-layout {','.join(names)} (or allow the Transposes with --allow-transpose)")


def _unique(problems: list[NodeProblem]) -> list[NodeProblem]:
    seen, out = set(), []
    for p in problems:
        if (p.node, p.reason) not in seen:
            seen.add((p.node, p.reason))
            out.append(p)
    return out
