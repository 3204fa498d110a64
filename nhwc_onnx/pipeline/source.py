"""An ONNX source as the partition reads it: nodes in dependency order with their names,
which tensors depend on a graph input, each tensor's shape and element type, and which axes
follow a symbolic batch."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InvalidModelError, MissingDependencyError, UsageError
from ..ir.input_shapes import batch_symbol, find_override, input_shape
from ..options import ConvertOptions
from ..schemas.symbolic_batch import PROBES

MAC_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})
RECURRENT_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}  # weight products per step: gates x hidden


def reads(node) -> list[str]:
    """Every tensor ``node`` reads: its inputs and the outer names its subgraphs use."""
    found = [i for i in node.input if i]
    for attr in node.attribute:
        graphs = ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)
        for g in graphs:
            inner = {o for n in g.node for o in n.output} | {i.name for i in g.input} | {
                t.name for t in g.initializer}
            for n in g.node:
                found += [t for t in reads(n) if t not in inner]
    return list(dict.fromkeys(found))


@dataclass
class OnnxSource:
    proto: Any  # onnx.ModelProto
    order: list  # NodeProto, dependency order (the selected part: --inputs/--outputs)
    names: list[str]  # node names, as refusals name them
    inputs: list[str]  # graph inputs fed (not initializers)
    outputs: list[str]  # the outputs wanted
    consts: dict[str, np.ndarray]
    shapes: dict[str, tuple] = field(default_factory=dict)  # at the first probe / the batch
    dtypes: dict[str, str] = field(default_factory=dict)
    batch_axes: dict[str, set[int]] = field(default_factory=dict)  # axes that follow a batch
    symbol: str | None = None  # the symbolic batch's name
    producer: dict[str, int] = field(default_factory=dict)  # tensor -> node index
    live: list[bool] = field(default_factory=list)  # node depends on a graph input
    read_by: list[list[str]] = field(default_factory=list)  # each node's ``reads``

    def node_reads(self, index: int) -> list[str]:
        return self.read_by[index]

    def sample_shape(self, tensor: str) -> tuple | None:
        """The tensor's shape for one sample: axes that follow a symbolic batch at 1."""
        if tensor in self.consts:
            return tuple(self.consts[tensor].shape)
        shape = self.shapes.get(tensor)
        if shape is None:
            return None
        axes = self.batch_axes.get(tensor, set())
        return tuple(1 if i in axes else d for i, d in enumerate(shape))

    def samples_per_run(self) -> int:
        """Axis 0 of the first graph input when fixed (the batch), else 1."""
        from .cost import samples_per_run

        return samples_per_run(self.sample_shape(self.inputs[0]) if self.inputs else None) \
            if not (self.inputs and self.batch_axes.get(self.inputs[0])) else 1

    def _recurrent_macs(self, node) -> int:
        return _recurrent(self, node)

    def macs(self, index: int) -> int:
        """Multiply-accumulates of one node per run (0 for ops without a weight product)."""
        node = self.order[index]
        if node.op_type in RECURRENT_GATES:
            return self._recurrent_macs(node)
        if node.op_type not in MAC_OPS:
            return 0
        found = [self.sample_shape(t) for t in node.input[:2]]
        ins = [s for s in found if s is not None]
        out = self.sample_shape(node.output[0])
        if out is None or len(ins) != len(found) or any(
                not isinstance(d, int) for s in [out, *ins] for d in s):
            return 0
        size = int(np.prod(out, dtype=np.int64))
        if node.op_type == "Conv":
            return size * int(np.prod(ins[1][1:], dtype=np.int64))
        if node.op_type == "ConvTranspose":
            return int(np.prod(ins[0], dtype=np.int64)) * int(np.prod(ins[1][1:], dtype=np.int64))
        if node.op_type == "Gemm":
            trans_a = next((a.i for a in node.attribute if a.name == "transA"), 0)
            k = ins[0][0] if trans_a else ins[0][-1]
            return size * int(k)
        return size * int(ins[0][-1]) if ins[0] else 0  # MatMul


def _recurrent(source: OnnxSource, node) -> int:
    """LSTM/GRU/RNN: steps x batch x directions x gates x hidden x (input + hidden)."""
    x = source.sample_shape(node.input[0])
    w = source.sample_shape(node.input[1]) if len(node.input) > 1 else None
    r = source.sample_shape(node.input[2]) if len(node.input) > 2 else None
    if x is None or w is None or r is None or len(x) != 3:
        return 0
    if any(not isinstance(d, int) for d in (*x, *w, *r)):
        return 0
    return int(x[0]) * int(x[1]) * int(w[0]) * int(w[1]) * (int(w[2]) + int(r[2]))


def read_source(path, options: ConvertOptions, *, run_unknown: bool = False
                ) -> OnnxSource:
    """The source (a path, or a ModelProto: a TF/Caffe source's core ops written as ONNX) as
    the partition reads it. ``run_unknown``: shapes ONNX's inference cannot give (an op of
    another domain) come from onnxruntime running the source on zeros (the split needs them
    at its boundaries; ``info`` and the refusal's estimate do without)."""
    from onnx import numpy_helper

    from ..frontends.onnx.folding import ShapeFolder
    from ..frontends.onnx.loader import read_model
    from ..frontends.onnx.structure import node_names, opset_versions, topological_order
    from ..frontends.onnx.topology import declared_type

    proto = read_model(str(path)) if isinstance(path, (str, os.PathLike)) else path
    g = proto.graph
    full = topological_order(g)
    naming = node_names(full)
    consts = {}
    for t in g.initializer:
        consts[t.name] = numpy_helper.to_array(t)
    inputs = list(options.inputs or [i.name for i in g.input if i.name not in consts])
    outputs = list(options.outputs or [o.name for o in g.output])
    known = {o for n in full for o in n.output if o} | {i.name for i in g.input}
    missing = [t for t in outputs + inputs if t not in known]
    if missing:
        raise UsageError(f"{', '.join(map(repr, missing))} is not a tensor of the model")
    # the part between the inputs and the outputs, as the frontend selects it
    stop, needed, keep = set(inputs), set(outputs), []
    for node in reversed(full):
        if any(o in needed for o in node.output) and not any(o in stop for o in node.output):
            keep.append(node)
            needed.update(reads(node))
    order = list(reversed(keep))
    source = OnnxSource(proto, order, [naming[id(n)] for n in order], inputs, outputs, consts)
    source.producer = {o: i for i, n in enumerate(order) for o in n.output if o}
    source.read_by = [reads(node) for node in order]
    live = set(inputs)
    for i, node in enumerate(order):
        is_live = any(t in live for t in source.read_by[i])
        source.live.append(is_live)
        if is_live:
            live.update(o for o in node.output if o)
    declared = {i.name: declared_type(i) for i in g.input}
    shapes_at = {}
    for probe in (PROBES if options.batch is None else (None,)):
        shapes = _input_shapes(source, inputs, declared, options, probe)
        folder = ShapeFolder(proto, consts, shapes, opset_versions(proto))
        shapes_at[probe] = dict(folder.shapes)
        source.dtypes = {**folder.dtypes, **{n: declared.get(n, ("float32",))[0] or "float32"
                                             for n in inputs}}
        # a shape with an open dim (a graph output declared with the batch's name after such
        # an op) is not known either
        missing = [o for i, n in enumerate(order) if source.live[i] for o in n.output
                   if o and (shapes_at[probe].get(o) is None
                             or any(d is None for d in shapes_at[probe][o]))]
        if missing and run_unknown:  # an op ONNX's inference does not know: run it
            found = _runtime_shapes(proto, shapes, source.dtypes, missing)
            shapes_at[probe].update({t: shape for t, (shape, _) in found.items()})
            source.dtypes.update({t: dtype for t, (_, dtype) in found.items()})
        if source.symbol is None:
            break  # a fixed batch: one reading
    first = next(iter(shapes_at.values()))
    source.shapes = dict(first)
    if source.symbol is not None and len(shapes_at) == 2:
        second = shapes_at[PROBES[1]]
        for name, shape in first.items():
            other = second.get(name)
            if other is not None and len(other) == len(shape):
                source.batch_axes[name] = {i for i, (a, b) in enumerate(zip(shape, other))
                                           if a != b}
    return source


def _input_shapes(source: OnnxSource, inputs: list[str], declared: dict,
                  options: ConvertOptions, probe: int | None) -> dict[str, tuple]:
    """Each input's shape with an open batch at ``probe``; the source learns the batch's
    name from the first input that has one."""
    shapes = {}
    for name in inputs:
        dims = declared.get(name, (None, None))[1]
        override = find_override(options.input_shapes, name)
        if dims is None and override is None:
            raise InvalidModelError(f"input '{name}' has no shape in the model; give it "
                                    "with --input-shape")
        shape = input_shape(dims, override, options.batch, probe=probe, name=name)
        if shape is None or any(d is None for d in shape):
            raise InvalidModelError(f"input '{name}' has an unknown dimension; give it "
                                    "with --input-shape")
        shapes[name] = tuple(shape)
        if probe is not None and source.symbol is None:
            source.symbol = batch_symbol(dims, override, options.batch)
    return shapes


def _runtime_shapes(proto, input_shapes: dict, dtypes: dict, tensors: list[str]) -> dict:
    """tensor -> (shape, dtype) as onnxruntime computes them on zero inputs of
    ``input_shapes``; empty when onnxruntime cannot run the source."""
    import onnx

    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise MissingDependencyError("onnxruntime", "verify",
                                     "splitting a model into segments") from exc
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    known = {o.name for o in model.graph.output}
    for t in tensors:
        if t not in known:
            model.graph.output.append(onnx.ValueInfoProto(name=t))
    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        session = ort.InferenceSession(model.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        feeds = {name: np.zeros(shape, dtype=dtypes.get(name, "float32"))
                 for name, shape in input_shapes.items()}
        values = session.run(list(tensors), feeds)
    except Exception:  # noqa: BLE001 - onnxruntime raises its own types; shapes stay unknown
        return {}
    return {t: (tuple(int(d) for d in v.shape), str(v.dtype)) for t, v in zip(tensors, values)}
