"""Op selection for the spatial ops: Conv, DepthwiseConv2d, ConvTranspose, pools.

Weight layouts (core -> dialect): Conv OIHW (M, C/g, kH, kW) or HWIO (kH, kW, C/g, M) ->
(M, kH, kW, C/g); depthwise (group == C_in): (C*mult, 1, kH, kW) -> (kH, kW, C, mult), where
output channel k*mult + q of the grouped conv is filter q of input channel k in both;
ConvTranspose IOHW (C, M/g, kH, kW) stays, HWOI (kH, kW, M/g, C) -> IOHW.
"""
from __future__ import annotations

import numpy as np

from ...ir import Graph, Node
from ...schemas.base import attr, conv_transpose_axis, conv_transpose_tf
from ..base import PassContext
from ..rewrite import append_after, become, const, const_of, dims, int_pair, refuse


def _pads_string(node: Node) -> str | None:
    """The dialect pads string of a node normalised by normalize_padding, else None."""
    if any(node.attrs.get("pads") or []) or node.attrs.get("ceil_mode", 0):
        return None
    if node.attrs.get("count_include_pad", 0):
        return None
    return {"SAME_UPPER": "SAME", "VALID": "VALID"}.get(node.attrs.get("auto_pad", "NOTSET"))


def _oihw(w: np.ndarray, layout: str) -> np.ndarray:
    return w.transpose(3, 2, 0, 1) if layout == "HWIO" else w


def _common_checks(node: Node, ctx: PassContext) -> str | None:
    if attr(node, "data_format") != "NHWC":
        return "data_format is not NHWC after layout conversion"
    if len(dims(node.input(0))) != 4:
        return f"input is rank {len(dims(node.input(0)))}, not a 4-D NHWC map"
    return None


def conv(graph: Graph, node: Node, ctx: PassContext) -> bool:
    why = _common_checks(node, ctx)
    mode = _pads_string(node) if why is None else None
    if why is None and mode is None:
        return False  # padding normalisation refused it and recorded why
    w, b = const_of(node.input(1)), const_of(node.input(2))
    if why is None and w is None:
        why = "weights are not a constant"
    if why is None and node.input(2) is not None and b is None:
        why = "bias is not a constant"
    if why:
        return refuse(ctx, node, why)
    x = node.input(0)
    assert w is not None  # refused above otherwise
    w = _oihw(w, attr(node, "weight_layout"))  # a folded weight stays deferred
    m, cg, kh, kw = w.shape
    c_in, group = dims(x)[3], int(attr(node, "group"))
    attrs = {"kernel_shape": [kh, kw], "strides": int_pair(node, "strides", 1),
             "dilations": int_pair(node, "dilations", 1), "pads": mode}
    if group == c_in and c_in > 1 and cg == 1:
        mult = m // c_in
        dw = w.reshape(c_in, mult, kh, kw).transpose(2, 3, 0, 1)
        become(node, "DepthwiseConv2d", [x, const(graph, dw, f"{node.name}/W")], attrs)
        if b is not None:
            append_after(graph, node, "AddBias", [const(graph, b.reshape(-1), f"{node.name}/B")],
                         None, "bias")
        ctx.record("select", node.name, f"grouped Conv with group == C_in = {c_in} -> "
                   f"DepthwiseConv2d (multiplier {mult})" + (" + AddBias" if b is not None else ""))
        return True
    inputs = [x, const(graph, w.transpose(0, 2, 3, 1), f"{node.name}/W")]
    if b is not None:
        inputs.append(const(graph, b.reshape(-1), f"{node.name}/B"))
    become(node, "Conv", inputs, {**attrs, "group": group})
    return True


def pool(graph: Graph, node: Node, ctx: PassContext) -> bool:
    why = _common_checks(node, ctx)
    mode = _pads_string(node) if why is None else None
    if why is None and mode is None:
        return False  # padding normalisation refused it and recorded why
    kernel = [int(k) for k in node.attrs["kernel_shape"]]
    dil = int_pair(node, "dilations", 1)
    if why is None and any(d != 1 and k != 1 for d, k in zip(dil, kernel)):
        why = f"dilations {dil}: the dialect pools have no dilation"
    if why:
        return refuse(ctx, node, why)
    become(node, node.op, [node.input(0)],
           {"kernel_shape": kernel, "strides": int_pair(node, "strides", 1), "pads": mode})
    return True


def global_pool(graph: Graph, node: Node, ctx: PassContext) -> bool:
    why = _common_checks(node, ctx)
    if why:
        return refuse(ctx, node, why)
    become(node, node.op, [node.input(0)])
    return True


def conv_transpose(graph: Graph, node: Node, ctx: PassContext) -> bool:
    why = _common_checks(node, ctx)
    w, b = const_of(node.input(1)), const_of(node.input(2))
    if why is None and w is None:
        why = "weights are not a constant"
    if why is None and node.input(2) is not None and b is None:
        why = "bias is not a constant"
    if why:
        return refuse(ctx, node, why)
    x = node.input(0)
    w = np.asarray(w, np.float64)
    if attr(node, "weight_layout") == "HWOI":
        w = w.transpose(3, 2, 0, 1)
    kernel = list(w.shape[2:4])
    strides, dil = int_pair(node, "strides", 1), int_pair(node, "dilations", 1)
    out_pad = int_pair(node, "output_padding", 0)
    pads = [int(p) for p in (node.attrs.get("pads") or [0, 0, 0, 0])]
    shape_attr = node.attrs.get("output_shape")
    auto_pad = attr(node, "auto_pad")
    windows = [(begin, length) for length, begin, _ in (
        conv_transpose_axis(dims(x)[1 + a], kernel[a], strides[a], dil[a], out_pad[a], pads[a],
                            pads[a + 2], auto_pad,
                            None if shape_attr is None else int(shape_attr[-2 + a]))
        for a in range(2))]
    if any(start < 0 or length < 1 for start, length in windows):
        return refuse(ctx, node, f"output window {windows} (start, length) per axis is empty "
                      "or starts before the full output")
    plan = _transpose_plan(dims(x)[1:3], kernel, strides, dil, windows)
    mode, dialect_pad, out_shape, slice_at = plan
    attrs = {"kernel_shape": kernel, "strides": strides, "dilations": dil,
             "group": int(attr(node, "group")), "pads": mode,
             "output_padding": dialect_pad}
    if out_shape is not None:
        attrs["output_shape"] = out_shape
    inputs = [x, const(graph, w, f"{node.name}/W")]
    if b is not None:
        inputs.append(const(graph, b.reshape(-1), f"{node.name}/B"))
    become(node, "ConvTranspose", inputs, attrs)
    detail = f"ConvTranspose -> {mode}"
    if slice_at is not None:
        starts = [s for s, _ in windows]
        ends = [s + n for s, n in windows]
        n, m = dims(x)[0], dims(node.output)[3]
        append_after(graph, node, "Slice", [], {"starts": starts, "ends": ends, "axes": [1, 2]},
                     "crop", shape=(n, out_shape[0], out_shape[1], m))
        detail += f" then Slice rows/cols {starts}..{ends}: the source crops {starts} at the start"
    ctx.record("padding", node.name, f"{detail}; (start, length) per axis {windows}",
               choice=mode, output_padding=dialect_pad, output_shape=out_shape)
    return True


def _transpose_plan(hw, kernel, strides, dil, windows):
    """(pads string, output_padding, output_shape or None, slice?) matching every axis window."""
    full = [(hw[a] - 1) * strides[a] + (kernel[a] - 1) * dil[a] + 1 for a in range(2)]
    lengths = [n for _, n in windows]
    if all(start == 0 for start, _ in windows):
        shape = None if lengths == full else lengths
        return "VALID", [0, 0], shape, None
    same_pad = []
    for a, (start, length) in enumerate(windows):
        fits = [p for p in range(max(strides[a], dil[a]))
                if conv_transpose_tf(hw[a], kernel[a], strides[a], dil[a], p, "SAME",
                                     length)[1] == start]
        if not fits:
            break
        same_pad.append(fits[0])
    if len(same_pad) == 2:
        default = [hw[a] * strides[a] for a in range(2)]
        return "SAME", same_pad, None if lengths == default else lengths, None
    ends = [start + length for start, length in windows]
    return "VALID", [0, 0], ends, True
