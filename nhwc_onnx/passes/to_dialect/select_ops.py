"""Op selection handlers: core ops with a one-to-one dialect op become it, weights re-laid out.

Runs after padding normalisation (spatial ops carry auto_pad SAME_UPPER or VALID). Grouped
convolutions with group == C_in (> 1) become DepthwiseConv2d (its bias a following AddBias);
constant-weight Gemm/MatMul become Dense (a Flatten of an NHWC map feeding it is absorbed:
Dense takes the 4-D input with W (M, H, W, C)); scalar multiplies become Scale; Clip(0,6) and
min(relu(x), 6) become Relu6; max(x, a*x) with 0 < a < 1 becomes LeakyRelu; the activation
idioms of ``activation_idioms`` (ELU / leaky ReLU as Where, clip as Min/Max, PReLU as two Relus)
become their one dialect op.

The ``SelectOps`` pass (``lower.py``) runs these for the ops ``op_table`` gives them to. A core
node a handler cannot map is left for legalisation; when the reason is definite (e.g.
non-constant conv weights) it is recorded as a "select" decision with ``refused=True`` so the
final error can say why.

Handlers run on validated core nodes (required inputs present) whose values all have a known
shape (``select_and_legalize._shapes_known``); their asserts state that.
"""
from __future__ import annotations

from math import prod

import numpy as np

from ...ir import CORE, DIALECT, Graph, Node
from ...schemas.base import attr
from ..base import PassContext
from ..rewrite import (
    become,
    channel_vector,
    const,
    const_of,
    dims,
    emit,
    positive_axis,
    present,
    refuse,
    shape_of,
)
from . import activation_idioms


def unary(graph: Graph, node: Node, ctx: PassContext) -> bool:
    attrs = {}
    if node.op in ("Elu", "LeakyRelu"):
        attrs["alpha"] = float(attr(node, "alpha"))
    become(node, node.op, [node.input(0)], attrs)
    return True


def prelu(graph: Graph, node: Node, ctx: PassContext) -> bool:
    x, slope = node.input(0), const_of(node.input(1))
    assert x is not None
    vec = channel_vector(slope, x.shape[-1] if x.shape else None, x.rank)
    if vec is None:
        return False  # a constant slope of another shape is legalised, else refused there
    become(node, "PRelu", [x, const(graph, vec, f"{node.name}/slope")])
    return True


def clip(graph: Graph, node: Node, ctx: PassContext) -> bool:
    low, high = node.attrs.get("min"), node.attrs.get("max")
    if low == 0 and high == 6:
        become(node, "Relu6", [node.input(0)])
    elif low == 0 and high is None:
        become(node, "Relu", [node.input(0)])
    else:
        return False  # general bounds: legalised with Max and negations
    return True


def min_op(graph: Graph, node: Node, ctx: PassContext) -> bool:
    """min(relu(x), 6) and min(max(x, 0), 6) -> Relu6(x)."""
    a, b = node.input(0), node.input(1)
    clipped = activation_idioms.clipped_relu(node)
    if clipped is not None:
        become(node, "Relu6", [clipped])
        ctx.record("select", node.name, "min(max(x, 0), 6) -> Relu6")
        return True
    for act, bound in ((a, b), (b, a)):
        c = const_of(bound)
        prod = act.producer() if act is not None else None
        if c is None or c.size != 1 or float(c.reshape(-1)[0]) != 6.0 or prod is None:
            continue
        assert act is not None and act.shape is not None and node.output.shape is not None
        if prod.op != "Relu" or tuple(act.shape) != tuple(node.output.shape):
            continue
        become(node, "Relu6", [prod.input(0)])
        ctx.record("select", node.name, "min(relu(x), 6) -> Relu6")
        return True
    return False


def max_op(graph: Graph, node: Node, ctx: PassContext) -> bool:
    """max(x, a*x) with 0 < a < 1 -> LeakyRelu, max(min(x, 6), 0) -> Relu6; otherwise Max
    (broadcasting allowed)."""
    a, b = node.input(0), node.input(1)
    clipped = activation_idioms.clipped_relu(node)
    if clipped is not None:
        become(node, "Relu6", [clipped])
        ctx.record("select", node.name, "max(min(x, 6), 0) -> Relu6")
        return True
    for x, scaled in ((a, b), (b, a)):
        prod = scaled.producer() if scaled is not None else None
        if prod is None or x is None or scaled is None or x.shape != scaled.shape:
            continue
        alpha = _scale_of(prod, x)
        if alpha is not None and 0 < alpha < 1:
            become(node, "LeakyRelu", [x], {"alpha": alpha})
            ctx.record("select", node.name, f"max(x, {alpha}*x) -> LeakyRelu")
            return True
    become(node, "Max", [_f32(graph, node, a), _f32(graph, node, b)])
    return True


def _scale_of(prod: Node, x) -> float | None:
    if prod.op == "Scale" and prod.domain == DIALECT and prod.input(0) is x:
        return float(prod.attrs.get("scale", 1.0))
    if prod.op == "Mul" and prod.domain == CORE:
        for i in (0, 1):
            c = const_of(prod.input(1 - i))
            if prod.input(i) is x and c is not None and c.size == 1:
                return float(c.reshape(-1)[0])
    return None


def add_mul(graph: Graph, node: Node, ctx: PassContext) -> bool:
    a, b = node.input(0), node.input(1)
    assert a is not None and b is not None
    if node.op == "Mul":
        for x, s in ((a, b), (b, a)):
            c = const_of(s)
            assert x is not None
            if c is not None and c.size == 1 and not x.is_const and x.shape == node.output.shape:
                become(node, "Scale", [x], {"scale": float(c.reshape(-1)[0])})
                return True
    if a.shape == b.shape == node.output.shape and not (a.is_const and b.is_const):
        become(node, node.op, [_f32(graph, node, a), _f32(graph, node, b)])
        return True
    return False  # broadcasting: legalised


def _f32(graph: Graph, node: Node, v):
    if v.is_const and v.dtype != "float32":
        return const(graph, v.const, f"{node.name}/const")
    return v


def sum_op(graph: Graph, node: Node, ctx: PassContext) -> bool:
    shapes = {shape_of(v) for v in node.inputs}
    if len(shapes) != 1 or shape_of(node.output) not in shapes:
        return False
    if len(node.inputs) == 1:
        return False
    become(node, "Sum", [_f32(graph, node, v) for v in node.inputs])
    return True


def softmax(graph: Graph, node: Node, ctx: PassContext) -> bool:
    shape = dims(node.input(0))
    axis = positive_axis(int(attr(node, "axis")), len(shape))
    # ONNX-1 Softmax normalises the block dims[axis:]: equal when every later dim is 1.
    if any(d != 1 for d in shape[axis + 1:]) and ctx.options.allow_transpose:
        return _softmax_moved_last(graph, node, ctx, axis)
    if any(d != 1 for d in shape[axis + 1:]):
        return refuse(ctx, node, f"softmax over axis {axis} of {tuple(shape)} is not the last "
                      "non-trivial axis: the dialect's coerce-to-2-D Softmax would normalise "
                      f"dims {tuple(shape[axis:])} together, and moving the axis needs a "
                      "layout Transpose")
    become(node, "Softmax", [node.input(0)], {"axis": axis})
    return True


def _softmax_moved_last(graph: Graph, node: Node, ctx: PassContext, axis: int) -> bool:
    """--allow-transpose: swap ``axis`` with the last one, Softmax there, swap back (a warning
    per inserted Transpose)."""
    x = node.input(0)
    assert x is not None and x.shape is not None  # Softmax's input, of a known shape here
    return _on_moved_axis(graph, node, ctx, axis, "Softmax", [], {"axis": len(x.shape) - 1})


def _on_moved_axis(graph: Graph, node: Node, ctx: PassContext, axis: int, op: str,
                   params: list, attrs: dict) -> bool:
    """--allow-transpose: swap ``axis`` of the node's input with the last one, apply ``op``
    (input, *params) there, swap back (a warning per inserted Transpose)."""
    x = node.input(0)
    assert x is not None and x.shape is not None  # the op's input, of a known shape here
    perm = list(range(len(x.shape)))
    perm[axis], perm[-1] = perm[-1], perm[axis]  # its own inverse
    moved_shape = [x.shape[a] for a in perm]
    moved = emit(graph, "Transpose", [x], {"perm": perm}, f"{node.name}/axis_last",
                 moved_shape)
    result = emit(graph, op, [moved, *params], attrs, f"{node.name}/last_axis", moved_shape)
    become(node, "Transpose", [result], {"perm": perm})
    for t in (moved.producer(), node):
        assert t is not None  # emit made moved's producer
        ctx.warn(f"inserted Transpose '{t.name}' (perm {perm}) for {op} '{node.name}': its "
                 f"axis {axis} is not the last axis of {tuple(x.shape)}")
        ctx.record("layout", t.name, f"inserted Transpose {perm}", perm=perm)
    return True


def flatten(graph: Graph, node: Node, ctx: PassContext) -> bool:
    rank = len(dims(node.input(0)))
    axis = positive_axis(int(attr(node, "axis")), rank)
    become(node, "Flatten", [node.input(0)], {"axis": axis})
    return True


def reshape_to_output(graph: Graph, node: Node, ctx: PassContext) -> bool:
    """Reshape / Unsqueeze / Squeeze-like ops: a Reshape to the static output shape."""
    shape = const(graph, np.array(node.output.shape, np.int64), f"{node.name}/shape", np.int64)
    become(node, "Reshape", [node.input(0), shape])
    return True


def squeeze(graph: Graph, node: Node, ctx: PassContext) -> bool:
    rank = len(dims(node.input(0)))
    axes = sorted(positive_axis(int(a), rank) for a in node.attrs["axes"])
    become(node, "Squeeze", [node.input(0)], {"axes": axes})
    return True


def transpose(graph: Graph, node: Node, ctx: PassContext) -> bool:
    rank = len(dims(node.input(0)))
    perm = node.attrs.get("perm") or list(range(rank))[::-1]
    become(node, "Transpose", [node.input(0)],
           {"perm": [positive_axis(int(p), rank) for p in perm]})
    return True


def concat(graph: Graph, node: Node, ctx: PassContext) -> bool:
    rank = len(dims(node.inputs[0]))
    axis = positive_axis(int(node.attrs["axis"]), rank)
    become(node, "Concat", [_f32(graph, node, v) for v in node.inputs], {"axis": axis})
    return True


def slice_op(graph: Graph, node: Node, ctx: PassContext) -> bool:
    """Slice with clamped non-negative bounds; positive steps on H/W of a 4-D map become a
    1x1 MaxPool with that stride after the bounds (the max of one cell is the cell)."""
    x = node.input(0)
    shape = dims(x)
    rank = len(shape)
    axes = node.attrs.get("axes") or list(range(len(node.attrs["starts"])))
    steps = [int(s) for s in (node.attrs.get("steps") or [1] * len(axes))]
    strided = {positive_axis(int(a), rank): st for a, st in zip(axes, steps) if st != 1}
    if strided and (rank != 4 or any(st < 1 for st in strided.values())
                    or not set(strided) <= {1, 2}):
        return refuse(ctx, node, f"steps {steps} on axes {list(axes)}: only positive steps on "
                      "the H and W axes of a 4-D map have a dialect form")
    starts, ends, out_axes = [], [], []
    bounded = list(shape)
    for ax, s, e in zip(axes, node.attrs["starts"], node.attrs["ends"]):
        ax = positive_axis(int(ax), rank)
        dim = shape[ax]
        s, e = int(s), int(e)
        s = min(max(s + dim if s < 0 else s, 0), dim)
        e = min(max(e + dim if e < 0 else e, 0), dim)
        if e <= s:
            return refuse(ctx, node, f"empty slice [{s}, {e}) on axis {ax}")
        bounded[ax] = e - s
        if (s, e) == (0, dim):
            continue
        starts.append(s)
        ends.append(e)
        out_axes.append(ax)
    attrs = {"starts": starts, "ends": ends, "axes": out_axes}
    if not strided and not out_axes:
        return _identity(graph, node, ctx)
    if not strided:
        become(node, "Slice", [x], attrs)
        return True
    if out_axes:
        x = emit(graph, "Slice", [x], attrs, f"{node.name}/bounds", bounded)
    become(node, "MaxPool", [x], {"kernel_shape": [1, 1], "pads": "VALID",
                                  "strides": [strided.get(1, 1), strided.get(2, 1)]})
    return True


def _identity(graph: Graph, node: Node, ctx: PassContext) -> bool:
    """A no-op: Reshape to the same shape keeps the output tensor without special cases."""
    return reshape_to_output(graph, node, ctx)


def pad(graph: Graph, node: Node, ctx: PassContext) -> bool:
    if attr(node, "mode") != "constant" or float(attr(node, "value")):
        return False  # edge / reflect / non-zero value: legalised or refused
    x = node.input(0)
    assert x is not None and x.shape is not None and x.rank is not None
    rank = x.rank
    pads = [int(p) for p in node.attrs["pads"]]
    begins, ends = pads[:rank], pads[rank:]
    if any(p < 0 for p in pads):
        # Negative pads crop: Slice first, then pad the rest.
        starts = [max(-b, 0) for b in begins]
        stops = [d - max(-e, 0) for d, e in zip(x.shape, ends)]
        axes = [a for a in range(rank) if (starts[a], stops[a]) != (0, x.shape[a])]
        cropped_shape = [stops[a] - starts[a] for a in range(rank)]
        x = emit(graph, "Slice", [x], {"starts": [starts[a] for a in axes],
                                       "ends": [stops[a] for a in axes], "axes": axes},
                 f"{node.name}/crop", cropped_shape)
        begins = [max(b, 0) for b in begins]
        ends = [max(e, 0) for e in ends]
    flat = [v for pair in zip(begins, ends) for v in pair]
    become(node, "Pad", [x], {"pads": flat, "mode": "constant", "value": 0.0})
    return True


def reduce_mean(graph: Graph, node: Node, ctx: PassContext) -> bool:
    rank = len(dims(node.input(0)))
    axes = node.attrs.get("axes")
    axes = sorted(positive_axis(int(a), rank) for a in axes) if axes else list(range(rank))
    if not axes:  # a scalar: the mean of one value is that value
        become(node, "Reshape", [node.input(0), const(graph, np.array(
            list(dims(node.output))), f"{node.name}/shape", np.int64)])
        return True
    become(node, "ReduceMean", [node.input(0)],
           {"axes": axes, "keepdims": int(attr(node, "keepdims"))})
    return True


def batchnorm(graph: Graph, node: Node, ctx: PassContext) -> bool:
    x = node.input(0)
    assert x is not None and x.shape is not None and x.rank is not None
    axis = positive_axis(int(attr(node, "axis")), x.rank)
    if axis != x.rank - 1 and not ctx.options.allow_transpose:
        return refuse(ctx, node, f"normalises axis {axis} of {tuple(x.shape)}, not the last "
                      "(channel) axis the dialect BatchNormalization uses, and moving it "
                      "there needs a layout Transpose")
    params = [const_of(v) for v in node.inputs[1:5]]
    if any(p is None for p in params):
        return refuse(ctx, node, "scale, B, mean and var must be constants")
    c = x.shape[axis]
    vecs = [np.broadcast_to(np.asarray(p, np.float64).reshape(-1), (c,)) for p in params]
    names = ("scale", "B", "mean", "var")
    weights = [const(graph, v, f"{node.name}/{n}") for v, n in zip(vecs, names)]
    epsilon = {"epsilon": float(attr(node, "epsilon"))}
    if axis != x.rank - 1:
        return _on_moved_axis(graph, node, ctx, axis, "BatchNormalization", weights, epsilon)
    become(node, "BatchNormalization", [x] + weights, epsilon)
    return True


def gemm(graph: Graph, node: Node, ctx: PassContext) -> bool:
    a, b, c = node.input(0), node.input(1), node.input(2)
    w = const_of(b)
    alpha, beta = float(attr(node, "alpha")), float(attr(node, "beta"))
    trans_a, trans_b = int(attr(node, "transA")), int(attr(node, "transB"))
    n_out = dims(node.output)[-1]
    bias = None
    if c is not None:
        bias = channel_vector(const_of(c), n_out, 2)
    if w is not None and trans_a == 0 and (c is None or bias is not None):
        weight = w if trans_b else w.T  # (M, K), a view
        if alpha != 1.0:
            weight = weight.astype(np.float64) * alpha
        bias = None if bias is None else bias * beta
        if _per_position_tensordot(graph, node, weight.T, bias, ctx):
            return True
        return _to_dense(graph, node, a, weight, bias, ctx)
    if c is None:
        c = const(graph, np.zeros(n_out), f"{node.name}/C")
    become(node, "Gemm", [a, _f32(graph, node, b), _f32(graph, node, c)],
           {"alpha": alpha, "beta": beta, "transA": trans_a, "transB": trans_b})
    return True


def matmul(graph: Graph, node: Node, ctx: PassContext) -> bool:
    a, b = node.input(0), node.input(1)
    assert a is not None
    w = const_of(b)
    if w is not None and w.ndim == 2 and a.rank == 2:
        if _per_position_tensordot(graph, node, w, None, ctx):
            return True
        return _to_dense(graph, node, a, w.T, None, ctx)
    if w is not None and w.ndim == 2 and len(dims(a)) >= 3:
        _per_position(graph, node, a, w, None, node)
        ctx.record("select", node.name, f"MatMul of a rank-{a.rank} tensor by a constant "
                   "(K, M) weight: the same weight product at each position, a 1x1 Conv")
        return True
    if w is not None and a.rank != 2:
        return refuse(ctx, node, f"constant-weight MatMul on a rank-{a.rank} input with a "
                      f"{w.ndim}-D weight: only a 2-D (K, M) weight is one product per "
                      "position (Dense or a 1x1 Conv)")
    become(node, "MatMul", [_f32(graph, node, a), _f32(graph, node, b)])
    return True


def _per_position_tensordot(graph: Graph, node: Node, w, bias, ctx: PassContext) -> bool:
    """Reshape (..., K) -> (P, K), the product by w (K, M) (+ bias), Reshape back to (..., M):
    the reshapes go, the product becomes a 1x1 Conv at each position. Returns whether done."""
    found = _tensordot(graph, node)
    if found is None:
        return False
    x, back = found
    _per_position(graph, node, x, w, bias, back)
    graph.remove_node(node)
    ctx.record("select", back.name, f"Reshape -> {node.op} '{node.name}' -> Reshape of a "
               f"rank-{x.rank} tensor: the same weight product at each position, a 1x1 Conv")
    return True


def _tensordot(graph: Graph, node: Node):
    """(x, back) when ``node`` is the product of TensorFlow's Tensordot (Keras Dense on a
    rank-3/4 tensor): x (..., K) reshaped to (P, K), the MatMul, and ``back``, the only reader
    of the product, reshaping it to (..., M) with x's leading dims. Else None."""
    flat, out = present(node.input(0)), node.output
    reshape = flat.producer()
    if reshape is None or reshape.op != "Reshape" or len(flat.uses()) != 1:
        return None
    x = reshape.input(0)
    users = out.uses()
    if x is None or x.shape is None or len(x.shape) < 3 or out in graph.outputs or len(users) != 1:
        return None
    back, index = users[0]
    if back.op != "Reshape" or back.domain != CORE or index != 0:
        return None
    lead = tuple(x.shape[:-1])
    if shape_of(back.output) != (*lead, dims(out)[-1]) or dims(flat)[0] != prod(lead):
        return None
    return x, back


def _per_position(graph: Graph, node: Node, x, w, bias, result: Node) -> None:
    """``result`` computes x (..., K) . w (K, M) (+ bias) at every position as a 1x1 Conv: on
    x itself when it is 4-D, else on x reshaped (the same bytes) to (N, P, 1, K) and back."""
    k, m = w.shape
    weights = [const(graph, np.asarray(w).T.reshape(m, 1, 1, k), f"{node.name}/W")]
    if bias is not None:
        weights.append(const(graph, np.asarray(bias).reshape(-1), f"{node.name}/B"))
    attrs = {"kernel_shape": [1, 1], "strides": [1, 1], "dilations": [1, 1], "pads": "VALID",
             "group": 1}
    shape = tuple(x.shape)
    if len(shape) == 4:
        become(result, "Conv", [x, *weights], attrs)
        return
    grid = (shape[0], prod(shape[1:-1]), 1, k)
    x4 = emit(graph, "Reshape", [x, const(graph, np.array(grid), f"{node.name}/grid_shape",
                                          np.int64)], None, f"{node.name}/grid", grid)
    y4 = emit(graph, "Conv", [x4, *weights], attrs, f"{node.name}/conv", (*grid[:3], m))
    become(result, "Reshape", [y4, const(graph, np.array(result.output.shape),
                                         f"{node.name}/shape", np.int64)])


def _to_dense(graph: Graph, node: Node, x, weight: np.ndarray, bias, ctx: PassContext) -> bool:
    """Dense(x, W (M, K)); a Flatten of an NHWC map in front is absorbed."""
    flat = x.producer()
    if flat is not None and _flattens_a_map(flat) and len(x.uses()) == 1 and all(
            o is not x for o in graph.outputs):
        src = flat.input(0)
        weight = weight.reshape((weight.shape[0], *src.shape[1:]))
        graph.remove_node(flat)
        x = src
        ctx.record("select", node.name, f"{flat.op} absorbed: Dense on the NHWC map, "
                   "W (M,H,W,C)")
    inputs = [x, const(graph, weight, f"{node.name}/W")]
    if bias is not None:
        inputs.append(const(graph, bias, f"{node.name}/B"))
    become(node, "Dense", inputs)
    return True


def _flattens_a_map(node: Node) -> bool:
    """Flatten(axis 1) of an (N, H, W, C) map: (N, H*W*C) in H, W, C order.

    (A Reshape to the same shape is left as it is: the layout pass already gives the Dense
    after it a 2-D weight in H, W, C order.)"""
    src = node.input(0)
    if src is None or src.rank != 4 or node.op != "Flatten":
        return False
    return positive_axis(int(attr(node, "axis")), 4) == 1


def space_to_depth(graph: Graph, node: Node, ctx: PassContext) -> bool:
    if attr(node, "data_format") != "NHWC":
        return refuse(ctx, node, "data_format is not NHWC after layout conversion")
    become(node, "SpaceToDepth", [node.input(0)], {"blocksize": int(node.attrs["blocksize"])})
    return True


def bypass(graph: Graph, node: Node, ctx: PassContext) -> bool:
    return _identity(graph, node, ctx)


def cast(graph: Graph, node: Node, ctx: PassContext) -> bool:
    x = node.input(0)
    assert x is not None
    if x.dtype == "float32" and str(node.attrs.get("to")) == "float32":
        return _identity(graph, node, ctx)
    return refuse(ctx, node, f"cast from {x.dtype} to {node.attrs.get('to')}: "
                  "the dialect computes in float32 only")


def add(graph: Graph, node: Node, ctx: PassContext) -> bool:
    """Relu(x) + s * Relu(-x) -> PRelu, else as any Add."""
    return activation_idioms.prelu_sum(graph, node, ctx) or add_mul(graph, node, ctx)
