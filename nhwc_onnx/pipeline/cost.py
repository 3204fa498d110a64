"""What a model or a segment costs: multiply-accumulates per sample and the bytes of its
parameters. A sample: a run at batch 1 where the batch is symbolic, else a run divided by
axis 0 of the first graph input (the batch)."""
from __future__ import annotations

import numpy as np


def dialect_costs(model) -> tuple[int, int]:
    """(MACs, parameter bytes) of a dialect Model: the weight products of Conv,
    DepthwiseConv2d, ConvTranspose, Dense, Gemm and MatMul."""
    from ..schemas.validate import infer_shapes

    shapes = infer_shapes(model)
    macs = 0
    for node in model.graph:
        if node.op not in ("Conv", "DepthwiseConv2d", "ConvTranspose", "Dense", "Gemm",
                           "MatMul"):
            continue
        found = [_sample(v.shape if v.shape is not None else shapes.get(v.name))
                 if v is not None else None for v in node.inputs[:2]]
        ins = [s for s in found if s is not None]
        out = _sample(node.outputs[0].shape or shapes.get(node.outputs[0].name))
        if out is None or len(ins) != len(found):
            continue
        size = int(np.prod(out, dtype=np.int64))
        w = ins[1]
        if node.op == "Conv":
            macs += size * int(np.prod(w[1:], dtype=np.int64))
        elif node.op == "DepthwiseConv2d":
            macs += size * int(np.prod(w[:-2], dtype=np.int64))
        elif node.op == "ConvTranspose":
            channels = ins[0][-1] or 1
            macs += int(np.prod(ins[0], dtype=np.int64)) * int(np.prod(w, dtype=np.int64)) \
                // channels
        elif node.op == "Dense":
            macs += size * int(w[-1])
        elif node.op == "Gemm":
            trans_a = node.attrs.get("transA", 0)
            macs += size * int(ins[0][0] if trans_a else ins[0][-1])
        else:
            macs += size * int(ins[0][-1]) if ins[0] else 0
    params = int(sum(v.const.nbytes for v in model.graph.constants()))
    first = model.graph.inputs[0].shape if model.graph.inputs else None
    return macs // samples_per_run(first), params


def samples_per_run(shape) -> int:
    """Axis 0 of the first graph input when fixed (the batch), else 1."""
    if shape and isinstance(shape[0], int) and shape[0] > 0:
        return int(shape[0])
    return 1


def standard_costs(proto) -> int:
    """Parameter bytes of a standard ONNX model (its initializers)."""
    from onnx import numpy_helper

    return int(sum(numpy_helper.to_array(t).nbytes for t in proto.graph.initializer))


def _sample(shape) -> tuple | None:
    if shape is None:
        return None
    if any(not isinstance(d, int) and not isinstance(d, str) for d in shape):
        return None
    return tuple(1 if isinstance(d, str) else int(d) for d in shape)
