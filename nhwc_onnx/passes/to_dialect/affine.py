"""Per-channel affine maps y = x * a + b and folding them into the op that produced x.

Shared by BatchNorm folding and bias fusion. Producers that absorb an affine: core Conv and
ConvTranspose with constant weights (any weight_layout, grouped too), Gemm with a constant B
(transA 0, C absent or one value per column), MatMul with a constant 2-D B on a 2-D input
(it becomes Gemm when a bias appears), and an unfoldable core BatchNormalization (the two
affines merge). Arithmetic is float64; stored weights are float32.
"""
from __future__ import annotations

import numpy as np

from ...ir import CORE, Graph, Node, ScaledWeight, Value
from ...schemas.base import attr
from ..rewrite import channel_vector, const, const_of, present, sole_consumer


def channel_count(value: Value) -> int | None:
    return None if not value.shape else value.shape[-1]


def node_affine(node: Node, kinds: tuple[str, ...]) -> tuple[Value, np.ndarray, np.ndarray] | None:
    """(x, a, b) when ``node`` (one of ``kinds``) is y = x*a + b per channel (last axis)."""
    if node.domain != CORE or node.op not in kinds or not node.output.shape:
        return None  # unknown shape or a scalar: no channel axis
    out = node.output.shape
    c, rank = out[-1], len(out)
    if node.op == "BatchNormalization":
        x = present(node.input(0))
        params = [const_of(v) for v in node.inputs[1:5]]
        axis = int(attr(node, "axis"))
        if any(p is None for p in params) or x.shape is None or axis not in (-1, rank - 1):
            return None
        scale, bias, mean, var = (np.broadcast_to(np.asarray(p, np.float64).reshape(-1), (c,))
                                  for p in params)
        a = scale / np.sqrt(var + float(attr(node, "epsilon")))
        return x, a, bias - mean * a
    for i in (0, 1):
        x, k = present(node.input(i)), node.input(1 - i)
        if node.op == "Sub" and i == 1:
            break  # c - x is not x*a + b with a = 1
        vec = channel_vector(const_of(k), c, rank)
        if vec is None or x.is_const or x.shape is None or tuple(x.shape) != tuple(out):
            continue
        if node.op == "Mul":
            return x, vec, np.zeros(c)
        return x, np.ones(c), (vec if node.op == "Add" else -vec)
    return None


def affine_candidates(graph: Graph, kinds: tuple[str, ...]):
    """For each core node of ``kinds`` computing x*a + b per channel, in graph order:
    (node, x, a, b, the weight product it may fold into or None). The graph may change
    between two of them (a fold removes the node)."""
    graph.toposort()
    for node in graph.nodes:
        if node.graph is None or node.domain != CORE:
            continue
        affine = node_affine(node, kinds)
        if affine is not None:
            x, a, b = affine
            yield node, x, a, b, foldable(graph, x, node)


def _transpose_out_channel(w: np.ndarray, layout: str, group: int) -> np.ndarray:
    """Output channel of every element of a ConvTranspose weight (IOHW or HWOI)."""
    if layout == "HWOI":
        m_per_group, c = w.shape[2], w.shape[3]
        j = np.arange(m_per_group)[None, None, :, None]
        ci = np.arange(c)[None, None, None, :]
    else:
        c, m_per_group = w.shape[0], w.shape[1]
        j = np.arange(m_per_group)[None, :, None, None]
        ci = np.arange(c)[:, None, None, None]
    return np.broadcast_to((ci // (c // group)) * m_per_group + j, w.shape)


def foldable(graph: Graph, x: Value, consumer: Node) -> Node | None:
    """The producer of ``x`` when it can absorb an affine applied by ``consumer``."""
    prod = x.producer()
    if prod is None or prod.domain != CORE or sole_consumer(graph, x) is not consumer:
        return None
    if prod.op in ("Conv", "ConvTranspose"):
        bias = prod.input(2)
        ok = const_of(prod.input(1)) is not None and (bias is None or bias.is_const)
        return prod if ok and prod.attrs.get("data_format") == "NHWC" else None
    if prod.op == "Gemm":
        c = prod.input(2)
        n = channel_count(x)
        ok = (const_of(prod.input(1)) is not None and not attr(prod, "transA")
              and (c is None or channel_vector(const_of(c), n, 2) is not None))
        return prod if ok else None
    if prod.op == "MatMul":
        w = const_of(prod.input(1))
        ok = w is not None and w.ndim == 2 and present(prod.input(0)).rank == 2
        return prod if ok else None
    if prod.op == "BatchNormalization":
        return prod if node_affine(prod, ("BatchNormalization",)) is not None else None
    return None


def fold(graph: Graph, prod: Node, consumer: Node, a: np.ndarray, b: np.ndarray) -> None:
    """Absorb y = x*a + b (x = prod's output, y = consumer's output) into ``prod``."""
    name = prod.name
    if prod.op == "BatchNormalization":
        affine = node_affine(prod, ("BatchNormalization",))
        assert affine is not None  # foldable() checked it
        _, a0, b0 = affine
        c = a0.shape[0]
        prod.set_input(1, const(graph, a0 * a, f"{name}/scale"))
        prod.set_input(2, const(graph, b0 * a + b, f"{name}/B"))
        prod.set_input(3, const(graph, np.zeros(c), f"{name}/mean"))
        prod.set_input(4, const(graph, np.ones(c), f"{name}/var"))
        prod.attrs["epsilon"] = 0.0
    elif prod.op in ("Conv", "ConvTranspose"):
        scale = not np.all(a == 1)  # a bias add (fuse_bias) leaves the weights untouched
        w = const_of(prod.input(1))
        assert w is not None  # foldable() checked the weights are constant
        group = int(attr(prod, "group"))
        if prod.op == "Conv":
            layout = attr(prod, "weight_layout")
            grid = a[:, None, None, None] if layout == "OIHW" else a[None, None, None, :]
        else:
            layout = attr(prod, "weight_layout")
            grid = a[_transpose_out_channel(w, layout, group)]
        old_b = const_of(prod.input(2))
        bias = (np.zeros(a.shape[0]) if old_b is None
                else np.asarray(old_b, np.float64).reshape(-1))
        if scale:
            prod.set_input(1, const(graph, folded_weight(w, grid), f"{name}/W"))
        _set_bias(graph, prod, bias * a + b)
    else:  # Gemm / MatMul: output columns are the channels
        w = const_of(prod.input(1))
        trans_b = prod.op == "Gemm" and int(attr(prod, "transB"))
        scale = not np.all(a == 1)
        if scale:
            w = folded_weight(w, a[:, None] if trans_b else a[None, :])
        c_in = prod.input(2) if prod.op == "Gemm" else None
        n = a.shape[0]
        old = np.zeros(n) if c_in is None else channel_vector(const_of(c_in), n, 2)
        beta = float(attr(prod, "beta")) if prod.op == "Gemm" else 1.0
        assert old is not None  # foldable() checked C is one value per column
        bias = old * beta * a + b
        if scale:
            prod.set_input(1, const(graph, w, f"{name}/W"))
        if prod.op == "MatMul" and np.any(bias):
            prod.op = "Gemm"
            prod.attrs = {}
        if prod.op == "Gemm":
            prod.attrs["beta"] = 1.0
            _set_bias(graph, prod, bias)
    _take_over_output(graph, prod, consumer)


def folded_weight(w, grid):
    """``scaled_weight(w, grid)``, deferred when ``w`` is a float32 weight the factors do not
    reshape: an ``ir.ScaledWeight`` (same bits) that the writer computes block by block, so
    folding costs no fresh memory of the weight's size."""
    if isinstance(w, ScaledWeight) or (
            isinstance(w, np.ndarray) and w.dtype == np.float32 and w.ndim >= 1
            and np.broadcast_shapes(w.shape, np.shape(grid)) == w.shape):
        return ScaledWeight.of(w, grid)
    return scaled_weight(w, grid)


def scaled_weight(w: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """``w * grid`` computed in float64 and rounded once to float32: the same bits as
    ``np.multiply(w, grid, dtype=np.float64).astype(np.float32)``, element for element, with no
    float64 copy of the weight (fresh memory is the cost that dominates folding a weight)."""
    grid32 = np.asarray(grid).astype(np.float32)
    if w.dtype == np.float32 and np.array_equal(grid32, grid):
        # Both factors are float32 values: their float64 product is exact (24 + 24 bits of
        # significand fit in 53), so rounding it to float32 is exactly float32 multiplication.
        return np.multiply(w, grid32, dtype=np.float32)
    out = np.empty(np.broadcast_shapes(np.shape(w), np.shape(grid)), np.float32)
    # numpy runs the float64 loop over a few thousand elements at a time in its own small
    # buffers and rounds each result into ``out``, faster than a loop over float64 chunks: the
    # buffers stay in cache (docs/benchmarks.md, "Measured choices in the code").
    np.multiply(w, grid, out=out, dtype=np.float64, casting="same_kind")
    return out


def _set_bias(graph: Graph, prod: Node, bias: np.ndarray) -> None:
    value = const(graph, bias, f"{prod.name}/B")
    if len(prod.inputs) > 2:
        prod.set_input(2, value)
    else:
        prod.set_inputs([*prod.inputs, value])


def _take_over_output(graph: Graph, prod: Node, consumer: Node) -> None:
    """``prod`` now computes ``consumer``'s output tensor (name, uses, graph-output role)."""
    y = consumer.output
    graph.remove_node(consumer)
    graph.move_output(y, prod)
