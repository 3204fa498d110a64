"""Legalisation of a dilated MaxPool (the dialect pools have no dilation).

max over the taps {i*s + t*d} = MaxPool(1x1, stride s) of the elementwise Max of the k_h*k_w
shifted slices x[t_h*d_h : ..., t_w*d_w : ...]: every output reads exactly its taps. Padded
taps are zeros from an explicit Pad, allowed only on a provably non-negative input (a zero then
never beats the real maximum), as for the undilated MaxPool.
"""
from __future__ import annotations

from ...ir import Graph, Node
from ..base import PassContext
from ..rewrite import become, dims, emit, int_pair, present, refuse
from . import padding_math as pm
from .value_range import is_nonnegative


def dilated_max_pool(graph: Graph, node: Node, ctx: PassContext) -> bool:
    dilations = int_pair(node, "dilations", 1)
    x = present(node.input(0))
    if dilations == [1, 1] or len(dims(x)) != 4 or node.attrs.get("data_format") != "NHWC":
        return False  # padding normalisation already said why this node cannot convert
    kernel, strides = [int(k) for k in node.attrs["kernel_shape"]], int_pair(node, "strides", 1)
    pads = [int(p) for p in (node.attrs.get("pads") or [0, 0, 0, 0])]
    axes = [pm.resolve_axis(dims(x)[1 + a], kernel[a], strides[a], dilations[a], pads[a],
                            pads[a + 2], node.attrs.get("auto_pad", "NOTSET"),
                            bool(node.attrs.get("ceil_mode", 0))) for a in range(2)]
    windows = [pm.source_windows(src, pm.MAX) for src in axes]
    if any(src.out < 1 or not w.real.any(axis=1).all() for src, w in zip(axes, windows)):
        return refuse(ctx, node, "a dilated window reads no input cell at all")
    ends = [max(0, (src.out - 1) * src.stride + src.effective - src.size - src.begin)
            for src in axes]
    if any(src.begin or end for src, end in zip(axes, ends)):
        if not is_nonnegative(x):
            return refuse(ctx, node, f"dilated max pool {kernel}/{dilations} reads padding and "
                          "its input is not provably >= 0 (zeros could beat the maximum)")
        n, h, w, c = dims(x)
        (bh, bw), (eh, ew) = (axes[0].begin, axes[1].begin), ends
        x = emit(graph, "Pad", [x], {"pads": [0, 0, bh, eh, bw, ew, 0, 0], "mode": "constant",
                                     "value": 0.0}, f"{node.name}/pad",
                 (n, h + bh + eh, w + bw + ew, c))
    spans = [(src.out - 1) * src.stride + 1 for src in axes]
    out_dense = (dims(x)[0], spans[0], spans[1], dims(x)[3])
    taps = []
    for th in range(kernel[0]):
        for tw in range(kernel[1]):
            starts = [th * dilations[0], tw * dilations[1]]
            taps.append(emit(graph, "Slice", [x], {"starts": starts,
                                                   "ends": [s + n for s, n in zip(starts, spans)],
                                                   "axes": [1, 2]},
                             f"{node.name}/tap{th}_{tw}", out_dense))
    if strides == [1, 1]:
        become(node, "Max", taps)
        return True
    dense = emit(graph, "Max", taps, None, f"{node.name}/max", out_dense)
    become(node, "MaxPool", [dense], {"kernel_shape": [1, 1], "strides": strides,
                                      "pads": "VALID"})
    return True
