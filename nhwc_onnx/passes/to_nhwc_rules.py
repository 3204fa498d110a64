"""Per-op layout rules of the NCHW -> NHWC pass (see ``to_nhwc``)."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ir import Node
from ..schemas.base import CORE_OPS, LayoutClass
from .core_eval import flatten_axis
from .to_nhwc import SPATIAL_OPS, LayoutState, downstream
from .to_nhwc_layout import (
    NHWC,
    drop_axes_layout,
    flatten_row_order,
    identity,
    insert_axes_layout,
    inverse,
    is_identity,
    reshape_layout,
    stored_shape,
)

Rule = Callable[[LayoutState, Node], None]
_RULES: dict[str, Rule] = {}


def _rule(*names: str):
    def deco(fn: Rule) -> Rule:
        for name in names:
            _RULES[name] = fn
        return fn

    return deco


def visit(state: LayoutState, node: Node) -> None:
    rule = _RULES.get(node.op)
    if rule is None:
        schema = CORE_OPS[node.op]
        rule = _elementwise if schema.layout is LayoutClass.TRANSPARENT else _identity_only
    always = rule is _spatial or rule is _transpose or node.op == "Reshape"
    if not always and not any(state.permuted(v) for v in node.inputs):
        return  # nothing permuted reaches this node: it stays as it is
    rule(state, node)


def _outputs(state: LayoutState, node: Node, sigma) -> None:
    for out in node.outputs:
        state.set_sig(out, sigma)


def _rank(state: LayoutState, node: Node, index: int = 0) -> int:
    return len(state.src_shape(node.inputs[index]))


@_rule("MatMul", "Gemm", "Range", "ConstantOfShape")
def _identity_only(state: LayoutState, node: Node) -> None:
    """Ops that read their operands in source axis order (MatMul, Gemm, Range ...)."""
    for i, v in enumerate(node.inputs):
        if v is not None and not v.is_const:
            state.coerce(node, i, identity(_rank(state, node, i)),
                         f"{node.op} reads '{v.name}' in NCHW axis order, but it is stored NHWC; "
                         "this needs a layout Transpose")
    _outputs(state, node, ())


@_rule(*sorted(SPATIAL_OPS))
def _spatial(state: LayoutState, node: Node) -> None:
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


def _elementwise(state: LayoutState, node: Node) -> None:
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


@_rule("Softmax", "LogSoftmax", "BatchNormalization", "Split")
def _single_axis(state: LayoutState, node: Node) -> None:
    sigma = state.sig(node.inputs[0])
    default = CORE_OPS[node.op].with_defaults({})["axis"]
    axis = _axis_of(node.attrs.get("axis", default), len(sigma))
    node.attrs["axis"] = inverse(sigma)[axis]
    state.changed = True
    _outputs(state, node, sigma)


@_rule("Concat")
def _concat(state: LayoutState, node: Node) -> None:
    target = next(state.sig(v) for v in node.inputs if state.permuted(v))
    for i in range(len(node.inputs)):
        state.coerce(node, i, target, "Concat joins tensors stored in different layouts")
    node.attrs["axis"] = inverse(target)[_axis_of(node.attrs["axis"], len(target))]
    state.changed = True
    _outputs(state, node, target)


@_rule("ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd", "ArgMax", "Squeeze")
def _reduce(state: LayoutState, node: Node) -> None:
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


@_rule("Unsqueeze")
def _unsqueeze(state: LayoutState, node: Node) -> None:
    sigma = state.sig(node.inputs[0])
    rank = len(sigma) + len(node.attrs["axes"])
    new_axes = sorted(_axis_of(a, rank) for a in node.attrs["axes"])
    out_sigma, positions = insert_axes_layout(sigma, new_axes)
    node.attrs["axes"] = positions
    state.changed = True
    _outputs(state, node, out_sigma)


@_rule("Transpose")
def _transpose(state: LayoutState, node: Node) -> None:
    sigma_in = state.sig(node.inputs[0])
    rank = len(sigma_in)
    perm = node.attrs.get("perm")
    perm = list(range(rank))[::-1] if perm is None else list(perm)
    # Output layout that makes the Transpose vanish: taken when it is plain or NHWC.
    vanish = tuple(inverse(perm)[a] for a in sigma_in)
    sigma_out = vanish if is_identity(vanish) or vanish == NHWC else sigma_in
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


@_rule("Slice")
def _slice(state: LayoutState, node: Node) -> None:
    sigma = state.sig(node.inputs[0])
    axes = node.attrs.get("axes")
    axes = list(range(len(node.attrs["starts"]))) if axes is None else list(axes)
    node.attrs["axes"] = [inverse(sigma)[_axis_of(a, len(sigma))] for a in axes]
    state.changed = True
    _outputs(state, node, sigma)


@_rule("Pad")
def _pad(state: LayoutState, node: Node) -> None:
    sigma = state.sig(node.inputs[0])
    r = len(sigma)
    pads = list(node.attrs["pads"])
    node.attrs["pads"] = [pads[a] for a in sigma] + [pads[r + a] for a in sigma]
    state.changed = True
    _outputs(state, node, sigma)


@_rule("Resize")
def _resize(state: LayoutState, node: Node) -> None:
    sigma = state.sig(node.inputs[0])
    for key in ("scales", "sizes"):
        if node.attrs.get(key) is not None:
            values = list(node.attrs[key])
            node.attrs[key] = [values[a] for a in sigma]
    state.changed = True
    _outputs(state, node, sigma)


@_rule("Gather")
def _gather(state: LayoutState, node: Node) -> None:
    data, indices = node.inputs
    if state.permuted(indices) or state.src_shape(indices) and len(state.src_shape(indices)) > 1:
        _identity_only(state, node)
        return
    sigma = state.sig(data)
    axis = _axis_of(node.attrs.get("axis", 0), len(sigma))
    node.attrs["axis"] = inverse(sigma)[axis]
    state.changed = True
    scalar = len(state.src_shape(indices)) == 0
    _outputs(state, node, drop_axes_layout(sigma, {axis}) if scalar else sigma)


@_rule("Tile", "Expand")
def _tile_expand(state: LayoutState, node: Node) -> None:
    data, arg = node.inputs
    sigma = state.sig(data)
    values = None if not arg.is_const else [int(x) for x in np.asarray(arg.const).reshape(-1)]
    if values is None or len(values) != len(sigma):
        _identity_only(state, node)
        return
    state.replace_const_input(node, 1, np.asarray([values[a] for a in sigma], np.int64),
                              str(sigma))
    _outputs(state, node, sigma)


@_rule("Shape")
def _shape(state: LayoutState, node: Node) -> None:
    out = node.outputs[0]
    src = state.src_shape(node.inputs[0])
    state.graph.remove_node(node)
    out.set_const(np.asarray(src, np.int64))
    state.changed = True


@_rule("Size")
def _size(state: LayoutState, node: Node) -> None:
    _outputs(state, node, ())


@_rule("Flatten", "Reshape")
def _reshape(state: LayoutState, node: Node) -> None:
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


def _as_reshape(state: LayoutState, node: Node, shape) -> None:
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


def _dense_consumers(state: LayoutState, node: Node):
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


def _flatten_into_dense(state: LayoutState, node: Node, src_in, sigma, src_out) -> str:
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


def _dense_into_image(state: LayoutState, node: Node, src_in, src_out) -> None:
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
