"""Structural checks on an ONNX graph before conversion: order, definitions, names."""
from __future__ import annotations

import heapq

import onnx

from ...errors import InvalidModelError


def opset_versions(model: onnx.ModelProto) -> dict[str, int]:
    """Opset version per domain; "ai.onnx" and "" are the same standard domain."""
    out: dict[str, int] = {}
    for imp in model.opset_import:
        domain = "" if imp.domain in ("", "ai.onnx") else imp.domain
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
        raise InvalidModelError("the graph lists the same input twice")
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
        raise InvalidModelError("the graph lists the same output twice")
    for name in outputs:
        if name not in defined:
            raise InvalidModelError(f"graph output '{name}' is not produced by any node")


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
