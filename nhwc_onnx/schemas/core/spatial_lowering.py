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
from .lowering import core_attrs, in_nchw, int64, known, plain, refuse, spatial_hw

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
        kernel = [int(k) for k in attrs["kernel_shape"]]
        h, w = spatial_hw(node, attrs["data_format"])
        if h is None or w is None:
            padded, window = None, _window(node, attrs, pooling=True)
            if any(p >= kernel[i % 2] for i, p in enumerate(window.get("pads", []))):
                refuse(node, "pads", f"pads {window['pads']} as wide as the kernel {kernel} "
                       "(onnxruntime refuses them) with the input's H and W unknown")
        else:
            padded, window = _pool_window(node, attrs, kernel, (h, w))
        given = {name: plain(attrs[name]) for name in passed}

        def pool(x, outs):
            if padded is not None:
                fill = _lowest(L, node) if onnx_op == "MaxPool" else _zero(L, node)
                x = L.op("Pad", [x, int64(L, padded, "pads"), fill], mode="constant")[0]
            return L.op(onnx_op, [x], outputs=outs, kernel_shape=kernel,
                        strides=[int(s) for s in attrs["strides"]], **{**given, **window})

        in_nchw(L, attrs["data_format"], inputs[0], outputs[0], pool)

    return lower


def _pool_window(node, attrs: dict, kernel: list, hw: tuple) -> tuple[list | None, dict]:
    """(the ONNX pads of a Pad before the pool or None, the pool's padding attributes) giving
    the evaluator's windows with floor rounding: the last window is reached by end pads,
    never by ceil_mode (onnx's shape inference rounds ceil_mode without Caffe's rule that a
    window starts inside the input and its begin pad, and then disagrees with the kernel)."""
    if any(int(p) < 0 for p in attrs.get("pads") or []):
        refuse(node, "pads", f"negative pads {attrs['pads']} (a crop) have no ONNX pool form")
    plan = sp.spatial_plan(attrs, hw, pooling=True)
    dilations = attrs.get("dilations") or [1, 1]
    begins, ends = [b for _, b, _ in plan], [e for _, _, e in plan]
    reach = [(o - 1) * int(attrs["strides"][a]) + (kernel[a] - 1) * int(dilations[a]) + 1
             - hw[a] - begins[a] for a, (o, _, _) in enumerate(plan)]
    if node.op == "AveragePool" and int(attrs["count_include_pad"]):
        tails = [max(r - e, 0) for r, e in zip(reach, ends)]
        if not any(tails) and all(p < kernel[i % 2] for i, p in enumerate(begins + ends)):
            return None, {"pads": begins + ends, "ceil_mode": 0}  # every window in the extent
        # the padded extent counts: zeros of a Pad do, end pads past it do not
        if any(t >= k for t, k in zip(tails, kernel)):
            refuse(node, "ceil_mode", f"the last window reaches {tails} past the end pads, as "
                   f"wide as the kernel {kernel}")
        window = {"pads": [0, 0, *tails], "count_include_pad": 0, "ceil_mode": 0}
        return ([0, 0, *begins, 0, 0, *ends] if any(begins + ends) else None), window
    pads = begins + [max(r, 0) for r in reach]
    if all(p < kernel[i % 2] for i, p in enumerate(pads)):
        return None, {"pads": pads, "ceil_mode": 0}
    if node.op != "MaxPool":
        refuse(node, "pads", f"pads {pads} as wide as the kernel {kernel}: onnxruntime refuses "
               "them and a Pad before the pool would count in the divisor")
    # onnxruntime refuses a pad as wide as the kernel (a dilated SAME window has them): the
    # lowest value padded before a MaxPool never wins
    return [0, 0, *pads[:2], 0, 0, *pads[2:]], {"pads": [0, 0, 0, 0], "ceil_mode": 0}


def _lowest(L, node) -> str:
    dtype = np.dtype(node.inputs[0].dtype or "float32")
    low = -np.inf if dtype.kind == "f" else np.iinfo(dtype).min
    return L.const(np.array(low, dtype), "lowest")


def _zero(L, node) -> str:
    return L.const(np.zeros((), np.dtype(node.inputs[0].dtype or "float32")), "zero")


def nchw_lowering(*passed: str):
    """The ONNX op of the node's name on NCHW data, with the attributes ``passed``."""

    def lower(node, L, inputs, outputs) -> None:
        attrs = core_attrs(node)
        extra = {name: plain(attrs[name]) for name in passed}
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
    """ONNX Resize-13 with the node's scales (float32) or sizes. onnxruntime interpolates
    linearly a tensor of rank 2 or 3, and of rank 4 or 5 only on its last axes (or H, W of
    NHWC): the resized axes are moved there and back; a rank-1 tensor gets a leading axis.
    Nearest resizing whose indices onnxruntime might round otherwise is written as Gathers."""
    attrs = core_attrs(node)
    scales, sizes = attrs.get("scales"), attrs.get("sizes")
    shape = node.inputs[0].shape or (None,) * len(scales or sizes or ())
    if attrs["mode"] == "nearest" and all(known(d) for d in shape):
        sized = tuple(int(d) for d in shape if d is not None)  # all of them (known)
        if not _float32_reads_as_evaluated(attrs, sized):
            _lower_nearest_as_gathers(L, attrs, sized, inputs[0], outputs[0])
            return
        changed: list[int] = []  # nearest: every axis in place, each index checked above
    else:
        changed = _changed_axes(node, attrs, shape)
    rank = len(shape)
    perm = _linear_order(node, rank, changed) if attrs["mode"] == "linear" else list(range(rank))
    lead = [1] if attrs["mode"] == "linear" and rank == 1 else []
    roi = None  # only tf_crop_and_resize reads one
    if scales is not None:
        given = lead + [float(scales[a]) for a in perm]
        resize_inputs = [roi, L.const(np.array(given, np.float32), "scales")]
    else:
        assert sizes is not None  # exactly one of them (the schema's shape rule)
        resize_inputs = [roi, None, int64(L, lead + [sizes[a] for a in perm], "sizes")]
    extra = {name: attrs[name] for name in ("mode", "coordinate_transformation_mode",
                                             "nearest_mode")}
    x = inputs[0]
    undo: tuple[str, list, dict] | None = None  # (op, extra inputs, attributes) after Resize
    if lead:
        x = L.op("Unsqueeze", [x, int64(L, [0], "axes")])[0]
        undo = ("Squeeze", [int64(L, [0], "axes")], {})
    elif perm != list(range(rank)):
        x = L.op("Transpose", [x], perm=perm)[0]
        undo = ("Transpose", [], {"perm": [int(i) for i in np.argsort(perm)]})
    if undo is None:
        L.op("Resize", [x, *resize_inputs], outputs=outputs, **extra)
        return
    (resized,) = L.op("Resize", [x, *resize_inputs], **extra)
    L.op(undo[0], [resized, *undo[1]], outputs=outputs, **undo[2])


def _linear_order(node, rank: int, changed: list[int]) -> list[int]:
    """The axis order in which onnxruntime interpolates the changed axes."""
    last = {4: 2, 5: 3}.get(rank, rank if rank <= 3 else 0)  # the axes it interpolates
    if set(changed) <= set(range(rank - last, rank)) or (rank == 4 and set(changed) <= {1, 2}):
        return list(range(rank))
    if len(changed) > last:
        refuse(node, "scales", f"linear resizing of axes {changed} of a rank-{rank} tensor")
    return [a for a in range(rank) if a not in changed] + list(changed)


def _float32_reads_as_evaluated(attrs: dict, shape: tuple) -> bool:
    """Whether ONNX Resize computing its coordinates in float32 reads, on every axis, the
    input indices the evaluator reads (in float64): the output sizes agree and every variant
    of float32 arithmetic an implementation may use (dividing by the scale or multiplying by
    its inverse) rounds each coordinate to the evaluator's index. A kept axis must read
    itself (tf_half_pixel_for_nn with ceil would read the next pixel)."""
    out_shape = sp.resize_output_shape(attrs, shape)
    scales = attrs.get("scales")
    for axis, (n_in, n_out) in enumerate(zip(shape, out_shape)):
        if scales is not None and not _sized_alike(n_in, float(scales[axis])):
            return False
        coords = sp.resize_coords(attrs, axis, n_in, n_out)
        want = np.arange(n_out) if coords is None else sp.nearest_indices(attrs, coords, n_in)
        for variant in _float32_coords(attrs, axis, n_in, n_out):
            if not np.array_equal(_nearest_in_float32(variant, attrs["nearest_mode"], n_in),
                                  want):
                return False
    return True


def _sized_alike(n_in: int, scale: float) -> bool:
    """Whether the output size floor(n_in * scale) is the same with the scale as ONNX holds
    it (float32), multiplied in float32 (onnxruntime's kernel) or in double (onnx's shape
    inference): 7 * float32(9/7) is 9 in float32 and 8.99999988 in double."""
    exact = int(np.floor(n_in * scale))
    held = np.float32(scale)
    return int(np.floor(np.float32(n_in) * held)) == exact == int(np.floor(n_in * float(held)))


def _float32_coords(attrs: dict, axis: int, n_in: int, n_out: int) -> list[np.ndarray]:
    """The source coordinates of one axis as float32 arithmetic may compute them."""
    f = np.float32
    scales = attrs.get("scales")
    scale = f(scales[axis]) if scales is not None else f(n_out) / f(n_in)
    inverse = f(1) / scale
    x = np.arange(n_out, dtype=np.float32)
    half = f(0.5)
    mode = attrs["coordinate_transformation_mode"]
    if mode in ("half_pixel", "pytorch_half_pixel"):
        if mode == "pytorch_half_pixel" and n_out <= 1:
            return [np.zeros_like(x)]
        return [(x + half) / scale - half, (x + half) * inverse - half]
    if mode == "align_corners":
        if n_out <= 1:
            return [np.zeros_like(x)]
        return [x * f(n_in - 1) / f(n_out - 1), x * (f(n_in - 1) / f(n_out - 1)),
                x * f(n_in - 1) / (f(n_in) * scale - f(1))]
    if mode == "asymmetric":
        return [x / scale, x * inverse]
    return [(x + half) / scale, (x + half) * inverse]  # tf_half_pixel_for_nn


def _nearest_in_float32(coords: np.ndarray, rule: str, n_in: int) -> np.ndarray:
    """ONNX's nearest rules on float32 coordinates (widened exactly to float64)."""
    c = coords.astype(np.float64)
    low = np.floor(c)
    if rule == "floor":
        index = low
    elif rule == "ceil":
        index = np.ceil(c)
    else:
        tie = c == low + 0.5
        index = np.where(tie, low if rule == "round_prefer_floor" else low + 1, np.floor(c + 0.5))
    return np.clip(index, 0, n_in - 1).astype(np.int64)


def _lower_nearest_as_gathers(L, attrs: dict, shape, x: str, out: str) -> None:
    """Nearest resizing as a Gather per resized axis, of the indices the evaluator reads:
    exact where ONNX Resize's float32 coordinates round otherwise (half_pixel, floor, 7 -> 9:
    (4 + 0.5) * 7/9 - 0.5 is 3 in float32, just below it in float64)."""
    out_shape = sp.resize_output_shape(attrs, shape)
    gathers = []
    for axis, (in_len, out_len) in enumerate(zip(shape, out_shape)):
        coords = sp.resize_coords(attrs, axis, int(in_len), int(out_len))
        if coords is not None:
            gathers.append((axis, sp.nearest_indices(attrs, coords, int(in_len))))
    if not gathers:
        L.op("Identity", [x], outputs=[out])
    for i, (axis, indices) in enumerate(gathers):
        x = L.op("Gather", [x, L.const(indices, "indices")], axis=axis,
                 outputs=[out] if i == len(gathers) - 1 else 1)[0]


def _changed_axes(node, attrs: dict, shape) -> list[int]:
    """The axes the evaluator resizes; refused where onnxruntime would size or sample an axis
    differently."""
    scales, sizes = attrs.get("scales"), attrs.get("sizes")
    changed = []
    for axis, dim in enumerate(shape):
        if scales is not None:
            scale = float(scales[axis])
            if np.float32(scale) != scale and not (known(dim) and _sized_alike(int(dim), scale)):
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
