"""A light view of GraphDef nodes: data inputs as (node, output index) refs, control inputs
apart, typed attributes. The loader's graph surgery (inlining, dead branches, pruning) works on
these, never on the protobuf messages themselves."""
from __future__ import annotations

from collections.abc import Mapping

from ...errors import InvalidModelError
from .tensors import Attrs

Ref = tuple  # (producer node name, output index)


def parse_input(text: str, node_name: str) -> tuple[bool, Ref]:
    """'^x' -> control; 'x:2' -> ('x', 2); 'x' -> ('x', 0)."""
    if text.startswith("^"):
        return True, (text[1:], 0)
    name, sep, idx = text.rpartition(":")
    if sep and idx.isdigit():
        return False, (name, int(idx))
    if sep:
        raise InvalidModelError(f"node '{node_name}' has a malformed input '{text}'")
    return False, (text, 0)


def ref_name(ref: Ref) -> str:
    return f"{ref[0]}:{ref[1]}"


class TFNode:
    """One TensorFlow node: name, op type, data inputs, control inputs and attributes."""

    __slots__ = ("attrs", "controls", "inputs", "name", "op")

    def __init__(self, name: str, op: str, inputs: list[Ref], controls: list[str], attrs: Attrs):
        self.name = name
        self.op = op
        self.inputs = inputs
        self.controls = controls
        self.attrs = attrs

    @classmethod
    def from_proto(cls, node, prefix: str = "", bound: Mapping | None = None,
                   buffer=None) -> TFNode:
        inputs: list[Ref] = []
        controls: list[str] = []
        for text in node.input:
            is_control, ref = parse_input(text, node.name)
            if is_control:
                controls.append(ref[0])
            else:
                inputs.append(ref)
        name = prefix + node.name
        return cls(name, node.op, inputs, controls, Attrs(name, node.op, node.attr, bound, buffer))

    def __repr__(self) -> str:
        return f"TFNode({self.name!r}, {self.op}, {[ref_name(r) for r in self.inputs]})"


def output_count(node: TFNode) -> int:
    """How many outputs to expose when ``node`` is a sink of the graph."""
    if node.op in ("Split", "SplitV"):
        return node.attrs.int("num_split", 1) or 1
    if node.op == "Unpack":
        return node.attrs.int("num", 1) or 1
    if node.op == "IdentityN":
        return max(len(node.inputs), 1)
    return 1
