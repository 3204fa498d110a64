"""The layout rules of the core ops that keep their axes: elementwise, spatial and axis ops.

Each rule is called by the ``to_nhwc`` walk (``walk.LayoutWalk``) for a node of its ops when a
permuted value reaches it (``always_runs`` rules: always). It rewrites the node to work on the
stored layout and sets the layout of the node's outputs, or records through ``walk.coerce``
that a layout Transpose would be needed. Which op has which rule: ``table.LAYOUT_RULES``; the
rules of Transpose, Reshape and Flatten, which move axes: ``moves``.
"""
from __future__ import annotations

import numpy as np

from ...ir import Node
from ...schemas.base import CORE_OPS, LayoutClass
from .demand import wanted_layout
from .images import is_pointwise_conv
from .perm import (
    NHWC,
    channels_last,
    drop_axes_layout,
    identity,
    insert_axes_layout,
    inverse,
    is_identity,
    same_bytes,
)
from .walk import LayoutWalk, layout_rule

IMPLICIT, TRANSPARENT = LayoutClass.IMPLICIT, LayoutClass.TRANSPARENT
ATTRIBUTE, TERMINATE = LayoutClass.ATTRIBUTE, LayoutClass.TERMINATE


def outputs(state: LayoutWalk, node: Node, sigma) -> None:
    for out in node.outputs:
        state.set_sig(out, sigma)


def _rank(state: LayoutWalk, node: Node, index: int = 0) -> int:
    return len(state.src_shape(node.inputs[index]))


@layout_rule(TERMINATE)
def identity_only(state: LayoutWalk, node: Node) -> None:
    """Ops that read their operands in source axis order (MatMul, Gemm, Range ...)."""
    for i, v in enumerate(node.inputs):
        if v is not None and not v.is_const:
            state.coerce(node, i, identity(_rank(state, node, i)),
                         f"{node.op} reads '{v.name}' in NCHW axis order, but it is stored NHWC; "
                         "this needs a layout Transpose")
    outputs(state, node, ())


@layout_rule(IMPLICIT, always_runs=True)
def spatial(state: LayoutWalk, node: Node) -> None:
    x = node.inputs[0]
    assert x is not None  # the data input of a spatial op is required
    if node.attrs.get("data_format", "NCHW") == "NCHW":
        sigma = state.sig(x)
        if (sigma[-1] == 1 and not same_bytes(state.src_shape(x), sigma, NHWC)
                and is_pointwise_conv(state, node)):
            node.attrs["data_format"] = "NHWC"
            state.changed = True
            outputs(state, node, sigma)
            state.ctx.record("layout", node.name, f"1x1 Conv reads '{x.name}' stored with "
                             f"permutation {list(sigma)} (channel last) as it is: it computes "
                             "each position on its own, whichever order they are stored in",
                             perm=list(sigma))
            return
        state.coerce(node, 0, NHWC, f"{node.op} in NCHW reads '{x.name}', which "
                     "is not an NCHW feature map")
        node.attrs["data_format"] = "NHWC"
        state.changed = True
        outputs(state, node, NHWC)
    else:
        state.coerce(node, 0, identity(4), f"{node.op} in NHWC reads '{x.name}', "
                     "an NCHW feature map")
        outputs(state, node, ())


@layout_rule(TRANSPARENT, keeps_layout=True)
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
    outputs(state, node, target)


def axis_of(attrs_value: int, rank: int) -> int:
    return attrs_value % rank


@layout_rule(ATTRIBUTE, keeps_layout=True)
def single_axis(state: LayoutWalk, node: Node) -> None:
    sigma = state.sig(node.inputs[0])
    default = CORE_OPS[node.op].with_defaults({})["axis"]
    axis = axis_of(node.attrs.get("axis", default), len(sigma))
    node.attrs["axis"] = inverse(sigma)[axis]
    state.changed = True
    outputs(state, node, sigma)


@layout_rule(ATTRIBUTE, keeps_layout=True)
def softmax_axis(state: LayoutWalk, node: Node) -> None:
    """Softmax/LogSoftmax: the dialect normalises the last (non-trivial) axis. When the source
    axis is last in source order but not in the stored one (e.g. the W axis of an NCHW map),
    reading the source order needs a layout Transpose (recorded, or inserted when allowed)."""
    src, sigma = state.src_shape(node.inputs[0]), state.sig(node.inputs[0])
    default = CORE_OPS[node.op].with_defaults({})["axis"]
    axis = axis_of(node.attrs.get("axis", default), len(sigma))
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
    outputs(state, node, ())


@layout_rule(ATTRIBUTE, keeps_layout=True)
def concat(state: LayoutWalk, node: Node) -> None:
    target = next(state.sig(v) for v in node.inputs if state.permuted(v))
    for i in range(len(node.inputs)):
        state.coerce(node, i, target, "Concat joins tensors stored in different layouts")
    node.attrs["axis"] = inverse(target)[axis_of(node.attrs["axis"], len(target))]
    state.changed = True
    outputs(state, node, target)


@layout_rule(ATTRIBUTE)
def reduce_axes(state: LayoutWalk, node: Node) -> None:
    sigma = state.sig(node.inputs[0])
    rank = len(sigma)
    attrs = CORE_OPS[node.op].with_defaults(node.attrs)
    if node.op == "ArgMax":
        axes = [axis_of(attrs["axis"], rank)]
        node.attrs["axis"] = inverse(sigma)[axes[0]]
    else:
        given = attrs.get("axes")
        axes = list(range(rank)) if given is None else [axis_of(a, rank) for a in given]
        if given is not None:
            node.attrs["axes"] = sorted(inverse(sigma)[a] for a in axes)
    state.changed = True
    keep = node.op != "Squeeze" and attrs.get("keepdims", 1)
    outputs(state, node, sigma if keep else drop_axes_layout(sigma, set(axes)))


@layout_rule(ATTRIBUTE, always_runs=True)
def unsqueeze(state: LayoutWalk, node: Node) -> None:
    """Size-1 axes go where they keep the stored bytes; among those places, where the result
    is channels-last (an N,C,L map stored N,L,C lifted to N,C,1,L is stored N,1,L,C), and for
    a value in source order lifted to rank 4/5, where its readers want it (if they do)."""
    sigma = state.sig(node.inputs[0])
    rank = len(sigma) + len(node.attrs["axes"])
    new_axes = sorted(axis_of(a, rank) for a in node.attrs["axes"])
    out_sigma, positions = insert_axes_layout(sigma, new_axes)
    if rank in (4, 5):
        target = (wanted_layout(state, node.outputs[0]) if is_identity(sigma)
                  else channels_last(rank))
        if target is not None and drop_axes_layout(target, set(new_axes)) == tuple(sigma):
            out_sigma, positions = tuple(target), sorted(target.index(a) for a in new_axes)
    if is_identity(out_sigma):
        return  # a value in source order stays as the source wrote it
    if is_identity(sigma):
        state.ctx.record("layout", node.name, f"Unsqueeze stores its result with permutation "
                         f"{list(out_sigma)}, as its readers want it (the same bytes)")
    node.attrs["axes"] = positions
    state.changed = True
    outputs(state, node, out_sigma)


@layout_rule(ATTRIBUTE, keeps_layout=True)
def slice_axes(state: LayoutWalk, node: Node) -> None:
    sigma = state.sig(node.inputs[0])
    axes = node.attrs.get("axes")
    axes = list(range(len(node.attrs["starts"]))) if axes is None else list(axes)
    node.attrs["axes"] = [inverse(sigma)[axis_of(a, len(sigma))] for a in axes]
    state.changed = True
    outputs(state, node, sigma)


@layout_rule(ATTRIBUTE, keeps_layout=True)
def pad(state: LayoutWalk, node: Node) -> None:
    sigma = state.sig(node.inputs[0])
    r = len(sigma)
    pads = list(node.attrs["pads"])
    node.attrs["pads"] = [pads[a] for a in sigma] + [pads[r + a] for a in sigma]
    state.changed = True
    outputs(state, node, sigma)


@layout_rule(ATTRIBUTE, keeps_layout=True)
def resize(state: LayoutWalk, node: Node) -> None:
    sigma = state.sig(node.inputs[0])
    for key in ("scales", "sizes"):
        if node.attrs.get(key) is not None:
            values = list(node.attrs[key])
            node.attrs[key] = [values[a] for a in sigma]
    state.changed = True
    outputs(state, node, sigma)


@layout_rule(ATTRIBUTE)
def gather(state: LayoutWalk, node: Node) -> None:
    data, indices = node.inputs
    if state.permuted(indices) or state.src_shape(indices) and len(state.src_shape(indices)) > 1:
        identity_only(state, node)
        return
    sigma = state.sig(data)
    axis = axis_of(node.attrs.get("axis", 0), len(sigma))
    node.attrs["axis"] = inverse(sigma)[axis]
    state.changed = True
    scalar = len(state.src_shape(indices)) == 0
    outputs(state, node, drop_axes_layout(sigma, {axis}) if scalar else sigma)


@layout_rule(ATTRIBUTE, keeps_layout=True)
def tile_expand(state: LayoutWalk, node: Node) -> None:
    data, arg = node.inputs
    sigma = state.sig(data)
    values = None if arg is None or arg.const is None \
        else [int(x) for x in np.asarray(arg.const).reshape(-1)]
    if values is None or len(values) != len(sigma):
        identity_only(state, node)
        return
    state.replace_const_input(node, 1, np.asarray([values[a] for a in sigma], np.int64),
                              str(sigma))
    outputs(state, node, sigma)


@layout_rule(TERMINATE)
def shape(state: LayoutWalk, node: Node) -> None:
    out = node.outputs[0]
    src = state.src_shape(node.inputs[0])
    state.graph.remove_node(node)
    out.set_const(np.asarray(src, np.int64))
    state.changed = True


@layout_rule(TERMINATE)
def size(state: LayoutWalk, node: Node) -> None:
    outputs(state, node, ())
