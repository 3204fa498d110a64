"""Structural checks on an ONNX graph before conversion: order, definitions, names."""
from __future__ import annotations

import heapq

import onnx

from ...errors import InvalidModelError, ModelLoadError

MAX_OPSET = 1 << 16  # ONNX is at opset 2x; anything near 2^31 is a corrupt varint


def opset_versions(model: onnx.ModelProto) -> dict[str, int]:
    """Opset version per domain; "ai.onnx" and "" are the same standard domain."""
    out: dict[str, int] = {}
    for imp in model.opset_import:
        domain = "" if imp.domain in ("", "ai.onnx") else imp.domain
        if not 0 <= imp.version < MAX_OPSET:
            raise InvalidModelError(
                f"opset import of domain '{imp.domain or 'ai.onnx'}' has version {imp.version}, "
                "which is not an opset version (corrupt file?)")
        out[domain] = int(imp.version)
    if "" not in out:
        out[""] = 1 if model.ir_version < 3 else 0
    return out


def topological_order(g: onnx.GraphProto) -> list[onnx.NodeProto]:
    """Nodes with producers first (ties keep file order); a cycle is an InvalidModelError."""
    nodes = list(g.node)
    producer: dict[str, int] = {}
    for idx, node in enumerate(nodes):
        for out in node.output:
            if not out:
                continue
            if out in producer:
                other = nodes[producer[out]]
                raise InvalidModelError(
                    f"tensor '{out}' is produced twice (by node '{other.name or other.op_type}' "
                    f"and node '{node.name or node.op_type}')"
                )
            producer[out] = idx
    users: dict[int, list[int]] = {i: [] for i in range(len(nodes))}
    indeg = [0] * len(nodes)
    for idx, node in enumerate(nodes):
        deps = {producer[i] for i in node.input if i in producer}
        indeg[idx] = len(deps)
        for d in deps:
            users[d].append(idx)
    heap = [i for i in range(len(nodes)) if indeg[i] == 0]
    heapq.heapify(heap)
    order: list[int] = []
    while heap:
        i = heapq.heappop(heap)
        order.append(i)
        for u in users[i]:
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(heap, u)
    if len(order) != len(nodes):
        stuck = [nodes[i].name or nodes[i].op_type for i in range(len(nodes)) if indeg[i] > 0]
        shown = ", ".join(f"'{s}'" for s in stuck[:10])
        raise InvalidModelError(f"the ONNX graph has a cycle through node(s) {shown}")
    return [nodes[i] for i in order]


def check_structure(g: onnx.GraphProto, order: list[onnx.NodeProto]) -> None:
    """Every input defined, no tensor defined twice, every graph output produced."""
    defined: set[str] = set()
    inits = {t.name for t in g.initializer}
    graph_inputs = [i.name for i in g.input]
    if len(set(graph_inputs)) != len(graph_inputs):
        raise InvalidModelError(f"the graph lists input(s) {_repeated(graph_inputs)} twice")
    defined.update(graph_inputs)
    defined.update(inits)
    for node in order:
        for name in node.input:
            if name and name not in defined:
                label = node.name or node.op_type
                raise InvalidModelError(
                    f"node '{label}' ({node.op_type}) reads tensor '{name}', which no node, "
                    "graph input or initializer defines"
                )
        for out in node.output:
            if out and (out in graph_inputs or out in inits):
                raise InvalidModelError(
                    f"tensor '{out}' is both a graph input/initializer and a node output"
                )
            if out:
                defined.add(out)
    outputs = [o.name for o in g.output]
    if len(set(outputs)) != len(outputs):
        raise InvalidModelError(f"the graph lists output(s) {_repeated(outputs)} twice")
    for name in outputs:
        if name not in defined:
            raise InvalidModelError(f"graph output '{name}' is not produced by any node")


def _repeated(names: list[str]) -> str:
    return ", ".join(f"'{n}'" for n in sorted({n for n in names if names.count(n) > 1}))


def node_names(order: list[onnx.NodeProto]) -> dict[int, str]:
    """A unique, readable name per node: its own, or op type + first output when unnamed."""
    taken: set[str] = set()
    out: dict[int, str] = {}
    for node in order:
        base = node.name or f"{node.op_type}_{next((o for o in node.output if o), 'out')}"
        name = base
        k = 1
        while name in taken:
            name = f"{base}_{k}"
            k += 1
        taken.add(name)
        out[id(node)] = name
    return out


def check_arity(nodes: list[onnx.NodeProto], names: dict[int, str], opset: int) -> None:
    """Input/output counts within the ONNX schema's bounds; every offender in one error.

    A Conv with two outputs or a Concat with none is a broken file, not something to convert.
    Unknown ops and foreign domains are left to the op scan, which refuses them by name.
    """
    problems = []
    for node in nodes:
        if node.domain not in ("", "ai.onnx"):
            continue
        if not onnx.defs.has(node.op_type, ""):
            continue
        try:
            schema = onnx.defs.get_schema(node.op_type, opset, "")
        except onnx.defs.SchemaError:  # the op is newer than the model's opset
            continue
        for what, count, low, high in (
                ("inputs", len(node.input), schema.min_input, schema.max_input),
                ("outputs", len(node.output), schema.min_output, schema.max_output)):
            if not low <= count <= high:
                problems.append(f"node '{names[id(node)]}' ({node.op_type}) has {count} "
                                f"{what}; ONNX opset {opset} allows {_bounds(low, high)}")
        problems += _split_counts(node, names[id(node)])
    if problems:
        raise InvalidModelError("malformed node(s): " + "; ".join(problems))


def _split_counts(node: onnx.NodeProto, name: str) -> list[str]:
    """Split's num_outputs / split list must agree with its outputs: ONNX's own shape
    inference indexes past its vectors otherwise (an abort in builds with assertions)."""
    if node.op_type != "Split":
        return []
    for attr in node.attribute:
        if attr.name == "num_outputs" and attr.i != len(node.output):
            return [(f"node '{name}' (Split) has num_outputs {attr.i} but "
                     f"{len(node.output)} outputs")]
        if attr.name == "split" and len(attr.ints) != len(node.output):
            return [(f"node '{name}' (Split) lists {len(attr.ints)} split sizes for "
                     f"{len(node.output)} outputs")]
    return []


def _bounds(low: int, high: int) -> str:
    if low == high:
        return str(low)
    return f"at least {low}" if high >= 1 << 20 else f"{low} to {high}"  # variadic: 2^31-1


# Element sizes of raw_data by TensorProto data type (the types a model may store raw).
_TYPED_FIELDS = ("float_data", "int32_data", "int64_data", "double_data", "uint64_data",
                 "string_data")


def _stored_elements(t: onnx.TensorProto) -> int | None:
    """How many elements the tensor really holds (None: data lives outside, not checked here)."""
    if t.data_location == onnx.TensorProto.EXTERNAL:
        return None
    if t.HasField("raw_data"):
        try:
            itemsize = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
        except (KeyError, ValueError, TypeError):
            return None
        return len(t.raw_data) // max(itemsize, 1)
    for field in _TYPED_FIELDS:
        n = len(getattr(t, field))
        if n:
            if t.data_type in (onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128):
                n //= 2
            return n
    return 0


def check_tensor_sizes(g: onnx.GraphProto) -> None:
    """Every stored tensor (initializer or Constant value) holds what its dims declare;
    ModelLoadError otherwise (the bytes do not decode into a model: exit 2).

    Checked before ONNX's own shape inference, which trusts the dims and can grow without
    bound on a tensor that declares 2^40 elements but stores one.
    """
    bad = []
    tensors = [(t, f"initializer '{t.name}'") for t in g.initializer]
    for node in g.node:
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                    tensors.append((a.t, f"Constant node '{node.name or node.output[0]}'"))
    for t, where in tensors:
        stored = _stored_elements(t)
        if stored is None:
            continue
        declared = 1
        for d in t.dims:
            declared *= int(d)
        if any(int(d) < 0 for d in t.dims) or declared != stored:
            bad.append(f"{where} declares dims {list(t.dims)} but stores {stored} element(s)")
    if bad:
        shown = "; ".join(bad[:5]) + (f"; and {len(bad) - 5} more" if len(bad) > 5 else "")
        raise ModelLoadError(f"malformed tensor data: {shown}")  # bytes, not a model
