"""Several inputs per verification (``--samples N``) and what they show together: the worst
case of each output, and outputs that hardly change (``near_constant``).

Sample 0 is the user's ``--input`` files when given, else random inputs seeded by ``seed``
(the single input verification always used); sample i > 0 is random, seeded by
``(seed, i)``. Random inputs are uniform in [-1, 1): the range most image models are
normalised to.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .compare import TensorComparison

# An output counts as near-constant when none of its values, over every sample, moves further
# from its centre than this many tolerances: a model that ignored its input and returned that
# centre would pass, or come within this factor of passing, so a MATCH on it says little.
NEAR_CONSTANT_TOLERANCES = 10.0


def random_inputs(shapes: Mapping[str, tuple], seed: int | Sequence[int] = 0
                  ) -> dict[str, np.ndarray]:
    """Seeded inputs in [-1, 1)."""
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
            for name, shape in shapes.items()}


class Samples:
    """The inputs of each sample, in the source layout, made when asked (not kept)."""

    def __init__(self, shapes: Mapping[str, tuple], given: Mapping[str, np.ndarray] | None,
                 seed: int, count: int):
        self.shapes, self.given, self.seed, self.count = dict(shapes), given, seed, count

    def __len__(self) -> int:
        return self.count

    def feeds(self, index: int) -> dict[str, np.ndarray]:
        if index == 0:
            if self.given is not None:
                return dict(self.given)
            return random_inputs(self.shapes, self.seed)
        return random_inputs(self.shapes, (self.seed, index))


def worse(current: TensorComparison | None, new: TensorComparison) -> TensorComparison:
    """The worse of two comparisons of one tensor (error over tolerance); a failure in any
    sample fails the tensor."""
    if current is None:
        return new
    if new.severity > current.severity:
        new.within = new.within and current.within
        return new
    current.within = current.within and new.within
    return current


def near_constant(name: str, references: Sequence[np.ndarray], tolerance: float
                  ) -> str | None:
    """A warning when the source's output ``name`` hardly varies over its samples.

    The centre is each element's mean over the samples (with one sample: the mean of all its
    values), so an output that depends on its input only through a negligible part (a
    classifier output near uniform, a saturated softmax, a bias-dominated map) is flagged.
    """
    arrays = [np.asarray(r, dtype=np.float64) for r in references]
    if not arrays or any(a.size == 0 for a in arrays):
        return None
    if any(not np.all(np.isfinite(a)) for a in arrays):
        return None  # non-finite outputs are compared exactly; no spread to speak of
    stacked = np.stack(arrays)
    centre = stacked.mean(axis=0) if len(arrays) > 1 else stacked.mean()
    spread = float(np.abs(stacked - centre).max())
    if spread > NEAR_CONSTANT_TOLERANCES * tolerance:
        return None
    over = f"its {len(arrays)} samples" if len(arrays) > 1 else "the sample"
    centre_text = "its mean over the samples" if len(arrays) > 1 else "their mean"
    return (f"output '{name}' is near-constant over {over}: every value stays within "
            f"{spread:.3g} of {centre_text} (tolerance {tolerance:.3g}), so a model that "
            "ignored its input would match too; the comparison says little (try --samples, "
            "real --input data, or real weights)")
