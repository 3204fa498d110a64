"""The per-tensor comparison (``--layers``): every tensor both models compute, in the
converted model's execution order, compared like an output (max abs, max rel, cosine, within
``atol + rtol * max|reference|``), worst case over the samples.

The cost is one more run of each model per sample, with the shared tensors as extra outputs;
nothing is converted again. ``--bisect`` reads the first failing entry.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .compare import TensorComparison, compare
from .tensors import SharedTensor


@dataclass
class LayerComparison:
    """One shared tensor: its worst comparison over the samples."""

    tensor: SharedTensor
    comparison: TensorComparison

    @property
    def ok(self) -> bool:
        return self.comparison.within

    def to_dict(self) -> dict:
        c, t = self.comparison, self.tensor
        return {"name": t.node, "op": t.op, "source_op": t.source_op,
                "source_name": t.source, "converted_name": t.converted,
                "shape": list(c.source_shape), "max_abs": c.max_abs_error,
                "max_rel": c.max_rel_error, "cosine": c.cosine, "tolerance": c.tolerance,
                "ok": c.within, "sample": c.sample}


class LayerComparisons:
    """Collects the shared tensors' comparisons sample by sample."""

    def __init__(self, shared: Sequence[SharedTensor], atol: float, rtol: float):
        self.shared = list(shared)
        self.atol, self.rtol = atol, rtol
        self.worst: dict[str, TensorComparison] = {}
        self.skipped: dict[str, str] = {}  # converted name -> why it was not compared

    def add(self, sample: int, ours: Mapping[str, np.ndarray],
            theirs: Mapping[str, np.ndarray]) -> None:
        """One sample: ``ours`` by converted name, ``theirs`` by fetch name."""
        for t in self.shared:
            if t.converted in self.skipped:
                continue
            ref = np.asarray(theirs[t.fetch])
            got = t.in_source_layout(np.asarray(ours[t.converted]), ref)
            if got is None:  # same name, another shape: not the same tensor
                self.skipped[t.converted] = (
                    f"shape {list(np.shape(ours[t.converted]))} in the converted model, "
                    f"{list(ref.shape)} in the source")
                self.worst.pop(t.converted, None)
                continue
            c = compare(t.source, ref, got, self.atol, self.rtol)
            c.sample = sample
            best = self.worst.get(t.converted)
            if best is None or c.severity > best.severity:
                self.worst[t.converted] = c
            elif not c.within:
                best.within = False

    def result(self) -> list[LayerComparison]:
        return [LayerComparison(t, self.worst[t.converted]) for t in self.shared
                if t.converted in self.worst]


def compare_layers(shared: Sequence[SharedTensor], samples: Sequence[int],
                   run_ours: Callable[[int, list[str]], Mapping[str, np.ndarray]],
                   run_source: Callable[[int, list[str]], Mapping[str, np.ndarray]],
                   atol: float, rtol: float) -> LayerComparisons:
    """Run both models once per sample with every shared tensor exposed, and compare."""
    layers = LayerComparisons(shared, atol, rtol)
    if not shared:
        return layers
    converted = [t.converted for t in shared]
    fetches = list(dict.fromkeys(t.fetch for t in shared))
    for sample in samples:
        layers.add(sample, run_ours(sample, converted), run_source(sample, fetches))
    return layers


def first_divergence(layers: Sequence[LayerComparison] | None) -> dict:
    """The first tensor (execution order) out of tolerance, as ``--bisect`` reports it."""
    if not layers:
        return {"node": None, "reason": "no tensor of the converted model has a source name"}
    for layer in layers:
        if not layer.ok:
            t, c = layer.tensor, layer.comparison
            return {"node": t.node, "op": t.op, "source_op": t.source_op,
                    "tensor": t.converted, "max_abs_error": c.max_abs_error,
                    "max_rel_error": c.max_rel_error}
    return {"node": None, "reason": "every comparable intermediate tensor matches"}
