"""The exact cut's view of a Caffe net (see ``nhwc_onnx.frontends.topology``): in-place
layers (top == bottom) get a fresh tensor id per version of the blob."""
from __future__ import annotations

from ...options import ConvertOptions
from ..topology import SourceGraph, SourceNode
from .prototxt import inference_layers, read_prototxt


def source_graph(path: str, options: ConvertOptions) -> SourceGraph:
    net = read_prototxt(path)
    version: dict[str, str] = {}  # blob -> current tensor id
    display: dict[str, str] = {}
    inputs: list[str] = []
    consumed: set[str] = set()

    def new_id(blob: str) -> str:
        tid = blob if blob not in display.values() else f"{blob}@{len(display)}"
        display[tid] = blob
        version[blob] = tid
        return tid

    declared: dict[str, tuple] = {}
    net_shapes = ([list(s.dim) for s in net.input_shape] or
                  [list(net.input_dim[i:i + 4]) for i in range(0, len(net.input_dim), 4)])
    for i, blob in enumerate(net.input):
        inputs.append(new_id(blob))
        shape = net_shapes[min(i, len(net_shapes) - 1)] if net_shapes else None
        declared[inputs[-1]] = ("float32", None if shape is None else tuple(shape))
    nodes = []
    for layer in inference_layers(net):
        ins = [version.get(b, b) for b in layer.bottom]
        consumed.update(ins)
        outs = [new_id(t) for t in layer.top]
        if not layer.bottom and layer.type != "Silence":
            inputs += outs  # Input / data layers
            shapes = [tuple(s.dim) for s in layer.input_param.shape]
            for k, tid in enumerate(outs):
                given = shapes[min(k, len(shapes) - 1)] if shapes else None
                declared[tid] = ("float32", given)
        nodes.append(SourceNode(layer.name, layer.type, ins, outs))
    final = set(version.values())
    outputs = [t for n in nodes for t in n.outputs if t in final and t not in consumed]
    return SourceGraph(nodes, inputs, outputs, display, declared)
