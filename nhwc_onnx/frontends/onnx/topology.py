"""The exact cut's view of an ONNX model (see ``nhwc_onnx.frontends.topology``)."""
from __future__ import annotations

from ...options import ConvertOptions
from ..topology import SourceGraph, SourceNode
from .loader import read_model
from .structure import node_names, topological_order


def source_graph(path: str, options: ConvertOptions) -> SourceGraph:
    g = read_model(path).graph
    order = topological_order(g)
    names = node_names(order)
    consts = {t.name for t in g.initializer}
    inputs = list(options.inputs or [i.name for i in g.input if i.name not in consts])
    nodes = [SourceNode(names[id(n)], n.op_type, [i for i in n.input if i],
                        [o for o in n.output if o]) for n in order]
    return SourceGraph(nodes, inputs, [o.name for o in g.output])
