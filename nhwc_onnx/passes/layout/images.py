"""Which nodes read a value as an NCHW image: what makes a tensor an image for the layout pass."""
from __future__ import annotations

from ...ir import NCHW, Node, Value
from ...schemas.base import CORE_OPS


def is_spatial(op: str) -> bool:
    """Core ops that read a rank-4 image in their ``data_format`` (Conv, the pools ...): the
    ones declaring that attribute. Their layout rule is ``rules.spatial``."""
    schema = CORE_OPS.get(op)
    return schema is not None and "data_format" in schema.attrs


def reads_nchw_image(node: Node, index: int) -> bool:
    """Whether ``node`` reads input ``index`` as an NCHW image (spatial op, channel BatchNorm)."""
    if index != 0:
        return False
    if node.op == "BatchNormalization":
        x = node.inputs[0]
        return x is not None and x.rank == 4 and node.attrs.get("axis", 1) in (1, -3)
    if node.op == "Resize":
        return _resizes_nchw_image(node)
    return is_spatial(node.op) and node.attrs.get("data_format", "NCHW") == "NCHW"


def _resizes_nchw_image(node: Node) -> bool:
    """A rank-4 Resize that keeps axes 0 and 1 and scales 2 or 3 (F.interpolate) resizes an
    NCHW image; the dialect's UpSampling2D wants it stored NHWC."""
    x = node.inputs[0]
    shape = x.shape if x is not None else None
    if x is None or x.layout not in (None, NCHW) or shape is None or len(shape) != 4:
        return False
    scales = node.attrs.get("scales")
    if scales is None and node.attrs.get("sizes") is not None:
        scales = [m / n if n else 0 for m, n in zip(node.attrs["sizes"], shape)]
    return (scales is not None and len(scales) == 4 and list(scales[:2]) == [1, 1]
            and list(scales[2:]) != [1, 1])


def downstream(v: Value) -> tuple[set[int], bool]:
    """Nodes computed from ``v``, and whether an NCHW spatial op reads one of them as data."""
    seen: set[int] = set()
    found = False
    todo = [v]
    while todo:
        value = todo.pop()
        for node, index in value.uses():
            found = found or reads_nchw_image(node, index)
            if id(node) not in seen:
                seen.add(id(node))
                todo.extend(node.outputs)
    return seen, found


def is_pointwise_conv(state, node: Node) -> bool:
    """A Conv with a 1x1 window and as many positions out as in (so stride 1 or a size-1 axis,
    and no padding): each output position is computed from the same input position only, so
    the order the positions are stored in (H,W or W,H) does not matter, only that the channel
    is last."""
    if node.op != "Conv" or list(node.attrs.get("kernel_shape") or ()) != [1, 1]:
        return False
    src_in, src_out = state.src_shape(node.inputs[0]), state.src_shape(node.outputs[0])
    return len(src_in) == 4 and tuple(src_in[2:]) == tuple(src_out[2:])
