"""Clean-up: drop pass-through nodes (Identity, inference Dropout) and dead code.

Graph outputs keep their public names: when a removed Identity produced a graph output, the
producer's tensor takes that name (``Graph.bypass``).
"""
from __future__ import annotations

from ..ir import CORE, Graph, Model
from .base import Pass, PassContext, PassResult

PASS_THROUGH = {"Identity", "Dropout"}


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


def remove_dead_nodes(graph: Graph) -> int:
    """Remove nodes none of whose outputs reach a graph output."""
    graph.toposort()
    removed = 0
    outputs = {id(v) for v in graph.outputs}
    for node in reversed(graph.nodes):
        if any(v.uses() or id(v) in outputs for v in node.outputs):
            continue
        graph.remove_node(node)
        removed += 1
    return removed


class Cleanup(Pass):
    name = "cleanup"

    def call(self, model: Model, ctx: PassContext) -> PassResult:
        graph = model.graph
        through = remove_pass_through(graph)
        dead = remove_dead_nodes(graph)
        if through or dead:
            ctx.record("cleanup", "", f"removed {through} pass-through and {dead} dead node(s)",
                       pass_through=through, dead=dead)
        return PassResult(bool(through or dead))
