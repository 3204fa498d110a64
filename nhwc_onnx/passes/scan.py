"""Before the passes: the up-front scan, and the stand-ins of source nodes a frontend refused.

``scan(model)`` reads ``op_table`` on the core graph as the frontend left it: every node that
computes on run-time data (so it will not be folded into a constant), that some graph output
needs, and whose op is declared ``never`` (or whose ``when`` condition is already false here) is
refused at once, before any pass runs.

``isolate_unconverted(model)`` handles a frontend that kept going past refused source nodes:
each left an UNCONVERTED stand-in reading what the node read. The stand-ins and every node
computed from what a refused node should have produced are removed; the computed values they
read stay alive through one sink node (an extra graph output), so the passes still judge every
node the refusals do not depend on. The model is refused in the end anyway: the sink is never
written.
"""
from __future__ import annotations

from collections.abc import Callable

from ..errors import NodeProblem
from ..ir import CORE, UNCONVERTED, Graph, Model, Node, Value
from .rewrite import problem
from .to_dialect.op_table import NEVER, TABLE

SHAPE_ONLY = frozenset({"Shape", "Size"})  # read only their input's shape, static by then


def topological(graph: Graph) -> list[Node]:
    """The graph's nodes, producers first, without reordering the graph itself."""
    nodes = graph.nodes
    index = {id(n): i for i, n in enumerate(nodes)}
    waiting = [0] * len(nodes)
    users: list[list[int]] = [[] for _ in nodes]
    for i, node in enumerate(nodes):
        found = {index.get(id(v.producer())) for v in node.inputs
                 if v is not None and v.producer() is not None}
        producers = {p for p in found if p is not None}
        waiting[i] = len(producers)
        for p in producers:
            users[p].append(i)
    ready = [i for i in range(len(nodes)) if not waiting[i]]
    order = []
    while ready:
        i = ready.pop()
        order.append(nodes[i])
        for u in users[i]:
            waiting[u] -= 1
            if not waiting[u]:
                ready.append(u)
    return order if len(order) == len(nodes) else nodes  # a cycle: toposort names it later


def run_time_values(graph: Graph, order: list[Node]) -> Callable[[Value], bool]:
    """``runtime(v)``: v is computed from run-time data (a graph input, or a value no node
    produces: a refused node's), so a node reading it is not folded into a constant."""
    inputs = {id(v) for v in graph.inputs if v.const is None}
    computed: set[int] = set()

    def runtime(v: Value) -> bool:
        if v.const is not None:
            return False
        return id(v) in computed or id(v) in inputs or v.producer() is None

    for node in order:
        if node.domain == CORE and node.op in SHAPE_ONLY:
            continue
        if any(v is not None and runtime(v) for v in node.inputs):
            computed.update(id(v) for v in node.outputs)
    return runtime


def needed_nodes(graph: Graph) -> set[int]:
    """Ids of the nodes some graph output (or a stand-in) reads, directly or not."""
    todo = list(graph.outputs)
    todo += [v for n in graph.nodes if n.domain == UNCONVERTED for v in n.inputs if v is not None]
    needed: set[int] = set()
    while todo:
        node = todo.pop().producer()
        if node is None or id(node) in needed:
            continue
        needed.add(id(node))
        todo.extend(v for v in node.inputs if v is not None)
    return needed


def scan(model: Model) -> list[NodeProblem]:
    """Core nodes the table already rules out on this graph (see the module docstring)."""
    graph = model.graph
    order = topological(graph)
    runtime = run_time_values(graph, order)
    needed = needed_nodes(graph)
    problems = []
    for node in order:
        if node.domain != CORE or id(node) not in needed:
            continue
        if not any(v is not None and runtime(v) for v in node.inputs):
            continue  # folded into a constant
        entry = TABLE.get(node.op)
        if entry is None:
            continue  # an op without a declaration: the passes judge it
        reason: str | None
        if entry.converts == NEVER:
            reason = entry.condition
        else:
            reason = entry.refuted(node, runtime) if entry.refuted is not None else None
        if reason:
            problems.append(problem(node, reason))
    return problems


def isolate_unconverted(model: Model) -> list[Value]:
    """Set the refused nodes aside (see the module docstring); returns the graph outputs
    removed with them.

    Every node reading a value no node produces (a refused node's output) or computed from
    one is removed; the stand-ins, and one per removed node that read computed values, keep
    reading the computed values only, and each writes one scalar graph output: the passes
    treat them as readers of unknown ops (which need the values in the source's order)."""
    graph = model.graph
    inputs = {id(v) for v in graph.inputs}
    gone: set[int] = set()
    stand_ins: list[Node] = []
    removed: list[Node] = []
    for node in topological(graph):
        if node.domain == UNCONVERTED:
            stand_ins.append(node)
            continue
        if any(v is not None and v.const is None and id(v) not in inputs
               and (v.producer() is None or id(v) in gone) for v in node.inputs):
            removed.append(node)
            gone.update(id(v) for v in node.outputs)
    dropped = [v for v in graph.outputs if v.const is None and id(v) not in inputs
               and (id(v) in gone or v.producer() is None)]
    graph.outputs = [v for v in graph.outputs if not any(v is d for d in dropped)]

    def computed(v: Value | None) -> bool:
        return (v is not None and v.const is None and id(v) not in inputs
                and v.producer() is not None and id(v) not in gone)

    for node in reversed(removed):
        read = [v for v in node.inputs if computed(v)]
        graph.remove_node(node)
        if read:
            graph.release_node_name(node.name)
            stand_ins.append(graph.make_node(node.op, read, name=node.name, domain=UNCONVERTED,
                                             doc=node.doc))
    for node in stand_ins:
        read = list(dict.fromkeys(v for v in node.inputs if computed(v)))
        if not read:
            graph.remove_node(node)
            continue
        node.set_inputs(read)
        out = node.outputs[0]
        out.dtype, out.shape = "float32", ()
        graph.outputs.append(out)
    return dropped


__all__ = ["isolate_unconverted", "needed_nodes", "run_time_values", "scan", "topological"]
