"""ONNX ModelProto -> core-op ``Model``: structure checks, inputs, the scan, the conversion."""
from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import numpy_helper

from ...errors import InvalidModelError, NodeProblem, UsageError
from ...ir import CORE, NCHW, Graph, Model, Value
from ...ir.input_shapes import batch_symbol, find_override, input_shape, is_open
from ...ir.metadata import KEY_SOURCE_FILE, KEY_SOURCE_FRAMEWORK
from ...options import ConvertOptions
from ...schemas.base import CORE_OPS, check_attr_value
from ..base import (
    Converter,
    OpRegistry,
    Refusal,
    convert_nodes,
    keeps_going,
    leave_stand_in,
)
from .context import NodeCtx
from .folding import ShapeFolder
from .structure import (
    check_arity,
    check_structure,
    check_tensor_sizes,
    node_names,
    opset_versions,
    topological_order,
)

MAX_ELEMENTS = 1 << 31  # a graph input larger than this is an absurd shape, not a model


class OnnxImporter:
    def __init__(self, proto: onnx.ModelProto, options: ConvertOptions, registry: OpRegistry,
                 source_file: str = "", external: dict | None = None, *,
                 float32_only: bool = True):
        self.proto = proto
        self.float32_only = float32_only
        self.external = external or {}  # initializers read from external data, by name
        self.options = options
        self.registry = registry
        self.source_file = source_file
        self.graph = Graph(proto.graph.name or "graph")
        self.opsets = opset_versions(proto)
        self.values: dict[str, Value] = {}
        self.consts: dict[str, np.ndarray] = {}
        self.folder: ShapeFolder | None = None
        self.used_names: set[str] = set()
        self.tensor_names: set[str] = set()  # every tensor of the graph, once outputs are chosen
        # a symbolic batch's size in this probe conversion (None: the batch is fixed), and the
        # nodes that take a number computed from it as an attribute (schemas.batch_values)
        self.probe = options.batch_probe if options.batch is None else None
        self.batch_findings: list = []

    # -- values -----------------------------------------------------------------------------
    def value(self, name: str) -> Value:
        found = self.values.get(name)
        if found is None:
            raise InvalidModelError(f"tensor '{name}' is used but never defined")
        return found

    def fold(self, name: str) -> np.ndarray | None:
        if name in self.consts:
            return self.consts[name]
        return self.folder.fold(name) if self.folder is not None else None

    def static_shape(self, name: str) -> tuple | None:
        shape = self.known_rank_shape(name)
        if shape is None or any(d is None for d in shape):
            return None
        return shape

    def known_rank_shape(self, name: str) -> tuple | None:
        if name in self.consts:
            return tuple(self.consts[name].shape)
        return self.folder.shapes.get(name) if self.folder is not None else None

    # -- main -------------------------------------------------------------------------------
    def run(self) -> Model:
        g = self.proto.graph
        order = topological_order(g)
        check_structure(g, order)
        check_tensor_sizes(g)
        selected = self._select_outputs(order)
        self._read_constants(g)
        inputs = self._graph_inputs(g)
        names = node_names(order)
        check_arity(order, names, self.opsets.get("", 0))  # ONNX inference reads them all
        self.used_names = {i for n in selected for i in n.input if i} | set(self._output_names())
        self.folder = ShapeFolder(self.proto, self.consts, {v.name: v.shape for v in inputs
                                                             if v.shape is not None},
                                  self.opsets, self.probe)
        self._make_values(g, order, inputs)
        refused = self._convert(selected, names)
        self.graph.outputs = [self.value(n) for n in self._output_names()]
        declared = {o.name: o for o in self.proto.graph.output}
        for v in self.graph.outputs:  # ONNX's convention, as for the inputs
            if v.layout is None and v.rank in (4, 5):
                v.layout = NCHW
            dims = declared[v.name].type.tensor_type.shape.dim if v.name in declared else ()
            if dims and dims[0].dim_param:  # the file's own name of this output's batch
                v.meta["declared_batch"] = dims[0].dim_param
        model = Model(self.graph, {
            KEY_SOURCE_FRAMEWORK: "onnx",
            KEY_SOURCE_FILE: os.path.basename(self.source_file) if self.source_file else "",
            "source_opset": str(self.opsets.get("", 0)),
            "source_ir_version": str(self.proto.ir_version),
        })
        for node in selected:
            model.source_op_counts[node.op_type] = model.source_op_counts.get(node.op_type, 0) + 1
        model.refused = refused
        model.batch_findings = list(self.batch_findings)
        return model

    def _output_names(self) -> list[str]:
        if self.options.outputs:
            return list(self.options.outputs)
        return [o.name for o in self.proto.graph.output]

    def _select_outputs(self, order: list[onnx.NodeProto]) -> list[onnx.NodeProto]:
        """Nodes the requested outputs need (all nodes when no outputs are requested)."""
        wanted = set(self._output_names())
        produced = {o for n in order for o in n.output}
        known = produced | {i.name for i in self.proto.graph.input} | {
            t.name for t in self.proto.graph.initializer}
        self.tensor_names = known
        missing = sorted(wanted - known)
        if missing:
            raise UsageError(f"--outputs names {', '.join(map(repr, missing))}, which is not a "
                             "tensor of the model")
        stop = set(self.options.inputs or [])
        needed: set[str] = set(wanted)
        keep: list[onnx.NodeProto] = []
        for node in reversed(order):
            if any(o in needed for o in node.output):
                if any(o in stop for o in node.output):
                    continue
                keep.append(node)
                needed.update(i for i in node.input if i)
        return list(reversed(keep))

    def _read_constants(self, g: onnx.GraphProto) -> None:
        for init in g.initializer:
            if init.name in self.external:
                self.consts[init.name] = self.external[init.name]
                continue
            try:
                self.consts[init.name] = numpy_helper.to_array(init)
            except Exception as exc:  # onnx raises assorted types on corrupt tensors
                raise InvalidModelError(f"initializer '{init.name}' cannot be read: {exc}") from exc
        for name, array in self.options.constant_inputs.items():
            try:
                array = np.asarray(array)
            except ValueError:
                array = np.asarray(None)
            if array.dtype == object:
                raise InvalidModelError(f"constant input '{name}' must be a numeric array")
            self.consts[name] = array

    def _graph_inputs(self, g: onnx.GraphProto) -> list[Value]:
        """Graph inputs that are neither initializers (IR < 4 lists those too) nor pinned."""
        by_name = {i.name: i for i in g.input}
        names = list(self.options.inputs) if self.options.inputs else [
            i.name for i in g.input if i.name not in self.consts]
        result = []
        for name in names:
            if name in self.consts:
                continue
            proto = by_name.get(name)
            dtype, shape = _type_of(proto) if proto is not None else ("float32", None)
            if proto is None and name not in self.tensor_names:
                raise UsageError(f"--inputs names '{name}', which is not a tensor of the model")
            if proto is None and name not in self.options.input_shapes:
                raise InvalidModelError(f"input '{name}' is not a graph input; give its shape")
            override = find_override(self.options.input_shapes, name)
            resolved = self._resolve_shape(name, shape, override)
            value = Value(name, dtype, resolved, NCHW if len(resolved) in (4, 5) else None)
            value.meta["source_name"] = name
            symbol = batch_symbol(shape, override, self.options.batch)
            if symbol is not None:
                value.meta["batch_symbol"] = symbol
            result.append(value)
        return result

    def _resolve_shape(self, name: str, declared: tuple | None,
                       override: list[int] | None) -> tuple:
        shape = input_shape(declared, override, self.options.batch,
                            probe=self.options.batch_probe, name=name)
        if shape is None:
            raise InvalidModelError(
                f"input '{name}' has no shape in the model; give it with --input-shape "
                f"{name}=-1,3,224,224 (-1: a symbolic batch)")
        unknown = [i for i, d in enumerate(shape) if d is None]
        if unknown:
            raise InvalidModelError(unknown_dims_message(name, declared, override, unknown))
        sizes = [d for d in shape if d is not None]  # all of them (refused above otherwise)
        if any(d < 0 for d in sizes):
            raise InvalidModelError(f"input '{name}' has a negative dimension: {_fmt(shape)}")
        count = int(np.prod([max(d, 1) for d in sizes], dtype=np.float64))
        if count > MAX_ELEMENTS:
            raise InvalidModelError(
                f"input '{name}' shape {_fmt(shape)} has {count} elements; refused as absurd")
        return tuple(shape)

    def _make_values(self, g: onnx.GraphProto, order, inputs: list[Value]) -> None:
        # Tensor names are reserved first: graph inputs and outputs keep their ONNX names.
        for v in inputs:
            self.graph.add_input(v)
            self.values[v.name] = v
        for name, array in self.consts.items():
            value = Value(name, const=array)
            value.meta["source_name"] = name
            self.graph.reserve_name(name)
            self.values[name] = value
        dtypes = self.folder.dtypes if self.folder else {}
        for node in order:
            for out in node.output:
                if not out or out in self.values:
                    continue
                value = Value(out, dtypes.get(out, "float32"))
                shape = self.folder.shapes.get(out) if self.folder else None
                if shape is not None and all(d is not None for d in shape):
                    value.shape = shape
                value.meta["source_name"] = out
                self.graph.reserve_name(out)
                self.values[out] = value

    def _convert(self, order: list[onnx.NodeProto], names: dict[int, str]) -> list[NodeProblem]:
        """Convert every node; the problems (raised unless the options say keep going)."""
        problems = self._dtype_problems() if self.float32_only else []
        keep_going = keeps_going(self.options)

        def stand_in(node: onnx.NodeProto) -> None:
            # Its outputs stay without a producer: the pipeline drops what reads them.
            leave_stand_in(self.graph, names[id(node)], node.op_type,
                           (self.values.get(i) for i in node.input if i))

        return convert_nodes(order, self.registry, "onnx",
                             lambda node: (names[id(node)], node.op_type),
                             lambda converter, node: self._convert_node(converter, node, names),
                             problems=problems, not_converted=stand_in if keep_going else None,
                             keep_going=self.graph if keep_going else None)

    def _convert_node(self, converter: Converter, node: onnx.NodeProto,
                      names: dict[int, str]) -> NodeCtx:
        name = names[id(node)]
        schema = self._schema_of(node)
        _check_attribute_types(node, schema)
        ctx = NodeCtx(self, node, name, int(schema.since_version))
        converter.fn(ctx, node)
        _check_emitted_attributes(ctx)
        return ctx  # the loop checks its unread attributes

    def _dtype_problems(self) -> list[NodeProblem]:
        """The dialect computes in float32 only: say so for other graph inputs and outputs
        (``float32_only=False`` keeps them, to test the core graph alone)."""
        problems = [
            NodeProblem(v.name, "graph input", f"element type {v.dtype}: the dialect computes "
                        "in float32 only (pin non-float inputs as constants if they are)")
            for v in self.graph.inputs if v.dtype != "float32"]
        for name in self._output_names():
            dtype = self.folder.dtypes.get(name) if self.folder else None
            if dtype is not None and dtype != "float32":
                problems.append(NodeProblem(name, "graph output", f"element type {dtype}: the "
                                            "dialect computes in float32 only"))
        return problems

    def _schema_of(self, node: onnx.NodeProto):
        """The ONNX schema of ``node`` in the model's opset (``since_version``: its version)."""
        domain = node.domain or ""
        if domain not in ("", "ai.onnx"):
            raise Refusal(f"operator domain '{domain}' is not standard ONNX")
        opset = self.opsets.get("", 0)
        try:
            return onnx.defs.get_schema(node.op_type, opset, "")
        except Exception as exc:  # onnx raises its own SchemaError type
            raise Refusal(f"op '{node.op_type}' does not exist in ONNX opset {opset}") from exc


def _check_attribute_types(node: onnx.NodeProto, schema) -> None:
    """An attribute of another type than the op's schema declares (pads as a string) is a
    broken model: named here, rather than failing inside the op's converter."""
    for attr in node.attribute:
        declared = schema.attributes.get(attr.name)
        if declared is None or attr.type == onnx.AttributeProto.UNDEFINED:
            continue  # unknown names are reported as unread; untyped ones by their value
        expected = int(declared.type.value)
        if attr.type != expected:
            kind = onnx.AttributeProto.AttributeType.Name
            raise Refusal(f"attribute '{attr.name}' is of type {kind(attr.type)}, but ONNX "
                          f"{node.op_type} takes {kind(expected)}: the model is malformed")


def _check_emitted_attributes(ctx: NodeCtx) -> None:
    """The core schemas' attribute rules, applied right after conversion: a value no core op
    accepts (transA = 2, a mode outside the list) came from the source node, so the source
    node is named, instead of the final dialect check calling it a bug of nhwc-onnx."""
    for node in ctx.emitted:
        schema = CORE_OPS.get(node.op) if node.domain == CORE else None
        if schema is None:
            continue
        for attr_name, value in node.attrs.items():
            spec = schema.attrs.get(attr_name)
            reason = check_attr_value(attr_name, spec, value) if spec is not None else None
            if reason is not None:
                raise ctx.invalid_attribute(reason)


def _type_of(proto: onnx.ValueInfoProto) -> tuple[str, tuple | None]:
    t = proto.type
    if not t.HasField("tensor_type"):
        raise InvalidModelError(f"input '{proto.name}' is not a tensor")
    tt = t.tensor_type
    try:
        dtype = str(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))
    except (KeyError, ValueError, TypeError):
        raise InvalidModelError(f"input '{proto.name}' has an unknown element type") from None
    if not tt.HasField("shape"):
        return dtype, None
    # An open dimension keeps its name (dim_param: a symbolic batch is written back under it).
    dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                 for d in tt.shape.dim)
    return dtype, dims


def _fmt(shape) -> str:
    return "(" + ",".join("?" if d is None else str(d) for d in shape) + ")"


def unknown_dims_message(name: str, declared, override, unknown: list[int]) -> str:
    """Open dimensions other than the batch: the --input-shape that fixes them."""
    shown = list(declared if override is None else override)
    text = ",".join("?" if is_open(d, i) else str(d) for i, d in enumerate(shown))
    example = ",".join("-1" if i == 0 and is_open(d) else f"D{i}" if is_open(d, i) else str(d)
                       for i, d in enumerate(shown))
    return (f"input '{name}' has unknown dimension(s) at axis {unknown} (shape ({text})); "
            f"only the batch (axis 0) may stay symbolic: give the others with --input-shape "
            f"{name}={example} (each D a size; -1 keeps the batch symbolic, a number fixes "
            "it)")
