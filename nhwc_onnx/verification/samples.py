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


class Spread:
    """How much one output of the source moves over the samples, kept as running per-element
    sum, minimum and maximum (three arrays, whatever the number of samples): the centre of
    an element is its mean over the samples, and its furthest value from that centre is its
    minimum or its maximum. With one sample the centre is the mean of all its values."""

    def __init__(self):
        self.count = 0
        self.total: np.ndarray | None = None
        self.low: np.ndarray | None = None
        self.high: np.ndarray | None = None
        self.scale = 0.0  # max |value| over the samples: what rtol multiplies
        self.unusable = False  # an empty or non-finite output: no spread to speak of

    def add(self, reference: np.ndarray) -> None:
        array = np.asarray(reference)
        if array.size and np.issubdtype(array.dtype, np.number):
            self.scale = max(self.scale, float(np.abs(array).max()))
        if self.unusable:
            return
        array = array.astype(np.float64)
        if not array.size or not np.all(np.isfinite(array)):
            self.unusable = True  # non-finite outputs are compared exactly
            self.total = self.low = self.high = None
            return
        self.count += 1
        if self.total is None:
            self.total, self.low, self.high = array, array.copy(), array.copy()
            return
        self.total += array
        assert self.low is not None and self.high is not None  # set with total
        np.minimum(self.low, array, out=self.low)
        np.maximum(self.high, array, out=self.high)

    def warning(self, name: str, tolerance: float) -> str | None:
        """A warning when the output hardly varies: no value further than
        NEAR_CONSTANT_TOLERANCES tolerances from its centre."""
        if self.unusable or not self.count:
            return None
        # a usable sample was added: add() set them
        assert self.total is not None and self.low is not None and self.high is not None
        if self.count > 1:
            centre = self.total / self.count
            spread = float(max((self.high - centre).max(), (centre - self.low).max()))
        else:
            spread = float(np.abs(self.total - self.total.mean()).max())
        if spread > NEAR_CONSTANT_TOLERANCES * tolerance:
            return None
        several = self.count > 1
        over = f"its {self.count} samples" if several else "the sample"
        centre_text = "its mean over the samples" if several else "their mean"
        return (f"output '{name}' is near-constant over {over}: every value stays within "
                f"{spread:.3g} of {centre_text} (tolerance {tolerance:.3g}), so a model that "
                "ignored its input would match too; the comparison says little (try "
                "--samples, real --input data, or real weights)")


def near_constant(name: str, references: Sequence[np.ndarray], tolerance: float
                  ) -> str | None:
    """A warning when the source's output ``name`` hardly varies over its samples.

    The centre is each element's mean over the samples (with one sample: the mean of all its
    values), so an output that depends on its input only through a negligible part (a
    classifier output near uniform, a saturated softmax, a bias-dominated map) is flagged.
    """
    spread = Spread()
    for reference in references:
        spread.add(reference)
    return spread.warning(name, tolerance)
