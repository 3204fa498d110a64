"""The in-memory graph every stage shares: Value, Node, Graph, Model.

Values are compared by identity and know their producer and their uses; node inputs change
only through methods that keep those use lists right, so passes can rewrite freely.
"""
from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import InvalidModelError
from .deferred import DeferredArray

Shape = tuple  # tuple of int (or None for an unknown dimension)

# Layout tags: what a rank-4 (or 3/5) activation's axes mean.
NHWC = "NHWC"
NCHW = "NCHW"
LAYOUTS = (NHWC, NCHW)

CORE = "core"  # domain of framework-neutral ops emitted by frontends
DIALECT = "nhwc"  # domain of the 37 target ops
# Domain of a frontend's stand-in for a source node it could not convert (op: the source op):
# it reads what the node read, so the passes still judge the nodes computing those values.
UNCONVERTED = "unconverted"


class Value:
    """A tensor edge: produced by at most one node (or a graph input / constant), used by many."""

    __slots__ = ("_producer", "_uses", "const", "dtype", "layout", "meta", "name", "shape")

    def __init__(
        self,
        name: str,
        dtype: str | None = "float32",
        shape: Sequence[int | None] | None = None,
        layout: str | None = None,
        const: np.ndarray | None = None,
    ):
        self.name = name
        self.dtype = _canonical_dtype(dtype) if dtype is not None else None
        self.shape: Shape | None = tuple(shape) if shape is not None else None
        self.layout = layout
        self.const = const
        if const is not None:
            self.dtype = _dtype_name(const)
            self.shape = const.shape  # numpy shapes are tuples of Python ints
        self._producer: Node | None = None
        self._uses: list[tuple[Node, int]] = []
        self.meta: dict[str, Any] = {}

    def producer(self) -> Node | None:
        return self._producer

    def uses(self) -> list[tuple[Node, int]]:
        return list(self._uses)

    def consumers(self) -> list[Node]:
        seen: dict[int, Node] = {}
        for node, _ in self._uses:
            seen.setdefault(id(node), node)
        return list(seen.values())

    @property
    def is_const(self) -> bool:
        return self.const is not None

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) and d >= 0 for d in self.shape)

    def set_const(self, array: np.ndarray) -> None:
        self.const = array
        self.dtype = _dtype_name(array)
        self.shape = array.shape

    def __repr__(self) -> str:
        kind = "const " if self.const is not None else ""
        return f"Value({kind}{self.name!r}, {self.dtype}, {self.shape}, {self.layout})"


# str(np.dtype) costs microseconds and runs for every value a pass creates: remember it.
_DTYPE_NAMES: dict[Any, str] = {}
_ARRAY_DTYPE_NAMES: dict[np.dtype, str] = {}
_CANONICAL_NAMES = frozenset((
    "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
    "uint32", "uint64", "bool", "complex64", "complex128"))


def _canonical_dtype(dtype: Any) -> str:
    """numpy's name of ``dtype`` ('float32' for 'float32', np.float32, 'f4', ...)."""
    try:
        return _DTYPE_NAMES[dtype]
    except (KeyError, TypeError):  # TypeError: an unhashable spelling
        if isinstance(dtype, str) and dtype in _CANONICAL_NAMES:
            return dtype  # already numpy's name: known without loading numpy (see deferred.py)
        name = str(np.dtype(dtype))
    if isinstance(dtype, (str, type)):
        _DTYPE_NAMES[dtype] = name
    return name


def _dtype_name(array: np.ndarray) -> str:
    """'float32' for any byte order: the element type, not the storage order."""
    if isinstance(array, DeferredArray):
        return array.dtype_name
    dtype = array.dtype
    name = _ARRAY_DTYPE_NAMES.get(dtype)
    if name is None:
        name = _ARRAY_DTYPE_NAMES[dtype] = str(dtype.newbyteorder("="))
    return name


class Node:
    """One operation. ``attrs`` hold plain Python values: int, float, str, lists, ndarray."""

    __slots__ = ("_inputs", "_outputs", "_seq", "attrs", "doc", "domain", "graph", "name", "op")

    def __init__(
        self,
        op: str,
        inputs: Sequence[Value | None],
        outputs: Sequence[Value],
        attrs: dict[str, Any] | None = None,
        name: str = "",
        domain: str = CORE,
        doc: str = "",
    ):
        self.op = op
        self.domain = domain
        self.name = name
        self.attrs: dict[str, Any] = dict(attrs or {})
        self._inputs: list[Value | None] = []
        self._outputs: list[Value] = []
        self.graph: Graph | None = None
        self.doc = doc  # e.g. the source op this node came from
        self._seq = 0
        for v in inputs:
            self._append_input(v)
        for v in outputs:
            if v._producer is not None and v._producer is not self:
                raise InvalidModelError(
                    f"value '{v.name}' is produced by both '{v._producer.name}' and '{name}'"
                )
            v._producer = self
            self._outputs.append(v)

    # -- inputs -----------------------------------------------------------------------------
    @property
    def inputs(self) -> tuple[Value | None, ...]:
        return tuple(self._inputs)

    def _append_input(self, v: Value | None) -> None:
        idx = len(self._inputs)
        self._inputs.append(v)
        if v is not None:
            v._uses.append((self, idx))

    def set_input(self, index: int, value: Value | None) -> None:
        old = self._inputs[index]
        if old is value:
            return
        if old is not None:
            old._uses.remove((self, index))
        self._inputs[index] = value
        if value is not None:
            value._uses.append((self, index))

    def set_inputs(self, values: Sequence[Value | None]) -> None:
        self._detach_inputs()
        for v in values:
            self._append_input(v)

    def _detach_inputs(self) -> None:
        for idx, v in enumerate(self._inputs):
            if v is not None:
                v._uses.remove((self, idx))
        self._inputs = []

    def input(self, index: int) -> Value | None:
        return self._inputs[index] if index < len(self._inputs) else None

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    # -- outputs (changed only through Graph.move_output, which keeps producers right) --------
    @property
    def outputs(self) -> tuple[Value, ...]:
        return tuple(self._outputs)

    @property
    def output(self) -> Value:
        return self._outputs[0]

    def __repr__(self) -> str:
        ins = ", ".join(v.name if v is not None else "-" for v in self._inputs)
        outs = ", ".join(v.name for v in self._outputs)
        return f"Node({self.domain}.{self.op} {self.name!r}: ({ins}) -> ({outs}))"


class Graph:
    """Nodes kept in insertion order; removal while iterating over ``graph.nodes`` is safe."""

    def __init__(self, name: str = "graph"):
        self.name = name
        self.inputs: list[Value] = []
        self.outputs: list[Value] = []
        self._nodes: dict[int, Node] = {}
        self._seq = itertools.count()
        self._names: set[str] = set()  # tensor names
        self._node_names: set[str] = set()  # node names (a separate namespace, as in ONNX)

    # -- naming -----------------------------------------------------------------------------
    def reserve_name(self, name: str) -> None:
        self._names.add(name)

    def unique_name(self, base: str) -> str:
        """A tensor name not used yet in this graph, derived from ``base``."""
        return _fresh(self._names, base or "t")

    def unique_node_name(self, base: str) -> str:
        return _fresh(self._node_names, base or "node")

    def release_name(self, name: str) -> None:
        """Make a reserved tensor name available again (for the value that should carry it)."""
        self._names.discard(name)

    def release_node_name(self, name: str) -> None:
        """Make a node name available again (for a node that takes a removed one's place)."""
        self._node_names.discard(name)

    def rename_value(self, value: Value, base: str) -> str:
        """Give ``value`` a fresh name derived from ``base``; its old name becomes free."""
        old = value.name
        value.name = self.unique_name(base)
        self.release_name(old)
        return value.name

    # -- values -----------------------------------------------------------------------------
    def new_value(
        self,
        name: str,
        dtype: str = "float32",
        shape: Sequence[int | None] | None = None,
        layout: str | None = None,
    ) -> Value:
        return Value(self.unique_name(name), dtype, shape, layout)

    def constant(self, array: np.ndarray, name: str = "const") -> Value:
        """A weight or other constant tensor (serialized as an initializer)."""
        if not isinstance(array, DeferredArray):  # a deferred one is read when needed
            array = np.asarray(array)
        return Value(self.unique_name(name), const=array)

    def add_input(self, value: Value) -> Value:
        self._names.add(value.name)
        self.inputs.append(value)
        return value

    # -- nodes ------------------------------------------------------------------------------
    @property
    def nodes(self) -> list[Node]:
        return list(self._nodes.values())

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def add_node(self, node: Node) -> Node:
        if node.graph is not None:
            raise ValueError(f"node '{node.name}' already belongs to a graph")
        node.name = self.unique_node_name(node.name or node.op.lower())
        for v in node._outputs:
            self._names.add(v.name)
        node.graph = self
        node._seq = next(self._seq)
        self._nodes[id(node)] = node
        return node

    def make_node(
        self,
        op: str,
        inputs: Sequence[Value | None],
        attrs: dict[str, Any] | None = None,
        name: str = "",
        outputs: int | Sequence[Value] | Sequence[str] = 1,
        domain: str = CORE,
        doc: str = "",
    ) -> Node:
        """Create and add a node. ``outputs`` is a count, output Values, or output names."""
        node_name = self.unique_node_name(name or op.lower())
        if isinstance(outputs, int):
            outs = [
                Value(self.unique_name(node_name if i == 0 else f"{node_name}:{i}"))
                for i in range(outputs)
            ]
        else:
            outs = [
                o if isinstance(o, Value) else Value(self.unique_name(str(o))) for o in outputs
            ]
            self._names.update(o.name for o in outs)
        node = Node(op, inputs, outs, attrs, node_name, domain, doc)
        node.graph = self
        node._seq = next(self._seq)
        self._nodes[id(node)] = node
        return node

    def remove_node(self, node: Node) -> None:
        """Detach a node. Its outputs must be unused (or about to be rewired by the caller)."""
        if self._nodes.pop(id(node), None) is None:
            return
        node._detach_inputs()
        node.graph = None
        for v in node._outputs:
            if v._producer is node:
                v._producer = None

    def move_output(self, value: Value, node: Node, index: int = 0) -> Value:
        """Make ``node`` produce ``value`` (its name, uses and graph-output role stay) as output
        ``index``; returns the tensor the node wrote there before, now without a producer.
        ``value`` must have no producer left (its old one was removed) or be ``node``'s."""
        producer = value._producer
        if producer is not None and producer is not node and id(producer) in self._nodes:
            raise ValueError(f"value '{value.name}' is still produced by '{producer.name}'")
        before = node._outputs[index]
        if before is value:
            return before
        node._outputs[index] = value
        value._producer = node
        before._producer = None
        self._names.add(value.name)
        return before

    def replace_all_uses(self, old: Value, new: Value) -> None:
        """Every consumer of ``old`` (and the graph outputs) now reads ``new``."""
        if old is new:
            return
        for node, idx in list(old._uses):
            node.set_input(idx, new)
        for i, out in enumerate(self.outputs):
            if out is old:
                self.outputs[i] = new

    def bypass(self, node: Node, input_index: int = 0) -> None:
        """Remove a one-output pass-through node, keeping a graph output's name if needed."""
        src = node.inputs[input_index]
        out = node.outputs[0]
        if src is None:
            raise ValueError(f"node '{node.name}' has no input {input_index}")
        if out in self.outputs and (src in self.inputs or src in self.outputs or src.is_const):
            return  # keep the node: a graph output must stay a distinct, named tensor
        if out in self.outputs:
            self.remove_node(node)
            producer = src.producer()
            if producer is not None:
                # Rename the producer's tensor so the graph output keeps its public name.
                self.replace_all_uses(src, out)
                self.move_output(out, producer, producer._outputs.index(src))
                return
            self.replace_all_uses(out, src)
            return
        self.replace_all_uses(out, src)
        self.remove_node(node)

    # -- queries ----------------------------------------------------------------------------
    def values(self) -> list[Value]:
        """All values: graph inputs, node outputs and constants, in a deterministic order."""
        seen: dict[int, Value] = {}
        v: Value | None
        for v in self.inputs:
            seen.setdefault(id(v), v)
        for node in self.nodes:
            for v in node._inputs:
                if v is not None:
                    seen.setdefault(id(v), v)
            for v in node._outputs:
                seen.setdefault(id(v), v)
        for v in self.outputs:
            seen.setdefault(id(v), v)
        return list(seen.values())

    def constants(self) -> list[Value]:
        """Constant values read by nodes or exposed as outputs, in first-use order."""
        return [v for v in self.values() if v.const is not None and v._producer is None]

    def find_node(self, name: str) -> Node | None:
        for node in self._nodes.values():
            if node.name == name:
                return node
        return None

    def find_value(self, name: str) -> Value | None:
        for v in self.values():
            if v.name == name:
                return v
        return None

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for node in self._nodes.values():
            counts[node.op] = counts.get(node.op, 0) + 1
        return dict(sorted(counts.items()))

    # -- order ------------------------------------------------------------------------------
    def toposort(self) -> None:
        """Reorder nodes so producers come first; ties keep insertion order (deterministic).

        Raises InvalidModelError naming the nodes on a cycle.
        """
        if self._in_order():
            return  # passes call this often; most calls find nothing to move
        nodes = list(self._nodes.values())
        indeg: dict[int, int] = {}
        for node in nodes:
            deps = {
                id(v._producer)
                for v in node._inputs
                if v is not None and v._producer is not None and id(v._producer) in self._nodes
            }
            indeg[id(node)] = len(deps)
        heap = [(n._seq, id(n)) for n in nodes if indeg[id(n)] == 0]
        heapq.heapify(heap)
        order: list[Node] = []
        while heap:
            _, nid = heapq.heappop(heap)
            node = self._nodes[nid]
            order.append(node)
            done: set[int] = set()
            for v in node._outputs:
                for user, _ in v._uses:
                    uid = id(user)
                    if uid in done or uid not in self._nodes:
                        continue
                    done.add(uid)
                    indeg[uid] -= 1
                    if indeg[uid] == 0:
                        heapq.heappush(heap, (user._seq, uid))
        if len(order) != len(nodes):
            stuck = [n.name for n in nodes if indeg[id(n)] > 0]
            shown = ", ".join(f"'{s}'" for s in stuck[:10])
            more = f" and {len(stuck) - 10} more" if len(stuck) > 10 else ""
            raise InvalidModelError(f"the graph has a cycle through node(s) {shown}{more}")
        self._nodes = {id(n): n for n in order}
        for seq, n in enumerate(order):
            n._seq = seq
        self._seq = itertools.count(len(order))

    def _in_order(self) -> bool:
        """Whether every producer already comes before its consumers. Nodes are kept in
        ``_seq`` order, so the sort below would then return this same order."""
        nodes = self._nodes
        for node in nodes.values():
            seq = node._seq
            for v in node._inputs:
                if v is not None:
                    producer = v._producer
                    if producer is not None and producer._seq >= seq and id(producer) in nodes:
                        return False
        return True

    def dangling_inputs(self) -> list[tuple[Node, int, Value]]:
        """Node inputs that are neither graph inputs, constants, nor produced by a node."""
        graph_inputs = {id(v) for v in self.inputs}
        bad = []
        for node in self._nodes.values():
            for idx, v in enumerate(node._inputs):
                if v is None or v.const is not None or id(v) in graph_inputs:
                    continue
                if v._producer is None or id(v._producer) not in self._nodes:
                    bad.append((node, idx, v))
        return bad


def _fresh(used: set[str], base: str) -> str:
    if base not in used:
        used.add(base)
        return base
    for i in itertools.count(1):
        cand = f"{base}_{i}"
        if cand not in used:
            used.add(cand)
            return cand
    raise AssertionError("unreachable")


class Model:
    """A graph plus what the file around it says."""

    def __init__(self, graph: Graph, metadata: dict[str, str] | None = None):
        self.graph = graph
        self.metadata: dict[str, str] = dict(metadata or {})
        # Per graph input/output name: the permutation applied to reach NHWC (source -> ours).
        self.io_permutations: dict[str, list[int]] = {}
        self.producer_name = "nhwc-onnx"
        self.doc = ""
        # Op histogram of the source model as its frontend read it (for the report).
        self.source_op_counts: dict[str, int] = {}
        # What the file read breaks but the IR cannot hold (two initializers with one name:
        # the graph keeps one); errors.ValidationIssue records, reported by validate().
        self.load_issues: list = []
        # NodeProblems of the source nodes a frontend asked to keep going could not convert
        # (each left as an UNCONVERTED stand-in); the pipeline lists them with its own.
        self.refused: list = []
        # NodeProblems of the nodes that read a number computed from a symbolic batch's size
        # where the dialect cannot write the batch (found in one probe conversion;
        # schemas.batch_values)
        self.batch_findings: list = []

    def __repr__(self) -> str:
        return f"Model({self.graph.name!r}, {len(self.graph)} nodes)"
