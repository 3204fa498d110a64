"""Which layout the readers of a value want: the walk's guide where a layout costs nothing.

A source Transpose moves its data anyway, so its result can be stored in any order for free
(only the stored ``perm`` changes). ``wanted_layout`` looks forward from such a value and says
which order its readers need, as a layout of the value's source axes:

- an NCHW image reader (Conv, pools ...) wants NHWC; an unpadded 1x1 Conv, which reads each
  position on its own, wants any order with the channel last (``images.is_pointwise_conv``);
- a Reshape wants the order whose bytes reshape into the layout its own result wants (or, if
  nothing decides that, into the layout the Reshape rule would prefer: NHWC for a rank-4
  result, else the source order);
- a Transpose wants the order that lets it vanish under what its own result wants;
- an op that keeps its operand's layout (elementwise, Concat, Split, Softmax ...) wants what
  its result wants, unless another operand is already stored in some layout: a join wants that
  (a Softmax passes a wish on only if it keeps the softmax axis stored last);
- a MatMul-like op wants the source order; an image graph output wants NHWC.

It returns None when nothing downstream decides. The answer is only a preference: the rules
still check every node and refuse what is not exact.
"""
from __future__ import annotations

from ...ir import Node, Value
from .images import is_pointwise_conv, is_spatial
from .perm import (
    Perm,
    channels_last,
    identity,
    inverse,
    is_identity,
    reshape_layout,
    reshape_preference,
    same_bytes,
)
from .walk import LayoutWalk

_BUDGET = 512  # values looked at per question: enough for a detector head, bounded on any graph


def wanted_layout(state: LayoutWalk, value: Value) -> Perm | None:
    return _Search(state).wanted(value)


def _follows(state: LayoutWalk, op: str) -> bool:
    """Whether ``op``'s layout rule stores its result in its (first permuted) operand's layout
    (elementwise ops, Concat, Split, Slice, Softmax ...)."""
    rule = state.rules.get(op)
    return rule is not None and rule.keeps_layout


def _takes(state: LayoutWalk, node: Node, layout: Perm) -> bool:
    """Whether ``node`` has a dialect form on an operand stored in ``layout``: a strided
    Slice and a linear Resize stride or grow only the H and W places of a 4-D map."""
    if node.op == "Slice":
        axes = node.attrs.get("axes")
        axes = list(range(len(node.attrs["starts"]))) if axes is None else list(axes)
        steps = node.attrs.get("steps") or [1] * len(axes)
        moved = {int(a) % len(layout) for a, st in zip(axes, steps) if int(st) != 1}
    elif node.op == "Resize" and node.attrs.get("mode") == "linear":
        src = state.src_shape(node.inputs[0])
        scales, sizes = node.attrs.get("scales"), node.attrs.get("sizes")
        if scales is not None:
            moved = {a for a, f in enumerate(scales) if float(f) != 1.0}
        elif sizes is not None:
            moved = {a for a, (n, m) in enumerate(zip(src, sizes)) if n != m}
        else:
            return True
    else:
        return True
    where = inverse(layout)
    return not moved or (len(layout) == 4 and all(where[a] in (1, 2) for a in moved))


class _Search:
    def __init__(self, state: LayoutWalk):
        self.state = state
        self.memo: dict[int, Perm | None] = {}
        self.steps = 0

    def wanted(self, v: Value) -> Perm | None:
        if id(v) in self.memo:
            return self.memo[id(v)]
        self.memo[id(v)] = None  # a cycle or a repeated question adds nothing
        self.steps += 1
        if self.steps > _BUDGET:
            return None
        found = self._find(v)
        self.memo[id(v)] = found
        return found

    def _find(self, v: Value) -> Perm | None:
        state = self.state
        rank = len(state.src_shape(v))
        if id(v) in state.output_layouts:
            return state.output_layouts[id(v)]
        wants = []
        for node, index in v.uses():
            want = self._through(node, index, v)
            if want is not None and len(want) == rank:
                wants.append(tuple(want))
        # Readers disagree (a value that feeds a Transpose and a strided Slice): the first
        # wish every reader can take, else the first (the rules refuse what is not exact).
        for want in wants:
            if all(_takes(state, node, want) for node, _ in v.uses()):
                return want
        return wants[0] if wants else None

    def _through(self, node: Node, index: int, v: Value) -> Perm | None:
        state = self.state
        rank = len(state.src_shape(v))
        if node.op == "Transpose":
            perm = node.attrs.get("perm")
            perm = list(range(rank))[::-1] if perm is None else list(perm)
            after = self.wanted(node.outputs[0])
            return None if after is None else tuple(perm[b] for b in after)
        if node.op in ("Reshape", "Flatten"):
            return self._before_reshape(node) if index == 0 else None
        if is_spatial(node.op):
            if index != 0:
                return None
            if node.attrs.get("data_format", "NCHW") != "NCHW":
                # an NHWC source op (TensorFlow's default) reads its input as the source
                # wrote it: a preference for NHWC storage would permute a TF map
                return identity(rank)
            return self._before_spatial(node)
        if _follows(self.state, node.op):
            if len(state.src_shape(node.outputs[0])) != rank:
                return None
            want = self._joined(node, v, rank)
            if want is not None and node.op in ("Softmax", "LogSoftmax"):
                # the dialect's Softmax normalises the last stored axis of size > 1
                axis = node.attrs.get("axis", -1) % rank
                src = state.src_shape(v)
                if any(src[a] != 1 for a in want[want.index(axis) + 1:]):
                    return None
            return want
        if node.op in ("MatMul", "Gemm"):
            return identity(rank)
        return None

    def _joined(self, node: Node, v: Value, rank: int) -> Perm | None:
        """For an op that stores its result in its operands' layout: the layout another operand
        is stored in already, else the layout its result is wanted in."""
        for other in node.inputs:
            known = self._stored(other) if other is not v else None
            if known is not None and len(known) == rank:
                return known
        for out in node.outputs:
            after = self.wanted(out)
            if after is not None:
                return after
        return None

    def _before_reshape(self, node: Node) -> Perm | None:
        state = self.state
        src_in = state.src_shape(node.inputs[0])
        out = node.outputs[0]
        src_out = state.src_shape(out)
        after = self.wanted(out)
        # When no reader decides: what the Reshape rule prefers for its result (in a
        # channels-last source, the source order: its rank-4 maps are NHWC already).
        if after is not None:
            choices = [after]
        elif state.channels_first:
            choices = reshape_preference(len(src_out))
        else:
            choices = [identity(len(src_out))]
        for choice in choices:
            before = reshape_layout(src_out, choice, src_in, [])
            if before is not None:
                return before
        return None

    def _before_spatial(self, node: Node) -> Perm:
        image = channels_last(4)
        if not is_pointwise_conv(self.state, node):
            return image
        out = node.outputs[0]
        after = self.wanted(out)
        if after is None:
            return image
        # A pointwise Conv keeps every position where it is: its input wants its result's
        # order with the channel (unit in its result, or already last) moved last.
        moved = tuple(a for a in after if a != 1) + (1,)
        if not same_bytes(self.state.src_shape(out), after, moved):
            return image
        return moved

    def _stored(self, v: Value | None, depth: int = 0) -> Perm | None:
        """The layout another operand of a join is stored in, when it is known already: set by
        the walk, or made from such values by ops that keep their operands' layout (which take
        the first permuted operand's, as ``rules.elementwise`` does)."""
        state = self.state
        if v is None or v.is_const or depth > 32:
            return None
        if state.settled_layout(v):
            return state.sig(v)
        producer = v.producer()
        assert producer is not None  # a value without one is settled
        rank = len(state.src_shape(v))
        if producer.op in ("Reshape", "Flatten"):
            # a Reshape of a stored (permuted) map keeps the bytes in its preferred layout
            before = self._stored(producer.inputs[0], depth + 1)
            if before is None or is_identity(before):
                return None
            return reshape_layout(state.src_shape(producer.inputs[0]), before,
                                  state.src_shape(v), reshape_preference(rank))
        if not _follows(self.state, producer.op):
            return None
        known = [self._stored(u, depth + 1) for u in producer.inputs
                 if u is not None and not u.is_const and len(state.src_shape(u)) == rank]
        permuted = [k for k in known if k is not None and k != identity(rank)]
        if permuted:
            return permuted[0]
        return identity(rank) if known and None not in known else None
