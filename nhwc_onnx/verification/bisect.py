"""Find the first node of a converted model whose output differs from the source.

Converters keep source tensor names on the tensors that survive conversion, so every dialect
tensor whose name is also a source tensor can be compared; the first one (in execution order)
that differs names the culprit.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..ir import Model
from .compare import compare, to_converted_layout, to_source_layout

NCHW_SOURCES = ("caffe", "onnx")


def source_tensor_names(fw: str, source: str, weights: str | None = None,
                        signature: str = "serving_default") -> set[str]:
    """Names the source runtime can fetch."""
    if fw == "onnx":
        import onnx

        m = onnx.load(source, load_external_data=False)
        return {o for n in m.graph.node for o in n.output if o}
    if fw == "tf":
        from .runners import tensorflow_graph_def

        return {n.name for n in tensorflow_graph_def(source, signature).node}
    if fw == "caffe":
        import cv2

        net = cv2.dnn.readNetFromCaffe(source, weights) if weights else None
        return set(net.getLayerNames()) if net is not None else set()
    return set()


def first_divergence(fw, source, options, model: Model, src_feeds, perms, names, atol, rtol):
    from ..runtime import run
    from . import _run_source

    weights = options.weights
    if fw == "caffe" and weights in (None, "random"):
        from . import _random_caffemodel

        weights = _random_caffemodel(source, options)
    fetchable = source_tensor_names(fw, str(Path(source)), weights, options.signature)
    graph = model.graph
    graph.toposort()
    candidates = []
    for node in graph.nodes:
        for v in node.outputs:
            src_name = names.get(v.name, v.name)
            if src_name in fetchable:
                candidates.append((node, v))
    if not candidates:
        return {"node": None, "reason": "no tensor of the converted model has a source name"}
    ours = run(model, {n: to_converted_layout(x, perms.get(n)) for n, x in src_feeds.items()},
               extra_outputs=[v.name for _, v in candidates])
    opts = options
    if weights is not None:
        opts = type(options)(**{**options.__dict__, "weights": weights})
    theirs = _run_source(fw, source, opts, src_feeds, names, [v.name for _, v in candidates])
    for node, v in candidates:
        ref = np.asarray(theirs[v.name])
        got = np.asarray(ours[v.name])
        if got.ndim == 4 and fw in NCHW_SOURCES and ref.shape != got.shape:
            got = to_source_layout(got, [0, 2, 3, 1])
        if ref.shape != got.shape:
            continue  # not comparable (e.g. a reshaped tensor)
        c = compare(v.name, ref, got, atol, rtol)
        if not c.within:
            return {"node": node.name, "op": node.op, "source_op": node.doc, "tensor": v.name,
                    "max_abs_error": c.max_abs_error, "max_rel_error": c.max_rel_error}
    return {"node": None, "reason": "every comparable intermediate tensor matches"}
