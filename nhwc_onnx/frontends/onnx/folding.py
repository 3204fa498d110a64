"""Static shapes of every tensor (ONNX shape inference) and values of shape-only subgraphs.

Core ops take Squeeze axes, Slice starts, Pad pads, Resize scales ... as attributes. When an
exporter computes them with a Shape -> Gather -> Concat chain, the frontend needs the numbers:
``fold`` evaluates a tensor whose every path back to a graph input passes through Shape or Size
(so it cannot depend on runtime data), node by node with the ONNX reference evaluator.
"""
from __future__ import annotations

import contextlib

import numpy as np
import onnx

from ...schemas import batch_values

_NEVER_FOLD = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
               "Multinomial", "Bernoulli", "If", "Loop", "Scan"}
MAX_FOLD_ELEMENTS = 1 << 22  # do not materialise huge tensors just to read a few numbers
MAX_DEPTH = 400


class ShapeFolder:
    def __init__(self, proto: onnx.ModelProto, consts: dict[str, np.ndarray],
                 input_shapes: dict[str, tuple], opsets: dict[str, int],
                 probe: int | None = None):
        self.consts = consts
        self.opsets = opsets
        # a symbolic batch's size in this probe conversion: folded values computed from it
        # carry their slope in N (schemas.batch_values), by tensor name
        self.probe = probe
        self.batch_tags: dict[str, dict] = {}
        self.producers: dict[str, onnx.NodeProto] = {
            out: node for node in proto.graph.node for out in node.output if out}
        self.cache: dict[str, np.ndarray | None] = {}
        self.shapes: dict[str, tuple] = {}
        self.dtypes: dict[str, str] = {}
        self._shape_memo: dict[str, bool] = {}
        self._infer(proto, input_shapes, {})
        # Exporters compute Reshape targets from Shape ops, which ONNX's data propagation does
        # not always follow: fold those tensors and infer again with them as constants.
        known: dict[str, np.ndarray] = {}
        for _ in range(3):
            found = self._fold_shape_tensors(proto, known)
            if not found:
                break
            known.update(found)
            self.cache = {k: v for k, v in self.cache.items() if v is not None}
            self._infer(proto, input_shapes, known)
        self.shapes.update(input_shapes)

    def _fold_shape_tensors(self, proto: onnx.ModelProto, known: dict) -> dict:
        found = {}
        for node in proto.graph.node:
            for name in node.input:
                if not name or name in self.consts or name in known or name in found:
                    continue
                if not self._depends_on_shape(name):
                    continue
                value = self.fold(name)
                if value is not None and value.size <= 4096:
                    found[name] = value
        return found

    def _depends_on_shape(self, name: str) -> bool:
        """Whether a Shape or Size node is among the tensor's producers' ancestors."""
        memo = self._shape_memo
        stack = [name]
        seen: set[str] = set()
        while stack:
            current = stack.pop()
            if current in memo:
                if memo[current]:
                    memo[name] = True
                    return True
                continue
            if current in seen:
                continue
            seen.add(current)
            node = self.producers.get(current)
            if node is None:
                continue
            if node.op_type in ("Shape", "Size"):
                memo[name] = True
                return True
            stack.extend(i for i in node.input if i)
        memo[name] = False
        return False

    # -- shape inference --------------------------------------------------------------------
    def _infer(self, proto: onnx.ModelProto, input_shapes: dict[str, tuple],
               folded: dict[str, np.ndarray]) -> None:
        model = _skeleton(proto)
        if folded:
            keep = [n for n in model.graph.node
                    if not all(o in folded for o in n.output if o)]
            produced = {o for n in keep for o in n.output}
            del model.graph.node[:]
            model.graph.node.extend(keep)
            for name, array in folded.items():
                if name not in produced:
                    model.graph.initializer.append(onnx.numpy_helper.from_array(array, name))
        # Pinned inputs (constant_inputs) become initializers so inference sees their values.
        inits = {t.name for t in proto.graph.initializer}
        declared = {i.name for i in model.graph.input}
        for name, array in self.consts.items():
            if name not in inits and name in declared:
                try:
                    model.graph.initializer.append(onnx.numpy_helper.from_array(array, name))
                except (TypeError, ValueError):
                    continue
        for inp in model.graph.input:
            shape = input_shapes.get(inp.name)
            if shape is None or not inp.type.HasField("tensor_type"):
                continue
            dims = inp.type.tensor_type.shape.dim
            del dims[:]
            for d in shape:
                dims.add().dim_value = int(d)
        try:
            inferred = _inferred(model)
            # onnx's inference keeps a ceil-mode pool's last window that starts past the
            # input (and its head padding); onnxruntime drops it. Such a pool has the
            # floor-mode windows: infer it as one (on this copy), once per pool at most.
            for _ in range(sum(n.op_type in _POOLS for n in model.graph.node)):
                if not _floor_dropped_ceil_windows(model, inferred.graph):
                    break
                inferred = _inferred(model)
        except Exception:  # noqa: BLE001 - inference is a help, not a requirement
            return
        g = inferred.graph
        for info in list(g.value_info) + list(g.output) + list(g.input):
            tt = info.type.tensor_type if info.type.HasField("tensor_type") else None
            if tt is None:
                continue
            with contextlib.suppress(KeyError, ValueError, TypeError):
                self.dtypes[info.name] = str(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))
            if tt.HasField("shape"):
                self.shapes[info.name] = tuple(
                    d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)
        for name, array in self.consts.items():
            self.shapes[name] = tuple(array.shape)
            self.dtypes[name] = str(array.dtype)

    def static_shape(self, name: str) -> tuple | None:
        shape = self.shapes.get(name)
        if shape is None or any(d is None for d in shape):
            return None
        return shape

    # -- folding ----------------------------------------------------------------------------
    def fold(self, name: str, depth: int = 0) -> np.ndarray | None:
        if name in self.consts:
            return self.consts[name]
        if name in self.cache:
            return self.cache[name]
        node = self.producers.get(name)
        if node is None or depth > MAX_DEPTH or node.op_type in _NEVER_FOLD:
            return None
        if node.domain not in ("", "ai.onnx"):
            return None
        if node.op_type in ("Shape", "Size"):
            result = self._fold_shape_op(node)
            self.cache[name] = result
            if result is not None and self.probe is not None:
                self._tag_shape_op(node)
            return result
        feeds = {}
        for inp in node.input:
            if not inp:
                continue
            value = self.fold(inp, depth + 1)
            if value is None:
                self.cache[name] = None
                return None
            feeds[inp] = value
        if any(np.size(v) > MAX_FOLD_ELEMENTS for v in feeds.values()) or \
                _predicted_size(node, feeds) > MAX_FOLD_ELEMENTS:
            self.cache[name] = None
            return None
        results = self._evaluate(node, feeds)
        for out, value in zip(node.output, results or [None] * len(node.output)):
            if out:
                self.cache[out] = value
        if results is not None and self.probe is not None:
            self._tag(node, feeds, results)
        return self.cache.get(name)

    # -- values computed from a symbolic batch's size -------------------------------------------
    def _tag_shape_op(self, node: onnx.NodeProto) -> None:
        if node.input[0] in self.consts:
            return
        shape = self.static_shape(node.input[0])
        assert self.probe is not None  # called only with one
        slopes = batch_values.shape_slopes(shape, self.probe, node.op_type)
        if slopes is not None and shape is not None and node.op_type == "Shape":
            attrs = {a.name: a.i for a in node.attribute}
            slopes = slopes[slice(attrs.get("start", 0), attrs.get("end", len(shape)))]
        self.batch_tags[node.output[0]] = batch_values.tags(slopes, [],
                                                            (node.name, node.op_type))

    def _tag(self, node: onnx.NodeProto, feeds: dict, results: list) -> None:
        metas = [self.batch_tags.get(i, {}) for i in node.input]
        if not any(metas):
            return
        assert self.probe is not None  # called only with one
        arrays = [feeds.get(i) if i else None for i in node.input]
        cast = ""
        if node.op_type == "Cast":
            to = next((a.i for a in node.attribute if a.name == "to"), 0)
            cast = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(to)).kind
        names = list(node.input)

        def evaluate(inputs: list) -> list:  # the node's own ONNX rules, on slope arrays
            given = {n: np.asarray(a) for n, a in zip(names, inputs) if n}
            found = self._evaluate(node, given)
            if found is None:
                raise ValueError("not evaluable")
            return [np.asarray(f) for f in found if f is not None]

        ins = batch_values.Inputs(
            node.op_type, arrays, [m.get(batch_values.SLOPE) for m in metas], evaluate,
            () if node.op_type == "Concat" else tuple(range(1, len(names))), cast,
            whole=len(arrays) == 1 and arrays[0] is not None and np.ndim(arrays[0]) == 1)
        outs = [r for r in results if r is not None]
        for out, slope in zip([o for o in node.output if o],
                              batch_values.propagate(ins, outs, self.probe)):
            self.batch_tags[out] = batch_values.tags(slope, metas, (node.name, node.op_type))

    def _fold_shape_op(self, node: onnx.NodeProto) -> np.ndarray | None:
        if not node.input or not node.input[0]:
            return None
        shape = self.static_shape(node.input[0])
        if shape is None:
            return None
        if node.op_type == "Size":
            return np.array(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
        attrs = {a.name: a.i for a in node.attribute}
        rank = len(shape)
        start = attrs.get("start", 0)
        end = attrs.get("end", rank)
        return np.array(shape[slice(start, end)], dtype=np.int64)

    def _evaluate(self, node: onnx.NodeProto, feeds: dict[str, np.ndarray]) -> list | None:
        from onnx.reference import ReferenceEvaluator

        helper = onnx.helper
        inputs = [helper.make_tensor_value_info(n, 0, None) for n in feeds]
        outputs = [helper.make_tensor_value_info(n, 0, None) for n in node.output if n]
        graph = helper.make_graph([node], "fold", inputs, outputs)
        opsets = [helper.make_opsetid(d, v) for d, v in self.opsets.items() if v > 0]
        model = helper.make_model(graph, opset_imports=opsets)
        model.ir_version = 8
        try:
            results = ReferenceEvaluator(model).run(None, feeds)
        except Exception:  # noqa: BLE001 - not evaluable here: the converter refuses instead
            return None
        full = iter(results)
        return [next(full) if n else None for n in node.output]


_POOLS = ("MaxPool", "AveragePool", "LpPool")


def _inferred(model: onnx.ModelProto) -> onnx.ModelProto:
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    if _data_propagation_is_bounded(inferred.graph):
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    return inferred


def _floor_dropped_ceil_windows(model: onnx.ModelProto, inferred: onnx.GraphProto) -> bool:
    """Set ceil_mode 0 on the pools of ``model`` whose ceil-mode last window starts past the
    input and its head padding (onnxruntime drops that window: the floor-mode windows
    remain). True when a pool changed."""
    shapes = {}
    for info in list(inferred.value_info) + list(inferred.input):
        dims = info.type.tensor_type.shape.dim
        shapes[info.name] = [d.dim_value if d.HasField("dim_value") else None for d in dims]
    changed = False
    for node in model.graph.node:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type not in _POOLS or not attrs.get("ceil_mode") or \
                attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            continue
        shape = shapes.get(node.input[0]) if node.input else None
        kernel = list(attrs.get("kernel_shape", []))
        if not shape or not kernel or any(d is None for d in shape[2:]):
            continue
        n = len(kernel)
        strides = list(attrs.get("strides", [1] * n))
        dilations = list(attrs.get("dilations", [1] * n))
        pads = list(attrs.get("pads", [0] * 2 * n))
        for i, size in enumerate(shape[2:2 + n]):
            span = (kernel[i] - 1) * dilations[i] + 1
            padded = size + pads[i] + pads[i + n]
            if padded < span:
                break
            count = -(-(padded - span) // strides[i]) + 1
            if (padded - span) % strides[i] and (count - 1) * strides[i] >= size + pads[i]:
                for a in node.attribute:
                    if a.name == "ceil_mode":
                        a.i = 0
                changed = True
                break
    return changed


def _data_propagation_is_bounded(graph: onnx.GraphProto) -> bool:
    """ONNX's data propagation materialises every Range it can compute (Range(0, 2^40) takes
    minutes and terabytes): allow it only when each Range's length is known and small."""
    ranges = [n.output[0] for n in graph.node if n.op_type == "Range" and n.output]
    if not ranges:
        return True
    lengths = {}
    for info in list(graph.value_info) + list(graph.output):
        tt = info.type.tensor_type
        if info.name in ranges and tt.HasField("shape") and len(tt.shape.dim) == 1:
            dim = tt.shape.dim[0]
            lengths[info.name] = dim.dim_value if dim.HasField("dim_value") else None
    return all((length := lengths.get(name)) is not None and length <= MAX_FOLD_ELEMENTS
               for name in ranges)


def _predicted_size(node: onnx.NodeProto, feeds: dict[str, np.ndarray]) -> float:
    """Output element count of ops that can blow up small inputs (0 when not predictable)."""
    ins = [feeds.get(i) for i in node.input]
    try:
        if node.op_type in ("ConstantOfShape", "Expand") and ins and ins[-1] is not None:
            return float(np.prod(np.abs(ins[-1].astype(np.float64))))
        if node.op_type == "Tile" and len(ins) > 1 and ins[1] is not None:
            data = float(np.size(ins[0])) if ins[0] is not None else 1.0  # np.size(None) is 1
            return data * float(np.prod(np.abs(ins[1].astype(np.float64))))
        if node.op_type == "Range" and len(ins) == 3 and all(v is not None for v in ins):
            start, limit, delta = (float(np.asarray(v).reshape(-1)[0]) for v in ins)
            return abs((limit - start) / delta) if delta else float("inf")
    except (ValueError, TypeError, OverflowError, IndexError):
        return float("inf")
    return 0.0


SKELETON_MAX_ELEMENTS = 4096  # initializers kept with their values (shape tensors, small vectors)


def _skeleton(proto: onnx.ModelProto) -> onnx.ModelProto:
    """The model for shape inference: big initializers become typed graph inputs.

    Inference needs the values only of small tensors (Reshape shapes, Slice starts ...).
    Copying and serializing the weights cost seconds on a 100 MB model, and a model over 2 GB
    cannot be serialized at all (inference would silently be skipped).
    """
    model = onnx.ModelProto()
    model.ir_version = proto.ir_version
    model.opset_import.extend(proto.opset_import)
    model.functions.extend(proto.functions)
    src, g = proto.graph, model.graph
    g.name = src.name
    g.node.extend(src.node)
    g.input.extend(src.input)
    g.output.extend(src.output)
    g.value_info.extend(src.value_info)
    g.sparse_initializer.extend(src.sparse_initializer)
    declared = {i.name for i in src.input}
    # Before IR 4 ONNX inference types an initializer only through a graph input of its name;
    # old exporters left weights out of the inputs (onnxruntime runs such files): list them.
    undeclared_typed = proto.ir_version < 4
    for tensor in src.initializer:
        small = int(np.prod(tensor.dims, dtype=np.int64)) <= SKELETON_MAX_ELEMENTS
        if small:
            g.initializer.append(tensor)
        if tensor.name not in declared and (not small or undeclared_typed):
            g.input.append(onnx.helper.make_tensor_value_info(
                tensor.name, tensor.data_type, list(tensor.dims)))
    return model
