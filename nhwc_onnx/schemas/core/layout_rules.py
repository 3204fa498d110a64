"""NCHW -> NHWC layout rules of the core ops; each core op names its rule in its declaration.

A rule is called by the ``to_nhwc`` pass with its walk state (``LayoutWalk`` below) when a
permuted value reaches the node (spatial ops, Transpose and Reshape always). It rewrites the node
to work on the stored layout and sets the layout of the node's outputs, or records through
``state.coerce`` that a layout Transpose would be needed.
"""
from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from ...ir import NCHW, Node, Value
from ..base import CORE_OPS
from .define import flatten_axis
from .layout_perm import (
    NHWC,
    Perm,
    drop_axes_layout,
    flatten_row_order,
    identity,
    insert_axes_layout,
    inverse,
    is_identity,
    reshape_layout,
    stored_shape,
)


class LayoutWalk(Protocol):
    """What a layout rule may use of the pass's state (``passes.to_nhwc.LayoutWalk``)."""

    graph: Any
    ctx: Any  # PassContext: record(kind, node, text, **data)
    changed: bool
    vanishing: list

    def src_shape(self, v: Value) -> tuple: ...
    def sig(self, v: Value) -> Perm: ...
    def permuted(self, v: Value | None) -> bool: ...
    def set_sig(self, v: Value, sigma) -> None: ...
    def constant(self, array: np.ndarray, name: str) -> Value: ...
    def replace_const_input(self, node: Node, index: int, array: np.ndarray, tag: str) -> None: ...
    def coerce(self, node: Node, index: int, target: Perm, reason: str) -> None: ...


def always_runs(rule) -> bool:
    """Rules that must see their node even when nothing permuted reaches it."""
    return getattr(rule, "always_runs", False)


def _always(fn):
    fn.always_runs = True
    return fn


def is_spatial(op: str) -> bool:
    """Ops whose rule is ``spatial``: they read a rank-4 image in their ``data_format``."""
    schema = CORE_OPS.get(op)
    return schema is not None and schema.layout_rule is spatial


def reads_nchw_image(node: Node, index: int) -> bool:
    """Whether ``node`` reads input ``index`` as an NCHW image (spatial op, channel BatchNorm)."""
    if index != 0:
        return False
    if node.op == "BatchNormalization":
        rank = node.inputs[0].rank
        return rank == 4 and node.attrs.get("axis", 1) in (1, -3)
    if node.op == "Resize":
        return _resizes_nchw_image(node)
    return is_spatial(node.op) and node.attrs.get("data_format", "NCHW") == "NCHW"


def _resizes_nchw_image(node: Node) -> bool:
    """A rank-4 Resize that keeps axes 0 and 1 and scales 2 or 3 (F.interpolate) resizes an
    NCHW image; the dialect's UpSampling2D wants it stored NHWC."""
    shape = node.inputs[0].shape
    if node.inputs[0].layout not in (None, NCHW) or shape is None or len(shape) != 4:
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


def _outputs(state: LayoutWalk, node: Node, sigma) -> None:
    for out in node.outputs:
        state.set_sig(out, sigma)


def _rank(state: LayoutWalk, node: Node, index: int = 0) -> int:
    return len(state.src_shape(node.inputs[index]))


def identity_only(state: LayoutWalk, node: Node) -> None:
    """Ops that read their operands in source axis order (MatMul, Gemm, Range ...)."""
    for i, v in enumerate(node.inputs):
        if v is not None and not v.is_const:
            state.coerce(node, i, identity(_rank(state, node, i)),
                         f"{node.op} reads '{v.name}' in NCHW axis order, but it is stored NHWC; "
                         "this needs a layout Transpose")
    _outputs(state, node, ())


@_always
def spatial(state: LayoutWalk, node: Node) -> None:
    if node.attrs.get("data_format", "NCHW") == "NCHW":
        state.coerce(node, 0, NHWC, f"{node.op} in NCHW reads '{node.inputs[0].name}', which "
                     "is not an NCHW feature map")
        node.attrs["data_format"] = "NHWC"
        state.changed = True
        _outputs(state, node, NHWC)
    else:
        state.coerce(node, 0, identity(4), f"{node.op} in NHWC reads '{node.inputs[0].name}', "
                     "an NCHW feature map")
        _outputs(state, node, ())


def elementwise(state: LayoutWalk, node: Node) -> None:
    rank = len(state.src_shape(node.outputs[0]))
    target = identity(rank)
    for v in node.inputs:
        if state.permuted(v) and len(state.src_shape(v)) == rank:
            target = state.sig(v)
            break
    for i in range(len(node.inputs)):
        state.coerce(node, i, target, f"{node.op} combines tensors whose stored layouts differ "
                     "(a layout Transpose would be needed)")
    _outputs(state, node, target)


def _axis_of(attrs_value: int, rank: int) -> int:
    return attrs_value % rank


def single_axis(state: LayoutWalk, node: Node) -> None:
    sigma = state.sig(node.inputs[0])
    default = CORE_OPS[node.op].with_defaults({})["axis"]
    axis = _axis_of(node.attrs.get("axis", default), len(sigma))
    node.attrs["axis"] = inverse(sigma)[axis]
    state.changed = True
    _outputs(state, node, sigma)


def softmax_axis(state: LayoutWalk, node: Node) -> None:
    """Softmax/LogSoftmax: the dialect normalises the last (non-trivial) axis. When the source
    axis is last in source order but not in the stored one (e.g. the W axis of an NCHW map),
    reading the source order needs a layout Transpose (recorded, or inserted when allowed)."""
    src, sigma = state.src_shape(node.inputs[0]), state.sig(node.inputs[0])
    default = CORE_OPS[node.op].with_defaults({})["axis"]
    axis = _axis_of(node.attrs.get("axis", default), len(sigma))
    stored_axis = inverse(sigma)[axis]
    last_stored = all(src[a] == 1 for a in sigma[stored_axis + 1:])
    last_source = all(d == 1 for d in src[axis + 1:])
    if last_stored or not last_source:
        single_axis(state, node)
        return
    state.coerce(node, 0, identity(len(sigma)),
                 f"{node.op} over axis {axis} of the NCHW tensor {list(src)} (its last axis); "
                 "stored NHWC that axis is not last, so the dialect's last-axis softmax needs "
                 "a layout Transpose")
    _outputs(state, node, ())


def concat(state: LayoutWalk, node: Node) -> None:
    target = next(state.sig(v) for v in node.inputs if state.permuted(v))
    for i in range(len(node.inputs)):
        state.coerce(node, i, target, "Concat joins tensors stored in different layouts")
    node.attrs["axis"] = inverse(target)[_axis_of(node.attrs["axis"], len(target))]
    state.changed = True
    _outputs(state, node, target)


def reduce_axes(state: LayoutWalk, node: Node) -> None:
    sigma = state.sig(node.inputs[0])
    rank = len(sigma)
    attrs = CORE_OPS[node.op].with_defaults(node.attrs)
    if node.op == "ArgMax":
        axes = [_axis_of(attrs["axis"], rank)]
        node.attrs["axis"] = inverse(sigma)[axes[0]]
    else:
        given = attrs.get("axes")
        axes = list(range(rank)) if given is None else [_axis_of(a, rank) for a in given]
        if given is not None:
            node.attrs["axes"] = sorted(inverse(sigma)[a] for a in axes)
    state.changed = True
    keep = node.op != "Squeeze" and attrs.get("keepdims", 1)
    _outputs(state, node, sigma if keep else drop_axes_layout(sigma, set(axes)))


def unsqueeze(state: LayoutWalk, node: Node) -> None:
    sigma = state.sig(node.inputs[0])
    rank = len(sigma) + len(node.attrs["axes"])
    new_axes = sorted(_axis_of(a, rank) for a in node.attrs["axes"])
    out_sigma, positions = insert_axes_layout(sigma, new_axes)
    node.attrs["axes"] = positions
    state.changed = True
    _outputs(state, node, out_sigma)


@_always
def transpose(state: LayoutWalk, node: Node) -> None:
    sigma_in = state.sig(node.inputs[0])
    rank = len(sigma_in)
    perm = node.attrs.get("perm")
    perm = list(range(rank))[::-1] if perm is None else list(perm)
    # Output layout that makes the Transpose vanish: taken when it is plain or channels-last,
    # or when the result is only flattened into Dense-like layers (whose weight rows absorb
    # the order, as Keras Permute -> Flatten -> Dense).
    vanish = tuple(inverse(perm)[a] for a in sigma_in)
    channels_last = (0, *range(2, rank), 1) if rank in (4, 5) else None  # rank 3: keep
    takes_vanish = (is_identity(vanish) or vanish == channels_last
                    or (vanish[0] == 0 and _only_flattened_into_dense(state, node.outputs[0])))
    sigma_out = vanish if takes_vanish else sigma_in
    stored_perm = [inverse(sigma_in)[perm[a]] for a in sigma_out]
    _outputs(state, node, sigma_out)
    if is_identity(stored_perm):
        # Keep the node until the walk ends: its consumers still read the output's own axes.
        state.vanishing.append(node)
        state.ctx.record("layout", node.name, f"Transpose {perm} removed: it only converted "
                         "between NCHW and NHWC", perm=perm)
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


def slice_axes(state: LayoutWalk, node: Node) -> None:
    sigma = state.sig(node.inputs[0])
    axes = node.attrs.get("axes")
    axes = list(range(len(node.attrs["starts"]))) if axes is None else list(axes)
    node.attrs["axes"] = [inverse(sigma)[_axis_of(a, len(sigma))] for a in axes]
    state.changed = True
    _outputs(state, node, sigma)


def pad(state: LayoutWalk, node: Node) -> None:
    sigma = state.sig(node.inputs[0])
    r = len(sigma)
    pads = list(node.attrs["pads"])
    node.attrs["pads"] = [pads[a] for a in sigma] + [pads[r + a] for a in sigma]
    state.changed = True
    _outputs(state, node, sigma)


def resize(state: LayoutWalk, node: Node) -> None:
    sigma = state.sig(node.inputs[0])
    for key in ("scales", "sizes"):
        if node.attrs.get(key) is not None:
            values = list(node.attrs[key])
            node.attrs[key] = [values[a] for a in sigma]
    state.changed = True
    _outputs(state, node, sigma)


def gather(state: LayoutWalk, node: Node) -> None:
    data, indices = node.inputs
    if state.permuted(indices) or state.src_shape(indices) and len(state.src_shape(indices)) > 1:
        identity_only(state, node)
        return
    sigma = state.sig(data)
    axis = _axis_of(node.attrs.get("axis", 0), len(sigma))
    node.attrs["axis"] = inverse(sigma)[axis]
    state.changed = True
    scalar = len(state.src_shape(indices)) == 0
    _outputs(state, node, drop_axes_layout(sigma, {axis}) if scalar else sigma)


def tile_expand(state: LayoutWalk, node: Node) -> None:
    data, arg = node.inputs
    sigma = state.sig(data)
    values = None if not arg.is_const else [int(x) for x in np.asarray(arg.const).reshape(-1)]
    if values is None or len(values) != len(sigma):
        identity_only(state, node)
        return
    state.replace_const_input(node, 1, np.asarray([values[a] for a in sigma], np.int64),
                              str(sigma))
    _outputs(state, node, sigma)


def shape(state: LayoutWalk, node: Node) -> None:
    out = node.outputs[0]
    src = state.src_shape(node.inputs[0])
    state.graph.remove_node(node)
    out.set_const(np.asarray(src, np.int64))
    state.changed = True


def size(state: LayoutWalk, node: Node) -> None:
    _outputs(state, node, ())


def reshape(state: LayoutWalk, node: Node) -> None:
    data = node.inputs[0]
    out = node.outputs[0]
    src_in, sigma = state.src_shape(data), state.sig(data)
    src_out = state.src_shape(out)
    if is_identity(sigma):
        _dense_into_image(state, node, src_in, src_out)
        return
    prefer = ([NHWC] if len(src_out) == 4 else []) + [identity(len(src_out))]
    sigma_out = reshape_layout(src_in, sigma, src_out, prefer)
    if sigma_out is not None:
        _as_reshape(state, node, stored_shape(src_out, sigma_out))
        _outputs(state, node, sigma_out)
        if not is_identity(sigma_out):
            state.ctx.record("layout", node.name, f"{node.op} rewritten on stored axes: "
                             f"{list(src_in)} -> {list(src_out)} keeps layout {list(sigma_out)}")
        return
    why_not_dense = _flatten_into_dense(state, node, src_in, sigma, src_out)
    if not why_not_dense:
        return
    state.coerce(node, 0, identity(len(src_in)),
                 f"{node.op} from {list(src_in)} to {list(src_out)} mixes the channel axis of an "
                 "NCHW feature map with its spatial axes; the NHWC form needs a layout Transpose "
                 f"(its weights cannot absorb the order instead: {why_not_dense})")
    _outputs(state, node, ())


@_always
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
        if weight is None or not weight.is_const or weight.const.ndim != 2:
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
        # index array is several times slower on a 400 MB VGG weight).
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
    _outputs(state, node, ())
    return ""


def _dense_into_image(state: LayoutWalk, node: Node, src_in, src_out) -> None:
    """Dense (N, K) -> Reshape (N, C, H, W) -> NCHW image ops: permute the Dense weight columns
    (and bias) to H,W,C order so the Reshape yields an NHWC map directly (decoders, GANs)."""
    data, out = node.inputs[0], node.outputs[0]
    if len(src_in) != 2 or len(src_out) != 4 or src_in[0] != src_out[0]:
        return
    producer = data.producer()
    if producer is None or data in state.graph.outputs or len(data.uses()) != 1:
        return
    weight = producer.input(1)
    if producer.op not in ("Gemm", "MatMul") or producer.attrs.get("transA"):
        return
    if weight is None or not weight.is_const or weight.const.ndim != 2:
        return
    bias = producer.input(2) if producer.op == "Gemm" else None
    per_feature = bias is not None and bias.is_const and bias.const.size > 1
    if bias is not None and not (bias.is_const and (bias.const.size == 1 or (
            bias.const.shape[-1] == src_in[1] and bias.const.size == src_in[1]))):
        return
    if not downstream(out)[1]:
        return  # nothing reads it as an image: keep the source order
    order = flatten_row_order(src_out, NHWC)
    columns_first = producer.op == "Gemm" and producer.attrs.get("transB", 0)
    new_w = weight.const[order, :] if columns_first else weight.const[:, order]
    producer.set_input(1, state.constant(new_w, f"{weight.name}_nhwc"))
    if per_feature:
        producer.set_input(2, state.constant(bias.const[..., order], f"{bias.name}_nhwc"))
    _as_reshape(state, node, stored_shape(src_out, NHWC))
    _outputs(state, node, NHWC)
    state.ctx.record("layout", producer.name, f"output features of {producer.op} "
                     f"'{producer.name}' reordered from C,H,W to H,W,C so that '{node.name}' "
                     "builds an NHWC feature map")
