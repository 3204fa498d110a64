"""Split a TensorFlow or Caffe source: its core ops, written as standard ONNX, split as an
ONNX source is.

The frontend turns the source into core ops (each the standard ONNX operator of that name, or
a composition of them: ``schemas/core``), so the core graph written as standard ONNX
(``runtime.standard_onnx.lower_core_model``) computes what the source computes. That model
is split like any ONNX source (``partition.py``): its dialect segments are what ``convert``
makes of those nodes, its standard segments run them in onnxruntime. A source node the
frontend itself refuses (no converter, or no exact core form) has no core op to run: the
split is refused listing those nodes, as a plain conversion lists them.

A symbolic batch: the core graph is read at both probe sizes. A constant that differs
between them holds numbers computed from the batch's size; each element is written as the
runtime expression ``slope * N + offset`` on the batch read from a graph input, so the
ONNX model keeps the batch open and the ONNX frontend tracks those numbers as it tracks an
exporter's shape arithmetic. A number that is no straight-line function of N (the frontend
finds those while it folds, at both probes) is refused with the ``--batch`` remedy.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from .. import frameworks
from ..errors import NodeProblem, UnsupportedOpError
from ..ir import NCHW, Model
from ..ir.input_shapes import PROBES, probing
from ..ir.io_names import name_graph_io
from ..ir.metadata import KEY_SOURCE_FILE, KEY_SOURCE_FRAMEWORK
from ..options import ConvertOptions
from ..schemas.batch_values import REMEDY

INTERMEDIATE = "core.onnx"


def split_through_core(source, framework, options: ConvertOptions, convert, *, split_onnx,
                       whole):
    """The pipeline of a refused TF/Caffe ``source``. ``convert(options, path)`` converts the
    ONNX file ``path``; ``split_onnx(path, options, refusal, convert)`` splits it and
    ``whole(model, report, source)`` is the pipeline of a model converted whole."""
    proto, source_names, channels_last = core_as_onnx(source, framework, options)
    # a TF source's images are NHWC already: the ONNX route must not take them for NCHW
    # (rank 4: written as tf2onnx writes them; other ranks kept as they are)
    kept = [name for name in channels_last if not _nhwc_at_source(proto, name)]
    onnx_options = as_onnx_options(options).replace(
        keep_layout=tuple(dict.fromkeys([*options.keep_layout, *kept])))
    with tempfile.TemporaryDirectory(prefix="nhwc-onnx-split-") as folder:
        path = Path(folder) / INTERMEDIATE
        _save(proto, path)
        del proto

        def convert_intermediate(part_options: ConvertOptions):
            return convert(part_options.replace(framework="onnx"), path=path)

        try:
            model, report = convert_intermediate(onnx_options.replace(exact_cut=False))
        except UnsupportedOpError as refusal:
            pipeline = split_onnx(path, onnx_options, refusal, convert_intermediate)
        else:  # the core ops convert whole (the refusal was of a form the ONNX route reads)
            pipeline = whole(model, report, source)
        for model in pipeline.models.values():
            if isinstance(model, Model):
                _own_weights(model)
                # converted from the source (through its core ops), not from the temporary file
                model.metadata[KEY_SOURCE_FRAMEWORK] = framework.name
                model.metadata[KEY_SOURCE_FILE] = os.path.basename(str(source))
    pipeline.manifest.extra["source"] = os.path.basename(str(source))
    renamed = dict(options.rename)
    names = {renamed.get(k, k): v for k, v in source_names.items()}
    known = {e.name for e in pipeline.manifest.inputs + pipeline.manifest.outputs}
    names = {k: v for k, v in names.items() if k in known and k != v}
    if names:
        pipeline.manifest.extra["source_names"] = names
    return pipeline


def as_onnx_options(options: ConvertOptions) -> ConvertOptions:
    """The options that convert the core ops written as ONNX: the frontend applied the
    source's own (its cut, shapes and batch, Caffe weights, a SavedModel's signature)."""
    return options.replace(framework="onnx", inputs=None, outputs=None, input_shapes={},
                           batch=None, weights=None, signature=ConvertOptions().signature)


def estimate(source, framework, options: ConvertOptions, refusal: UnsupportedOpError) -> str:
    """How ``--split`` would cut a refused TF/Caffe source, in one line (partition.estimate
    on its core ops written as ONNX; the refusals name core nodes)."""
    from .partition import estimate as estimate_onnx

    proto, _, _ = core_as_onnx(source, framework, options)
    return estimate_onnx(proto, as_onnx_options(options), refusal)


def source_costs(source, framework, options: ConvertOptions) -> tuple[int, int]:
    """Multiply-accumulates per sample and parameter bytes of a TF/Caffe source (of its core
    ops, counted as those of an ONNX source)."""
    from .source import read_source

    proto, _, _ = core_as_onnx(source, framework, options)
    read = read_source(proto, as_onnx_options(options))
    return (sum(read.macs(i) for i in range(len(read.order))) // read.samples_per_run(),
            int(sum(a.nbytes for a in read.consts.values())))


def core_as_onnx(source, framework, options: ConvertOptions):
    """The source's core graph as a standard ONNX ModelProto (a symbolic batch kept open),
    its graph inputs' and outputs' source names (ONNX name -> source name), and those of its
    maps that are not channels-first (a TF source's NHWC images: kept as they are, as a plain
    conversion keeps them)."""
    from ..runtime.standard_onnx import lower_core_model

    first = _core_model(source, framework, probing(options))
    symbols = {v.name: v.meta["batch_symbol"] for v in first.graph.inputs
               if "batch_symbol" in v.meta}
    names = {v.name: str(v.meta.get("source_name", v.name))
             for v in first.graph.inputs + first.graph.outputs}
    channels_last = [v.name for v in first.graph.inputs + first.graph.outputs
                     if v.shape is not None and len(v.shape) >= 3 and v.layout != NCHW]
    proto = lower_core_model(first)
    if not symbols:
        return proto, names, channels_last
    second = _core_model(source, framework, options.running(batch_probe=PROBES[1]))
    both = {(p.node, p.op) for p in second.batch_findings}
    computed = [p for p in first.batch_findings if (p.node, p.op) in both]
    if computed:
        raise UnsupportedOpError(computed, framework.name,
                                 hint="the source's batch is symbolic: no number may depend "
                                 "on the batch's size")
    generalize_batch(proto, lower_core_model(second), symbols, framework.name)
    return proto, names, channels_last


def _core_model(source, framework, options: ConvertOptions) -> Model:
    """The frontend's core graph; the nodes it refuses are refused here too."""
    model = frameworks.load_source(source, framework, options.running(keep_going=True))
    refused = list(getattr(model, "refused", None) or [])
    if refused:
        raise UnsupportedOpError(refused, framework.name,
                                 hint="--split runs in standard ONNX what the frontend reads "
                                 "as core ops; these nodes have no converter or no exact core "
                                 "form")
    name_graph_io(model)
    return model


def generalize_batch(proto, second, symbols: dict[str, str], framework: str) -> None:
    """Write ``proto`` (the core graph at PROBES[0]) with the batch open: each graph input
    in ``symbols`` gets its symbol at axis 0, and every integer constant that differs in
    ``second`` (the same graph at PROBES[1]) is computed from the batch at run time."""
    from onnx import numpy_helper

    problems = _structure_differences(proto, second)
    if problems:
        raise UnsupportedOpError(problems, framework, hint=REMEDY)
    for value in proto.graph.input:
        if value.name in symbols:
            dim = value.type.tensor_type.shape.dim[0]
            dim.Clear()
            dim.dim_param = symbols[value.name]
    _open_output_shapes(proto, second, next(iter(symbols.values())))
    at_second = {t.name: numpy_helper.to_array(t) for t in second.graph.initializer}
    reader = next(v.name for v in proto.graph.input if v.name in symbols)
    kept, made = [], []
    for tensor in proto.graph.initializer:
        a = numpy_helper.to_array(tensor)
        b = at_second[tensor.name]
        if a.shape == b.shape and np.array_equal(a, b):
            kept.append(tensor)
            continue
        slope = _slope(a, b)
        if slope is None:
            raise UnsupportedOpError(_readers(proto, tensor.name, "a constant that differs "
                                              "with the batch's size in no straight line"),
                                     framework, hint=REMEDY)
        made += _batch_expression(tensor.name, a, slope, reader)
    del proto.graph.initializer[:]
    proto.graph.initializer.extend(kept)
    nodes = list(proto.graph.node)
    del proto.graph.node[:]
    proto.graph.node.extend(made + nodes)


def _open_output_shapes(proto, second, symbol: str) -> None:
    """A graph output's declared dimension that differs at the second probe is the batch at
    axis 0 (its symbol) and unknown anywhere else."""
    for out, other in zip(proto.graph.output, second.graph.output):
        dims, others = out.type.tensor_type.shape.dim, other.type.tensor_type.shape.dim
        if len(dims) != len(others):
            continue
        for axis, (dim, at_second) in enumerate(zip(dims, others)):
            if dim.dim_value != at_second.dim_value:
                dim.Clear()
                if axis == 0:
                    dim.dim_param = symbol


def _structure_differences(a, b) -> list[NodeProblem]:
    """Nodes that differ other than by their constants' values (none for one graph)."""
    if len(a.graph.node) != len(b.graph.node):
        return [NodeProblem("", "graph", "the core graph has another number of nodes at "
                            "another batch size")]
    found = []
    for x, y in zip(a.graph.node, b.graph.node):
        if (x.op_type, list(x.input), list(x.output), [t.SerializeToString() for t in
                                                       x.attribute]) != (
                y.op_type, list(y.input), list(y.output), [t.SerializeToString() for t in
                                                           y.attribute]):
            found.append(NodeProblem(x.name, x.op_type, "differs at another batch size"))
    if sorted(t.name for t in a.graph.initializer) != sorted(t.name for t in b.graph.initializer):
        found.append(NodeProblem("", "graph", "other constants at another batch size"))
    return found


def _slope(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """Per element, the integer slope in N of ``a`` (at PROBES[0]) and ``b`` (at PROBES[1]);
    None when they are no integers of one shape or some element is no such line."""
    if a.shape != b.shape or a.dtype != b.dtype or a.dtype.kind not in "iu":
        return None
    step = PROBES[1] - PROBES[0]
    diff = b.astype(np.int64) - a.astype(np.int64)
    if np.any(diff % step):
        return None
    return diff // step


def _batch_expression(name: str, at_probe: np.ndarray, slope: np.ndarray, reader: str) -> list:
    """Nodes computing ``name`` = slope * N + offset, N read from axis 0 of ``reader``."""
    from onnx import helper, numpy_helper

    offset = at_probe.astype(np.int64) - slope * PROBES[0]
    base = f"{name}/batch"
    scalar = at_probe.ndim == 0
    nodes = [helper.make_node("Shape", [reader], [f"{base}/shape"], name=f"{base}/shape"),
             helper.make_node("Gather" if scalar else "Slice",
                              [f"{base}/shape", f"{base}/zero"] if scalar
                              else [f"{base}/shape", f"{base}/zero", f"{base}/one"],
                              [f"{base}/n"], name=f"{base}/n"),
             helper.make_node("Mul", [f"{base}/n", f"{base}/slope"], [f"{base}/scaled"],
                              name=f"{base}/scaled"),
             helper.make_node("Add", [f"{base}/scaled", f"{base}/offset"], [f"{base}/int64"],
                              name=f"{base}/sum"),
             helper.make_node("Cast", [f"{base}/int64"], [name], name=f"{base}/cast",
                              to=helper.np_dtype_to_tensor_dtype(at_probe.dtype))]
    consts = {"zero": np.array(0 if scalar else [0], np.int64), "one": np.array([1], np.int64),
              "slope": slope.astype(np.int64), "offset": offset}
    for key, array in consts.items():
        nodes.insert(0, helper.make_node("Constant", [], [f"{base}/{key}"],
                                         name=f"{base}/{key}",
                                         value=numpy_helper.from_array(array)))
    return nodes


def _nhwc_at_source(proto, name: str) -> bool:
    """Write the rank-4 graph input or output ``name`` of a channels-last source as an NHWC
    tensor the ONNX route recognises (tf2onnx's form): an input read only by a Transpose to
    NCHW (here followed by one back), an output written by a Transpose from NCHW. The ONNX
    route then stores it as it is, an image (preprocessing applies), and the passes cancel
    the pair. False: not a rank-4 graph input or output."""
    from onnx import helper

    graph = proto.graph
    io = {v.name: v for v in list(graph.input) + list(graph.output)}
    value = io.get(name)
    if value is None or len(value.type.tensor_type.shape.dim) != 4:
        return False
    inner, nchw = f"{name}/nhwc", f"{name}/nchw"
    is_input = any(v.name == name for v in graph.input)
    for node in graph.node:  # the tensor the graph's nodes read or write is renamed
        ports = node.input if is_input else node.output
        for i, t in enumerate(ports):
            if t == name:
                ports[i] = inner
    if is_input:
        pair = [helper.make_node("Transpose", [name], [nchw], name=nchw, perm=[0, 3, 1, 2]),
                helper.make_node("Transpose", [nchw], [inner], name=inner, perm=[0, 2, 3, 1])]
        nodes = pair + list(graph.node)
    else:
        pair = [helper.make_node("Transpose", [inner], [nchw], name=nchw, perm=[0, 3, 1, 2]),
                helper.make_node("Transpose", [nchw], [name], name=f"{name}/out",
                                 perm=[0, 2, 3, 1])]
        nodes = list(graph.node) + pair
    del graph.node[:]
    graph.node.extend(nodes)
    return True


def _readers(proto, tensor: str, reason: str) -> list[NodeProblem]:
    return [NodeProblem(n.name, n.op_type, f"reads {reason} ('{tensor}')")
            for n in proto.graph.node if tensor in n.input] or [
        NodeProblem(tensor, "constant", reason)]


def _save(proto, path: Path) -> None:
    """The intermediate model in one file, or with its weights beside it when too large for
    one protobuf message."""
    import onnx

    large = proto.ByteSize() > (1 << 31) - (1 << 24)
    onnx.save_model(proto, str(path), save_as_external_data=large,
                    all_tensors_to_one_file=True, location=INTERMEDIATE + ".data")


def _own_weights(model: Model) -> None:
    """Weights read from the intermediate file are copied: that file is gone once the split
    is made, and a weight that remembers it would be handed to onnxruntime by its path."""
    from ..files.reads import file_origin

    for value in model.graph.constants():
        if value.const is not None and file_origin(value.const) is not None:
            value.const = np.array(value.const)
