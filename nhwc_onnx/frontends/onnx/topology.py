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
    declared = {info.name: declared_type(info) for info in list(g.input) + list(g.output)}
    return SourceGraph(nodes, inputs, [o.name for o in g.output], declared=declared)


def declared_type(info) -> tuple:
    """(dtype, dims) as the file declares a graph input/output (symbols kept)."""
    import onnx

    tt = info.type.tensor_type
    try:
        dtype = str(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))
    except (KeyError, ValueError, TypeError):
        dtype = None
    if not tt.HasField("shape"):
        return dtype, None
    return dtype, tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                        for d in tt.shape.dim)
