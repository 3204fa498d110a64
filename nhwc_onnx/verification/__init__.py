"""Prove a conversion: run the source in its own runtime and the dialect model through ours.

Inputs are generated in the source layout (seeded), permuted per the recorded I/O permutations
for the converted model, and each output is compared in the source layout.
"""
from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ModelLoadError, UsageError, VerificationError
from ..frontends.base import FrontendOptions
from ..ir import Model
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

    @property
    def ok(self) -> bool:
        return all(c.within for c in self.outputs)

    def to_dict(self) -> dict:
        return {
            "source": self.source, "framework": self.framework, "atol": self.atol,
            "rtol": self.rtol, "seed": self.seed, "ok": self.ok,
            "outputs": [c.to_dict() for c in self.outputs],
            "first_divergence": self.first_divergence,
        }


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
    *,
    framework: str | None = None,
    options: FrontendOptions | None = None,
    feeds: Mapping[str, np.ndarray] | None = None,
    seed: int = 0,
    atol: float = 1e-4,
    rtol: float = 1e-4,
    bisect: bool = False,
    raise_on_failure: bool = False,
) -> VerificationReport:
    """Compare ``converted`` (a dialect file or Model) with ``source`` on the same inputs.

    ``feeds`` are in the source layout, keyed by the converted model's input names.
    """
    from ..api import detect_framework
    from ..runtime import run

    for name, value in (("atol", atol), ("rtol", rtol)):
        if not value >= 0:  # a negative or NaN tolerance would fail (or pass) everything
            raise UsageError(f"{value} is not a number >= 0", param_hint=name)
    options = options or FrontendOptions()
    fw = framework or detect_framework(source)
    if isinstance(converted, Model):
        model = converted
    else:
        from ..serialize import load

        model = load(converted)
    perms = _io_permutations(model)
    names = _source_names(model)
    shapes = {}
    for v in model.graph.inputs:
        if v.shape is None or not all(isinstance(d, int) for d in v.shape):
            raise ModelLoadError(f"input '{v.name}' has no static shape; pass --input-shape")
        perm = perms.get(v.name)
        shape = tuple(v.shape) if not perm else tuple(np.array(v.shape)[np.argsort(perm)])
        shapes[v.name] = shape
    if not isinstance(converted, Model):
        from .pairing import check_pairing

        check_pairing(source, fw, options, converted, model, shapes)
    src_feeds = dict(feeds) if feeds is not None else random_inputs(shapes, seed)
    missing = [n for n in shapes if n not in src_feeds]
    if missing:
        raise ModelLoadError(f"no value given for input(s) {', '.join(missing)}")
    ours = run(model, {n: to_converted_layout(src_feeds[n], perms.get(n)) for n in shapes})
    out_names = [v.name for v in model.graph.outputs]
    src_out = _run_source(fw, source, options, src_feeds, names, out_names)
    report = VerificationReport(str(source), fw, atol, rtol, seed)
    for name in out_names:
        actual = to_source_layout(ours[name], perms.get(name))
        report.outputs.append(compare(name, src_out[name], actual, atol, rtol))
    if bisect and not report.ok:
        from .bisect import first_divergence

        report.first_divergence = first_divergence(
            fw, source, options, model, src_feeds, perms, names, atol, rtol)
    if raise_on_failure and not report.ok:
        bad = ", ".join(c.name for c in report.outputs if not c.within)
        raise VerificationError(f"outputs differ beyond tolerance: {bad}")
    return report


def _run_source(fw, source, options, src_feeds, names, fetch_names) -> dict[str, np.ndarray]:
    """Run the source model; feeds and results keyed by the converted model's names."""
    from .runners import run_source

    weights = options.weights
    if fw == "caffe" and weights in (None, "random"):
        weights = _random_caffemodel(source, options)
    feed_src = {names.get(k, k): v for k, v in src_feeds.items()}
    fetch_src = [names.get(k, k) for k in fetch_names]
    out = run_source(fw, str(source), feed_src, fetch_src, weights=weights,
                     signature=options.signature)
    return {k: out[names.get(k, k)] for k in fetch_names}


def _random_caffemodel(prototxt, options: FrontendOptions) -> str:
    """The seeded random weights the Caffe frontend used, written where OpenCV can read them."""
    from ..frontends.caffe import random_weights
    from ..frontends.caffe.writer import write_caffemodel

    _, blobs = random_weights(str(prototxt), options)
    out = Path(tempfile.gettempdir()) / f"nhwc_onnx_verify_{os.getpid()}_{options.seed}.caffemodel"
    write_caffemodel(out, [(name, "", arrays) for name, arrays in blobs.items()])
    return str(out)
