"""The two passes that turn core ops into dialect ops, each running the handlers ``op_table``
declares for its stage.

``SelectOps`` runs after padding normalisation and maps core ops with a one-to-one dialect op
(``select`` handlers); ``Legalize`` then rewrites what is left into exact dialect subgraphs
(``legalize`` handlers) and refuses, in one UnsupportedOpError, every core node still left,
with the reason a pass recorded or the one its table entry declares.
"""
from __future__ import annotations

from ...errors import NodeProblem, UnsupportedOpError
from ...ir import CORE, DIALECT, Graph, Node
from ..base import Pass, PassContext, PassResult
from ..rewrite import apply_handlers, problem
from .op_table import default_reason, handlers

SELECT = handlers("select")
LEGALIZE = handlers("legalize")


def _shapes_known(node: Node) -> bool:
    return all(v is None or v.shape is not None for v in (*node.inputs, *node.outputs))


class SelectOps(Pass):
    name = "select_ops"

    def call(self, model, ctx: PassContext) -> PassResult:
        done = apply_handlers(model.graph, ctx, SELECT, _shapes_known)
        for node, _ in done:
            if node.domain == DIALECT:
                ctx.record("select", node.name, f"-> {node.op}")
        return PassResult(bool(done))


class Legalize(Pass):
    name = "legalize"

    def call(self, model, ctx: PassContext) -> PassResult:
        graph = model.graph
        done = apply_handlers(graph, ctx, LEGALIZE, _shapes_known)
        for node, source_op in done:
            ctx.record("legalize", node.name, f"{source_op} rewritten into dialect ops",
                       op=source_op)
        problems = leftovers(graph, ctx)
        if problems:
            ctx.refuse_stage(UnsupportedOpError(problems))
        return PassResult(bool(done))


def leftovers(graph: Graph, ctx: PassContext) -> list[NodeProblem]:
    """Every graph input/output of another type than float32 and every core node left."""
    problems = []
    for kind, values in (("graph input", graph.inputs), ("graph output", graph.outputs)):
        for v in values:
            if v.dtype not in (None, "float32"):
                problems.append(NodeProblem(v.name, kind, f"element type {v.dtype}: the "
                                            "dialect computes in float32 only", "dtype"))
    for node in graph.nodes:
        if node.domain == CORE:
            problems.append(ctx.refusals.get(node) or problem(node, default_reason(node.op)))
    return problems


__all__ = ["LEGALIZE", "SELECT", "Legalize", "SelectOps", "leftovers"]
