"""Graph surgery before conversion: inline functions, pick inputs and outputs, prune to what the
outputs need, order the nodes, and resolve Switch/Merge whose predicate is a constant."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...errors import InvalidModelError, NodeProblem, UnsupportedOpError, UsageError
from ..base import check_node_count
from .functions import Inliner
from .patterns import fuse_atrous
from .proto import tf_graph_pb2
from .tfnodes import Ref, TFNode, output_count, parse_input, ref_name

# Ops that produce no data a model output could be: never picked as default outputs.
_NOT_OUTPUTS = frozenset({
    "NoOp", "Assert", "Print", "PrintV2", "SaveV2", "Save", "SaveSlices", "RestoreV2",
    "MergeV2Checkpoints", "AssignVariableOp", "Assign", "VarHandleOp", "VariableV2",
    "Placeholder", "PlaceholderWithDefault", "Const",
})
_LOOP_OPS = frozenset({"Enter", "Exit", "NextIteration", "LoopCond", "RefEnter", "RefExit",
                       "RefNextIteration"})


class PreparedGraph:
    """The nodes to convert, in dependency order, with the graph's input and output tensors."""

    def __init__(self, order: list[TFNode], inputs: list[Ref], outputs: list[Ref]):
        self.order = order
        self.inputs = inputs
        self.outputs = outputs


def tensor_ref(text: str) -> Ref:
    _, ref = parse_input(text.strip(), "<option>")
    return ref


def build_nodes(graph_def, buffer=None, stops: set[str] | None = None) -> list[TFNode]:
    check_node_count(len(graph_def.node), "the GraphDef")
    nodes = [TFNode.from_proto(n, buffer=buffer) for n in graph_def.node]
    top = {n.name: n for n in nodes}
    refuse_cycles(top)
    inliner = Inliner(graph_def.library,
                      lambda ref: _constant_bool(top, ref, stops or set()))
    if inliner.functions:
        nodes = inliner.expand(nodes)
        if inliner.aliases:
            for node in nodes:
                node.inputs = [inliner.resolve(r) for r in node.inputs]
    nodes = fuse_atrous(nodes)
    seen: set[str] = set()
    for node in nodes:
        if node.name in seen:
            raise InvalidModelError(f"two nodes are named '{node.name}'")
        seen.add(node.name)
    return nodes


def default_outputs(nodes: list[TFNode]) -> list[Ref]:
    used: set[str] = set()
    for node in nodes:
        for ref in node.inputs:
            used.add(ref[0])
    sinks = [n for n in nodes if n.name not in used and n.op not in _NOT_OUTPUTS]
    if not sinks:  # a graph of constants only: its unused constants are the outputs
        sinks = [n for n in nodes if n.name not in used and n.op == "Const"]
    return [(n.name, i) for n in sinks for i in range(output_count(n))]


def prune(by_name: dict[str, TFNode], outputs: Sequence[Ref], stops: set[str]) -> list[TFNode]:
    """The nodes the outputs depend on through data edges, producers first.

    Raises InvalidModelError on a missing producer or a cycle (UnsupportedOpError when the
    cycle is a TensorFlow 1 while loop)."""
    for ref in outputs:
        if ref[0] not in by_name:
            raise InvalidModelError(f"output tensor '{ref_name(ref)}' has no producing node")
    order: list[TFNode] = []
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    for root in dict.fromkeys(r[0] for r in outputs):
        if state.get(root) == 2:
            continue
        stack = [(root, 0)]
        state[root] = 1
        while stack:
            name, pos = stack[-1]
            node = by_name[name]
            deps = () if name in stops else node.inputs
            if pos < len(deps):
                stack[-1] = (name, pos + 1)
                dep = deps[pos][0]
                mark = state.get(dep)
                if mark == 2:
                    continue
                if mark == 1:
                    _raise_cycle(by_name, [s[0] for s in stack], dep)
                if dep not in by_name:
                    raise InvalidModelError(
                        f"node '{name}' ({node.op}) reads '{ref_name(deps[pos])}', "
                        "which no node produces"
                    )
                state[dep] = 1
                stack.append((dep, 0))
            else:
                stack.pop()
                state[name] = 2
                order.append(node)
    return order


def _raise_cycle(by_name: dict[str, TFNode], path: list[str], back_to: str) -> None:
    cycle = path[path.index(back_to):]
    loop = [n for n in cycle if by_name[n].op in _LOOP_OPS]
    if loop:
        problems = [NodeProblem(n, by_name[n].op, "TensorFlow 1 while loops are not supported")
                    for n in loop]
        raise UnsupportedOpError(problems, "tensorflow")
    shown = " -> ".join(f"'{n}'" for n in cycle[:8])
    raise InvalidModelError(f"the graph has a cycle: {shown}{' ...' if len(cycle) > 8 else ''}")


_BACK_EDGE_OPS = frozenset({"NextIteration", "RefNextIteration"})


def refuse_cycles(by_name: dict[str, TFNode]) -> None:
    """Refuse a graph TensorFlow itself cannot import: a cycle through data or control inputs
    (``^y`` on ``y`` included), anywhere in the graph, not only on the outputs' path. The one
    cycle TensorFlow accepts - a while loop's NextIteration -> Merge back edge - is left to
    ``prune``, which refuses while loops on the outputs' path as unsupported."""
    def deps(node: TFNode) -> list[tuple[str, bool]]:  # (producer, through a control input)
        found = [(ref[0], False) for ref in node.inputs] + [(c, True) for c in node.controls]
        return [(d, control) for d, control in found
                if d in by_name and by_name[d].op not in _BACK_EDGE_OPS]

    cyclic = _cyclic_components(by_name, deps)
    if not cyclic:
        return
    first = cyclic[0]
    path = _cycle_path(first, by_name, deps)
    shown = " -> ".join(f"'^{n}'" if control else f"'{n}'" for n, control in path[:9])
    more = " ..." if len(path) > 9 else ""
    others = [n for component in cyclic[1:] for n in component]
    tail = ""
    if others:
        listed = ", ".join(f"'{n}'" for n in others[:8])
        tail = f"; {len(others)} more node(s) on other cycles: {listed}" + (
            " ..." if len(others) > 8 else "")
    controls = " ('^name': through a control input)" if any(c for _, c in path) else ""
    raise InvalidModelError(f"the graph has a cycle: {shown}{more}{controls}{tail}")


def _cyclic_components(by_name: dict[str, TFNode], deps) -> list[list[str]]:
    """The strongly connected components that hold a cycle (Tarjan's algorithm without
    recursion: graphs have up to 100,000 nodes), in graph order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root, root_node in by_name.items():
        if root in index:
            continue
        # each frame: (node, its producers - computed once per node, pos of the next one)
        work = [(root, [d for d, _ in deps(root_node)], 0)]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            name, edges, pos = work[-1]
            if pos < len(edges):
                work[-1] = (name, edges, pos + 1)
                dep = edges[pos]
                if dep not in index:
                    index[dep] = low[dep] = len(index)
                    stack.append(dep)
                    on_stack.add(dep)
                    work.append((dep, [d for d, _ in deps(by_name[dep])], 0))
                elif dep in on_stack:
                    low[name] = min(low[name], index[dep])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[name])
            if low[name] == index[name]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == name:
                        break
                if len(component) > 1 or name in edges:
                    found.append(component)
    order = {name: i for i, name in enumerate(by_name)}
    found = [sorted(c, key=order.__getitem__) for c in found]
    return sorted(found, key=lambda c: order[c[0]])


def _cycle_path(component: list[str], by_name: dict[str, TFNode],
                deps) -> list[tuple[str, bool]]:
    """One cycle through the component's first node: [(node, reached through a control
    input)], starting and ending at that node."""
    members = set(component)
    start = component[0]
    came_from: dict[str, tuple[str, bool]] = {}
    queue = [start]
    for name in queue:  # breadth first: the shortest way back
        for dep, control in deps(by_name[name]):
            if dep == start:
                path = [(dep, control)]
                while name != start:
                    path.append((name, came_from[name][1]))
                    name = came_from[name][0]
                path.append((start, False))
                return path[::-1]
            if dep in members and dep not in came_from:
                came_from[dep] = (name, control)
                queue.append(dep)
    return [(start, False)]  # pragma: no cover - a component always closes


def _constant_bool(by_name: dict[str, TFNode], ref: Ref, stops: set[str]) -> bool | None:
    for _ in range(64):
        node = by_name.get(ref[0])
        if node is None or node.name in stops:
            return None
        if node.op in ("Identity", "PlaceholderWithDefault", "StopGradient") and node.inputs:
            ref = node.inputs[0]
            continue
        if node.op == "Const":
            value = node.attrs.tensor("value")
            if value is not None and value.size == 1 and value.dtype == np.bool_:
                return bool(value.reshape(()))
        return None
    return None


def _index_const(name: str, index: int) -> TFNode:
    proto = tf_graph_pb2.NodeDef(name=name, op="Const")
    proto.attr["dtype"].type = tf_graph_pb2.DT_INT32
    tensor = proto.attr["value"].tensor
    tensor.dtype = tf_graph_pb2.DT_INT32
    tensor.int_val.append(index)
    return TFNode.from_proto(proto)


def resolve_dead_branches(order: list[TFNode], by_name: dict[str, TFNode],
                          stops: set[str]) -> tuple[dict[Ref, Ref], set[Ref], set[str]]:
    """Rewire Switch/Merge with a constant predicate.

    Returns (aliases: resolved tensor -> the live tensor it forwards, dead Switch outputs,
    nodes that can never run)."""
    if not any(n.op in ("Switch", "Merge") for n in order):
        return {}, set(), set()
    alias: dict[Ref, Ref] = {}
    dead: set[Ref] = set()  # the untaken side of each resolved Switch
    dead_nodes: set[str] = set()  # nodes that never run: every output is dead

    def is_dead(ref: Ref) -> bool:
        return ref in dead or ref[0] in dead_nodes

    for node in order:
        node.inputs = [alias.get(r, r) for r in node.inputs]
        if node.name in stops:
            continue
        if node.op == "Switch" and len(node.inputs) == 2 and not is_dead(node.inputs[0]):
            pred = _constant_bool(by_name, node.inputs[1], stops)
            if pred is not None:
                taken = int(pred)
                alias[(node.name, taken)] = node.inputs[0]
                dead.add((node.name, 1 - taken))
                continue
        if node.op == "Merge":
            live = [r for r in node.inputs if not is_dead(r)]
            if len(live) == 1 and len(node.inputs) > 1:
                alias[(node.name, 0)] = live[0]
                const = _index_const(f"{node.name}/value_index", node.inputs.index(live[0]))
                by_name[const.name] = const
                alias[(node.name, 1)] = (const.name, 0)
                continue
            if live:
                continue  # several live inputs: a real runtime choice, refused as Merge later
        if any(is_dead(r) for r in node.inputs) or any(c in dead_nodes for c in node.controls):
            dead_nodes.add(node.name)
    return alias, dead, dead_nodes


def prepare(graph_def, inputs: Sequence[str] | None, outputs: Sequence[str] | None,
            buffer=None) -> PreparedGraph:
    in_refs = [tensor_ref(t) for t in inputs] if inputs else []
    stops = {r[0] for r in in_refs}
    nodes = build_nodes(graph_def, buffer, stops)
    by_name = {n.name: n for n in nodes}
    out_refs = [tensor_ref(t) for t in outputs] if outputs else default_outputs(nodes)
    unknown = [ref_name(r) for r in out_refs if outputs and r[0] not in by_name]
    if unknown:
        raise UsageError(f"--outputs names {', '.join(map(repr, unknown))}, which is not a "
                         "tensor of the graph")
    if not out_refs:
        raise InvalidModelError("the graph has no output: it computes nothing")
    for ref in in_refs:
        if ref[0] not in by_name:
            raise UsageError(f"--inputs names '{ref_name(ref)}', which is not a tensor of the "
                             "graph")
    order = prune(by_name, out_refs, stops)
    alias, dead, dead_nodes = resolve_dead_branches(order, by_name, stops)
    if alias:
        for ref in out_refs:
            if ref in dead or ref[0] in dead_nodes:
                raise InvalidModelError(
                    f"output '{ref_name(ref)}' is on a branch a constant predicate never takes"
                )
        out_refs = [alias.get(r, r) for r in out_refs]
        order = prune(by_name, out_refs, stops)
    if not in_refs:
        in_refs = [(n.name, 0) for n in order if n.op == "Placeholder"]
    return PreparedGraph(order, in_refs, out_refs)
