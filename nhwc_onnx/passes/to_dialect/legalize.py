"""Legalisation handlers: core ops with no one-to-one dialect op as exact dialect subgraphs.

Every rewrite here is exact in float32 up to the rounding of one operation (negation is
exact; ``a - b`` is ``a + (-b)`` bit for bit). Division by a constant ``c`` becomes a
multiplication by ``1/c``: bit for bit equal when every divisor is a power of two, otherwise
equal up to rounding (``1/c`` is rounded once more, so results may differ by one float32
rounding step, relative 6e-8), which is the standard docs/rounding.md sets for legalisation; the
report records which case applied.

The ``Legalize`` pass (``lower.py``) runs these for the ops ``op_table`` gives them to; whatever
core op is left afterwards goes into ONE UnsupportedOpError listing every node with its reason.
"""
from __future__ import annotations

import numpy as np

from ...ir import CORE, Graph, Node, Value
from ...schemas.base import attr
from ..base import PassContext
from ..rewrite import (
    affine_batchnorm,
    become,
    channel_vector,
    const,
    const_of,
    dims,
    emit,
    present,
    refuse,
)
from . import rounding
from .legalize_tensor import broadcast_to

MAX_MATERIALISED_BYTES = 16 * 1024 * 1024


def _neg_scale(graph: Graph, v: Value, name: str) -> Value:
    """-v: a negated constant, or Scale(v, -1) (negation is exact)."""
    if v.is_const:
        return const(graph, -np.asarray(v.const, np.float64), f"{name}/neg")
    return emit(graph, "Scale", [v], {"scale": -1.0}, f"{name}/neg", dims(v))


def arith(graph: Graph, node: Node, ctx: PassContext) -> bool:
    """Add / Mul with numpy broadcasting -> AddBias, BatchNormalization, Scale or Add/Mul."""
    a, b = node.input(0), node.input(1)
    assert a is not None and b is not None
    out = tuple(dims(node.output))
    for x, c in ((a, b), (b, a)):
        cv = const_of(c)
        if cv is None or x.is_const or tuple(dims(x)) != out:
            continue
        if node.op == "Mul" and cv.size == 1:
            become(node, "Scale", [x], {"scale": float(cv.reshape(-1)[0])})
            return True
        vec = channel_vector(cv, out[-1], len(out)) if out else None
        if vec is not None and node.op == "Add":
            become(node, "AddBias", [x, const(graph, vec, f"{node.name}/B")])
            return True
        if vec is not None and node.op == "Mul" and len(out) >= 2:
            affine_batchnorm(graph, node, x, vec, np.zeros_like(vec))
            return True
    ins = []
    for v in (a, b):
        full = broadcast_to(graph, v, out, f"{node.name}/{v.name}", MAX_MATERIALISED_BYTES)
        if full is None:
            return refuse(ctx, node, f"cannot broadcast {v.name} {tuple(dims(v))} to {out} "
                          "exactly (neither a per-channel vector, nor size-1 axes to "
                          "replicate, nor a constant under 16 MB)")
        ins.append(full)
    become(node, node.op, ins)
    return True


def sub(graph: Graph, node: Node, ctx: PassContext) -> bool:
    a, b = node.input(0), present(node.input(1))
    become(node, "Add", [a, _neg_scale(graph, b, node.name)], domain=CORE)
    return arith(graph, node, ctx)


def _is_power_of_two(c: np.ndarray) -> bool:
    c = np.abs(np.asarray(c, np.float64))
    if not np.all(np.isfinite(c)) or np.any(c == 0):
        return False
    mantissa, _ = np.frexp(c)
    return bool(np.all(mantissa == 0.5))


def div(graph: Graph, node: Node, ctx: PassContext) -> bool:
    a, b = node.input(0), node.input(1)
    cv = const_of(b)
    if cv is None:
        return refuse(ctx, node, "division by a non-constant tensor has no dialect form")
    exact = _is_power_of_two(cv)
    if not exact and rounding.strict(ctx):
        return refuse(ctx, node, rounding.refusal("reciprocal_multiply"))
    ctx.record("legalize", node.name,
               "x / c computed as x * (1/c)" + ("" if exact else
                                               ": may differ by one float32 rounding step"),
               exact=exact)
    if not exact:
        rounding.record(ctx, node, "reciprocal_multiply")
    recip = const(graph, 1.0 / np.asarray(cv, np.float64), f"{node.name}/reciprocal")
    become(node, "Mul", [a, recip], domain=CORE)
    return arith(graph, node, ctx)


def neg(graph: Graph, node: Node, ctx: PassContext) -> bool:
    become(node, "Scale", [node.input(0)], {"scale": -1.0})
    return True


def _bound(graph: Graph, value: float, rank: int, name: str) -> Value:
    return const(graph, np.full((1,) * rank, value), name)


def _min_of(graph: Graph, node: Node, a: Value, b: Value) -> None:
    """node := min(a, b) = -max(-a, -b) (negation is exact)."""
    out = dims(node.output)
    m = emit(graph, "Max", [_neg_scale(graph, a, f"{node.name}/a"),
                            _neg_scale(graph, b, f"{node.name}/b")], None,
             f"{node.name}/max", out)
    become(node, "Scale", [m], {"scale": -1.0})


def min_op(graph: Graph, node: Node, ctx: PassContext) -> bool:
    _min_of(graph, node, present(node.input(0)), present(node.input(1)))
    return True


def clip(graph: Graph, node: Node, ctx: PassContext) -> bool:
    x = present(node.input(0))
    low, high = node.attrs.get("min"), node.attrs.get("max")
    rank = len(dims(x))
    if low is not None and high is None:
        become(node, "Max", [x, _bound(graph, low, rank, f"{node.name}/min")])
        return True
    if low is not None:
        x = emit(graph, "Max", [x, _bound(graph, low, rank, f"{node.name}/min")], None,
                 f"{node.name}/low", dims(x))
    if high is None:
        become(node, "Reshape", [x, const(graph, np.array(dims(x)), f"{node.name}/shape",
                                          np.int64)])
        return True
    _min_of(graph, node, x, _bound(graph, high, rank, f"{node.name}/max_bound"))
    return True


def sum_op(graph: Graph, node: Node, ctx: PassContext) -> bool:
    out = tuple(dims(node.output))
    ins = [broadcast_to(graph, v, out, f"{node.name}/{v.name}", MAX_MATERIALISED_BYTES)
           for v in map(present, node.inputs)]
    if any(v is None for v in ins):
        return refuse(ctx, node, "an input cannot be broadcast exactly to the output shape")
    if len(ins) == 1:
        ins = [ins[0], const(graph, np.zeros(out), f"{node.name}/zero")]
    become(node, "Sum", ins)
    return True


def mean(graph: Graph, node: Node, ctx: PassContext) -> bool:
    n = len(node.inputs)
    exact = not n & (n - 1)  # 1/n is a power of two: the scale is bit-exact
    if not exact and rounding.strict(ctx):
        return refuse(ctx, node, rounding.refusal("mean_scale"))
    out = tuple(dims(node.output))
    ins = [broadcast_to(graph, v, out, f"{node.name}/{v.name}", MAX_MATERIALISED_BYTES)
           for v in map(present, node.inputs)]
    if any(v is None for v in ins):
        return refuse(ctx, node, "an input cannot be broadcast exactly to the output shape")
    total = emit(graph, "Sum", ins, None, f"{node.name}/sum", out) if n > 1 else ins[0]
    become(node, "Scale", [total], {"scale": 1.0 / n})
    if not exact:
        rounding.record(ctx, node, "mean_scale", f"n = {n}")
    return True


def _hard_sigmoid_into(graph: Graph, node: Node, x: Value, alpha: float, beta: float,
                       name: str, final: bool) -> Value | None:
    """max(0, min(1, alpha*x + beta)) as BN-affine, Relu, then -max(-r, -1)."""
    c = dims(x)[-1]
    z = emit(graph, "BatchNormalization",
             [x, const(graph, np.full(c, alpha), f"{name}/alpha"),
              const(graph, np.full(c, beta), f"{name}/beta"),
              const(graph, np.zeros(c), f"{name}/mean"), const(graph, np.ones(c), f"{name}/var")],
             {"epsilon": 0.0}, f"{name}/affine", dims(x))
    r = emit(graph, "Relu", [z], None, f"{name}/relu", dims(x))
    neg = emit(graph, "Scale", [r], {"scale": -1.0}, f"{name}/neg", dims(x))
    m = emit(graph, "Max", [neg, _bound(graph, -1.0, len(dims(x)), f"{name}/one")], None,
             f"{name}/max", dims(x))
    if final:
        become(node, "Scale", [m], {"scale": -1.0})
        return None
    return emit(graph, "Scale", [m], {"scale": -1.0}, f"{name}/hard_sigmoid", dims(x))


def hard_sigmoid(graph: Graph, node: Node, ctx: PassContext) -> bool:
    x = present(node.input(0))
    alpha, beta = float(attr(node, "alpha")), float(attr(node, "beta"))
    if len(dims(x)) >= 2:
        _hard_sigmoid_into(graph, node, x, alpha, beta, node.name, final=True)
        return True
    # Rank 0/1 has no channel axis for the BatchNormalization affine: compute on a (1, n)
    # view and reshape back (reshapes move no numbers).
    shape = tuple(dims(x))
    view = (1, int(np.prod(shape, dtype=np.int64)))
    wide = emit(graph, "Reshape", [x, const(graph, np.array(view), f"{node.name}/view_shape",
                                            np.int64)], None, f"{node.name}/view", view)
    y = _hard_sigmoid_into(graph, node, wide, alpha, beta, node.name, final=False)
    become(node, "Reshape", [y, const(graph, np.array(list(shape)), f"{node.name}/shape",
                                      np.int64)])
    return True


def hard_swish(graph: Graph, node: Node, ctx: PassContext) -> bool:
    x = present(node.input(0))
    if len(dims(x)) < 2:
        return refuse(ctx, node, "the exact subgraph needs a channel axis (rank >= 2)")
    gate = _hard_sigmoid_into(graph, node, x, float(np.float32(1.0 / 6.0)), 0.5, node.name,
                              final=False)
    become(node, "Mul", [x, gate])
    return True


def prelu(graph: Graph, node: Node, ctx: PassContext) -> bool:
    """PRelu with a constant slope that is not per channel: relu(x) + slope * min(x, 0).

    Exact: for x >= 0 the product is a signed zero and x + 0 = x; for x < 0 min(x, 0) = x
    (two exact negations) and 0 + slope*x is the source's single rounding.
    """
    x, out = present(node.input(0)), tuple(dims(node.output))
    if not present(node.input(1)).is_const:
        return refuse(ctx, node, "slope is not a constant")
    slope = broadcast_to(graph, present(node.input(1)), out, f"{node.name}/slope",
                         MAX_MATERIALISED_BYTES)
    if slope is None:
        return refuse(ctx, node, f"slope {tuple(dims(node.input(1)))} does not broadcast to {out}")
    pos = emit(graph, "Relu", [x], None, f"{node.name}/pos", out)
    flipped = emit(graph, "Relu", [_neg_scale(graph, x, f"{node.name}/x")], None,
                   f"{node.name}/flipped", out)
    neg = emit(graph, "Scale", [flipped], {"scale": -1.0}, f"{node.name}/neg", out)
    prod = emit(graph, "Mul", [neg, slope], None, f"{node.name}/slope_x", out)
    become(node, "Add", [pos, prod])
    return True


def squared_difference(graph: Graph, node: Node, ctx: PassContext) -> bool:
    """(a - b) * (a - b): a + (-b) is the same rounding as a - b, then one product."""
    out = tuple(dims(node.output))
    a, b = (broadcast_to(graph, v, out, f"{node.name}/{v.name}", MAX_MATERIALISED_BYTES)
            for v in map(present, node.inputs))
    if a is None or b is None:
        return refuse(ctx, node, "an input cannot be broadcast exactly to the output shape")
    diff = emit(graph, "Add", [a, _neg_scale(graph, b, node.name)], None, f"{node.name}/diff",
                out)
    become(node, "Mul", [diff, diff])
    return True


def square(graph: Graph, node: Node, ctx: PassContext) -> bool:
    """x * x: the product the source computes."""
    x = node.input(0)
    become(node, "Mul", [x, x])
    return True


# Constant exponents with a dialect form: x^1 = x and x^2 = x * x are bit-exact (x * x is the
# correctly rounded square: onnxruntime computes it for a one-valued exponent, TensorFlow's
# graph optimiser rewrites Pow(x, 2) as Square); x^3 = (x * x) * x rounds twice (within 2 ulps
# of the exact cube; onnxruntime and TensorFlow's optimiser compute these two products too).
POWERS = (1, 2, 3)


def pow_exponent(node: Node) -> int | None | str:
    """The one exponent of ``Pow`` when it is constant and in ``POWERS``; None when the exponent
    is not a constant (yet); otherwise why there is no dialect form."""
    values = const_of(node.input(1))
    if values is None:
        return None
    values = np.unique(np.asarray(values, np.float64))
    if values.size == 1 and values[0] in POWERS:  # 2.0000001 in float64 is not 2
        return int(values[0])
    shown = ", ".join(f"{v:.9g}" for v in values[:4]) + (", ..." if values.size > 4 else "")
    return (f"exponent {shown}: only a constant exponent 1, 2 or 3 (x, x*x, x*x*x) has a dialect "
            "form (0.5 would need a square root, negative ones a reciprocal)")


def power(graph: Graph, node: Node, ctx: PassContext) -> bool:
    """Pow with a constant exponent of 1, 2 or 3 (the same for every element) as products."""
    exponent = node.input(1)
    if exponent is None or not exponent.is_const:
        return refuse(ctx, node, "the exponent is computed at run time: no dialect op raises "
                      "to a tensor's power")
    k = pow_exponent(node)
    if isinstance(k, str):
        return refuse(ctx, node, k)
    if k == 3 and rounding.strict(ctx):
        return refuse(ctx, node, rounding.refusal("cube_multiply"))
    out = tuple(dims(node.output))
    x = broadcast_to(graph, present(node.input(0)), out, f"{node.name}/base",
                     MAX_MATERIALISED_BYTES)
    if x is None:
        return refuse(ctx, node, f"cannot broadcast the base {tuple(dims(node.input(0)))} to "
                      f"{out} exactly")
    if k == 1:
        become(node, "Reshape", [x, const(graph, np.array(out, np.int64), f"{node.name}/shape",
                                          np.int64)])
    elif k == 2:
        become(node, "Mul", [x, x])
    else:
        squared = emit(graph, "Mul", [x, x], None, f"{node.name}/square", out)
        become(node, "Mul", [squared, x])
        rounding.record(ctx, node, "cube_multiply")
    return True
