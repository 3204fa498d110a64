"""The spatial core ops written as standard ONNX (opset 17): Conv, ConvTranspose, pooling,
BatchNormalization, Resize and depth/space.

ONNX's spatial ops are NCHW: ``data_format`` NHWC runs them between two Transposes. Weights in
a TensorFlow layout are put in ONNX's once, when they are constants. Pads are the ones the
evaluator computes (``spatial_math``), written out whenever H and W are known.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import spatial_math as sp
from .lowering import core_attrs, in_nchw, int64, known, refuse, spatial_hw

Step = Callable[[str, Any], list]  # (input name, outputs: names or a count) -> output names


def _chain(x: str, steps: list[Step], outputs: Any) -> list:
    """Each step on the previous one's result; the last writes ``outputs``."""
    for i, step in enumerate(steps):
        x = step(x, outputs if i == len(steps) - 1 else 1)[0]
    return [x]


def _window(node, attrs: dict, pooling: bool) -> dict[str, Any]:
    """ONNX padding attributes equal to the node's: the evaluator's explicit pads when H and W
    are known (SAME_* and VALID follow TensorFlow's sizes, ceil_mode only rounds explicit
    pads), else ``auto_pad`` as it is."""
    auto_pad = attrs["auto_pad"]
    pads = [int(p) for p in attrs.get("pads") or [0, 0, 0, 0]]
    ceil = int(attrs.get("ceil_mode", 0)) if pooling and auto_pad == "NOTSET" else 0
    h, w = spatial_hw(node, attrs["data_format"])
    if auto_pad != "NOTSET" and h is not None and w is not None:
        (_, hb, he), (_, wb, we) = sp.spatial_plan(attrs, (h, w), pooling=pooling)
        pads = [hb, wb, he, we]
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        if any(int(d) != 1 for d in attrs.get("dilations") or [1, 1]):
            refuse(node, "dilations", f"{auto_pad} of a dilated window needs the input's H and "
                   "W (onnxruntime's auto_pad ignores dilations)")
        return {"auto_pad": auto_pad, **({"ceil_mode": 0} if pooling else {})}
    elif auto_pad == "VALID":
        pads = [0, 0, 0, 0]
    if any(p < 0 for p in pads):
        refuse(node, "pads", f"negative pads {pads} (a crop) have no ONNX {node.op} form")
    return {"pads": pads, **({"ceil_mode": ceil} if pooling else {})}


def _weight(L, node, inputs: list, layout: str, onnx_layout: str) -> str:
    """Input 1 in ONNX's layout: (kH, kW, a, b) -> (b, a, kH, kW) for TensorFlow's."""
    if layout == onnx_layout:
        return inputs[1]
    const = node.inputs[1].const
    if const is not None:
        return L.const(np.ascontiguousarray(np.asarray(const).transpose(3, 2, 0, 1)), "weight")
    return L.op("Transpose", [inputs[1]], perm=[3, 2, 0, 1])[0]


def lower_conv(node, L, inputs, outputs) -> None:
    attrs = core_attrs(node)
    weight = _weight(L, node, inputs, attrs["weight_layout"], "OIHW")
    extra = [weight] + ([inputs[2]] if len(inputs) > 2 and inputs[2] is not None else [])
    window = _window(node, attrs, pooling=False)
    in_nchw(L, attrs["data_format"], inputs[0], outputs[0], lambda x, outs: L.op(
        "Conv", [x, *extra], outputs=outs, kernel_shape=[int(k) for k in attrs["kernel_shape"]],
        strides=[int(s) for s in attrs["strides"]], group=int(attrs["group"]),
        dilations=[int(d) for d in attrs["dilations"]], **window))


def lower_conv_transpose(node, L, inputs, outputs) -> None:
    """The full transposed convolution (no crop, no bias), zeros appended where the window
    reaches past it (output_padding, a negative end crop), the window sliced out, then the
    bias over all of it: the evaluator's steps."""
    attrs = core_attrs(node)
    h, w = spatial_hw(node, attrs["data_format"])
    if h is None or w is None:
        refuse(node, "output_shape", "the output window needs the input's H and W, found "
               f"{node.inputs[0].shape}")
    kernel = [int(k) for k in attrs["kernel_shape"]]
    plans = [sp.conv_transpose_plan(attrs, size, axis, kernel[axis])
             for axis, size in enumerate((h, w))]
    if any(begin < 0 for _, begin, _ in plans):
        refuse(node, "pads", "a negative begin crop has no ONNX ConvTranspose form")
    full = [(size - 1) * attrs["strides"][axis] + (kernel[axis] - 1) * attrs["dilations"][axis]
            + 1 for axis, size in enumerate((h, w))]
    fill = [max(begin + o - full[axis], 0) for axis, (o, begin, _) in enumerate(plans)]
    weight = _weight(L, node, inputs, attrs["weight_layout"], "IOHW")
    steps: list[Step] = [lambda x, outs: L.op(
        "ConvTranspose", [x, weight], outputs=outs, kernel_shape=kernel,
        strides=[int(s) for s in attrs["strides"]], group=int(attrs["group"]),
        dilations=[int(d) for d in attrs["dilations"]], pads=[0, 0, 0, 0])]
    if any(fill):
        steps.append(lambda x, outs: L.op("Pad", [x, int64(L, [0, 0, 0, 0, 0, 0, *fill], "pads")],
                                          outputs=outs, mode="constant"))
    starts = [begin for _, begin, _ in plans]
    ends = [begin + o for o, begin, _ in plans]
    if starts != [0, 0] or ends != [full[a] + fill[a] for a in range(2)]:
        steps.append(lambda x, outs: L.op(
            "Slice", [x, int64(L, starts, "starts"), int64(L, ends, "ends"),
                      int64(L, [2, 3], "axes")], outputs=outs))
    if len(inputs) > 2 and inputs[2] is not None:
        bias = _channel_column(L, node, 2, inputs[2])
        steps.append(lambda x, outs: L.op("Add", [x, bias], outputs=outs))
    in_nchw(L, attrs["data_format"], inputs[0], outputs[0],
            lambda x, outs: _chain(x, steps, outs))


def _channel_column(L, node, index: int, name: str) -> str:
    """A (M,) vector as (M, 1, 1), to add along the channels of an NCHW tensor."""
    const = node.inputs[index].const
    if const is not None:
        return L.const(np.asarray(const).reshape(-1, 1, 1), "bias")
    return L.op("Unsqueeze", [name, int64(L, [1, 2], "axes")])[0]


def pool_lowering(onnx_op: str, *passed: str):
    def lower(node, L, inputs, outputs) -> None:
        attrs = core_attrs(node)
        extra = {name: [int(v) for v in attrs[name]] if isinstance(attrs[name], list)
                 else int(attrs[name]) for name in passed}
        window = _window(node, attrs, pooling=True)
        kernel = [int(k) for k in attrs["kernel_shape"]]
        padded = _pad_before_max(node, attrs, window, kernel)

        def pool(x, outs):
            if padded is not None:
                x = L.op("Pad", [x, int64(L, padded, "pads"), _lowest(L, node)],
                         mode="constant")[0]
            return L.op(onnx_op, [x], outputs=outs, kernel_shape=kernel,
                        strides=[int(s) for s in attrs["strides"]], **extra, **window)

        in_nchw(L, attrs["data_format"], inputs[0], outputs[0], pool)

    return lower


def _pad_before_max(node, attrs: dict, window: dict, kernel: list) -> list | None:
    """onnxruntime refuses a pool pad as wide as the kernel (a dilated SAME window has them).
    A MaxPool's padding then becomes a Pad of the lowest value before it (padded cells never
    win), its end reaching the evaluator's last window: the Pad's ONNX pads, with ``window``
    set to no padding. An AveragePool's divisor has no such form: refused."""
    pads = window.get("pads")
    if pads is None or all(p < kernel[i % 2] for i, p in enumerate(pads)):
        return None
    if node.op != "MaxPool":
        refuse(node, "pads", f"pads {pads} as wide as the kernel {kernel}: onnxruntime refuses "
               "them and a Pad before the pool would change the divisor")
    h, w = spatial_hw(node, attrs["data_format"])
    if window["ceil_mode"] and (h is None or w is None):
        refuse(node, "ceil_mode", "the last window of a pool with pads as wide as the kernel "
               "needs the input's H and W")
    ends = pads[2:]
    if h is not None and w is not None:
        plan = sp.spatial_plan({**attrs, "pads": pads, "auto_pad": "NOTSET"}, (h, w),
                               pooling=True)
        dilations = attrs.get("dilations") or [1, 1]
        ends = [max((o - 1) * attrs["strides"][a] + (kernel[a] - 1) * dilations[a] + 1
                    - size - pads[a], pads[a + 2])
                for a, ((o, _, _), size) in enumerate(zip(plan, (h, w)))]
    window.update(pads=[0, 0, 0, 0], ceil_mode=0)
    return [0, 0, pads[0], pads[1], 0, 0, ends[0], ends[1]]


def _lowest(L, node) -> str:
    dtype = np.dtype(node.inputs[0].dtype or "float32")
    low = -np.inf if dtype.kind == "f" else np.iinfo(dtype).min
    return L.const(np.array(low, dtype), "lowest")


def nchw_lowering(*passed: str):
    """The ONNX op of the node's name on NCHW data, with the attributes ``passed``."""

    def lower(node, L, inputs, outputs) -> None:
        attrs = core_attrs(node)
        extra = {name: attrs[name] for name in passed}
        in_nchw(L, attrs["data_format"], inputs[0], outputs[0],
                lambda x, outs: L.op(node.op, [x], outputs=outs, **extra))

    return lower


def lower_batchnorm(node, L, inputs, outputs) -> None:
    """ONNX BatchNormalization normalises axis 1: another axis is moved there and back."""
    attrs = core_attrs(node)
    shape = node.inputs[0].shape
    if shape is None or len(shape) < 2:
        refuse(node, "axis", f"ONNX BatchNormalization needs a rank >= 2 input, found {shape}")
    rank = len(shape)
    axis = int(attrs["axis"]) % rank
    params = inputs[1:5]
    epsilon = float(attrs["epsilon"])
    if axis == 1:
        L.op("BatchNormalization", [inputs[0], *params], outputs=outputs, epsilon=epsilon)
        return
    others = [a for a in range(rank) if a != axis]
    perm = [others[0], axis, *others[1:]]
    (moved,) = L.op("Transpose", [inputs[0]], perm=perm)
    (normed,) = L.op("BatchNormalization", [moved, *params], epsilon=epsilon)
    L.op("Transpose", [normed], outputs=outputs, perm=[int(i) for i in np.argsort(perm)])


def lower_resize(node, L, inputs, outputs) -> None:
    """ONNX Resize-13 with the node's scales (float32) or sizes. onnxruntime resizes a rank 4
    or 5 tensor linearly only on its last axes (or H, W of NHWC): the resized axes are moved
    there and back."""
    attrs = core_attrs(node)
    scales, sizes = attrs.get("scales"), attrs.get("sizes")
    shape = node.inputs[0].shape or (None,) * len(scales or sizes or ())
    changed = _changed_axes(node, attrs, shape)
    rank = len(shape)
    perm = list(range(rank))
    last = {4: 2, 5: 3}.get(rank, rank if rank <= 3 else 0)  # axes it resizes linearly
    native = set(changed) <= set(range(rank - last, rank)) or (rank == 4 and set(changed) <= {1, 2})
    if attrs["mode"] == "linear" and not native:
        if len(changed) > last:
            refuse(node, "scales", f"linear resizing of axes {changed} of a rank-{rank} tensor")
        perm = [a for a in range(rank) if a not in changed] + list(changed)

    def order(values) -> list:
        return [values[a] for a in perm]

    roi = None  # only tf_crop_and_resize reads one
    if scales is not None:
        resize_inputs = [roi, L.const(np.array(order(scales), np.float32), "scales")]
    else:
        resize_inputs = [roi, None, int64(L, order(sizes), "sizes")]
    extra = {name: attrs[name] for name in ("mode", "coordinate_transformation_mode",
                                             "nearest_mode")}
    if perm == list(range(rank)):
        L.op("Resize", [inputs[0], *resize_inputs], outputs=outputs, **extra)
        return
    (moved,) = L.op("Transpose", [inputs[0]], perm=perm)
    (resized,) = L.op("Resize", [moved, *resize_inputs], **extra)
    L.op("Transpose", [resized], outputs=outputs, perm=[int(i) for i in np.argsort(perm)])


def _changed_axes(node, attrs: dict, shape) -> list[int]:
    """The axes the evaluator resizes; refused where onnxruntime would size or sample an axis
    differently."""
    scales, sizes = attrs.get("scales"), attrs.get("sizes")
    changed = []
    for axis, dim in enumerate(shape):
        if scales is not None:
            scale = float(scales[axis])
            if np.float32(scale) != scale and not (known(dim) and int(
                    np.floor(np.float32(dim) * np.float32(scale))) == int(np.floor(dim * scale))):
                refuse(node, "scales", f"scale {scale} of axis {axis} (size {dim}) gives another "
                       "output size in float32, as onnxruntime computes it")
            same = scale == 1.0
        else:
            assert sizes is not None  # exactly one of them (the schema's shape rule)
            same = known(dim) and int(sizes[axis]) == dim
        if not same:
            changed.append(axis)
        elif not (known(dim) and dim == 1) and _moves_unchanged_axis(attrs):
            refuse(node, "coordinate_transformation_mode", "tf_half_pixel_for_nn samples an "
                   f"axis the node keeps (axis {axis}) half a pixel off")
    return changed


def _moves_unchanged_axis(attrs: dict) -> bool:
    """Whether ONNX samples an axis of scale 1 elsewhere than the axis itself (the evaluator
    leaves such an axis alone): tf_half_pixel_for_nn reads x + 0.5, which rounding up or
    interpolating moves."""
    return attrs["coordinate_transformation_mode"] == "tf_half_pixel_for_nn" and (
        attrs["mode"] == "linear" or attrs["nearest_mode"] in ("ceil", "round_prefer_ceil"))
