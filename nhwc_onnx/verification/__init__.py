"""Prove a conversion: run the source in its own runtime and the dialect model through ours.

Inputs are generated in the source layout (seeded), permuted per the recorded I/O permutations
for the converted model, and each output is compared in the source layout. The source runs
through its frontend's reference runner (``nhwc_onnx.frameworks``).
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from .. import frameworks
from ..errors import ModelLoadError, UsageError, VerificationError
from ..ir import Model
from ..options import ConvertOptions
from ..serialize.keys import KEY_IO_PERMUTATIONS
from .compare import TensorComparison, compare, to_converted_layout, to_source_layout


@dataclass
class VerificationReport:
    source: str
    framework: str
    atol: float
    rtol: float
    seed: int
    outputs: list[TensorComparison] = field(default_factory=list)
    first_divergence: dict | None = None  # set by bisect: the first node whose output differs
    # A symbolic batch is compared at each of these sizes (each comparison says its batch);
    # empty for a model whose batch is fixed.
    batches: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.within for c in self.outputs)

    def to_dict(self) -> dict:
        return {
            "source": self.source, "framework": self.framework, "atol": self.atol,
            "rtol": self.rtol, "seed": self.seed, "ok": self.ok,
            "outputs": [c.to_dict() for c in self.outputs],
            "first_divergence": self.first_divergence,
            **({"batches": list(self.batches)} if self.batches else {}),
        }


# The sizes a symbolic batch is verified at: one sample, and several (distinct from the
# other dimensions a test uses) so that a model mixing samples cannot pass.
SYMBOLIC_BATCHES = (1, 3)


def random_inputs(shapes: Mapping[str, tuple], seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs in [-1, 1): the range most image models are normalised to."""
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
            for name, shape in shapes.items()}


def _io_permutations(model: Model) -> dict[str, list[int]]:
    if model.io_permutations:
        return dict(model.io_permutations)
    raw = model.metadata.get(KEY_IO_PERMUTATIONS)
    return json.loads(raw) if raw else {}


def _source_names(model: Model) -> dict[str, str]:
    raw = model.metadata.get("source_names")
    return json.loads(raw) if raw else {}


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
    raise_on_failure: bool = False,
) -> VerificationReport:
    """Compare ``converted`` (a dialect file or Model) with ``source`` on the same inputs.

    ``options`` are the conversion's (framework, weights, signature ...). Random inputs are
    seeded with ``seed`` (default ``options.seed``, which also seeds ``--weights random``, as
    the command line's one ``--seed`` does). ``feeds`` are in the source layout, keyed by the
    converted model's input names.
    """
    from ..runtime import run

    for name, value in (("atol", atol), ("rtol", rtol)):
        if not value >= 0:  # a negative or NaN tolerance would fail (or pass) everything
            raise UsageError(f"{value} is not a number >= 0", param_hint=name)
    options = options if options is not None else ConvertOptions()
    seed = options.seed if seed is None else seed
    fw = frameworks.get(options.framework) if options.framework else frameworks.detect(source)
    if isinstance(converted, Model):
        model = converted
    else:
        from ..serialize import load

        model = load(converted)
    perms = _io_permutations(model)
    names = _source_names(model)
    shapes = {}
    for v in model.graph.inputs:
        symbolic_batch = bool(v.shape) and isinstance(v.shape[0], str)
        if v.shape is None or not all(isinstance(d, int) for d in v.shape[symbolic_batch:]):
            raise ModelLoadError(f"input '{v.name}' has no static shape; pass --input-shape")
        perm = perms.get(v.name)  # axis 0 stays first (the batch)
        shape = tuple(v.shape) if not perm else tuple(v.shape[i] for i in np.argsort(perm))
        shapes[v.name] = shape
    if not isinstance(converted, Model):
        from .pairing import check_pairing

        check_pairing(source, fw, options, converted, model, shapes)
    symbolic = any(isinstance(d, str) for shape in shapes.values() for d in shape[:1])
    batches = SYMBOLIC_BATCHES if symbolic and feeds is None else (None,)
    out_names = [v.name for v in model.graph.outputs]
    reference = fw.reference(source, options)
    report = VerificationReport(str(source), fw.name, atol, rtol, seed)
    report.batches = list(batches) if symbolic and feeds is None else []
    for batch in batches:
        sized = {n: tuple(batch if isinstance(d, str) else d for d in shape)
                 for n, shape in shapes.items()}
        src_feeds = dict(feeds) if feeds is not None else random_inputs(sized, seed)
        missing = [n for n in shapes if n not in src_feeds]
        if missing:
            raise ModelLoadError(f"no value given for input(s) {', '.join(missing)}")
        raw_feeds = {n: src_feeds[n] for n in shapes}
        ours = run(model, {n: to_converted_layout(src_feeds[n], perms.get(n)) for n in shapes})
        src_feeds = preprocessed(model, src_feeds, perms)  # what the source sees of those inputs
        src_out = run_source(reference, src_feeds, names, out_names)
        comparisons = []
        for name in out_names:
            actual = to_source_layout(ours[name], perms.get(name))
            comparisons.append(compare(name, src_out[name], actual, atol, rtol, batch=batch))
        report.outputs += comparisons
        if bisect and not all(c.within for c in comparisons) and \
                report.first_divergence is None:
            from .bisect import first_divergence

            report.first_divergence = first_divergence(
                fw, reference.tensor_names(),
                lambda fetches, feeds=src_feeds: run_source(reference, feeds, names, fetches),
                model, raw_feeds, perms, names, atol, rtol)
    if raise_on_failure and not report.ok:
        bad = ", ".join(c.name for c in report.outputs if not c.within)
        raise VerificationError(f"outputs differ beyond tolerance: {bad}")
    return report


def preprocessed(model: Model, feeds: Mapping[str, np.ndarray], perms: Mapping[str, list[int]]
                 ) -> dict[str, np.ndarray]:
    """The source's inputs for the converted model's ``feeds`` (source layout): where the
    model embeds preprocessing (metadata ``preprocessing``), the source sees
    ((x, channels reversed if asked) - mean) / std, computed in float32 as a user would."""
    raw = model.metadata.get("preprocessing")
    if not raw:
        return dict(feeds)
    steps = json.loads(raw)
    result = dict(feeds)
    if not isinstance(steps, dict):  # files of 0.1.0 used the key for Caffe's transform_param
        return result
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


def run_source(reference, src_feeds, names, fetch_names) -> dict[str, np.ndarray]:
    """Run the source model; feeds and results keyed by the converted model's names."""
    feed_src = {names.get(k, k): v for k, v in src_feeds.items()}
    fetch_src = [names.get(k, k) for k in fetch_names]
    out = reference.run(feed_src, fetch_src)
    return {k: out[names.get(k, k)] for k in fetch_names}
