"""Rules and lowering helpers shared by the NHWC spatial dialect ops (conv and pool families).

Shapes seen by inference may hold ``None`` for an unknown dimension (typically the batch);
every helper here lets ``None`` flow through instead of guessing.
"""
from __future__ import annotations

from typing import Any

from .base import (
    DIALECT_OPS,
    Attr,
    AttrKind,
    InferContext,
    Lowerer,
    RuleError,
    same_tf,
    valid_tf,
)

TO_NCHW = [0, 3, 1, 2]  # NHWC activation -> NCHW, for standard ONNX Conv/Pool inside a lowering
TO_NHWC = [0, 2, 3, 1]

PADS_STRING = Attr(
    AttrKind.STRING, default="VALID", allowed=("SAME", "VALID"),
    doc='"SAME" or "VALID" with TensorFlow semantics (SAME: the odd padding pixel at the end). '
        "The converter always writes it; a reader missing it assumes VALID (no padding).",
)
STRIDES = Attr(AttrKind.INTS, default=[1, 1], doc="[sH, sW], each >= 1")
DILATIONS = Attr(AttrKind.INTS, default=[1, 1], doc="[dH, dW], each >= 1")
KERNEL_FROM_W = Attr(AttrKind.INTS, doc="[kH, kW]; inferred from W when absent, must agree with W")


def fmt(shape: Any) -> str:
    return "(" + ",".join("?" if d is None else str(d) for d in shape) + ")"


def same_dim(a: int | None, b: int | None) -> bool:
    """True unless both dimensions are known and differ."""
    return a is None or b is None or a == b


def pair(ctx: InferContext, name: str, minimum: int = 1) -> tuple[int, int]:
    """A two-element int attribute (H, W), each >= minimum."""
    value = ctx.attr(name)
    if value is None or len(value) != 2 or any(int(v) < minimum for v in value):
        raise RuleError(
            "attribute", f"attribute '{name}' must list 2 ints (H, W), each >= {minimum}",
            f"[h, w] >= {minimum}", value,
        )
    return int(value[0]), int(value[1])


def nhwc_input(ctx: InferContext, index: int = 0, port: str = "X") -> tuple:
    shape = ctx.shape(index)
    if len(shape) != 4:
        raise RuleError("rank", f"input '{port}' must be a 4-D NHWC tensor", "rank 4",
                        f"rank {len(shape)} {fmt(shape)}")
    return tuple(shape)


def check_kernel_attr(ctx: InferContext, from_weight: tuple) -> tuple[int, int]:
    """kernel_shape is optional; when present it must equal the kernel size W implies."""
    if ctx.attr("kernel_shape") is None:
        return int(from_weight[0]), int(from_weight[1])
    kernel = pair(ctx, "kernel_shape")
    if tuple(kernel) != tuple(from_weight):
        raise RuleError("weight-shape", "attribute 'kernel_shape' disagrees with the weight W",
                        list(from_weight), list(kernel))
    return kernel


def check_vector(ctx: InferContext, index: int, port: str, size: int | None) -> None:
    """A 1-D parameter (bias, BatchNorm statistics) of ``size`` elements."""
    shape = ctx.shape(index)
    if len(shape) != 1 or not same_dim(shape[0], size):
        raise RuleError("weight-shape", f"input '{port}' must be 1-D of size {size}",
                        f"({size})", fmt(shape))


def spatial_out(i: int | None, k: int, s: int, d: int, mode: str) -> int | None:
    if i is None:
        return None
    return same_tf(i, k, s, d)[0] if mode == "SAME" else valid_tf(i, k, s, d)


def window_output(ctx: InferContext, x: tuple, kernel: tuple, strides: tuple,
                  dilations: tuple = (1, 1)) -> tuple[int | None, int | None]:
    """Output H, W of a windowed op; an empty VALID output is a broken rule, not a shape."""
    mode = ctx.attr("pads")
    outs = []
    for axis, name in ((1, "H"), (2, "W")):
        o = spatial_out(x[axis], kernel[axis - 1], strides[axis - 1], dilations[axis - 1], mode)
        if o is not None and o < 1:
            e = (kernel[axis - 1] - 1) * dilations[axis - 1] + 1
            raise RuleError("shape", f"VALID window of effective size {e} does not fit input "
                                     f"{name} = {x[axis]}", f"{name} >= {e}", x[axis])
        outs.append(o)
    return outs[0], outs[1]


# -- lowering helpers --------------------------------------------------------------------------


def attrs_of(node) -> dict[str, Any]:
    """A dialect node's attributes with the schema's defaults filled in."""
    return DIALECT_OPS[node.op].with_defaults(node.attrs)


def onnx_pads(node, hw: tuple, kernel: tuple, strides: tuple, dilations: tuple) -> dict[str, Any]:
    """Standard ONNX padding attributes equal to the node's TF SAME/VALID.

    Explicit pads when H and W are known; otherwise auto_pad SAME_UPPER, which puts the odd
    pixel at the end exactly as TensorFlow does.
    """
    if attrs_of(node)["pads"] != "SAME":
        return {"pads": [0, 0, 0, 0]}
    if any(d is None for d in hw):
        return {"auto_pad": "SAME_UPPER"}
    (_, bh, eh), (_, bw, ew) = (
        same_tf(hw[0], kernel[0], strides[0], dilations[0]),
        same_tf(hw[1], kernel[1], strides[1], dilations[1]),
    )
    return {"pads": [bh, bw, eh, ew]}


def lower_in_nchw(L: Lowerer, op_type: str, x: str, extra: list[str], out: str,
                  **attrs: Any) -> None:
    """Run a standard (NCHW) ONNX op on an NHWC tensor: transpose in, op, transpose out."""
    x_nchw = L.op("Transpose", [x], perm=TO_NCHW)[0]
    y_nchw = L.op(op_type, [x_nchw, *extra], **attrs)[0]
    L.op("Transpose", [y_nchw], outputs=[out], perm=TO_NHWC)
