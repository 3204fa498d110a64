"""BatchNorm folding: per-channel scalings folded into the op before them.

Folds a core BatchNormalization, or a multiply by a per-channel constant (Keras's folded
``x*a + b``, the Mul half of Caffe's Scale layer), into the preceding Conv / ConvTranspose
(grouped too, any weight layout), Gemm or MatMul with constant weights:
W' = W * a per output channel, B' = B * a + b, computed in float64 and stored as float32.
Never when the producer's output has another consumer or is a graph output.

What cannot fold stays a (core) BatchNormalization: a lone per-channel multiply becomes one
with mean 0, var 1, epsilon 0, so a following per-channel Add (Sub) merges into its B; op
selection then emits the dialect BatchNormalization. Additions after Conv / Dense are the bias
fusion pass's job, which runs before and after this one.
"""
from __future__ import annotations

import numpy as np

from ...ir import CORE
from ..base import Pass, PassContext, PassResult
from ..rewrite import affine_batchnorm, sole_consumer
from .affine import affine_candidates, fold


class FoldBatchNorm(Pass):
    name = "fold_batchnorm"

    def call(self, model, ctx: PassContext) -> PassResult:
        graph = model.graph
        modified = False
        for node, x, a, b, prod in affine_candidates(
                graph, ("BatchNormalization", "Mul", "Add", "Sub")):
            scaling = node.op in ("BatchNormalization", "Mul")
            if prod is not None and (scaling or prod.op == "BatchNormalization"):
                fold(graph, prod, node, a, b)
                ctx.record("fold_batchnorm", node.name,
                           f"{node.op} folded into {prod.op} '{prod.name}'",
                           into=prod.name, op=node.op)
                modified = True
            elif node.op == "Mul" and not np.all(a == a[0]):
                affine_batchnorm(graph, node, x, a, np.zeros(a.shape[0]), domain=CORE)
                ctx.record("fold_batchnorm", node.name, "per-channel Mul kept as "
                           "BatchNormalization (mean 0, var 1, epsilon 0): nothing to fold into",
                           op=node.op, folded=False)
                modified = True
            elif node.op == "BatchNormalization":
                why = ("producer output has other consumers or is a graph output"
                       if x.producer() is not None and sole_consumer(graph, x) is not node
                       else "no Conv/ConvTranspose/Gemm/MatMul with constant weights before it")
                ctx.record("fold_batchnorm", node.name, f"not folded: {why}", folded=False)
        return PassResult(modified)
