"""Activation idioms that are one dialect op, recognised on core (or already selected) ops so
every frontend shares them. Op selection calls these while it walks the graph; the inner nodes
of a recognised idiom are left unused and dropped.

- ``Where(x > 0, x | Elu(x), alpha * Elu(x) | alpha * (Exp(x) - 1))`` -> ``Elu(x, alpha)``
  (Keras 3 ``ELU(alpha != 1)`` and ``activations.elu``; hand-written ELUs). For x > 0 both sides
  are x; otherwise the source computes alpha * (exp(x) - 1) as Elu does.
- ``Where(x > 0, x, alpha * x)`` -> ``LeakyRelu(x, alpha)`` (same products, any alpha).
- ``Min(Max(x, 0), 6)`` / ``Max(Min(x, 6), 0)`` (``tf.clip_by_value``) -> ``Relu6``.
- ``Relu(x) + s * Relu(-x)`` with a constant s (Keras ``PReLU``: s = -alpha) -> ``PRelu(x,
  -s)`` when s is one value per channel: for x < 0 the source computes (-alpha) * (-x), which
  is alpha * x bit for bit, and adds 0; for x >= 0 it adds x and a zero.
"""
from __future__ import annotations

import numpy as np

from ...ir import Graph, Node, Value
from ..base import PassContext
from ..rewrite import become, channel_vector, const, const_of, dims, present


def _producer(v: Value | None, *ops: str) -> Node | None:
    node = v.producer() if v is not None else None
    return node if node is not None and node.op in ops else None


def _scalar(v: Value | None) -> float | None:
    """The one value of a constant whose elements are all equal."""
    c = const_of(v)
    if c is None or c.size == 0 or not np.all(c == c.reshape(-1)[0]):
        return None
    return float(c.reshape(-1)[0])


def _positive_test(cond: Value | None) -> Value | None:
    """x for a condition x > 0."""
    node = _producer(cond, "Greater")
    if node is None or _scalar(node.input(1)) != 0.0:
        return None
    return node.input(0)


def _times_constant(v: Value | None) -> tuple[float, Value | None] | None:
    """(a, y) for v = a * y: a selected Scale or a Mul by a one-valued constant."""
    node = _producer(v, "Scale", "Mul")
    if node is None:
        return None
    if node.op == "Scale":
        return float(node.attrs.get("scale", 1.0)), node.input(0)
    for i in (0, 1):
        a = _scalar(node.input(i))
        if a is not None and const_of(node.input(1 - i)) is None:
            return a, node.input(1 - i)
    return None


def _is_unit_elu(v: Value | None, x: Value) -> bool:
    node = _producer(v, "Elu")
    return node is not None and node.input(0) is x and float(node.attrs.get("alpha", 1.0)) == 1.0


def _is_exp_minus_one(v: Value | None, x: Value) -> bool:
    node = _producer(v, "Sub", "Add")
    if node is None:
        return False
    exp = _producer(node.input(0), "Exp")
    one = _scalar(node.input(1))
    return (exp is not None and exp.input(0) is x
            and one == (1.0 if node.op == "Sub" else -1.0))


def where(graph: Graph, node: Node, ctx: PassContext) -> bool:
    """Where(x > 0, ...) forms of ELU and leaky ReLU; any other Where is left for legalisation."""
    cond, if_true, if_false = node.inputs
    x = _positive_test(cond)
    if x is None or x.shape is None or tuple(x.shape) != tuple(dims(node.output)):
        return False
    if not (if_true is x or _is_unit_elu(if_true, x)):
        return False
    scaled = _times_constant(if_false)
    if scaled is None:
        return False
    alpha, inner = scaled
    if inner is x and if_true is x:
        become(node, "LeakyRelu", [x], {"alpha": alpha})
    elif _is_unit_elu(inner, x) or _is_exp_minus_one(inner, x):
        become(node, "Elu", [x], {"alpha": alpha})
    else:
        return False
    ctx.record("select", node.name, f"where(x > 0, x, {alpha} * ...) -> {node.op}")
    return True


def clipped_relu(node: Node) -> Value | None:
    """x for Min(Max(x, 0), 6) / Max(Min(x, 6), 0) (``node`` the outer one), else None."""
    outer_bound, inner_op, inner_bound = ((6.0, "Max", 0.0) if node.op == "Min"
                                          else (0.0, "Min", 6.0))
    for i in (0, 1):
        if _scalar(node.input(1 - i)) != outer_bound:
            continue
        inner = _producer(node.input(i), inner_op)
        if inner is None or len(inner.inputs) != 2:
            continue
        for j in (0, 1):
            x = present(inner.input(j))
            if (_scalar(inner.input(1 - j)) == inner_bound and not x.is_const
                    and x.shape is not None and tuple(x.shape) == tuple(dims(node.output))):
                return x
    return None


def prelu_sum(graph: Graph, node: Node, ctx: PassContext) -> bool:
    """Relu(x) + s * Relu(-x) with s one constant per channel -> PRelu(x, -s)."""
    if node.op != "Add" or len(node.inputs) != 2:
        return False
    for i in (0, 1):
        pos = _producer(node.input(i), "Relu")
        scaled = _slope_times(node.input(1 - i))
        if pos is None or scaled is None:
            continue
        x, (slope, neg_relu) = present(pos.input(0)), scaled
        relu = _producer(neg_relu, "Relu")
        negation = _producer(relu.input(0) if relu is not None else None, "Neg")
        if negation is None or negation.input(0) is not x:
            continue
        if x.shape is None or tuple(x.shape) != tuple(dims(node.output)):
            continue
        vec = channel_vector(slope, x.shape[-1], x.rank)
        if vec is None:
            continue  # a slope per position (Keras PReLU without shared axes) stays as it is
        become(node, "PRelu", [x, const(graph, -np.asarray(vec, np.float64),
                                        f"{node.name}/slope")])
        ctx.record("select", node.name, "relu(x) + s * relu(-x) -> PRelu")
        return True
    return False


def _slope_times(v: Value | None) -> tuple[np.ndarray, Value | None] | None:
    """(s, y) for v = s * y with s constant (a selected Scale or a Mul)."""
    node = _producer(v, "Scale", "Mul", "BatchNormalization")
    if node is None:
        return None
    if node.op == "Scale":
        return np.asarray(node.attrs.get("scale", 1.0), np.float64), node.input(0)
    if node.op == "BatchNormalization":  # a per-channel multiply folding left as a plain scale
        scale, bias, mean, var = (const_of(node.input(i)) for i in range(1, 5))
        plain = (float(node.attrs.get("epsilon", 1e-5)) == 0.0 and bias is not None
                 and mean is not None and var is not None
                 and not bias.any() and not mean.any() and np.all(var == 1))
        return (scale, node.input(0)) if plain and scale is not None else None
    for j in (0, 1):
        c = const_of(node.input(j))
        if c is not None and const_of(node.input(1 - j)) is None:
            return c, node.input(1 - j)
    return None
