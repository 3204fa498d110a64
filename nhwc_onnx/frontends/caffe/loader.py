"""Load a Caffe net into the IR: scan for unsupported layers, then convert layer by layer."""
from __future__ import annotations

import json
import os

import numpy as np

from ...errors import (
    ConversionBugError,
    InvalidModelError,
    NhwcOnnxError,
    NodeProblem,
    UnsupportedOpError,
)
from ...ir import Graph, Model
from ..base import FrontendOptions
from . import caffe_pb2 as pb
from .builder import CaffeBuilder
from .prototxt import inference_layers, read_prototxt
from .registry import CHECKS, REGISTRY
from .weights import WeightSource

# Layers that create blobs from nothing (graph inputs).
_SOURCE_LAYERS = {"Input", "Data", "ImageData", "MemoryData", "DummyData", "HDF5Data",
                  "WindowData", "AnnotatedData"}


def scan_layers(layers: list[pb.LayerParameter]) -> None:
    """Raise one UnsupportedOpError naming every layer that cannot be converted exactly."""
    problems: list[NodeProblem] = []
    try:
        REGISTRY.scan([(layer.name, layer.type) for layer in layers], "caffe")
    except UnsupportedOpError as e:
        problems.extend(e.problems)
    for layer in layers:
        check = CHECKS.get(layer.type)
        reason = check(layer) if check is not None else None
        if reason:
            problems.append(NodeProblem(layer.name, layer.type, reason))
    if problems:
        order = {layer.name: i for i, layer in enumerate(layers)}
        problems.sort(key=lambda p: order.get(p.node, 0))
        raise UnsupportedOpError(problems, "caffe")


def _net_inputs(b: CaffeBuilder, net: pb.NetParameter) -> None:
    """Inputs declared at net level: ``input`` with ``input_shape`` or 4 ``input_dim`` each."""
    names = list(net.input)
    if not names:
        return
    if len(net.input_shape):
        if len(net.input_shape) not in (1, len(names)):
            raise InvalidModelError(
                f"{len(net.input_shape)} input_shape entries for {len(names)} inputs")
        shapes = [list(net.input_shape[min(i, len(net.input_shape) - 1)].dim)
                  for i in range(len(names))]
    elif len(net.input_dim):
        dims = list(net.input_dim)
        if len(dims) != 4 * len(names):
            raise InvalidModelError(
                f"{len(dims)} input_dim values for {len(names)} inputs (4 per input expected)")
        shapes = [dims[4 * i:4 * i + 4] for i in range(len(names))]
    else:
        shapes = [None] * len(names)
    for name, shape in zip(names, shapes):
        b.define_input(name, b.resolve_input_shape(name, shape, "net input"))


def _convert(path: str, options: FrontendOptions, weights_option: str | None
             ) -> tuple[Model, WeightSource]:
    net = read_prototxt(path)
    layers = inference_layers(net)
    if options.outputs:
        layers = _layers_for(layers, options.outputs)
    scan_layers(layers)
    # Read the (possibly huge) caffemodel only once the net is known to be convertible.
    weights = WeightSource.from_option(weights_option, options.seed)
    graph = Graph(net.name or os.path.splitext(os.path.basename(path))[0])
    b = CaffeBuilder(graph, weights, options.input_shapes, options.batch)
    _net_inputs(b, net)
    for layer in layers:
        fn = REGISTRY.get(layer.type).fn
        if not layer.bottom and layer.type not in _SOURCE_LAYERS:
            raise InvalidModelError(f"layer '{layer.name}' ({layer.type}) has no bottom")
        if not layer.top and layer.type != "Silence":
            raise InvalidModelError(f"layer '{layer.name}' ({layer.type}) has no top")
        try:
            fn(b, layer)
        except NhwcOnnxError:
            raise
        except Exception as e:  # a converter bug, not the user's model
            raise ConversionBugError(
                f"while converting layer '{layer.name}' ({layer.type}, caffe): "
                f"{type(e).__name__}: {e}") from e
    if not graph.inputs:
        raise InvalidModelError(f"{path} declares no inputs (no input, Input or data layer)")
    unknown = [n for n in options.inputs or [] if n not in {v.name for v in graph.inputs}]
    if unknown:
        raise InvalidModelError(
            f"requested input(s) {', '.join(unknown)} are not inputs of this net (its inputs: "
            f"{', '.join(v.name for v in graph.inputs)}); a Caffe net's inputs are fixed")
    graph.outputs = _outputs(b, options)
    b.finish()
    model = Model(graph, {"source_framework": "caffe", "source_file": os.fspath(path)})
    # One count per Caffe layer (a layer may become several core nodes).
    for layer in layers:
        model.source_op_counts[layer.type] = model.source_op_counts.get(layer.type, 0) + 1
    if options.weights:
        model.metadata["source_weights"] = os.fspath(options.weights)
    if b.preprocessing:
        model.metadata["preprocessing"] = json.dumps(b.preprocessing, sort_keys=True)
    return model, weights


def _layers_for(layers: list[pb.LayerParameter], outputs: list[str]) -> list[pb.LayerParameter]:
    """The layers the requested output blobs depend on (with in-place layers, a blob is its
    last writer's version), so that layers after them are neither scanned nor converted."""
    needed = set(outputs)
    keep = []
    for layer in reversed(layers):
        tops = set(layer.top)
        if tops & needed or (not layer.top and layer.type != "Silence"):
            keep.append(layer)
            needed -= tops
            needed.update(layer.bottom)
    return list(reversed(keep))


def _outputs(b: CaffeBuilder, options: FrontendOptions) -> list:
    if options.outputs:
        outs = []
        for name in options.outputs:
            if name not in b.blobs:
                raise InvalidModelError(f"requested output '{name}' is not a blob of this net")
            outs.append(b.blobs[name])
        return outs
    # Caffe's net outputs: the final version of every blob no layer reads.
    outs = [v for v in b.produced
            if id(v) not in b.consumed and b.blobs.get(v.meta["source_name"]) is v]
    if not outs:
        raise InvalidModelError("the net has no outputs (every blob is consumed)")
    return outs


def load(path: str | os.PathLike, options: FrontendOptions | None = None) -> Model:
    """Convert a deploy prototxt (+ ``options.weights``: a .caffemodel path or "random")."""
    options = options or FrontendOptions()
    weights = os.fspath(options.weights) if options.weights else None
    model, _ = _convert(os.fspath(path), options, weights)
    return model


def random_weights(path: str | os.PathLike, options: FrontendOptions | None = None
                   ) -> tuple[Model, dict[str, list[np.ndarray]]]:
    """Convert with seeded random weights and also return them per layer (to write a
    .caffemodel for another runtime)."""
    options = options or FrontendOptions()
    model, weights = _convert(os.fspath(path), options, "random")
    return model, weights.generated
