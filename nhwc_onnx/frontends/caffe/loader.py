"""Load a Caffe net into the IR: check the layers, convert them one by one (frontends/base.py's
loop), and raise one error naming every layer that has no exact form."""
from __future__ import annotations

import json
import os

import numpy as np

from ...errors import (
    InvalidAttributeError,
    InvalidModelError,
    NodeProblem,
    UnsupportedOpError,
    UsageError,
)
from ...ir import Graph, Model
from ...ir.metadata import (
    KEY_SOURCE_FILE,
    KEY_SOURCE_FRAMEWORK,
    KEY_SOURCE_TRANSFORM,
    KEY_SOURCE_WEIGHTS,
)
from ...options import ConvertOptions
from ..base import Converter, convert_nodes, keeps_going, leave_stand_in, sort_problems
from . import caffe_pb2 as pb
from .builder import CaffeBuilder
from .calibration import Calibration, logit_layers
from .prototxt import inference_layers, read_prototxt
from .registry import REGISTRY
from .weights import WeightSource

# Layers that create blobs from nothing (graph inputs).
SOURCE_LAYERS = {"Input", "Data", "ImageData", "MemoryData", "DummyData", "HDF5Data",
                 "WindowData", "AnnotatedData"}


def _describe(layer: pb.LayerParameter) -> tuple[str, str]:
    return layer.name, layer.type


def check_layers(layers: list[pb.LayerParameter]) -> list[NodeProblem]:
    """What the prototxt alone shows: layers whose configuration has no exact form."""
    return REGISTRY.checked(layers, _describe)


def check_single_writers(net: pb.NetParameter, layers: list[pb.LayerParameter]) -> None:
    """Caffe (and OpenCV) refuse a net where a blob is written by two layers unless the later
    one works in place (its top i is its bottom i): the later write would silently win."""
    writer = {name: "the net's inputs" for name in net.input}
    for layer in layers:
        for i, top in enumerate(layer.top):
            in_place = i < len(layer.bottom) and layer.bottom[i] == top
            if top in writer and not in_place:
                raise InvalidModelError(
                    f"blob '{top}' is the top of layer '{layer.name}' ({layer.type}) and already "
                    f"of {writer[top]}; Caffe takes a blob written twice only in place (the "
                    "same name as bottom and top of one layer)")
            if top not in writer:
                writer[top] = f"layer '{layer.name}' ({layer.type})"


def _net_inputs(b: CaffeBuilder, net: pb.NetParameter) -> None:
    """Inputs declared at net level: ``input`` with ``input_shape`` or 4 ``input_dim`` each."""
    names = list(net.input)
    if not names:
        return
    shapes: list[list[int] | None]
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


def _convert(path: str, options: ConvertOptions, weights_option: str | None
             ) -> tuple[Model, WeightSource]:
    net = read_prototxt(path)
    layers = _selected_layers(net, options)
    problems = check_layers(layers) + REGISTRY.unsupported((la.name, la.type) for la in layers)
    # A refused net is still converted, to list every layer that cannot be, but with zero
    # weights: the (possibly huge) caffemodel is read only for a net that may convert.
    weights = (WeightSource.placeholders() if problems
               else WeightSource.from_option(weights_option, options.seed))
    graph = Graph(net.name or os.path.splitext(os.path.basename(path))[0])
    b = CaffeBuilder(graph, weights, options.input_shapes, options.batch, options.batch_probe)
    if weights.random:
        weights.calibration = Calibration(b, options.seed, logit_layers(layers))
    unset: set[str] = set()  # blobs whose latest writer was not converted

    def convert(converter: Converter, layer: pb.LayerParameter) -> CaffeBuilder:
        tracked = b.begin(layer)
        if not layer.bottom and layer.type not in SOURCE_LAYERS:
            raise b.invalid("has no bottom")
        if not layer.top and layer.type != "Silence":
            raise b.invalid("has no top")
        before = len(graph)
        if converter.check is not None:
            converter.check(tracked)  # found nothing to refuse up front; what it read counts
        converter.fn(b, tracked)
        unset.difference_update(layer.top)
        if weights.calibration is not None:
            weights.calibration.after_layer(layer, graph.nodes[before:],
                                            weights.generated.get(layer.name))
            weights.calibration.release()
        return b  # the loop checks the fields the converter left unread

    keep_going = keeps_going(options)

    def not_converted(layer: pb.LayerParameter) -> None:
        if keep_going:
            read = [b.blobs[n] for n in layer.bottom if n in b.blobs and n not in unset]
            b.consumed.update(id(v) for v in read)  # read, so not a net output
            leave_stand_in(graph, layer.name, layer.type, read)
        unset.update(layer.top)

    try:
        _net_inputs(b, net)
        refused = convert_nodes(
            layers, REGISTRY, "caffe", _describe, convert,
            blocked=lambda layer: any(name in unset for name in layer.bottom),
            not_converted=not_converted, problems=problems,
            keep_going=graph if keep_going else None)
    except (InvalidModelError, InvalidAttributeError):
        if not problems:
            raise
        # The layers the prototxt alone shows to be unconvertible come first: what stopped
        # the conversion run behind them may well be their consequence.
        raise UnsupportedOpError(sort_problems(problems, layers, _describe), "caffe") from None
    finally:
        weights.calibration = None  # its activations (and its cycle through the builder)
    if not graph.inputs:
        raise InvalidModelError(f"{path} declares no inputs (no input, Input or data layer)")
    unknown = [n for n in options.inputs or [] if n not in {v.name for v in graph.inputs}]
    if unknown:
        raise UsageError(
            f"requested input(s) {', '.join(unknown)} are not inputs of this net (its inputs: "
            f"{', '.join(v.name for v in graph.inputs)}); a Caffe net's inputs are fixed")
    graph.outputs = _outputs(b, options, unset if refused else None)
    b.finish()
    model = _model(path, graph, layers, b, options)
    model.refused = refused
    return model, weights


def _selected_layers(net: pb.NetParameter, options: ConvertOptions) -> list[pb.LayerParameter]:
    """The inference layers ``--outputs`` asks for (all of them without it)."""
    layers = inference_layers(net)
    check_single_writers(net, layers)
    if options.outputs:
        blobs = set(net.input).union(*(layer.top for layer in layers))
        unknown = [n for n in options.outputs if n not in blobs]
        if unknown:  # else no layer would be kept, and the net would seem to have no inputs
            raise UsageError(f"--outputs names {', '.join(map(repr, unknown))}, which is not a "
                             "blob of this net")
        layers = layers_for(layers, list(options.outputs))
    return layers


def _model(path: str, graph: Graph, layers: list[pb.LayerParameter], b: CaffeBuilder,
           options: ConvertOptions) -> Model:
    model = Model(graph, {KEY_SOURCE_FRAMEWORK: "caffe", KEY_SOURCE_FILE: os.fspath(path)})
    # One count per Caffe layer (a layer may become several core nodes).
    for layer in layers:
        model.source_op_counts[layer.type] = model.source_op_counts.get(layer.type, 0) + 1
    if options.weights:
        model.metadata[KEY_SOURCE_WEIGHTS] = os.fspath(options.weights)
    if b.preprocessing:
        # What the data layers did to their input, recorded only: the converted input still
        # takes data prepared that way. (Key "preprocessing" means preprocessing embedded in
        # the model, which then takes raw pixels: --mean / --std / --reverse-channels.)
        model.metadata[KEY_SOURCE_TRANSFORM] = json.dumps(b.preprocessing, sort_keys=True)
    return model


def layers_for(layers: list[pb.LayerParameter], outputs: list[str]) -> list[pb.LayerParameter]:
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


def _outputs(b: CaffeBuilder, options: ConvertOptions, unset: set[str] | None = None) -> list:
    """The net's outputs; ``unset``: blobs refused layers should have written (left out)."""
    if options.outputs:
        outs = []
        for name in options.outputs:
            if unset is not None and name in unset:
                continue
            if name not in b.blobs:
                raise UsageError(f"--outputs names '{name}', which is not a blob of this net")
            outs.append(b.blobs[name])
        return outs
    # Caffe's net outputs: the final version of every blob no layer reads.
    outs = [v for v in b.produced
            if id(v) not in b.consumed and b.blobs.get(v.meta["source_name"]) is v]
    if not outs and unset is None:
        raise InvalidModelError("the net has no outputs (every blob is consumed)")
    return outs


def load(path: str | os.PathLike, options: ConvertOptions | None = None) -> Model:
    """Convert a deploy prototxt (+ ``options.weights``: a .caffemodel path or "random")."""
    options = options or ConvertOptions()
    weights = os.fspath(options.weights) if options.weights else None
    model, _ = _convert(os.fspath(path), options, weights)
    return model


def random_weights(path: str | os.PathLike, options: ConvertOptions | None = None
                   ) -> tuple[Model, dict[str, list[np.ndarray]]]:
    """Convert with seeded random weights and also return them per layer (to write a
    .caffemodel for another runtime)."""
    options = options or ConvertOptions()
    model, weights = _convert(os.fspath(path), options, "random")
    return model, weights.generated
