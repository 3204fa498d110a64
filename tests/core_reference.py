"""Execute a core-op model in numpy: the reference that frontends and passes are tested against.

``run_core(model, feeds)`` needs no runtime besides numpy; each node runs through its schema's
``evaluate`` (see ``schemas.core``). It is slow and exact (convolutions accumulate in float64).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from nhwc_onnx.errors import InvalidModelError, NhwcOnnxError
from nhwc_onnx.ir import Graph, Model, Value
from nhwc_onnx.schemas.core import evaluate_node


def run_core(
    model: Model | Graph, feeds: Mapping[str, np.ndarray], extra_outputs: Sequence[str] = ()
) -> dict[str, np.ndarray]:
    """Run every node in topological order; return graph outputs (and ``extra_outputs``) by name."""
    graph = model.graph if isinstance(model, Model) else model
    env: dict[int, np.ndarray] = {}
    for v in graph.inputs:
        if v.is_const:
            env[id(v)] = v.const
            continue
        if v.name not in feeds:
            raise InvalidModelError(f"no value fed for graph input '{v.name}'")
        env[id(v)] = np.asarray(feeds[v.name])
    graph.toposort()
    for node in graph.nodes:
        args = []
        for v in node.inputs:
            args.append(None if v is None else _lookup(env, v, node.name))
        try:
            outs = evaluate_node(node, args)
        except NhwcOnnxError:
            raise
        except (ValueError, IndexError, TypeError) as exc:
            raise InvalidModelError(
                f"evaluating node '{node.name}' ({node.op}) failed: {exc}"
            ) from exc
        if len(outs) != len(node.outputs):
            raise InvalidModelError(
                f"node '{node.name}' ({node.op}) computed {len(outs)} outputs, "
                f"declares {len(node.outputs)}"
            )
        for v, arr in zip(node.outputs, outs):
            env[id(v)] = arr
    wanted = list(graph.outputs)
    for name in extra_outputs:
        v = graph.find_value(name)
        if v is None:
            raise InvalidModelError(f"no value named '{name}' in the graph")
        wanted.append(v)
    return {v.name: _lookup(env, v, "graph output") for v in wanted}


def _lookup(env: dict[int, np.ndarray], v: Value, where: str) -> np.ndarray:
    if v.is_const:
        return v.const
    if id(v) not in env:
        raise InvalidModelError(f"value '{v.name}' read by {where} is never computed")
    return env[id(v)]
