"""Inline function-library calls (PartitionedCall, StatefulPartitionedCall, or a node whose op
type names a library function), as TensorFlow 2 graphs frozen from Keras contain them.

Inside a function body a tensor is named 'node:output_arg:index' (or just an input arg name);
in a graph it is 'node:flat_index'. Translating needs the output args of each body op: a
single output arg (possibly a list) for almost every op, the table below for the rest.
"""
from __future__ import annotations

from ...errors import InvalidModelError
from ..base import MAX_SOURCE_NODES
from .tfnodes import Ref, TFNode

CALL_OPS = ("PartitionedCall", "StatefulPartitionedCall")
IF_OPS = ("If", "StatelessIf")  # inlined when the predicate (input 0) is a constant
MAX_DEPTH = 32
# Nodes the graph may have once calls are inlined. Functions calling the next level twice grow
# exponentially (20 levels of a 5 KB file: a million copies); the expanded size is counted
# from the call graph before anything is copied.
MAX_INLINED_NODES = MAX_SOURCE_NODES

# Ops with several output args: their names in order (each arg one tensor).
_MULTI_OUTPUT_ARGS = {
    "FusedBatchNorm": ("y", "batch_mean", "batch_variance", "reserve_space_1",
                       "reserve_space_2"),
    "FusedBatchNormV2": ("y", "batch_mean", "batch_variance", "reserve_space_1",
                         "reserve_space_2"),
    "FusedBatchNormV3": ("y", "batch_mean", "batch_variance", "reserve_space_1",
                         "reserve_space_2", "reserve_space_3"),
    "Switch": ("output_false", "output_true"),
    "RefSwitch": ("output_false", "output_true"),
    "Merge": ("output", "value_index"),
    "TopKV2": ("values", "indices"),
    "Unique": ("y", "idx"),
}


class Inliner:
    """Expand calls recursively; remember where each call output really comes from."""

    def __init__(self, library, constant_pred=None):
        self.functions = {f.signature.name: f for f in library.function}
        self.aliases: dict[Ref, Ref] = {}  # call output -> body tensor (graph naming)
        self._constant_pred = constant_pred or (lambda ref: None)

    def is_call(self, node: TFNode) -> bool:
        if node.op in IF_OPS:
            return bool(node.inputs) and self._constant_pred(node.inputs[0]) is not None
        return node.op in CALL_OPS or node.op in self.functions

    def expand(self, nodes: list[TFNode]) -> list[TFNode]:
        if not self.functions:
            return nodes
        self._check_expanded_size(nodes)
        out: list[TFNode] = []
        for node in nodes:
            if self.is_call(node):
                self._inline(node, out, 0)
            else:
                out.append(node)
        return out

    def _check_expanded_size(self, nodes: list[TFNode]) -> None:
        """Refuse before inlining when the calls would expand past MAX_INLINED_NODES (an upper
        bound: an If with a constant predicate counts its larger branch)."""
        sizes: dict[str, int] = {}
        total, biggest = 0, None
        for node in nodes:
            callees = self._static_callees(node.op, node.attrs.raw)
            if not callees or (node.op in IF_OPS and not self.is_call(node)):
                total += 1
                continue
            size, name = max((self._expanded_size(f, sizes, 1, node.name), f) for f in callees)
            total += size
            if biggest is None or size > biggest[0]:
                biggest = (size, name, node.name)
            if total > MAX_INLINED_NODES:
                break
        if total > MAX_INLINED_NODES:
            # the nodes alone are within MAX_SOURCE_NODES (read bound): a call pushed it over
            assert biggest is not None
            size, name, caller = biggest
            raise InvalidModelError(
                f"function '{name}' (called by node '{caller}') expands to {size} nodes when "
                f"its calls are inlined; the graph would have {total} or more, more than the "
                f"{MAX_INLINED_NODES} nhwc-onnx converts (calls that each call the next level "
                "several times grow exponentially); refused")

    def _static_callees(self, op: str, raw_attr) -> list[str]:
        """The library functions a node (graph or body) calls, whatever its predicate."""
        keys = ("f",) if op in CALL_OPS else ("then_branch", "else_branch") if op in IF_OPS \
            else ()
        if op in self.functions:
            return [op]
        names = []
        for key in keys:
            attr = raw_attr(key)
            if attr is not None and attr.WhichOneof("value") == "func" \
                    and attr.func.name in self.functions:
                names.append(attr.func.name)
        return names

    def _expanded_size(self, fname: str, sizes: dict[str, int], depth: int, caller: str) -> int:
        """Nodes one call of ``fname`` becomes, calls inside it expanded (memoized)."""
        if fname in sizes:
            return sizes[fname]
        if depth > MAX_DEPTH:
            raise InvalidModelError(
                f"function calls nest deeper than {MAX_DEPTH} at '{caller}' (function "
                f"'{fname}'; a function that calls itself cannot be inlined)")
        size = 0
        for body in self.functions[fname].node_def:
            callees = self._static_callees(body.op, lambda k, b=body: b.attr.get(k))
            size += max((self._expanded_size(f, sizes, depth + 1, caller) for f in callees),
                        default=1)
        sizes[fname] = size
        return size

    def resolve(self, ref: Ref) -> Ref:
        seen = 0
        while ref in self.aliases:
            ref = self.aliases[ref]
            seen += 1
            if seen > 10_000:
                raise InvalidModelError(f"function outputs refer to each other ('{ref[0]}')")
        return ref

    def _function_name(self, call: TFNode) -> tuple[str, dict]:
        if call.op in CALL_OPS or call.op in IF_OPS:
            key = "f"
            if call.op in IF_OPS:
                key = "then_branch" if self._constant_pred(call.inputs[0]) else "else_branch"
            raw = call.attrs.raw(key)
            if raw is None or raw.WhichOneof("value") != "func":
                raise InvalidModelError(f"node '{call.name}' ({call.op}) names no function")
            return raw.func.name, dict(raw.func.attr)
        return call.op, dict(call.attrs.attr_map)

    def _inline(self, call: TFNode, out: list[TFNode], depth: int) -> None:
        if depth > MAX_DEPTH:
            raise InvalidModelError(f"function calls nest deeper than {MAX_DEPTH} at '{call.name}'")
        fname, bound = self._function_name(call)
        fdef = self.functions.get(fname)
        if fdef is None:
            raise InvalidModelError(
                f"node '{call.name}' ({call.op}) calls function '{fname}', which the graph's "
                "library does not define"
            )
        sig = fdef.signature
        inputs = call.inputs[1:] if call.op in IF_OPS else call.inputs
        if any(a.number_attr or a.type_list_attr for a in sig.input_arg) or len(
            sig.input_arg
        ) != len(inputs):
            raise InvalidModelError(
                f"node '{call.name}' calls '{fname}' with {len(inputs)} inputs; it takes "
                f"{len(sig.input_arg)} (list-typed arguments are not supported)"
            )
        prefix = call.name + "/"
        args = {a.name: inputs[i] for i, a in enumerate(sig.input_arg)}
        body_ops = {n.name: n.op for n in fdef.node_def}

        for body in fdef.node_def:
            inputs = []
            controls: list[str] = []
            for text in body.input:
                if text.startswith("^"):
                    inner = text[1:]
                    if inner in body_ops:
                        controls.append(prefix + inner)
                    continue
                inputs.append(self._body_ref(text, args, body_ops, prefix, call.name))
            node = TFNode.from_proto(body, prefix, bound)
            node.inputs = inputs
            node.controls = controls
            if self.is_call(node):
                self._inline(node, out, depth + 1)
            else:
                out.append(node)
        for i, arg in enumerate(sig.output_arg):
            if arg.name not in fdef.ret:
                raise InvalidModelError(f"function '{fname}' does not define output '{arg.name}'")
            target = self._body_ref(fdef.ret[arg.name], args, body_ops, prefix, call.name)
            self.aliases[(call.name, i)] = target

    def _body_ref(self, text: str, args: dict, body_ops: dict, prefix: str, call: str) -> Ref:
        parts = text.split(":")
        if len(parts) == 1:
            if text in args:
                return args[text]
            if text in body_ops:
                return (prefix + text, 0)
        elif len(parts) == 3 and parts[0] in body_ops and parts[2].isdigit():
            return (prefix + parts[0], self._flat_index(body_ops[parts[0]], parts[1],
                                                        int(parts[2])))
        elif len(parts) == 2 and parts[0] in args and parts[1].isdigit():
            return args[parts[0]]
        raise InvalidModelError(f"inside the function called by '{call}': unknown tensor '{text}'")

    def _flat_index(self, op: str, arg: str, index: int) -> int:
        names = _MULTI_OUTPUT_ARGS.get(op)
        if names is None and op in self.functions:
            names = tuple(a.name for a in self.functions[op].signature.output_arg)
        if names and arg in names:
            return names.index(arg) + index
        return index
