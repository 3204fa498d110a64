"""Bias fusion: Add (or Sub) of a constant per-channel vector after Conv / ConvTranspose /
Gemm / MatMul with constant weights becomes their bias input B (B' = B + b).

Shapes (C,), (1, 1, 1, C), (1, C) and scalars all count as a channel vector. A grouped conv
with group == C_in keeps the bias here too; op selection turns it into DepthwiseConv2d plus
AddBias (the dialect's depthwise op has no bias input). Never fuses when the producer's output
has another consumer or is a graph output.
"""
from __future__ import annotations

from ..base import Pass, PassContext, PassResult
from .affine import affine_candidates, fold

_TARGETS = ("Conv", "ConvTranspose", "Gemm", "MatMul")


class FuseBias(Pass):
    name = "fuse_bias"

    def call(self, model, ctx: PassContext) -> PassResult:
        graph = model.graph
        modified = False
        for node, _x, a, b, prod in affine_candidates(graph, ("Add", "Sub")):
            if prod is None or prod.op not in _TARGETS:
                continue
            fold(graph, prod, node, a, b)
            ctx.record("fuse_bias", node.name, f"{node.op} of a channel vector fused into the "
                       f"bias of {prod.op} '{prod.name}'", into=prod.name)
            modified = True
        return PassResult(modified)
