"""The exact cut's view of a TensorFlow graph (see ``nhwc_onnx.frontends.topology``): the
prepared GraphDef, tensors named ``node:index``."""
from __future__ import annotations

import os

from ...options import ConvertOptions
from ..topology import SourceGraph, SourceNode
from . import KERAS_SUFFIXES
from .graph_prep import prepare
from .reader import read_graphdef
from .tfnodes import ref_name


def source_graph(path: str, options: ConvertOptions) -> SourceGraph:
    if os.path.isdir(path) or path.lower().endswith(KERAS_SUFFIXES):
        from .savedmodel import load_frozen

        graph_def, buffer, _label, options, user_names = load_frozen(path, options)
    else:
        graph_def, buffer = read_graphdef(path)
        user_names = {}
    prepared = prepare(graph_def, options.inputs, options.outputs, buffer)
    used: dict[str, set[int]] = {}
    for node in prepared.order:
        for name, index in node.inputs:
            used.setdefault(name, set()).add(index)
    for name, index in prepared.outputs:
        used.setdefault(name, set()).add(index)
    inputs = {ref_name(r) for r in prepared.inputs}
    nodes = []
    for node in prepared.order:
        outs = [ref_name((node.name, i)) for i in sorted(used.get(node.name, {0}))]
        ins = [ref_name(r) for r in node.inputs]
        if any(o in inputs for o in outs):
            ins = []  # an input placeholder (possibly an internal node named with --inputs)
        nodes.append(SourceNode(node.name, node.op, ins, outs))
    display = {t: t[:-2] for n in nodes for t in n.outputs if t.endswith(":0")}
    declared = {}
    for node in prepared.order:
        if ref_name((node.name, 0)) in inputs:
            _found, shape = node.attrs.shape("shape")
            dtype = node.attrs.dtype("dtype")
            declared[ref_name((node.name, 0))] = (None if dtype is None else str(dtype), shape)
    return SourceGraph(nodes, sorted(inputs), [ref_name(r) for r in prepared.outputs], display,
                       declared, user_names)
