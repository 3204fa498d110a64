"""``info`` on a source model: what it holds, and whether and how it converts.

The source is read by its frontend (past refused nodes, as ``convert`` reads it) and taken
through the conversion pipeline (nothing is written, no exact cut is searched): its one error
lists what every stage would refuse. A model that its frontend cannot even turn into a graph -
an input whose shape the conversion would need, a broken attribute - is still described, from
the topology the exact cut reads and the shapes the file declares (symbols kept: ``batch``,
or ``None`` for no value); one whose topology does not read either (a cycle) only by how its
conversion ends.
"""
from __future__ import annotations

import os
from typing import Any

from .. import frameworks
from ..errors import (
    InvalidAttributeError,
    InvalidModelError,
    NhwcOnnxError,
    UnsupportedOpError,
)
from ..ir import Model
from ..ir.io_names import name_graph_io
from ..options import ConvertOptions

# What a frontend raises for a model it reads but would not convert (unreadable files raise
# ModelLoadError, a missing runtime MissingDependencyError: those stay errors of ``info``).
_REFUSED_AT_LOAD = (UnsupportedOpError, InvalidModelError, InvalidAttributeError)


def describe_value(v) -> dict[str, Any]:
    return {"name": v.name, "shape": list(v.shape) if v.shape is not None else None,
            "dtype": v.dtype}


def source_op_counts(model: Model) -> dict[str, int]:
    if model.source_op_counts:
        return dict(sorted(model.source_op_counts.items()))
    counts: dict[str, int] = {}
    for node in model.graph.nodes:
        op = node.doc or node.op
        counts[op] = counts.get(op, 0) + 1
    return dict(sorted(counts.items()))


def describe_source(path: str | os.PathLike, fw: frameworks.Framework,
                    options: ConvertOptions) -> dict[str, Any]:
    """inputs, outputs, nodes, ops, parameters, metadata and ``conversion``: ``{"status":
    "converts" | "refused" | "fails", "refused": [{"node", "op", "reason"}], "reason"}``."""
    from . import symbolic_batch

    reading = options.running(keep_going=True)
    try:  # past refused nodes: the conversion below lists the refusals of every stage
        model = frameworks.load_source(path, fw, symbolic_batch.probing(reading))
    except _REFUSED_AT_LOAD as exc:
        return _from_topology(path, fw, options, exc)
    name_graph_io(model, options.rename)
    symbols = symbolic_batch.probed_inputs(model)
    consts = model.graph.constants()
    data = {
        "inputs": [describe_value(v) for v in model.graph.inputs],
        "outputs": _outputs(path, fw, options, model),
        "nodes": len(model.graph),
        "ops": source_op_counts(model),
        "parameters": int(sum(int(v.const.size) for v in consts if v.const.dtype.kind == "f")),
        "metadata": dict(sorted(model.metadata.items())),
    }
    from ..passes import PassContext
    from ..passes.pipeline import to_dialect

    second = _show_symbolic_batch(data, path, fw, reading, symbols, model) if symbols else None
    try:
        ctx = PassContext(options=options, log_warnings=False)
        to_dialect(model, ctx)
        if symbols:  # a batch-mixing node is refused only by the second probe conversion
            symbolic_batch.finish(model, ctx, path, fw, options, symbols, second=second)
    except NhwcOnnxError as exc:
        data["conversion"] = _conversion(exc)
    else:
        data["conversion"] = {"status": "converts", "refused": [], "reason": None}
    return data


def _show_symbolic_batch(data: dict[str, Any], path, fw: frameworks.Framework,
                         options: ConvertOptions, symbols: dict[str, str],
                         model: Model) -> Model | None:
    """Write an open batch by its name in ``data``'s inputs and outputs: the source is read
    at the second probe size too, and a dimension that follows the probe is the batch, named
    as the file names it there (an exporter may give each output a name of its own).
    Returns that reading (the second probe conversion starts from it), None if it fails."""
    from ..schemas.symbolic_batch import merged_shape
    from .symbolic_batch import load_at_second_probe

    try:
        second = load_at_second_probe(path, fw, options)
    except NhwcOnnxError:
        return None
    symbol = next(iter(symbols.values()))
    own = {**symbols, **{v.name: v.meta["declared_batch"] for v in model.graph.outputs
                         if "declared_batch" in v.meta}}
    at_second = {v.name: v.shape for v in second.graph.inputs + second.graph.outputs}
    for entry in data["inputs"] + data["outputs"]:
        other = at_second.get(entry["name"])
        if entry["shape"] is not None and other is not None:
            merged = merged_shape(tuple(entry["shape"]), tuple(other),
                                  own.get(entry["name"], symbol))
            entry["shape"] = list(merged) if merged is not None else entry["shape"]
    return second


def _outputs(path, fw: frameworks.Framework, options: ConvertOptions,
             model: Model) -> list[dict[str, Any]]:
    """The graph outputs; with refused nodes, the source's own list (a frontend leaves out
    an output only a refused node computes), each with what is known of it."""
    ours = [describe_value(v) for v in model.graph.outputs]
    if not model.refused:
        return ours
    try:
        graph = fw.source_graph(path, options)
    except NhwcOnnxError:
        return ours
    known = {d["name"]: d for d in ours}
    listed: list[dict[str, Any]] = []
    for t in graph.outputs:
        name = graph.user_names.get(t) or graph.name_of(t)
        dtype, shape = graph.declared.get(t, (None, None))
        ours_of_it = known.pop(name, None)
        listed.append(ours_of_it or {
            "name": name, "shape": None if shape is None else list(shape), "dtype": dtype})
    return listed + list(known.values())


def _conversion(exc: NhwcOnnxError) -> dict[str, Any]:
    if isinstance(exc, UnsupportedOpError):
        return {"status": "refused", "reason": str(exc).splitlines()[0],
                "refused": [{"node": p.node, "op": p.op, "reason": p.reason}
                            for p in exc.problems]}
    return {"status": "fails", "refused": [], "reason": str(exc)}


def _from_topology(path, fw: frameworks.Framework, options: ConvertOptions,
                   exc: NhwcOnnxError) -> dict[str, Any]:
    """The description of a source its frontend refused to turn into a graph."""
    try:
        graph = fw.source_graph(path, options)
    except _REFUSED_AT_LOAD:
        # Not even its topology reads (a cycle, a tensor produced twice): the file decodes, so
        # it is described by how its conversion ends; what it holds is not known.
        return {"inputs": [], "outputs": [], "nodes": None, "ops": {}, "parameters": None,
                "metadata": {}, "conversion": _conversion(exc)}
    ops: dict[str, int] = {}
    for node in graph.nodes:
        ops[node.op] = ops.get(node.op, 0) + 1

    def tensor(t: str) -> dict[str, Any]:
        dtype, shape = graph.declared.get(t, (None, None))
        return {"name": graph.user_names.get(t) or graph.name_of(t),
                "shape": None if shape is None else list(shape), "dtype": dtype}

    return {
        "inputs": [tensor(t) for t in graph.inputs],
        "outputs": [tensor(t) for t in graph.outputs],
        "nodes": len(graph.nodes),
        "ops": dict(sorted(ops.items())),
        "parameters": None,  # the weights are not read for a graph that does not load
        "metadata": {},
        "conversion": _conversion(exc),
    }
