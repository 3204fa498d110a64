"""Numeric comparison of two tensors, in the terms the report uses."""
from __future__ import annotations

from dataclasses import KW_ONLY, asdict, dataclass

import numpy as np


@dataclass
class TensorComparison:
    name: str
    source_shape: list[int]
    converted_shape: list[int]
    max_abs_error: float
    max_rel_error: float  # max |diff| / max |reference|: error relative to the output's scale
    cosine: float
    within: bool
    _: KW_ONLY  # named, never positional: a tolerance once landed in ``batch`` unseen
    batch: int | None = None  # the size of a symbolic batch this comparison ran at
    tolerance: float = 0.0  # atol + rtol * max|reference|: the largest error that passes
    sample: int = 0  # with several samples: the one this (worst) comparison comes from

    def to_dict(self) -> dict:
        data = asdict(self)
        if self.batch is None:
            del data["batch"]
        return data

    @property
    def severity(self) -> float:
        """Error over tolerance (> 1: out of tolerance); how samples pick their worst case."""
        if not self.within and self.max_abs_error <= self.tolerance:
            return float("inf")  # a NaN or infinity where the reference has none
        if self.tolerance > 0:
            return self.max_abs_error / self.tolerance
        return 0.0 if self.max_abs_error == 0 else float("inf")


def compare(
    name: str, reference: np.ndarray, actual: np.ndarray, atol: float = 1e-4,
    rtol: float = 1e-4, *, batch: int | None = None,
) -> TensorComparison:
    """Pass when max|actual - reference| <= atol + rtol * max|reference|."""
    result = _compare(name, reference, actual, atol, rtol)
    result.batch = batch
    return result


def _compare(name: str, reference: np.ndarray, actual: np.ndarray, atol: float,
             rtol: float) -> TensorComparison:
    ref = np.asarray(reference, dtype=np.float64)
    act = np.asarray(actual, dtype=np.float64)
    if ref.shape != act.shape:
        return TensorComparison(name, list(ref.shape), list(act.shape), float("inf"),
                                float("inf"), 0.0, False, tolerance=atol)
    if ref.size == 0:
        return TensorComparison(name, list(ref.shape), list(act.shape), 0.0, 0.0, 1.0, True,
                                tolerance=atol)
    finite = np.isfinite(ref) & np.isfinite(act)
    both_nan = np.isnan(ref) & np.isnan(act)
    same_nonfinite = bool(np.all((ref == act) | both_nan | finite))
    diff = np.abs(ref - act)
    diff[~finite] = 0.0 if same_nonfinite else np.inf
    max_abs = float(diff.max())
    scale = float(np.abs(ref[finite]).max()) if finite.any() else 0.0
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else float("inf"))
    r = ref[finite].ravel()
    a = act[finite].ravel()
    denom = float(np.linalg.norm(r) * np.linalg.norm(a))
    cosine = float(np.dot(r, a) / denom) if denom > 0 else (1.0 if max_abs == 0 else 0.0)
    tolerance = atol + rtol * scale
    within = same_nonfinite and max_abs <= tolerance
    return TensorComparison(name, list(ref.shape), list(act.shape), max_abs, max_rel, cosine,
                            within, tolerance=tolerance)


def to_source_layout(array: np.ndarray, perm: list[int] | None) -> np.ndarray:
    """Undo an I/O permutation (``perm`` maps source axes to ours: ours = src.transpose(perm))."""
    if not perm:
        return array
    return np.transpose(array, np.argsort(perm))


def to_converted_layout(array: np.ndarray, perm: list[int] | None) -> np.ndarray:
    if not perm:
        return array
    return np.ascontiguousarray(np.transpose(array, perm))
