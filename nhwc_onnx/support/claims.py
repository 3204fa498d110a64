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
    ("A symbolic batch is no static shape: a number computed from its size (Shape or Size of "
    "a tensor that carries it, and what is computed from them) folds only where it is the "
    "batch itself, as entry 0 of a Reshape target or of Resize sizes; any other use (a Min, a "
    "comparison, a rounding division, data, another parameter) is refused with the remedy "
    "--batch N."),
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
    """Every source op of the framework with a converter and, as never, the framework's ops
    without one that the listing shows (every ONNX default-domain op; for TensorFlow the raw
    ops models often hold), by name."""
    registry = frontend_registry(framework)
    found = [support_of(registry, name) for name in registry.names()]
    found += [no_converter(framework, name) for name in _listed_without_converter(framework)
              if name not in registry]
    return sorted(found, key=lambda e: e.op)


# Why a source op that has no converter has no exact form, where more can be said than that.
_PER_SAMPLE_STATISTICS = ("it divides by a standard deviation computed from the data at run "
                          "time: no dialect op divides by a tensor")
NO_CONVERTER_REASONS = {
    "LayerNormalization": _PER_SAMPLE_STATISTICS,
    "InstanceNormalization": _PER_SAMPLE_STATISTICS,
    "GroupNormalization": _PER_SAMPLE_STATISTICS,
    "MeanVarianceNormalization": _PER_SAMPLE_STATISTICS,
    "Mod": "a remainder needs rounding to integers, which no dialect op computes",
    "Einsum": "no converter reads einsum equations (a product of two run-time tensors or a "
              "contraction with a constant is not derived from them)",
}
# TensorFlow raw ops without a converter that the full listing shows (any other raw op is
# answered when named: TensorFlow's own registry knows it).
_TF_LISTED = ("Einsum", "Mod")


def _listed_without_converter(framework: str) -> list[str]:
    if framework == "onnx":
        return sorted(_onnx_op_names())
    if framework == "tf":
        return list(_TF_LISTED)
    return []


def _onnx_op_names() -> set[str]:
    import onnx

    return {s.name for s in onnx.defs.get_all_schemas() if s.domain in ("", "ai.onnx")}


def _tf_op_exists(name: str) -> bool:
    if name in _TF_LISTED:
        return True
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # its start-up chatter is no answer
    try:
        import tensorflow  # noqa: F401 - registers the raw ops
        from tensorflow.python.framework import op_def_registry
    except ImportError as exc:
        from ..errors import MissingDependencyError

        raise MissingDependencyError("tensorflow", "tf",
                                     "naming a TensorFlow op without a converter") from exc
    return op_def_registry.get(name) is not None


def no_converter(framework: str, name: str) -> SourceOpSupport:
    """The never claim of a source op that has no converter."""
    reason = NO_CONVERTER_REASONS.get(name, f"nhwc-onnx has no {framework} converter for it")
    return SourceOpSupport(name, NEVER, reason, ())


def knows_every_op(framework: str) -> bool:
    """Whether ``is_source_op`` knows the framework's ops without a converter too."""
    return _op_catalogue(framework) is not None


def _op_catalogue(framework: str):
    """name -> whether the framework has that op: the ONNX default domain's schemas and
    TensorFlow's raw ops; None where only the converted ops are known (Caffe)."""
    if framework == "onnx":
        return lambda name: name in _onnx_op_names()
    if framework == "tf":
        return _tf_op_exists
    return None


def is_source_op(framework: str, name: str) -> bool:
    """Whether ``name`` is an op of the framework (with a converter or not): the ONNX default
    domain's schemas, TensorFlow's raw ops; for other frameworks, the converted ones only."""
    if name in frontend_registry(framework):
        return True
    catalogue = _op_catalogue(framework)
    return catalogue is not None and catalogue(name)


def grouped(entries: list[SourceOpSupport]) -> dict[str, list[SourceOpSupport]]:
    return {g: [e for e in entries if e.converts == g] for g in GROUPS}


def as_json(entries: list[SourceOpSupport]) -> str:
    return json.dumps([e.to_dict() for e in entries], indent=2)


def as_text(framework: str, entries: list[SourceOpSupport], summary: bool = True) -> str:
    """The three groups with the counts and the notes first; without ``summary`` (named ops)
    one entry after the other, in the order given."""
    if not summary:
        lines = [line for e in entries for line in _lines(e, e.converts)]
        if any(e.converts != ALWAYS for e in entries):
            lines.append(f"- {NOTES[0]}")  # a never op still folds on constant inputs
        return "\n".join(lines)
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
    "is_source_op",
    "knows_every_op",
    "no_converter",
    "source_op_support",
    "support_of",
]
