"""StridedSlice with constant bounds and every mask: Slice, then Squeeze (shrink_axis_mask),
then Unsqueeze (new_axis_mask)."""
from __future__ import annotations

from ...ir import Value
from .context import Refusal, TFContext
from .ops_array import INT64_MAX, INT64_MIN, _axis_list
from .registry import REGISTRY
from .tfnodes import TFNode


def _bit(mask: int, i: int) -> bool:
    return bool(mask >> i & 1)


def plan_strided_slice(begin, end, strides, masks: dict, rank: int | None):
    """(slice axes/starts/ends/steps, shrink axes, new-axis output positions).

    ``rank`` is needed only with an ellipsis. Input axes past the spec are kept whole."""
    n = len(begin)
    if not (len(end) == n == len(strides)):
        raise Refusal("begin, end and strides differ in length")
    ellipsis = masks["ellipsis_mask"]
    if ellipsis.bit_count() > 1:
        raise Refusal("more than one ellipsis")
    if ellipsis and rank is None:
        raise Refusal("an ellipsis needs the input's rank, which is unknown")
    consuming = sum(1 for i in range(n)
                    if not _bit(masks["new_axis_mask"], i) and not _bit(ellipsis, i))
    final: list[tuple[str, int | None]]
    axes, starts, ends, steps, shrink, final = [], [], [], [], [], []
    axis = 0
    for i in range(n):
        if _bit(ellipsis, i):
            assert rank is not None  # refused above without it
            for _ in range(rank - consuming):
                final.append(("in", axis))
                axis += 1
            continue
        if _bit(masks["new_axis_mask"], i):
            final.append(("new", None))
            continue
        b, e, s = int(begin[i]), int(end[i]), int(strides[i])
        if s == 0:
            raise Refusal("a stride of 0")
        if _bit(masks["shrink_axis_mask"], i):
            axes.append(axis)
            starts.append(b)
            ends.append(INT64_MAX if b == -1 else b + 1)
            steps.append(1)
            shrink.append(axis)
            axis += 1
            continue
        if _bit(masks["begin_mask"], i):
            b = 0 if s > 0 else INT64_MAX
        if _bit(masks["end_mask"], i):
            e = INT64_MAX if s > 0 else INT64_MIN
        if not (b == 0 and e == INT64_MAX and s == 1):
            axes.append(axis)
            starts.append(b)
            ends.append(e)
            steps.append(s)
        final.append(("in", axis))
        axis += 1
    squeezed_pos = [k for k, (kind, _) in enumerate(final) if kind == "new"]
    return (axes, starts, ends, steps), shrink, squeezed_pos


@REGISTRY.register("StridedSlice", emits=("Slice", "Squeeze", "Unsqueeze"))
def convert_strided_slice(ctx: TFContext, node: TFNode) -> list[Value]:
    """Constant begin/end/strides with begin, end, ellipsis, new-axis and shrink masks."""
    begin = _axis_list(ctx.need_const(1, "begin"))
    end = _axis_list(ctx.need_const(2, "end"))
    strides = _axis_list(ctx.need_const(3, "strides"))
    masks = {k: int(ctx.attrs.int(k, 0)) for k in ("begin_mask", "end_mask", "ellipsis_mask",
                                                     "new_axis_mask", "shrink_axis_mask")}
    shape = ctx.shape(0)
    rank = None if shape is None else len(shape)
    (axes, starts, ends, steps), shrink, new_pos = plan_strided_slice(
        begin, end, strides, masks, rank)
    x = ctx.input(0)
    stages = []
    if axes:
        stages.append(("Slice", {"starts": starts, "ends": ends, "axes": axes, "steps": steps}))
    if shrink:
        stages.append(("Squeeze", {"axes": shrink}))
    if new_pos:
        stages.append(("Unsqueeze", {"axes": new_pos}))
    for k, (op, attrs) in enumerate(stages):
        last = k == len(stages) - 1
        x = ctx.emit1(op, [x], attrs, suffix=None if last else op.lower())
    return [x]
