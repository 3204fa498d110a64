"""One dialect model with a symbolic batch, from two conversions at two probe batch sizes.

The passes prove each conversion exact for the shapes they were given. Converted with the
batch at ``PROBES[0]`` and at ``PROBES[1]``, a model whose ops compute every sample alone
gives two dialect graphs that are the same node for node (ops, attributes, constants) and
differ only in the size of axis 0 of the values computed from the batch, and in the Reshape
shape constants that spell that size out. ``generalize`` checks exactly that, writes the batch
as a name on the first graph (a Reshape's batch entry becomes 0: "copy axis 0", as Reshape's
special_zero), and infers every value's shape with the batch symbolic, under the per-sample rules of
``schemas.batch``. Since each op of the result computes per sample and is the op both exact
conversions chose, the result is exact at every batch size.

Anything else is a node that mixes the batch with other axes (a Reshape folding the batch
into H, a batch-axis Concat, a constant of the batch's size ...): a refusal naming it, whose
remedy is a fixed batch (``--batch N``).
"""
from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from ..errors import NodeProblem
from ..files.reads import file_origin
from ..ir import DIALECT, Model, Node, Value
from ..passes.base import Decision
from ..schemas.symbolic_batch import PROBES, describe_difference, mixes_samples

REMEDY = "convert with --batch N for a fixed batch"


class Generalized:
    """What ``generalize`` found: the batch's name, the graph inputs and outputs that carry
    it, and the nodes that mix it with other axes (empty: ``first`` now has the symbolic
    batch)."""

    def __init__(self, symbol: str):
        self.symbol = symbol
        self.inputs: list[str] = []
        self.outputs: list[str] = []
        self.problems: list[NodeProblem] = []

    def record(self) -> dict[str, Any]:
        """The report's and the metadata's ``batch`` entry."""
        return {"dim_param": self.symbol, "inputs": self.inputs, "outputs": self.outputs}


def generalize(first: Model, second: Model, symbols: dict[str, str]) -> Generalized:
    """Write the symbolic batch into ``first`` (converted at PROBES[0]) by comparing it with
    ``second`` (PROBES[1]). ``symbols``: graph input -> the name its source gives the batch
    (the first batch input's name is the model's). ``first`` is changed only when no problem
    is found."""
    g1, g2 = first.graph, second.graph
    for graph, probe in zip((g1, g2), PROBES):
        _products_per_pixel(graph, probe)
    batch_inputs = _batch_inputs(g1.inputs, g2.inputs)
    symbol = next((symbols[n] for n in batch_inputs if n in symbols), "N")
    result = Generalized(symbol)
    result.inputs = batch_inputs
    result.problems += _structure_problems(first, second)
    if result.problems:
        return result
    reshapes, biases, constant_problems = _compare_constants(g1, g2)
    result.problems += constant_problems
    if result.problems:
        return result
    for value in reshapes:
        shape = np.array(value.const, dtype=np.int64)
        shape[0] = 0  # Reshape's special_zero: copy the input's axis 0, the batch
        value.set_const(shape)
    for value in biases:
        for node in value.consumers():
            _add_bias_per_sample(g1, node)
    for value in g1.inputs:
        if value.name in batch_inputs:
            assert value.shape is not None  # _batch_inputs names only inputs with a shape
            value.shape = (symbol, *value.shape[1:])
    result.problems += _symbolic_shapes(first)
    result.outputs = [v.name for v in g1.outputs if v.shape and v.shape[0] == symbol]
    return result


def _products_per_pixel(graph, probe: int) -> None:
    """A product by a constant matrix written with the batch folded into its rows and split
    back (TensorFlow's Tensordot of a Dense on a rank >= 3 tensor: Reshape to (N*P, C) ->
    Dense -> [AddBias] -> Reshape to (N, ..., M)) becomes the per-sample form it is: a 1x1
    Conv of the map (a rank-4 input as it is, another one seen as (N, P, 1, C)); the Reshapes
    then copy the batch. Same values, same products, in both probe conversions alike."""
    for fold in list(graph.nodes):
        x = fold.inputs[0] if fold.op == "Reshape" and fold.domain == DIALECT else None
        if x is None or x.is_const or not x.shape or len(x.shape) < 3 or x.shape[0] != probe:
            continue
        rows, spatial, c = fold.outputs[0], tuple(x.shape[1:-1]), x.shape[-1]
        if rows is None:
            continue
        dense = _sole_reader(rows)
        weight_in = dense.inputs[1] if dense is not None and len(dense.inputs) > 1 else None
        if tuple(rows.shape or ()) != (probe * math.prod(spatial), c) or dense is None or \
                dense.op != "Dense" or id(dense.inputs[0]) != id(rows) or weight_in is None or \
                weight_in.const is None or weight_in.const.shape[1:] != (c,):
            continue
        m = weight_in.const.shape[0]
        product = dense.outputs[0]
        if product is None:
            continue
        back = _sole_reader(product)
        bias = back if back is not None and back.op == "AddBias" else None
        if bias is not None:
            back = _sole_reader(bias.outputs[0])
        if back is None or back.op != "Reshape" or \
                tuple(back.outputs[0].shape or ()) != (probe, *spatial, m):
            continue
        grid = spatial if len(spatial) == 2 else (math.prod(spatial), 1)
        fold.set_inputs([x, graph.constant(np.array([probe, *grid, c], np.int64),
                                           f"{fold.name}/per_pixel")])
        weight = np.asarray(weight_in.const).reshape(m, 1, 1, c)
        dense.op = "Conv"
        dense.set_inputs([rows, graph.constant(weight, f"{dense.name}/W"), *dense.inputs[2:]])
        dense.attrs = {"kernel_shape": [1, 1], "strides": [1, 1], "dilations": [1, 1],
                       "pads": "VALID", "group": 1}
        rows.shape = (probe, *grid, c)
        product.shape = (probe, *grid, m)
        biased = bias.outputs[0] if bias is not None else None
        if biased is not None:
            biased.shape = product.shape


def _sole_reader(value: Value) -> Node | None:
    readers = value.consumers()
    if len(readers) != 1 or readers[0].graph is None or value in readers[0].graph.outputs:
        return None
    return readers[0]


def _batch_inputs(inputs1: list[Value], inputs2: list[Value]) -> list[str]:
    """Graph inputs whose axis 0 is the probe (the frontends put it only there)."""
    return [a.name for a, b in zip(inputs1, inputs2)
            if a.shape and b.shape and (a.shape[0], b.shape[0]) == PROBES]


def _structure_problems(first: Model, second: Model) -> list[NodeProblem]:
    """Nodes, graph inputs/outputs and layout permutations that differ between the two."""
    g1, g2 = first.graph, second.graph
    problems = []

    def differ(node: str, op: str, what: str) -> None:
        problems.append(NodeProblem(node, op, f"converts differently at two batch sizes "
                                    f"({what}); {REMEDY}", "batch"))

    if [v.name for v in g1.inputs] != [v.name for v in g2.inputs] or \
            [v.name for v in g1.outputs] != [v.name for v in g2.outputs]:
        differ("", "graph", "its inputs or outputs differ")
        return problems
    for a, b in zip(g1.inputs, g2.inputs):
        if a.shape is None or b.shape is None or len(a.shape) != len(b.shape) or \
                tuple(a.shape[1:]) != tuple(b.shape[1:]):
            differ(a.name, "graph input", f"shape {describe_difference(a.shape, b.shape)}")
    if first.io_permutations != second.io_permutations:
        differ("", "graph", "the layouts of its inputs or outputs differ")
    nodes2 = {n.name: n for n in g2.nodes}
    if set(nodes2) != {n.name for n in g1.nodes}:
        only = sorted({n.name for n in g1.nodes} ^ set(nodes2))
        differ(only[0], "", f"{len(only)} node(s) exist at one size only: "
               f"{', '.join(only[:5])}")
        return problems
    for node in g1.nodes:
        other = nodes2[node.name]
        why = _node_difference(node, other)
        if not why:
            continue
        carried = {i for i, v in enumerate(node.inputs)
                   if v is not None and v.shape and v.shape[0] == PROBES[0]}
        reason = mixes_samples(node, carried) if carried else None
        if reason:  # the difference is the batch, at an axis only a fixed batch allows
            problems.append(NodeProblem(node.name, node.op, f"{reason}; {REMEDY}", "batch"))
        else:
            differ(node.name, node.op, why)
    return problems


def _node_difference(a: Node, b: Node) -> str:
    if (a.op, a.domain) != (b.op, b.domain):
        return f"{a.op} against {b.op}"
    if [_name(v) for v in a.inputs] != [_name(v) for v in b.inputs] or \
            [v.name for v in a.outputs] != [v.name for v in b.outputs]:
        return "its inputs or outputs differ"
    if set(a.attrs) != set(b.attrs):
        return "its attributes differ"
    for key in sorted(a.attrs):
        if not _same(a.attrs[key], b.attrs[key]):
            return f"attribute '{key}' is {a.attrs[key]!r} against {b.attrs[key]!r}"
    return ""


def _name(value: Value | None) -> str | None:
    return None if value is None else value.name


def _same(x: Any, y: Any) -> bool:
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return _same_array(x, y)
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True  # NaN attribute values
    return type(x) is type(y) and x == y


def _same_array(x, y) -> bool:
    """Same shape, type and values; two views of one span of a mapped source file are
    equal without reading it."""
    if tuple(x.shape) != tuple(y.shape) or str(x.dtype) != str(y.dtype):
        return False
    base_x, base_y = getattr(x, "base", None), getattr(y, "base", None)
    factors_x, factors_y = getattr(x, "factors", None), getattr(y, "factors", None)
    if factors_x is not None or factors_y is not None:  # ir.ScaledWeight: compare its parts
        return factors_x is not None and factors_y is not None and \
            _same_array(base_x, base_y) and len(factors_x) == len(factors_y) and \
            all(_same_array(f, g) for f, g in zip(factors_x, factors_y))
    if isinstance(x, np.ndarray) and isinstance(y, np.ndarray):
        span_x, span_y = file_origin(x), file_origin(y)
        if span_x is not None and span_y is not None and x.strides == y.strides and \
                (span_x.path, span_x.offset, span_x.length) == \
                (span_y.path, span_y.offset, span_y.length):
            return True
    return bool(np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True))


def _compare_constants(g1, g2) -> tuple[list[Value], list[Value], list[NodeProblem]]:
    """Constants equal at both sizes, except Reshape shapes whose axis 0 is the batch (to
    become 0) and one number added to every sample of a rank-1 value (an AddBias along its
    only axis, the batch); any other difference is a problem of its readers."""
    constants2 = {v.name: v for v in g2.constants()}
    reshapes, biases, problems = [], [], []
    for value in g1.constants():
        other = constants2.get(value.name)
        if other is not None and _same_array(value.const, other.const):
            continue
        readers = value.consumers()
        if other is not None and _is_batch_reshape_shape(value, other):
            reshapes.append(value)
            continue
        if other is not None and _is_bias_of_samples(value, other):
            biases.append(value)
            continue
        why = _constant_problem(value, other)
        for node in readers or [None]:
            problems.append(NodeProblem(node.name if node else value.name,
                                        node.op if node else "constant", why, "batch"))
    return reshapes, biases, problems


def _is_bias_of_samples(value: Value, other: Value) -> bool:
    """One number repeated along the batch, as the bias of AddBias on rank-1 values (x + b
    for x of shape (N,): the channel axis AddBias adds along is the batch)."""
    a, b = np.asarray(value.const), np.asarray(other.const)
    if (a.shape, b.shape) != ((PROBES[0],), (PROBES[1],)) or a.dtype.kind != "f":
        return False
    if not (np.all(a == a[0]) and np.all(b == b[0]) and a[0] == b[0]):
        return False
    return all(node.op == "AddBias" and index == 1 and node.inputs[0] is not None
               and tuple(node.inputs[0].shape or ()) == (PROBES[0],)
               for node, index in value.uses())


def _add_bias_per_sample(graph, node: Node) -> None:
    """x (N,) + b as Reshape to (N, 1), AddBias of the one number, Reshape back to (N,):
    the same sums, with constants that do not depend on the batch."""
    x, bias = node.inputs[0], node.inputs[1]
    assert bias is not None  # node is a reader of the bias constant, at input 1
    column = graph.make_node(
        "Reshape", [x, graph.constant(np.array([0, 1], np.int64), f"{node.name}/column_shape")],
        name=f"{node.name}/column", domain=DIALECT)
    node.set_input(0, column.outputs[0])
    node.set_input(1, graph.constant(np.asarray(bias.const)[:1].copy(), f"{node.name}/bias"))
    summed = Value(graph.unique_name(f"{node.name}/column_sum"), "float32")
    out = graph.move_output(summed, node, 0)
    graph.make_node("Reshape", [summed, graph.constant(np.array([0], np.int64),
                                                       f"{node.name}/back_shape")],
                    name=f"{node.name}/back", outputs=[out], domain=DIALECT)
    column.outputs[0].dtype = "float32"


def _constant_problem(value: Value, other: Value | None) -> str:
    assert value.const is not None  # a graph constant (Graph.constants): its array is set
    first = tuple(value.const.shape)
    second = tuple(other.const.shape) if other is not None and other.const is not None else None
    if second is not None and len(first) == len(second) and first[1:] == second[1:] and \
            (first[0], second[0]) == PROBES:
        # Add, Mul, Sum ... do not broadcast: a constant that is not per channel is written
        # out for every sample, and no constant can have a symbolic size.
        return (f"its constant input '{value.name}' would need the batch's size (shape "
                f"(N, {', '.join(map(str, first[1:]))}): the dialect's elementwise ops do not "
                f"broadcast, and a constant cannot have a symbolic batch); {REMEDY}")
    if second is None:
        shape = f"shape {first} at one batch size, absent at another"
    elif first == second:
        shape = f"shape {first}, other values at another batch size"
    else:
        shape = f"shape {describe_difference(first, second)}"
    return (f"its constant input '{value.name}' depends on the batch size ({shape}): it mixes "
            f"the batch with other axes; {REMEDY}")


def _is_batch_reshape_shape(value: Value, other: Value) -> bool:
    """A Reshape target that spells the batch out at index 0 (and nothing else differs),
    read only as the shape of Reshapes whose data carries the batch at axis 0."""
    a, b = np.asarray(value.const), np.asarray(other.const)
    if a.ndim != 1 or a.shape != b.shape or not a.size or a.dtype.kind != "i":
        return False
    if (int(a[0]), int(b[0])) != PROBES or not np.array_equal(a[1:], b[1:]):
        return False
    for node, index in value.uses():
        data = node.inputs[0]
        if node.op != "Reshape" or index != 1 or data is None or not data.shape or \
                data.shape[0] != PROBES[0]:
            return False
    return True


def _symbolic_shapes(model: Model) -> list[NodeProblem]:
    """Infer every value's shape with the batch symbolic (the dialect's own inference, per
    sample); set them; nodes that mix samples are the problems."""
    from ..schemas import infer_shapes, validate

    problems = [NodeProblem(issue.node or "", issue.op or "graph",
                            f"{issue.message}; {REMEDY}", "batch")
                for issue in validate(model) if issue.rule in ("batch", "symbolic-dim")]
    if problems:
        return problems
    shapes = infer_shapes(model)
    for value in model.graph.values():
        if not value.is_const and value.name in shapes:
            value.shape = tuple(shapes[value.name])
    return []


# -- the report: decisions and warnings of the first conversion, with the batch named -----------


def generalize_decisions(first: list[Decision], second: list[Decision],
                         symbol: str) -> list[Decision]:
    """``first``'s decisions with each number that is the probe size in the first and the
    other probe in the second written as ``symbol``."""
    if len(first) != len(second):
        return list(first)
    return [Decision(a.kind, a.node, generalize_text(a.detail, b.detail, symbol),
                     _generalize_data(a.data, b.data, symbol))
            for a, b in zip(first, second)]


def generalize_text(a: str, b: str, symbol: str) -> str:
    parts_a, parts_b = re.split(r"(\d+)", a), re.split(r"(\d+)", b)
    if len(parts_a) != len(parts_b):
        return a
    out = []
    for x, y in zip(parts_a, parts_b):
        if x == y:
            out.append(x)
        elif (x, y) == tuple(str(p) for p in PROBES):
            out.append(symbol)
        else:
            return a
    return "".join(out)


def _generalize_data(a: Any, b: Any, symbol: str) -> Any:
    if isinstance(a, dict) and isinstance(b, dict) and set(a) == set(b):
        return {k: _generalize_data(a[k], b[k], symbol) for k in a}
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        return type(a)(_generalize_data(x, y, symbol) for x, y in zip(a, b))
    if isinstance(a, str) and isinstance(b, str):
        return generalize_text(a, b, symbol)
    if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool) and \
            (a, b) == PROBES:
        return symbol
    return a
