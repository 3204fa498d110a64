"""Clean-up: drop pass-through nodes (Identity, inference Dropout) and dead code.

Graph outputs keep their public names: when a removed Identity produced a graph output, the
producer's tensor takes that name (``Graph.bypass``).
"""
from __future__ import annotations

from ..ir import CORE, Graph, Model
from .base import Pass, PassContext, PassResult
from .rewrite import remove_dead
from .to_dialect.op_table import pass_through_ops

PASS_THROUGH = pass_through_ops()  # Identity, inference Dropout


def remove_pass_through(graph: Graph) -> int:
    removed = 0
    for node in graph.nodes:
        if node.domain != CORE or node.op not in PASS_THROUGH or node.inputs[0] is None:
            continue
        extra = node.outputs[1:]  # a Dropout mask nobody reads is fine
        if any(v.uses() or v in graph.outputs for v in extra):
            continue
        graph.bypass(node, 0)
        if node.graph is None:
            removed += 1
    return removed


def drop_empty_concat_inputs(graph: Graph) -> int:
    """A Concat input with no elements adds nothing; removing it lets the empty tensor (an
    empty Slice or Split piece, which has no dialect form) die as dead code."""
    dropped = 0
    for node in graph.nodes:
        if node.domain != CORE or node.op != "Concat":
            continue
        kept = [v for v in node.inputs if v is None or not _is_empty(v)]
        if len(kept) == len(node.inputs) or not kept:
            continue
        dropped += len(node.inputs) - len(kept)
        node.set_inputs(kept)
        if len(kept) == 1:
            node.op = "Identity"
            node.attrs = {}
    return dropped


def _is_empty(value) -> bool:
    return value.static and any(int(d) == 0 for d in value.shape)


class Cleanup(Pass):
    name = "cleanup"

    def call(self, model: Model, ctx: PassContext) -> PassResult:
        graph = model.graph
        empty = drop_empty_concat_inputs(graph)
        through = remove_pass_through(graph)
        dead = remove_dead(graph)
        if through or dead:
            ctx.record("cleanup", "", f"removed {through} pass-through and {dead} dead node(s)",
                       pass_through=through, dead=dead)
        if empty:
            ctx.record("cleanup", "", f"dropped {empty} empty Concat input(s)",
                       empty_concat_inputs=empty)
        return PassResult(bool(through or dead or empty))
