"""What each source op of a framework converts to: its frontend Declaration combined with the
core ops' declarations in ``passes/to_dialect/op_table.py``. ``nhwc-onnx ops --framework`` and
docs/ops.md print it; the per-source-op tests hold every claim to the whole pipeline.

A claim is about a node that computes on run-time data: a node whose inputs are all constant
(weights, values computed from static shapes) is folded into a constant, whatever its op.
"""
from __future__ import annotations

import json
from typing import NamedTuple

from .. import frameworks
from ..passes.to_dialect.op_table import ALWAYS, NEVER, TABLE, WHEN

# Declaration.converts of a source op computed from static shapes or constants only: folded
# into a constant, whatever the core ops it is written with (Shape, Size, Rank, ZerosLike ...).
FOLDED = "folded"
GROUPS = (ALWAYS, WHEN, NEVER)
NOTES = (
    ("Claims are about nodes that compute on run-time data: a node whose inputs are all "
    "constant (weights, or values computed from static shapes) is folded into a constant "
    "first, whatever its op."),
    ("Inputs that are parameters (shapes, axes, permutations, paddings, sizes, scales, "
    "bounds) must be constant or computed from static shapes, as in frozen graphs and "
    "exports."),
    ("Channels-first sources (ONNX, Caffe, NCHW TensorFlow) are stored NHWC: a node that "
    "would read a tensor in another axis order than it is stored (a Flatten or Reshape that "
    "mixes channels with spatial axes and feeds no weight product, ops joining tensors stored "
    "in different orders) needs a layout Transpose and is refused; --allow-transpose inserts "
    "it with a warning."),
    ("--strict also refuses the rewrites that round differently from the source "
    "(docs/rounding.md)."),
    ("With a symbolic batch, a node whose dialect form needs a constant as large as the "
    "batch (an elementwise operand that varies along H or W, the divisor correction of an "
    "AveragePool's padded border, padding with a non-zero value) is refused with the "
    "--batch N remedy: the dialect's elementwise ops do not broadcast."),
)


class SourceOpSupport(NamedTuple):
    op: str
    converts: str  # always | when | never
    condition: str  # when: the condition; never: the reason; always: ""
    dialect_ops: tuple[str, ...]
    doc: str = ""

    def to_dict(self) -> dict:
        return {"op": self.op, "converts": self.converts, "condition": self.condition,
                "dialect_ops": list(self.dialect_ops)}


def frontend_registry(framework: str):
    """The OpRegistry of a framework (a --framework name; imports the frontend, an import
    failure propagates)."""
    return frameworks.get(framework).registry()


def support_of(registry, name: str) -> SourceOpSupport:
    """The claim for source op ``name`` of ``registry`` (ValueError when it is undeclared or
    names an unknown core op: every converter must say what it emits)."""
    declared = registry.declaration(name)
    converter = registry.get(name)
    if declared is None or converter is None:
        raise ValueError(f"{registry.framework} op '{name}' declares no emitted core ops")
    unknown = [op for op in declared.emits if op not in TABLE]
    if unknown:
        raise ValueError(f"{registry.framework} op '{name}' emits unknown core op(s) {unknown}")
    doc = converter.doc
    if declared.converts == NEVER:
        return SourceOpSupport(name, NEVER, declared.condition, (), doc)
    if declared.converts == FOLDED:
        return SourceOpSupport(name, ALWAYS, "", (), doc)
    entries = {op: TABLE[op] for op in declared.emits}
    never = [op for op, e in entries.items() if e.converts == NEVER]
    if never:
        reason = "; ".join(_labelled(name, op, entries[op].condition) for op in never)
        return SourceOpSupport(name, NEVER, reason, (), doc)
    dialect = tuple(sorted({d for e in entries.values() for d in e.dialect_ops}))
    if declared.converts == ALWAYS:
        return SourceOpSupport(name, ALWAYS, "", dialect, doc)
    if declared.converts == WHEN:  # the converter's condition says it all
        return SourceOpSupport(name, WHEN, declared.condition, dialect, doc)
    conditions = [declared.condition] if declared.condition else []
    conditions += [_labelled(name, op, e.condition) for op, e in entries.items()
                   if e.converts == WHEN]
    if conditions:
        return SourceOpSupport(name, WHEN, "; ".join(conditions), dialect, doc)
    return SourceOpSupport(name, ALWAYS, "", dialect, doc)


def _labelled(source_op: str, op: str, text: str) -> str:
    """A core op's condition, named when the source op has another name."""
    return text if op == source_op else f"{op}: {text}"


def source_op_support(framework: str) -> list[SourceOpSupport]:
    """Every source op of the framework, by name."""
    registry = frontend_registry(framework)
    return [support_of(registry, name) for name in registry.names()]


def grouped(entries: list[SourceOpSupport]) -> dict[str, list[SourceOpSupport]]:
    return {g: [e for e in entries if e.converts == g] for g in GROUPS}


def as_json(entries: list[SourceOpSupport]) -> str:
    return json.dumps([e.to_dict() for e in entries], indent=2)


def as_text(framework: str, entries: list[SourceOpSupport], summary: bool = True) -> str:
    """The three groups with the counts and the notes first; without ``summary`` (named ops)
    one entry after the other, in the order given."""
    if not summary:
        return "\n".join(line for e in entries for line in _lines(e, e.converts))
    groups = grouped(entries)
    counts = ", ".join(f"{len(groups[g])} {g}" for g in GROUPS)
    lines = [f"{len(entries)} {frameworks.get(framework).package} op(s): {counts}"]
    lines += [f"- {note}" for note in NOTES]
    for group in GROUPS:
        if groups[group]:
            lines += ["", f"{group} ({len(groups[group])}):"]
            lines += [f"  {line}" for e in groups[group] for line in _lines(e)]
    return "\n".join(lines)


def _lines(e: SourceOpSupport, label: str = "") -> list[str]:
    """``op [label] dialect ops`` and, indented, the condition or the reason."""
    target = ", ".join(e.dialect_ops) or ("-" if e.converts == NEVER else "(removed or folded)")
    head = f"{e.op:<28} {label + ' ' if label else ''}{target}".rstrip()
    if not e.condition:
        return [head]
    return [head, f"    {'when' if e.converts == WHEN else 'why'}: {e.condition}"]


__all__ = [
    "GROUPS",
    "NOTES",
    "SourceOpSupport",
    "as_json",
    "as_text",
    "frontend_registry",
    "grouped",
    "source_op_support",
    "support_of",
]
