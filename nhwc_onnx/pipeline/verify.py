"""Verify a pipeline end to end: the source in its own runtime and the pipeline on the same
seeded inputs (a symbolic batch at 1 and 3); with ``layers`` also every tensor passed between
segments, against the source's tensor of that name."""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import frameworks
from ..errors import ModelLoadError, UsageError, VerificationError
from ..ir.metadata import KEY_PREPROCESSING
from ..options import ConvertOptions
from ..verification import SYMBOLIC_BATCHES, VerificationReport
from ..verification.compare import compare, to_converted_layout, to_source_layout
from ..verification.layers import LayerComparison
from ..verification.samples import Samples, worse
from ..verification.tensors import Alignment, SharedTensor
from .manifest import DIALECT


def verify_pipeline(source, pipeline, options: ConvertOptions, *, feeds=None,
                    seed: int | None = None, atol: float = 1e-4, rtol: float = 1e-4,
                    layers: bool = False, samples: int = 1, raise_on_failure: bool = False
                    ) -> VerificationReport:
    for name, value in (("atol", atol), ("rtol", rtol)):
        if not value >= 0:
            raise UsageError(f"{value} is not a number >= 0", param_hint=name)
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise UsageError(f"{samples!r} is not a whole number >= 1", param_hint="samples")
    seed = options.seed if seed is None else seed
    fw = frameworks.get(options.framework) if options.framework else frameworks.detect(source)
    manifest = pipeline.manifest
    back = dict(manifest.extra.get("source_names") or {})  # pipeline name -> source name
    back.update({new: old for old, new in options.rename.items()})
    shapes = {}
    for e in manifest.inputs:
        shape = list(e.shape)
        if e.permutation:
            shape = [shape[i] for i in np.argsort(e.permutation)]
        shapes[e.name] = shape
    symbolic = feeds is None and any(shape and isinstance(shape[0], str)
                                     for shape in shapes.values())
    batches = SYMBOLIC_BATCHES if symbolic else (None,)
    inputs = {b: Samples({n: tuple(b if isinstance(d, str) else d for d in s)
                          for n, s in shapes.items()}, feeds, seed, samples) for b in batches}
    reference = fw.reference(source, options)
    outs = [e for e in manifest.outputs]
    fetch = {}
    for e in outs:
        fetch[e.name] = reference.fetch_name(e.name, back.get(e.name, e.name))
        if fetch[e.name] is None:
            raise ModelLoadError(f"the source '{source}' computes no tensor named "
                                 f"'{back.get(e.name, e.name)}'")
    passed = _passed_tensors(manifest) if layers else []
    layer_fetch = {e.name: reference.fetch_name(e.name, back.get(e.name, e.name))
                   for e in passed}
    passed = [e for e in passed if layer_fetch[e.name] is not None]
    perms = {e.name: e.permutation for e in manifest.inputs + manifest.outputs + passed}

    def source_feeds(batch, index):
        raw = inputs[batch].feeds(index)
        seen = _preprocessed(pipeline, raw, perms)
        return {back.get(k, k): v for k, v in seen.items()}

    report = VerificationReport(str(source), fw.name, atol, rtol, seed, samples=samples)
    report.batches = [b for b in batches if b is not None] if symbolic else []
    worst: dict[Any, Any] = {}
    layer_worst: dict[Any, Any] = {}
    for batch in batches:
        for index in range(samples):
            ours = pipeline.run({n: to_converted_layout(x, perms.get(n))
                                 for n, x in inputs[batch].feeds(index).items()},
                                [e.name for e in passed])
            fetches = [fetch[e.name] for e in outs] + [layer_fetch[e.name] for e in passed]
            theirs = reference.run(source_feeds(batch, index), list(dict.fromkeys(fetches)))
            for e in outs:
                c = compare(e.name, theirs[fetch[e.name]],
                            to_source_layout(ours[e.name], e.permutation), atol, rtol,
                            batch=batch)
                c.sample = index
                worst[e.name, batch] = worse(worst.get((e.name, batch)), c)
            for e in passed:
                c = compare(e.name, theirs[layer_fetch[e.name]],
                            to_source_layout(ours[e.name], e.permutation), atol, rtol)
                c.sample = index
                layer_worst[e.name] = worse(layer_worst.get(e.name), c)
    report.outputs = [worst[e.name, b] for b in batches for e in outs]
    if layers:
        report.layers = [LayerComparison(
            SharedTensor(e.name, back.get(e.name, e.name), layer_fetch[e.name],
                         _producer(manifest, e.name), "segment boundary", None,
                         (Alignment(tuple(e.permutation) if e.permutation else None),)),
            layer_worst[e.name]) for e in passed]
    if raise_on_failure and not report.ok:
        bad = ", ".join(c.name for c in report.outputs if not c.within)
        raise VerificationError(f"outputs differ beyond tolerance: {bad}")
    return report


def _passed_tensors(manifest) -> list:
    produced = {e.name: e for s in manifest.segments for e in s.outputs}
    return list({e.name: produced[e.name] for s in manifest.segments for e in s.inputs
                 if e.name in produced}.values())


def _producer(manifest, name: str) -> str:
    for seg in manifest.segments:
        if any(e.name == name for e in seg.outputs):
            return seg.file
    return "?"


def _preprocessed(pipeline, feeds, perms):
    """What the source sees of the raw inputs: each dialect segment's embedded
    preprocessing of the pipeline inputs it reads."""
    from ..verification import preprocessed

    result = dict(feeds)
    for seg in pipeline.manifest.segments:
        if seg.kind != DIALECT:
            continue
        model = pipeline.models[seg.file]
        mine = {e.name for e in seg.inputs} & set(result)
        if mine and model.metadata.get(KEY_PREPROCESSING):
            done = preprocessed(model, {n: result[n] for n in mine}, perms)
            result.update(done)
    return result
