"""Find the first node of a converted model whose output differs from the source.

Converters keep source tensor names on the tensors that survive conversion, so every dialect
tensor whose name is also a source tensor can be compared; the first one (in execution order)
that differs names the culprit.
"""
from __future__ import annotations

import numpy as np

from ..ir import Model
from .compare import compare, to_converted_layout, to_source_layout


def first_divergence(fw, fetchable: set[str], fetch_source, model: Model, src_feeds, perms,
                     names, atol, rtol):
    """The first node (execution order) whose output differs from the source tensor of the
    same name, as a dict for the report. ``fetchable``: the source tensors its runtime can
    fetch; ``fetch_source(names)``: the source's values of those converted-model tensors."""
    from ..runtime import run

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
    theirs = fetch_source([v.name for _, v in candidates])
    for node, v in candidates:
        ref = np.asarray(theirs[v.name])
        got = np.asarray(ours[v.name])
        if got.ndim == 4 and fw.source_layout == "NCHW" and ref.shape != got.shape:
            got = to_source_layout(got, [0, 2, 3, 1])
        if ref.shape != got.shape:
            continue  # not comparable (e.g. a reshaped tensor)
        c = compare(v.name, ref, got, atol, rtol)
        if not c.within:
            return {"node": node.name, "op": node.op, "source_op": node.doc, "tensor": v.name,
                    "max_abs_error": c.max_abs_error, "max_rel_error": c.max_rel_error}
    return {"node": None, "reason": "every comparable intermediate tensor matches"}
