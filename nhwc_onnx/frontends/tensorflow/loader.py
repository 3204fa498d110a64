"""GraphDef -> core IR Model. No TensorFlow import anywhere on this path.

Order of work: read the file, inline functions, pick inputs/outputs, prune, resolve constant
Switch/Merge, scan for unsupported ops, convert node by node, and raise ONE error that lists
every node that has no exact core form.
"""
from __future__ import annotations

import os

from ...errors import InvalidModelError
from ...ir import NCHW, NHWC, Graph, Model, Value
from ...ir.input_shapes import batch_symbol, find_override, input_shape, is_open
from ...ir.metadata import KEY_SOURCE_FILE, KEY_SOURCE_FRAMEWORK
from ...options import ConvertOptions
from ..base import Converter, convert_nodes, keeps_going, leave_stand_in
from . import (  # noqa: F401  (importing registers the converters)
    ops_array,
    ops_extra,
    ops_graph,
    ops_math,
    ops_nn,
    ops_slice,
)
from .context import TFContext
from .graph_prep import PreparedGraph, prepare
from .reader import read_graphdef
from .registry import REGISTRY
from .tfnodes import Ref, TFNode, ref_name

FRAMEWORK = "tensorflow"
MAX_DIM = 1 << 31  # larger dimensions are corrupt files, not models


def load_file(path: str | os.PathLike, options: ConvertOptions) -> Model:
    graph_def, buffer = read_graphdef(path)
    return convert_graphdef(graph_def, options, os.path.basename(os.fspath(path)), buffer)


def convert_graphdef(graph_def, options: ConvertOptions, source_file: str,
                     buffer=None) -> Model:
    """Convert a parsed GraphDef; ``buffer`` holds weights lifted out of it (wire.py)."""
    prepared = prepare(graph_def, options.inputs, options.outputs, buffer)
    del graph_def  # node attributes stay referenced by the prepared nodes only
    graph = Graph(os.path.splitext(source_file)[0] or "graph")
    for node in prepared.order:
        graph.reserve_name(node.name)
    ctx = TFContext(graph, options)
    layout = _graph_layout(prepared.order)
    input_nodes = _make_inputs(ctx, prepared, layout)
    keep_going = keeps_going(options)

    def stand_in(node: TFNode) -> None:
        leave_stand_in(graph, node.name, node.op, (ctx.values.get(r) for r in node.inputs))

    # Outputs of refused nodes and of the nodes converted downstream of one: a node reading
    # one is blocked (converted only on stand-ins, its own refusals not listed).
    after_refusal: set[Ref] = set()

    def blocked(node: TFNode) -> bool:
        return any(ref not in ctx.values or ref in after_refusal for ref in node.inputs)

    def convert_blocked(converter: Converter, node: TFNode) -> TFContext:
        return _convert_on_stand_ins(ctx, converter, node, after_refusal)

    refused = convert_nodes(
        [n for n in prepared.order if n.name not in input_nodes], REGISTRY, FRAMEWORK,
        lambda node: (node.name, node.op), lambda converter, node: _convert(ctx, converter, node),
        blocked=blocked, not_converted=stand_in if keep_going else None,
        keep_going=graph if keep_going else None, convert_blocked=convert_blocked)
    _set_outputs(ctx, prepared.outputs, {n.name: n.op for n in prepared.order}, bool(refused))
    graph.toposort()
    model = Model(graph, {KEY_SOURCE_FRAMEWORK: FRAMEWORK, KEY_SOURCE_FILE: source_file})
    for node in prepared.order:
        model.source_op_counts[node.op] = model.source_op_counts.get(node.op, 0) + 1
    model.refused = refused
    model.batch_findings = list(ctx.batch_findings)
    return model


def _convert(ctx: TFContext, converter: Converter, node: TFNode) -> TFContext:
    """Convert one node (the loop then checks the attributes it read)."""
    _convert_outputs(ctx, converter, node)
    return ctx


def _convert_outputs(ctx: TFContext, converter: Converter, node: TFNode) -> int:
    """Convert one node; returns how many outputs it made."""
    ctx.begin(node)
    count = 0
    for i, value in enumerate(converter.fn(ctx, node)):
        value.meta.setdefault("source_name", f"{node.name}:{i}")
        ctx.values[(node.name, i)] = value
        count = i + 1
    return count


def _convert_on_stand_ins(ctx: TFContext, converter: Converter, node: TFNode,
                          after_refusal: set[Ref]) -> TFContext:
    """Convert a node downstream of a refusal: what a refused node should have made is a value
    no node produces and of unknown shape (the passes then judge the core ops that read it, as
    for an ONNX graph); its outputs are downstream of the refusal too."""
    for ref in node.inputs:
        if ref not in ctx.values:
            ctx.values[ref] = Value(ref_name(ref), str(node.attrs.dtype("T", "float32")))
            after_refusal.add(ref)
    made = _convert_outputs(ctx, converter, node)
    after_refusal.update((node.name, i) for i in range(made))
    return ctx


def _graph_layout(order: list[TFNode]) -> str:
    formats = {n.attrs.str("data_format", "") for n in order if n.attrs.has("data_format")}
    formats.discard("")
    return NCHW if formats == {NCHW} else NHWC


def _input_shape(ctx: TFContext, node: TFNode, ref: Ref
                 ) -> tuple[tuple[int, ...], str | None]:
    """The input's shape (a symbolic batch at its probe size) and its batch symbol, if any."""
    override = find_override(ctx.options.input_shapes, ref_name(ref),
                             ref[0] if ref[1] == 0 else None)
    if override is not None and any(d > MAX_DIM for d in override):
        raise InvalidModelError(f"--input-shape for '{node.name}' has an impossible "
                                f"dimension: {override}")
    found, declared = node.attrs.shape("shape")
    if not found:
        listed = node.attrs.ints("_output_shapes", []) or []
        declared = listed[ref[1]] if ref[1] < len(listed) else None
    if declared is not None:  # TensorFlow writes -1 for an unknown size
        declared = tuple(None if d is None or d < 0 else d for d in declared)
    hint = f"pass --input-shape {node.name}=<dims, comma-separated, in the graph's layout>"
    if declared is None and override is None:
        raise InvalidModelError(f"input '{node.name}' has an unknown rank; {hint} (-1 first "
                                "keeps the batch symbolic)")
    options = ctx.options
    shape = input_shape(declared, override, options.batch, probe=options.batch_probe,
                        name=node.name)
    assert shape is not None  # declared or overridden: refused above otherwise
    dims = list(shape)
    unknown = [i for i, d in enumerate(dims) if d is None]
    if unknown:
        shown = override if override is not None else declared
        text = "x".join("?" if is_open(d, i) else str(d) for i, d in enumerate(shown))
        example = ",".join("-1" if i == 0 and is_open(d) else f"D{i}" if is_open(d, i)
                           else str(d) for i, d in enumerate(shown))
        raise InvalidModelError(
            f"input '{node.name}' has unknown dimensions ({text}); only the batch (axis 0) "
            f"may stay symbolic: give the others with --input-shape {node.name}={example} "
            "(each D a size, in the graph's layout; -1 keeps the batch symbolic, a number "
            "fixes it)")
    sizes = [d for d in dims if d is not None]  # all of them: refused above otherwise
    if any(d > MAX_DIM for d in sizes):
        raise InvalidModelError(f"input '{node.name}' has an absurd shape {sizes}")
    return tuple(sizes), batch_symbol(declared, override, options.batch)


def _make_inputs(ctx: TFContext, prepared: PreparedGraph, layout: str) -> set[str]:
    by_name = {n.name: n for n in prepared.order}
    names: set[str] = set()
    for ref in prepared.inputs:
        node = by_name.get(ref[0])
        if node is None:
            continue  # an input the outputs do not depend on
        shape, symbol = _input_shape(ctx, node, ref)
        dtype_attr = node.attrs.dtype("dtype") or node.attrs.dtype("T")
        dtype = str(dtype_attr) if dtype_attr is not None else "float32"
        name = node.name if ref[1] == 0 else ref_name(ref)
        ctx.graph.release_name(name)
        value = Value(ctx.graph.unique_name(name), dtype, shape,
                      layout if len(shape) == 4 else None)
        value.meta["source_name"] = ref_name(ref)
        if symbol is not None:
            value.meta["batch_symbol"] = symbol
        ctx.graph.add_input(value)
        ctx.values[ref] = value
        names.add(node.name)
    return names


def _set_outputs(ctx: TFContext, outputs: list[Ref], ops: dict[str, str],
                 some_refused: bool = False) -> None:
    """Graph outputs carry the TF tensor names: an Identity is added where the tensor's value
    was produced under another name (pass-through ops), is a graph input or a constant, or is
    listed twice. The cleanup passes remove it and keep the name. With ``some_refused`` an
    output a refused node should have computed is left out."""
    graph = ctx.graph
    inputs = {id(v) for v in graph.inputs}
    seen: set[int] = set()
    for ref in outputs:
        value = ctx.values.get(ref)
        if value is None and some_refused:
            continue
        if value is None:
            raise InvalidModelError(f"output '{ref_name(ref)}' is not computed by the graph")
        wanted = ref[0] if ref[1] == 0 else ref_name(ref)
        if (value.producer() is None or id(value) in seen or id(value) in inputs
                or value.name != wanted):
            if value.name == wanted and value.is_const:
                graph.rename_value(value, f"{wanted}/value")  # the output takes the name
            if value.name != wanted:
                graph.release_name(wanted)
            node = graph.make_node("Identity", [value], name=wanted,
                                   doc=ops.get(ref[0], "Identity"))
            out = node.outputs[0]
            out.dtype, out.shape, out.layout = value.dtype, value.shape, value.layout
            value = out
        value.meta["source_name"] = ref_name(ref)
        seen.add(id(value))
        graph.outputs.append(value)
