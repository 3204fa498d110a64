"""What a converter sees: its node's inputs as IR Values, typed attributes (reads recorded by
the node's ``Attrs``), and helpers that emit core nodes named after the TensorFlow node (helpers
get '<name>/<suffix>'). One context serves the whole graph: ``begin(node)`` makes a node the
current one (the contract of ``frontends/context.py``)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...ir import CORE, Graph, Node, Value
from ...schemas import CORE_OPS, batch_values
from ...schemas.core import infer_dtypes
from ..context import NodeContext, Refusal
from . import shapes
from .tensors import Attrs
from .tfnodes import Ref, TFNode

MAX_GENERATED_ELEMENTS = 1 << 28  # Fill/Tile/Range/... beyond this are corrupt, not models
# Besides the elementwise ops, the core ops whose rank-4 output keeps the axes of input 0:
# Expand and Tile repeat along them, MatMul is a per-pixel Dense ([N,H,W,C] x [C,K]).
_KEEP_INPUT_AXES = frozenset({"Expand", "MatMul", "Tile"})

# Attributes that leave what a node computes at inference unchanged: an implementation hint,
# training settings (FusedBatchNorm's running-average factor, is_training true being refused;
# MatMul's and BatchMatMul's marks of a gradient operand), the count of inputs (N: AddN,
# ConcatV2, Pack ... read their inputs). Element types (T, dtype, Tidx ...) are recognised by
# their kind and bookkeeping (_output_shapes, _class ...) by its leading underscore.
_WITHOUT_EFFECT = frozenset({"use_cudnn_on_gpu", "exponential_avg_factor", "N",
                             "grad_a", "grad_b", "grad_x", "grad_y"})
# ... and for one op only: SplitV's count of outputs (its size_splits input says it all),
# Gather's validate_indices (TensorFlow ignores it), Equal's answer to shapes that do not
# broadcast (such shapes do not convert at all).
_WITHOUT_EFFECT_FOR = {"SplitV": frozenset({"num_split"}),
                       "Gather": frozenset({"validate_indices"}),
                       "Equal": frozenset({"incompatible_shape_error"})}


def without_effect(attrs: Attrs, name: str) -> bool:
    """Whether a TensorFlow attribute need not be read (see ``_WITHOUT_EFFECT``); judged in
    the mode the node uses: explicit_paddings counts only with padding EXPLICIT (TensorFlow
    requires it empty otherwise)."""
    if name.startswith("_") or name in _WITHOUT_EFFECT or attrs.is_type(name):
        return True
    if name == "explicit_paddings":
        return attrs.value("padding") != "EXPLICIT"
    return name in _WITHOUT_EFFECT_FOR.get(attrs.op, ())


class TFContext(NodeContext):
    framework = "tensorflow"

    def __init__(self, graph: Graph, options):
        super().__init__()
        self.graph = graph
        self.options = options
        self.values: dict[Ref, Value] = {}
        self.known: dict[int, np.ndarray] = {}  # id(value) -> small int value computed here
        # a symbolic batch's size in this probe conversion: known values computed from it are
        # tagged (schemas.batch_values), and those taken as attributes are findings
        self.probe: int | None = options.batch_probe if options.batch is None else None
        self.batch_findings: list = []
        self._node: TFNode | None = None
        self._own_name_free = False

    # -- the current node ---------------------------------------------------------------------
    def begin(self, node: TFNode) -> None:
        self._node = node
        self._own_name_free = True
        node.attrs.read.clear()  # what earlier stages asked for is not the converter's reading
        self.begin_node(node.name, node.op, node.attrs.read)

    @property
    def node(self) -> TFNode:
        """The node being converted (the ops below are only called while one is)."""
        assert self._node is not None, "no TensorFlow node is being converted"
        return self._node

    @property
    def attrs(self) -> Attrs:
        return self.node.attrs

    def attribute_names(self) -> set[str]:
        return self.node.attrs.names()

    def attribute_value(self, name: str) -> Any:
        return self.node.attrs.value(name)

    def without_effect(self, name: str) -> bool:
        return without_effect(self.node.attrs, name)

    @property
    def n_inputs(self) -> int:
        return len(self.node.inputs)

    def input(self, index: int) -> Value:
        if not 0 <= index < len(self.node.inputs):  # a computed index may be -1 (no inputs)
            raise Refusal(f"expects at least {max(index, 0) + 1} inputs, has "
                          f"{len(self.node.inputs)}")
        return self.values[self.node.inputs[index]]

    def inputs(self) -> list[Value]:
        return [self.values[r] for r in self.node.inputs]

    def value_of(self, value: Value) -> np.ndarray | None:
        if value.const is not None:
            return value.const
        return self.known.get(id(value))

    def const(self, index: int) -> np.ndarray | None:
        """The input's value if it is a constant (or computable from static shapes)."""
        return self.value_of(self.input(index))

    def need_const(self, index: int, what: str) -> np.ndarray:
        value = self.const(index)
        if value is None:
            raise Refusal(f"{what} (input {index}) must be a constant")
        if self.probe is not None:
            given = self.input(index)
            finding = batch_values.attribute_finding(given.name, given.meta, value, self.probe,
                                                     self.name, self.node.op, what)
            if finding is not None:
                self.batch_findings.append(finding)
        return value

    def need_scalar(self, index: int, what: str) -> np.ndarray:
        """A constant input TensorFlow requires to hold one value (an axis, a fill value)."""
        value = np.asarray(self.need_const(index, what))
        if value.size != 1:
            raise self.invalid(f"{what} (input {index}) must be a scalar, found shape "
                                    f"{list(value.shape)}")
        return value.reshape(())

    def shape(self, index: int) -> tuple | None:
        return self.input(index).shape

    def static_shape(self, index: int, why: str) -> tuple:
        shape = self.input(index).shape
        if shape is None or any(not isinstance(d, int) for d in shape):
            ref = self.node.inputs[index]
            raise Refusal(
                f"{why} needs the static shape of '{ref[0]}:{ref[1]}' (found {shape}); pass "
                "--input-shape for the graph inputs"
            )
        return shape

    def check_size(self, shape, what: str) -> None:
        """Refuse a generated tensor (Fill, Tile, Range ...) of an absurd size up front, before
        constant folding would try to allocate it."""
        if shape is None or any(not isinstance(d, int) for d in shape):
            return
        count = 1
        for d in shape:
            count *= max(int(d), 0)
        if count > MAX_GENERATED_ELEMENTS:
            raise self.invalid(f"would create {what} of shape {list(shape)} ({count} "
                               "elements): not a plausible model")

    def check_same_dtype(self, *indices: int) -> None:
        """TensorFlow requires these inputs to share one element type; a graph where they do
        not is broken (TensorFlow itself would refuse to run it)."""
        found = {i: self.input(i).dtype for i in indices}
        if len(set(found.values())) > 1:
            listed = ", ".join(f"input {i} is {d}" for i, d in found.items())
            raise self.invalid(f"{listed}; TensorFlow requires one type")

    def rank(self, index: int, why: str) -> int:
        shape = self.input(index).shape
        if shape is None:
            raise Refusal(f"{why} needs the rank of input {index}, which is unknown")
        return len(shape)

    # -- emitting -----------------------------------------------------------------------------
    def _node_name(self, suffix: str | None) -> str:
        if suffix is None and self._own_name_free:
            # Every TF node name is reserved before conversion so helper nodes never take a
            # name a later TF node needs; the node that carries it frees it just before.
            self.graph.release_name(self.name)
            self._own_name_free = False
            return self.name
        return f"{self.name}/{suffix or 'out'}"

    def own_name(self) -> str:
        """Claim the TF node's name for a value this converter creates (e.g. a constant)."""
        return self._node_name(None)

    def emit(self, op: str, inputs: Sequence[Value | None], attrs: dict[str, Any] | None = None,
             suffix: str | None = None, outputs: int = 1, dtype: str | None = None) -> Node:
        """Add one core node; output 0 of the un-suffixed node carries the TF node's name."""
        node = self.graph.make_node(op, list(inputs), attrs or {}, name=self._node_name(suffix),
                                    outputs=outputs, domain=CORE, doc=self.node.op)
        self._annotate(node, dtype)
        return node

    def emit1(self, op: str, inputs: Sequence[Value | None], attrs: dict[str, Any] | None = None,
              suffix: str | None = None, dtype: str | None = None) -> Value:
        return self.emit(op, inputs, attrs, suffix, 1, dtype).outputs[0]

    def constant(self, array: np.ndarray, suffix: str) -> Value:
        return self.graph.constant(np.asarray(array), f"{self.name}/{suffix}")

    def int64(self, values, suffix: str) -> Value:
        return self.constant(np.asarray(values, dtype=np.int64), suffix)

    def _annotate(self, node: Node, dtype: str | None) -> None:
        ins = [v for v in node.inputs if v is not None]
        if dtype is None:
            in_dtypes = [None if v is None else v.dtype or None for v in node.inputs]
            dtype = infer_dtypes(node, in_dtypes)[0] or "float32"
        in_shapes = [None if v is None else v.shape for v in node.inputs]
        in_known = [None if v is None else self.value_of(v) for v in node.inputs]
        out_shapes = shapes.infer(node, in_shapes, in_known)
        layout = self._layout(node)
        for v, shape in zip(node.outputs, out_shapes):
            v.dtype = dtype
            v.shape = shape
            if shape is not None and len(shape) == 4:
                v.layout = layout
        if node.op == "Shape" and ins and shapes._known(ins[0].shape):
            self.known[id(node.outputs[0])] = np.asarray(ins[0].shape, dtype=np.int64)
        elif any(k is not None for k in in_known):
            outs = shapes.evaluate_small(node, in_known)
            if outs is not None:
                for v, arr in zip(node.outputs, outs):
                    self.known[id(v)] = arr
                    v.shape = tuple(arr.shape)
        if self.probe is not None:
            self._tag_batch_values(node)

    def _tag_batch_values(self, node: Node) -> None:
        """Known values computed from the batch's size carry their slope in N."""
        found = [self.known.get(id(v)) for v in node.outputs]
        outs = [a for a in found if a is not None]
        probe = self.probe
        if len(outs) != len(found) or probe is None:  # (called only with a probe)
            return
        here = (node.name, node.doc or node.op)
        for v, tag in zip(node.outputs, batch_values.tag_folded(node, outs, probe,
                                                                 self.value_of)):
            # said by the TensorFlow node's name, not that of a helper node it emitted
            v.meta.update({k: (self.name, self.node.op)
                           if k != batch_values.SLOPE and w == here else w
                           for k, w in tag.items()})

    def _layout(self, node: Node) -> str | None:
        """Spatial ops say their layout; ops that keep the axes of their input keep its layout;
        others: unknown."""
        fmt = node.attrs.get("data_format")
        if fmt:
            return fmt
        schema = CORE_OPS.get(node.op)
        if schema is None or not (schema.elementwise or node.op in _KEEP_INPUT_AXES):
            return None
        x = node.inputs[0] if node.inputs else None
        return x.layout if x is not None and x.rank == 4 else None
