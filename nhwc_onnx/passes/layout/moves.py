"""The layout rules of Transpose, Reshape and Flatten: ops that move axes between positions.

A Transpose that only converts between NCHW and NHWC disappears; a Reshape/Flatten keeps its
meaning on the stored axes when their bytes allow it (channel shuffle, H=W=1), or when it
flattens a feature map into fully-connected layers whose constant weight rows can be permuted
instead (and, the other way, when a Dense output is reshaped into an image, its weight columns).
Anything else needs a layout Transpose (``walk.coerce`` records it).
"""
from __future__ import annotations

import numpy as np

from ...ir import Node, Value
from ...schemas.core import flatten_axis
from .demand import wanted_layout
from .images import downstream
from .perm import (
    NHWC,
    channels_last,
    flatten_row_order,
    identity,
    inverse,
    is_identity,
    reshape_layout,
    reshape_preference,
    stored_shape,
)
from .rules import ATTRIBUTE, TERMINATE, outputs
from .walk import LayoutWalk, layout_rule


@layout_rule(ATTRIBUTE, always_runs=True)
def transpose(state: LayoutWalk, node: Node) -> None:
    sigma_in = state.sig(node.inputs[0])
    rank = len(sigma_in)
    perm = node.attrs.get("perm")
    perm = list(range(rank))[::-1] if perm is None else list(perm)
    # Output layout that makes the Transpose vanish: taken when it is plain or channels-last,
    # or when the result is only flattened into Dense-like layers (whose weight rows absorb
    # the order, as Keras Permute -> Flatten -> Dense).
    vanish = tuple(inverse(perm)[a] for a in sigma_in)
    image = channels_last(rank) if rank in (4, 5) else None  # rank 3: keep
    takes_vanish = (is_identity(vanish) or vanish == image
                    or (vanish[0] == 0 and _only_flattened_into_dense(state, node.outputs[0])))
    # Otherwise the Transpose moves data anyway, so its result is stored as its readers want
    # it (an NHWC image after a pixel shuffle's Reshape, a DFL head's 1x1 Conv, an image graph
    # output ...); when nothing decides, in its input's layout.
    wanted = None if takes_vanish else wanted_layout(state, node.outputs[0])
    sigma_out = vanish if takes_vanish else (wanted or sigma_in)
    stored_perm = [inverse(sigma_in)[perm[a]] for a in sigma_out]
    outputs(state, node, sigma_out)
    if is_identity(stored_perm):
        # Keep the node until the walk ends: its consumers still read the output's own axes.
        state.vanishing.append(node)
        why = ("it only converted between NCHW and NHWC" if takes_vanish else
               f"its readers take its result stored with permutation {list(sigma_out)}, which "
               "is how its input is stored already")
        state.ctx.record("layout", node.name, f"Transpose {perm} removed: {why}", perm=perm)
    elif wanted is not None and tuple(wanted) != tuple(sigma_in):
        state.ctx.record("layout", node.name, f"Transpose perm {perm} -> {stored_perm} on the "
                         f"stored layout, storing its result with permutation {list(wanted)} "
                         "as its readers want it", perm=stored_perm)
    elif stored_perm != perm:
        state.ctx.record("layout", node.name, f"Transpose perm {perm} -> {stored_perm} on the "
                         "stored layout", perm=stored_perm)
    if stored_perm != perm:
        node.attrs["perm"] = stored_perm
        state.changed = True


def _only_flattened_into_dense(state: LayoutWalk, value: Value) -> bool:
    """Every reader of ``value`` flattens it to (batch, features) for Dense-like layers with a
    constant 2-D weight, so any stored order of ``value`` can be absorbed by those weights."""
    uses = value.uses()
    if not uses or value in state.graph.outputs:
        return False
    src = state.src_shape(value)
    for user, index in uses:
        if index != 0 or user.op not in ("Reshape", "Flatten") or len(user.outputs) != 1:
            return False
        out = state.src_shape(user.outputs[0])
        if (len(out) != 2 or not src or out[0] != src[0]
                or int(np.prod(src[1:])) != out[1]):
            return False
        if isinstance(_dense_consumers(state, user), str):
            return False
    return True


@layout_rule(TERMINATE)
def reshape(state: LayoutWalk, node: Node) -> None:
    data = node.inputs[0]
    out = node.outputs[0]
    src_in, sigma = state.src_shape(data), state.sig(data)
    src_out = state.src_shape(out)
    if is_identity(sigma):
        if not _as_readers_want(state, node, src_in, src_out):
            _dense_into_image(state, node, src_in, src_out)
        return
    sigma_out = reshape_layout(src_in, sigma, src_out, reshape_preference(len(src_out)))
    if sigma_out is not None:
        _as_reshape(state, node, stored_shape(src_out, sigma_out))
        outputs(state, node, sigma_out)
        if not is_identity(sigma_out):
            state.ctx.record("layout", node.name, f"{node.op} rewritten on stored axes: "
                             f"{list(src_in)} -> {list(src_out)} keeps layout {list(sigma_out)}")
        return
    if _softmax_over_block(state, node, src_in, sigma, src_out):
        return
    why_not_dense = _flatten_into_dense(state, node, src_in, sigma, src_out)
    if not why_not_dense:
        return
    state.coerce(node, 0, identity(len(src_in)),
                 f"{node.op} from {list(src_in)} to {list(src_out)} mixes the channel axis of an "
                 "NCHW feature map with its spatial axes; the NHWC form needs a layout Transpose "
                 f"(its weights cannot absorb the order instead: {why_not_dense})")
    outputs(state, node, ())


@layout_rule(TERMINATE, always_runs=True)
def reshape_always(state: LayoutWalk, node: Node) -> None:
    """Reshape: its target shape is rewritten even when its input keeps the source layout."""
    reshape(state, node)


def _as_reshape(state: LayoutWalk, node: Node, shape) -> None:
    """Make ``node`` reshape its (stored) input to ``shape``, keeping the node's name."""
    state.changed = True
    target = np.asarray(shape, np.int64)
    if node.op == "Flatten":
        stored_in = stored_shape(state.src_shape(node.inputs[0]), state.sig(node.inputs[0]))
        axis = flatten_axis(node.attrs.get("axis", 1), len(stored_in))
        flat = (int(np.prod(stored_in[:axis])), int(np.prod(stored_in[axis:])))
        if flat == tuple(target):
            return
        node.op = "Reshape"
        node.attrs = {}
        node.set_inputs([node.inputs[0], state.constant(target, f"{node.name}/shape")])
        return
    node.set_input(1, state.constant(target, f"{node.name}/shape_nhwc"))
    node.attrs.pop("allowzero", None)


def _softmax_over_block(state: LayoutWalk, node: Node, src_in, sigma, src_out) -> bool:
    """Flatten(a) -> Softmax -> Reshape back: how an opset < 13 Softmax(axis=a) of a rank-4
    map is read (``frontends/onnx``): one softmax over the block of axes a.. jointly, e.g. over
    C x H x W, which does not depend on the order of the block. When the stored layout only
    reorders axes inside the block, the stored tensor is flattened, normalised and reshaped
    back to the stored shape: no Transpose. The flattened rows are in stored order, so every
    reader must be such a Softmax whose result is only reshaped back. Returns whether done."""
    graph = state.graph
    a = len(src_out) - 1
    if (a < 1 or tuple(src_out[:a]) != tuple(src_in[:a]) or tuple(sigma[:a]) != tuple(range(a))
            or int(np.prod(src_in[a:])) != src_out[a]):
        return False
    out = node.outputs[0]
    backs = []
    for user, index in out.uses() if out not in graph.outputs else []:
        if (user.op not in ("Softmax", "LogSoftmax") or index != 0
                or user.attrs.get("axis", -1) % (a + 1) != a):
            return False
        soft = user.outputs[0]
        if soft in graph.outputs or not soft.uses():
            return False
        for back, j in soft.uses():
            if (back.op != "Reshape" or j != 0
                    or tuple(state.src_shape(back.outputs[0])) != tuple(src_in)):
                return False
            backs.append(back)
    if not backs:
        return False
    outputs(state, node, ())
    for back in backs:
        _as_reshape(state, back, stored_shape(src_in, sigma))
        state.set_sig(back.outputs[0], sigma)
        state.settled.add(id(back))
    state.ctx.record("layout", node.name, f"{node.op} of {list(src_in)} into rows of "
                     f"{src_out[a]} for a softmax over the whole row: computed on the stored "
                     f"order (permutation {list(sigma)}), which the softmax does not depend on")
    return True


def _dense_consumers(state: LayoutWalk, node: Node):
    """The (consumer, index) uses when all are Dense-like with a constant weight, else a reason."""
    out = node.outputs[0]
    if out in state.graph.outputs:
        return "its result is a graph output"
    uses = out.uses()
    for user, index in uses:
        weight = user.input(1)
        dense_like = (user.op == "MatMul" or (user.op == "Gemm" and not user.attrs.get("transA")))
        if index != 0 or not dense_like:
            return f"its result feeds '{user.name}' ({user.op}), not a Gemm/MatMul weight product"
        if weight is None or weight.const is None or weight.const.ndim != 2:
            return (f"the weight of '{user.name}' ({user.op}) is not a 2-D constant, so its rows "
                    "cannot be permuted")
    return uses if uses else "nothing reads its result"


def _flatten_into_dense(state: LayoutWalk, node: Node, src_in, sigma, src_out) -> str:
    """Flatten/Reshape (N, ...) -> (N, K) feeding Dense-like layers: permute their weights.

    Returns "" when done, else why it does not apply.
    """
    if len(src_out) != 2 or src_out[0] != src_in[0] or sigma[0] != 0:
        return "it is not a flatten to (batch, features)"
    if int(np.prod(src_in[1:])) != src_out[1]:
        return "it is not a flatten to (batch, features)"
    uses = _dense_consumers(state, node)
    if isinstance(uses, str):
        return uses
    inner = [int(d) for d in src_in[1:]]
    perm = [a - 1 for a in sigma[1:]]  # stored axis j holds source axis perm[j]
    for user, _ in uses:
        weight = user.inputs[1].const
        rows_last = user.op == "Gemm" and user.attrs.get("transB", 0)
        # The same permutation as flatten_row_order, as one transposing copy (a gather with an
        # index array is several times slower on large weights).
        if rows_last:  # (M, K)
            m = weight.shape[0]
            new = np.ascontiguousarray(
                weight.reshape(m, *inner).transpose(0, *[p + 1 for p in perm])).reshape(m, -1)
        else:  # (K, M), stored as the transpose of a C-ordered (M, K) so that Dense's
            # (M, H, W, C) weight is a free reshape later
            m = weight.shape[1]
            new = np.ascontiguousarray(
                weight.reshape(*inner, m).transpose(len(inner), *perm)).reshape(m, -1).T
        user.set_input(1, state.constant(new, f"{user.inputs[1].name}_nhwc"))
        state.ctx.record("layout", user.name, f"weight of {user.op} '{user.name}' permuted from "
                         "C,H,W to H,W,C order (its input is a flattened NHWC feature map)")
    _as_reshape(state, node, (int(src_out[0]), int(src_out[1])))
    outputs(state, node, ())
    return ""


def _as_readers_want(state: LayoutWalk, node: Node, src_in, src_out) -> bool:
    """A Reshape of a value stored in source order into a rank-4/5 tensor: store its result
    as its readers want it when the same bytes allow it (e.g. (N, C) -> (N, C, 1, 1) stored
    (N, 1, 1, C), so a Tile/Expand of it is an NHWC image). Returns whether done."""
    if len(src_out) not in (4, 5):
        return False
    wanted = wanted_layout(state, node.outputs[0])
    if wanted is None or is_identity(wanted):
        return False
    if reshape_layout(src_in, identity(len(src_in)), src_out, [wanted]) != tuple(wanted):
        return False
    _as_reshape(state, node, stored_shape(src_out, wanted))
    outputs(state, node, wanted)
    state.ctx.record("layout", node.name, f"{node.op} to {list(src_out)} stores its result "
                     f"with permutation {list(wanted)}, as its readers want it (the same bytes)")
    return True


def _dense_into_image(state: LayoutWalk, node: Node, src_in, src_out) -> bool:
    """Dense (N, K) -> Reshape (N, C, H, W) -> NCHW image ops or an image graph output: permute
    the Dense weight columns (and bias) to H,W,C order so the Reshape yields an NHWC map
    directly (decoders, GANs). Returns whether done."""
    data, out = node.inputs[0], node.outputs[0]
    if len(src_in) != 2 or len(src_out) != 4 or src_in[0] != src_out[0]:
        return False
    assert data is not None  # Reshape's data input is required
    producer = data.producer()
    if producer is None or data in state.graph.outputs or len(data.uses()) != 1:
        return False
    weight = producer.input(1)
    if producer.op not in ("Gemm", "MatMul") or producer.attrs.get("transA"):
        return False
    if weight is None or weight.const is None or weight.const.ndim != 2:
        return False
    bias = producer.input(2) if producer.op == "Gemm" else None
    per_feature = bias is not None and bias.const is not None and bias.const.size > 1
    if bias is not None and not (bias.const is not None and (bias.const.size == 1 or (
            bias.const.shape[-1] == src_in[1] and bias.const.size == src_in[1]))):
        return False
    if not downstream(out)[1] and wanted_layout(state, out) != NHWC:
        return False  # nothing reads it as an image, and it is no image output: source order
    order = flatten_row_order(src_out, NHWC)
    columns_first = producer.op == "Gemm" and producer.attrs.get("transB", 0)
    new_w = weight.const[order, :] if columns_first else weight.const[:, order]
    producer.set_input(1, state.constant(new_w, f"{weight.name}_nhwc"))
    if per_feature:
        assert bias is not None and bias.const is not None  # per_feature says so
        producer.set_input(2, state.constant(bias.const[..., order], f"{bias.name}_nhwc"))
    _as_reshape(state, node, stored_shape(src_out, NHWC))
    outputs(state, node, NHWC)
    state.ctx.record("layout", producer.name, f"output features of {producer.op} "
                     f"'{producer.name}' reordered from C,H,W to H,W,C so that '{node.name}' "
                     "builds an NHWC feature map")
    return True
