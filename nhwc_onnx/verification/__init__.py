"""Prove a conversion: run the source in its own runtime and the dialect model through ours.

Inputs are generated in the source layout (seeded; ``samples`` of them), permuted per the
recorded I/O permutations for the converted model, and each output is compared in the source
layout; the verdict is the worst sample's. With ``layers`` every tensor both models compute is
compared too (``layers.py``, through the one mapping of ``tensors.py``). The source runs
through its frontend's reference runner (``nhwc_onnx.frameworks``), cut and reshaped the way
the conversion was (``--inputs``, ``--outputs``, ``--input-shape``, ``--batch``).
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import frameworks
from ..errors import ModelLoadError, UsageError, VerificationError
from ..ir import Model
from ..options import ConvertOptions
from ..serialize.keys import (
    KEY_IO_PERMUTATIONS,
    KEY_PREPROCESSING,
    KEY_SOURCE_NAMES,
    read_io_permutations,
    read_preprocessing,
    read_source_names,
)
from .compare import TensorComparison, compare, to_converted_layout, to_source_layout
from .layers import LayerComparison, compare_layers, first_divergence
from .samples import Samples, Spread, random_inputs, worse

__all__ = ["LayerComparison", "TensorComparison", "VerificationReport", "random_inputs",
           "verify"]


@dataclass
class VerificationReport:
    source: str
    framework: str
    atol: float
    rtol: float
    seed: int
    outputs: list[TensorComparison] = field(default_factory=list)  # worst case per output
    first_divergence: dict | None = None  # set by bisect: the first node whose output differs
    # A symbolic batch is compared at each of these sizes (each comparison says its batch);
    # empty for a model whose batch is fixed.
    batches: list[int] = field(default_factory=list)
    samples: int = 1
    layers: list[LayerComparison] | None = None  # with layers=True, in execution order
    skipped_layers: dict[str, str] = field(default_factory=dict)  # same name, other shape
    warnings: list[str] = field(default_factory=list)
    near_constant: list[str] = field(default_factory=list)  # outputs that hardly vary
    summary: dict = field(default_factory=dict)  # source ops, dialect ops, layout (the page)

    @property
    def ok(self) -> bool:
        return all(c.within for c in self.outputs)

    @property
    def first_failing_layer(self) -> LayerComparison | None:
        return next((layer for layer in self.layers or () if not layer.ok), None)

    def to_dict(self) -> dict:
        return {
            "source": self.source, "framework": self.framework, "atol": self.atol,
            "rtol": self.rtol, "seed": self.seed, "samples": self.samples, "ok": self.ok,
            "outputs": [c.to_dict() for c in self.outputs],
            "first_divergence": self.first_divergence,
            **({"batches": list(self.batches)} if self.batches else {}),
            "layers": None if self.layers is None else [c.to_dict() for c in self.layers],
            "near_constant": list(self.near_constant),
            "warnings": list(self.warnings),
        }


# The sizes a symbolic batch is verified at: one sample, several (distinct from the other
# dimensions a test uses) so that a model mixing samples cannot pass, and one above both
# probe sizes of the conversion (11, 13), where a number computed from the batch's size
# would show.
SYMBOLIC_BATCHES = (1, 3, 17)


def _io_permutations(model: Model) -> dict[str, list[int]]:
    if model.io_permutations:
        return dict(model.io_permutations)
    return read_io_permutations(model.metadata.get(KEY_IO_PERMUTATIONS))


def _source_names(model: Model) -> dict[str, str]:
    return read_source_names(model.metadata.get(KEY_SOURCE_NAMES))


def verify(
    source: str | os.PathLike,
    converted: str | os.PathLike | Model,
    options: ConvertOptions | None = None,
    *,
    feeds: Mapping[str, np.ndarray] | None = None,
    seed: int | None = None,
    atol: float = 1e-4,
    rtol: float = 1e-4,
    bisect: bool = False,
    layers: bool = False,
    samples: int = 1,
    raise_on_failure: bool = False,
) -> VerificationReport:
    """Compare ``converted`` (a dialect file or Model) with ``source`` on the same inputs.

    ``options`` are the conversion's (framework, weights, signature, the cut and shapes ...).
    Random inputs are seeded with ``seed`` (default ``options.seed``, which also seeds
    ``--weights random``, as the command line's one ``--seed`` does). ``feeds`` are in the
    source layout, keyed by the converted model's input names; they are the first of
    ``samples`` inputs, the others random (at the feeds' batch when it is symbolic).
    ``layers`` compares every tensor both models compute; ``bisect`` names the first one out
    of tolerance when an output is.
    """
    from ..runtime import run

    for name, value in (("atol", atol), ("rtol", rtol)):
        if not value >= 0:  # a negative or NaN tolerance would fail (or pass) everything
            raise UsageError(f"{value} is not a number >= 0", param_hint=name)
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise UsageError(f"{samples!r} is not a whole number >= 1", param_hint="samples")
    if feeds is not None and not isinstance(feeds, Mapping):
        raise TypeError(f"verify(feeds=...): expected a mapping NAME -> array, got "
                        f"{type(feeds).__name__}")
    options = options if options is not None else ConvertOptions()
    seed = options.seed if seed is None else seed
    fw = frameworks.of(options, source)
    if isinstance(converted, Model):
        model = converted
    else:
        from ..serialize import load

        model = load(converted)
    perms = _io_permutations(model)
    names = _source_names(model)
    shapes = {}
    for v in model.graph.inputs:
        symbolic_batch = v.shape is not None and bool(v.shape) and isinstance(v.shape[0], str)
        if v.shape is None or not all(isinstance(d, int) for d in v.shape[symbolic_batch:]):
            raise ModelLoadError(f"input '{v.name}' has no static shape; pass --input-shape")
        perm = perms.get(v.name)  # axis 0 stays first (the batch)
        shape = tuple(v.shape) if not perm else tuple(v.shape[i] for i in np.argsort(perm))
        shapes[v.name] = shape
    parsed = None
    if not isinstance(converted, Model):
        from .pairing import check_pairing

        parsed = check_pairing(source, fw, options, converted, model, shapes)
    if feeds is not None:
        missing = [n for n in shapes if n not in feeds]
        if missing:
            raise ModelLoadError(f"no value given for input(s) {', '.join(missing)}")
    # A symbolic batch is compared at each of SYMBOLIC_BATCHES (given feeds fix their own)
    symbolic = feeds is None and any(isinstance(shape[0], str) for shape in shapes.values()
                                     if shape)
    batches = SYMBOLIC_BATCHES if symbolic else (None,)
    # given feeds fix the batch of the random samples after them too
    fed_batch = next((int(np.shape(feeds[n])[0]) for n, shape in shapes.items()
                      if shape and isinstance(shape[0], str) and np.ndim(feeds[n])),
                     None) if feeds is not None else None
    inputs = {batch: Samples({n: tuple((fed_batch if batch is None else batch)
                                       if isinstance(d, str) else d for d in shape)
                              for n, shape in shapes.items()}, feeds, seed, samples)
              for batch in batches}
    reference = fw.reference(source, options)
    out_names = [v.name for v in model.graph.outputs]
    fetch = {}
    for name in out_names:
        fetch[name] = reference.fetch_name(name, names.get(name, name))
        if fetch[name] is None:
            raise ModelLoadError(f"the source '{source}' computes no tensor named "
                                 f"'{names.get(name, name)}' (output '{name}')")

    def source_feeds(batch: int | None, index: int) -> dict[str, np.ndarray]:
        # what the source sees of the converted model's raw inputs (embedded preprocessing)
        seen = preprocessed(model, inputs[batch].feeds(index), perms)
        return {names.get(k, k): v for k, v in seen.items()}

    def run_ours(batch: int | None, index: int, extra: Sequence[str] = ()) -> dict[str, np.ndarray]:
        return run(model, {n: to_converted_layout(x, perms.get(n))
                           for n, x in inputs[batch].feeds(index).items()}, extra_outputs=extra)

    report = VerificationReport(str(source), fw.name, atol, rtol, seed, samples=samples)
    report.batches = list(SYMBOLIC_BATCHES) if symbolic else []
    report.summary = _summary(model, perms, parsed)
    worst: dict[tuple[str, int | None], TensorComparison] = {}
    # Per output, only its running spread over the samples (never every sample's arrays)
    spreads = {name: Spread() for name in out_names}
    for batch in batches:
        for index in range(samples):
            ours = run_ours(batch, index)
            theirs = reference.run(source_feeds(batch, index), [fetch[n] for n in out_names])
            for name in out_names:
                actual = to_source_layout(ours[name], perms.get(name))
                c = compare(name, theirs[fetch[name]], actual, atol, rtol, batch=batch)
                c.sample = index
                worst[name, batch] = worse(worst.get((name, batch)), c)
                if batch == batches[0]:  # the spread over samples, at one batch size
                    spreads[name].add(theirs[fetch[name]])
            del ours, theirs
    report.outputs = [worst[name, batch] for batch in batches for name in out_names]
    for name in out_names:
        spread = spreads.pop(name)
        warning = spread.warning(name, atol + rtol * spread.scale)
        if warning:
            report.near_constant.append(name)
            report.warnings.append(warning)
    if layers or (bisect and not report.ok):
        from .tensors import shared_tensors

        shared = shared_tensors(model, reference, names, perms, fw.source_layout)
        # --layers: at the largest batch compared; bisect alone: where an output failed
        failed = [c for c in report.outputs if not c.within]
        at = failed[0].batch if failed and not layers else batches[-1]
        # bisect alone compares the samples where an output failed, --layers all of them
        chosen = range(samples) if layers else sorted({c.sample for c in failed
                                                       if c.batch == at})
        compared = compare_layers(
            shared, chosen, lambda i, extra: run_ours(at, i, extra),
            lambda i, fetches: reference.run(source_feeds(at, i), fetches), atol, rtol)
        if layers:
            report.layers = compared.result()
            report.skipped_layers = dict(compared.skipped)
        if bisect and not report.ok:
            report.first_divergence = first_divergence(compared.result())
    if raise_on_failure and not report.ok:
        bad = ", ".join(c.name for c in report.outputs if not c.within)
        raise VerificationError(f"outputs differ beyond tolerance: {bad}")
    return report


def preprocessed(model: Model, feeds: Mapping[str, np.ndarray], perms: Mapping[str, list[int]]
                 ) -> dict[str, np.ndarray]:
    """The source's inputs for the converted model's ``feeds`` (source layout): where the
    model embeds preprocessing (metadata ``preprocessing``), the source sees
    ((x, channels reversed if asked) - mean) / std, computed in float32 as a user would."""
    steps = read_preprocessing(model.metadata.get(KEY_PREPROCESSING))
    result = dict(feeds)
    for name, step in steps.items():
        if name not in result:
            continue
        x = np.asarray(result[name], np.float32)
        perm = perms.get(name)
        axis = perm[-1] if perm else x.ndim - 1  # the channel axis in the source layout
        if step.get("reverse_channels"):
            x = np.flip(x, axis)
        shape = [1] * x.ndim
        shape[axis] = -1
        mean = np.asarray(step["mean"], np.float32).reshape(shape)
        std = np.asarray(step["std"], np.float32).reshape(shape)
        result[name] = np.ascontiguousarray((x - mean) / std)
    return result


def _summary(model: Model, perms: Mapping[str, list[int]], parsed: Model | None) -> dict:
    """What the report page says about the conversion when no conversion report is at hand
    (``verify`` of a file): op counts of both models and the recorded layout."""
    summary: dict = {"dialect_ops": model.graph.op_counts(),
                     "layout": {name: list(perm) for name, perm in sorted(perms.items())}}
    if parsed is not None:
        counts = dict(parsed.source_op_counts) or {}
        if not counts:
            for node in parsed.graph.nodes:
                counts[node.doc or node.op] = counts.get(node.doc or node.op, 0) + 1
        summary["source_ops"] = dict(sorted(counts.items()))
    return summary
