"""Prove a conversion: run the source in its own runtime and the dialect model through ours.

Inputs are generated in the source layout (seeded; ``samples`` of them), permuted per the
recorded I/O permutations for the converted model, and each output is compared in the source
layout; the verdict is the worst sample's. With ``layers`` every tensor both models compute is
compared too (``layers.py``, through the one mapping of ``tensors.py``). The source runs
through its frontend's reference runner (``nhwc_onnx.frameworks``), cut and reshaped the way
the conversion was (``--inputs``, ``--outputs``, ``--input-shape``, ``--batch``).
"""
from __future__ import annotations

import numbers
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import frameworks
from ..errors import ModelLoadError, UsageError, VerificationError
from ..ir import Model
from ..ir.metadata import (
    KEY_IO_PERMUTATIONS,
    KEY_PREPROCESSING,
    KEY_SOURCE_NAMES,
    read_io_permutations,
    read_preprocessing,
    read_source_names,
)
from ..options import ConvertOptions
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


def _check_feeds(model: Model, feeds: Mapping, shapes: dict[str, tuple]) -> None:
    """Each given array must be what ``run`` takes for that input (its element type, the
    input's shape in the source layout): UsageError naming the input otherwise."""
    from ..runtime import feed_mismatch

    dtypes = {v.name: v.dtype for v in model.graph.inputs}
    for name, array in feeds.items():
        if name not in shapes:
            raise UsageError(f"the model has no input {name!r} (inputs: "
                             f"{', '.join(shapes)})", param_hint="feeds")
        mismatch = feed_mismatch(dtypes[name], shapes[name], np.asarray(array))
        if mismatch is not None:
            needs, has = mismatch
            layout = " (the source's layout)" if needs.startswith("shape") else ""
            verb = "has" if layout else "is"
            raise UsageError(f"input {name!r} needs {needs}{layout}, the array {verb} {has}",
                             param_hint="feeds")


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
    _check_arguments(atol=atol, rtol=rtol, samples=samples, feeds=feeds, seed=seed,
                     bisect=bisect, layers=layers, raise_on_failure=raise_on_failure)
    options = options if options is not None else ConvertOptions()
    seed = options.seed if seed is None else seed
    fw = frameworks.of(options, source)
    both = _SideBySide.prepare(source, converted, options, fw, feeds, seed, samples)
    report = VerificationReport(str(source), fw.name, atol, rtol, seed, samples=samples)
    report.batches = list(both.batches) if both.symbolic else []
    report.summary = _summary(both.model, both.perms, both.parsed)
    both.compare_outputs(report, atol, rtol)
    if layers or (bisect and not report.ok):
        both.compare_layers(report, layers, bisect, atol, rtol)
    if raise_on_failure and not report.ok:
        bad = ", ".join(c.name for c in report.outputs if not c.within)
        raise VerificationError(f"outputs differ beyond tolerance: {bad}")
    return report


def _check_arguments(*, atol, rtol, samples, feeds, seed, **flags) -> None:
    """Every argument of ``verify`` once, before any work: a wrong type is a TypeError naming
    the argument (``atol="x"`` would fail deep inside numpy), a wrong value a UsageError."""
    def wrong(name: str, expected: str, value) -> TypeError:
        return TypeError(f"{name}: expected {expected}, got {type(value).__name__} "
                         f"{value!r:.60}")

    for name, value in (("atol", atol), ("rtol", rtol)):
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            raise wrong(name, "a number >= 0", value)
        if not float(value) >= 0:  # a negative or NaN tolerance would fail (or pass) everything
            raise UsageError(f"{value} is not a number >= 0", param_hint=name)
    if seed is not None and (isinstance(seed, bool) or not hasattr(type(seed), "__index__")):
        raise wrong("seed", "an int", seed)
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise wrong(name, "True or False", value)
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise UsageError(f"{samples!r} is not a whole number >= 1", param_hint="samples")
    if feeds is not None and not isinstance(feeds, Mapping):
        raise wrong("feeds", "a mapping input name -> array", feeds)


class _SideBySide:
    """The source and the converted model on the same inputs, stage by stage: ``prepare``
    the inputs (per batch size compared), run the source and ours, compare the outputs, then
    (``--layers``, ``--bisect``) every tensor both compute."""

    def __init__(self, source, model: Model, parsed: Model | None, reference, perms, names,
                 inputs: dict, batches: tuple, symbolic: bool, samples: int, fw):
        self.source, self.model, self.parsed, self.reference = source, model, parsed, reference
        self.perms, self.names, self.inputs = perms, names, inputs
        self.batches, self.symbolic, self.samples, self.fw = batches, symbolic, samples, fw
        self.out_names = [v.name for v in model.graph.outputs]
        self.fetch: dict[str, str] = {}
        for name in self.out_names:
            found = reference.fetch_name(name, names.get(name, name))
            if found is None:
                raise ModelLoadError(f"the source '{source}' computes no tensor named "
                                     f"'{names.get(name, name)}' (output '{name}')")
            self.fetch[name] = found

    @classmethod
    def prepare(cls, source, converted, options: ConvertOptions, fw, feeds, seed: int,
                samples: int) -> _SideBySide:
        if isinstance(converted, Model):
            model = converted
        else:
            from ..serialize import load

            model = load(converted)
        perms = _io_permutations(model)
        names = _source_names(model)
        shapes = _source_layout_shapes(model, perms)
        parsed = None
        if not isinstance(converted, Model):
            from .pairing import check_pairing

            parsed = check_pairing(source, fw, options, converted, model, shapes)
        if feeds is not None:
            missing = [n for n in shapes if n not in feeds]
            if missing:
                raise ModelLoadError(f"no value given for input(s) {', '.join(missing)}")
            _check_feeds(model, feeds, shapes)
        # A symbolic batch is compared at each of SYMBOLIC_BATCHES (given feeds fix their own)
        symbolic = feeds is None and any(isinstance(shape[0], str)
                                         for shape in shapes.values() if shape)
        batches = SYMBOLIC_BATCHES if symbolic else (None,)
        # given feeds fix the batch of the random samples after them too
        fed_batch = next((int(np.shape(feeds[n])[0]) for n, shape in shapes.items()
                          if shape and isinstance(shape[0], str) and np.ndim(feeds[n])),
                         None) if feeds is not None else None
        inputs = {batch: Samples({n: tuple((fed_batch if batch is None else batch)
                                           if isinstance(d, str) else d for d in shape)
                                  for n, shape in shapes.items()}, feeds, seed, samples)
                  for batch in batches}
        return cls(source, model, parsed, fw.reference(source, options), perms, names, inputs,
                   batches, symbolic, samples, fw)

    def source_feeds(self, batch: int | None, index: int) -> dict[str, np.ndarray]:
        # what the source sees of the converted model's raw inputs (embedded preprocessing)
        seen = preprocessed(self.model, self.inputs[batch].feeds(index), self.perms)
        return {self.names.get(k, k): v for k, v in seen.items()}

    def run_source(self, batch: int | None, index: int, fetches) -> dict[str, np.ndarray]:
        return self.reference.run(self.source_feeds(batch, index), fetches)

    def run_ours(self, batch: int | None, index: int, extra: Sequence[str] = ()
                 ) -> dict[str, np.ndarray]:
        from ..runtime import run

        return run(self.model, {n: to_converted_layout(x, self.perms.get(n))
                                for n, x in self.inputs[batch].feeds(index).items()},
                   extra_outputs=extra)

    def compare_outputs(self, report: VerificationReport, atol: float, rtol: float) -> None:
        """The worst comparison per output and batch size; a near-constant output warned."""
        worst: dict[tuple[str, int | None], TensorComparison] = {}
        # Per output, only its running spread over the samples (never every sample's arrays)
        spreads = {name: Spread() for name in self.out_names}
        for batch in self.batches:
            for index in range(self.samples):
                ours = self.run_ours(batch, index)
                theirs = self.run_source(batch, index, [self.fetch[n] for n in self.out_names])
                for name in self.out_names:
                    actual = to_source_layout(ours[name], self.perms.get(name))
                    c = compare(name, theirs[self.fetch[name]], actual, atol, rtol, batch=batch)
                    c.sample = index
                    worst[name, batch] = worse(worst.get((name, batch)), c)
                    if batch == self.batches[0]:  # the spread over samples, at one batch size
                        spreads[name].add(theirs[self.fetch[name]])
                del ours, theirs
        report.outputs = [worst[name, batch] for batch in self.batches
                          for name in self.out_names]
        for name in self.out_names:
            spread = spreads.pop(name)
            warning = spread.warning(name, atol + rtol * spread.scale)
            if warning:
                report.near_constant.append(name)
                report.warnings.append(warning)

    def compare_layers(self, report: VerificationReport, layers: bool, bisect: bool,
                       atol: float, rtol: float) -> None:
        from .tensors import shared_tensors

        shared = shared_tensors(self.model, self.reference, self.names, self.perms,
                                self.fw.source_layout)
        # --layers: at the largest batch compared; bisect alone: where an output failed
        failed = [c for c in report.outputs if not c.within]
        at = failed[0].batch if failed and not layers else self.batches[-1]
        # bisect alone compares the samples where an output failed, --layers all of them
        chosen = range(self.samples) if layers else sorted({c.sample for c in failed
                                                            if c.batch == at})
        compared = compare_layers(
            shared, chosen, lambda i, extra: self.run_ours(at, i, extra),
            lambda i, fetches: self.run_source(at, i, fetches), atol, rtol)
        if layers:
            report.layers = compared.result()
            report.skipped_layers = dict(compared.skipped)
        if bisect and not report.ok:
            report.first_divergence = first_divergence(compared.result())


def _source_layout_shapes(model: Model, perms) -> dict[str, tuple]:
    """Each input's shape as the source takes it (a symbolic batch stays a name)."""
    shapes = {}
    for v in model.graph.inputs:
        symbolic_batch = v.shape is not None and bool(v.shape) and isinstance(v.shape[0], str)
        if v.shape is None or not all(isinstance(d, int) for d in v.shape[symbolic_batch:]):
            raise ModelLoadError(f"input '{v.name}' has no static shape; pass --input-shape")
        perm = perms.get(v.name)  # axis 0 stays first (the batch)
        shapes[v.name] = (tuple(v.shape) if not perm
                          else tuple(v.shape[i] for i in np.argsort(perm)))
    return shapes


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
