"""Padding proofs: which dialect form (SAME, VALID, Pad + VALID) reads exactly the source's cells.

Everything here is per spatial axis and pure arithmetic. A windowed op along one axis is
described by the cells each output reads: output ``j`` starts at ``j*stride - begin`` and reads
``kernel`` taps ``dilation`` apart. Two formulations are equal when, for every output, they
combine the same input cells with the same weights (conv: same start; pools: same set of real
cells, same divisor, and zero padding only where it cannot win a max). A 2-D window is the
product of its two axes, so per-axis equality proves 2-D equality.

The comparisons are brute force over the actual output positions of the node (a few hundred
at most), so they are proofs for the node's own sizes, not for a formula's general case.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ...schemas.base import same_tf, valid_tf
from ...schemas.core.spatial_math import axis_plan

CONV = "conv"  # zero padding, every tap weighted (Conv, DepthwiseConv2d)
MAX = "max"  # padded cells never win
AVG = "avg"  # sum of real cells / divisor


@dataclass(frozen=True)
class AxisSource:
    """One spatial axis of a source Conv / MaxPool / AveragePool, with resolved padding."""

    size: int
    kernel: int
    stride: int
    dilation: int
    begin: int  # pad before the input
    end: int  # pad after the input
    out: int  # output size the source computes
    count_include_pad: bool = False  # AVG: divide by the window clipped to [-begin, size+end)

    @property
    def effective(self) -> int:
        return (self.kernel - 1) * self.dilation + 1


def resolve_axis(size: int, kernel: int, stride: int, dilation: int, pad_begin: int,
                 pad_end: int, auto_pad: str, ceil_mode: bool, count_include_pad: bool = False
                 ) -> AxisSource:
    """The source convention's own output size and pads (the core op's axis_plan).

    SAME_UPPER / SAME_LOWER / VALID follow TensorFlow's sizes; explicit pads round down, or up
    with ``ceil_mode`` where a window must start inside the input plus its begin pad.
    """
    out, begin, end = axis_plan(size, kernel, stride, dilation, pad_begin, pad_end, auto_pad,
                                ceil_mode)
    return AxisSource(size, kernel, stride, dilation, begin, end, out, count_include_pad)


@dataclass(frozen=True)
class AxisWindows:
    """What each output of one axis reads: tap positions (out, kernel), real-cell mask, divisor."""

    taps: np.ndarray
    real: np.ndarray
    divisor: np.ndarray  # AVG only: what each output divides by (along this axis)


class WindowTooLarge(ValueError):
    """The tap table of one axis would be absurdly large (a kernel of 2^40 under SAME)."""


MAX_WINDOW_TAPS = 1 << 26  # outputs x kernel taps per axis compared cell by cell


def _windows(out: int, begin: int, size: int, kernel: int, stride: int, dilation: int,
             extent: tuple[int, int] | None) -> AxisWindows:
    if max(out, 0) * max(kernel, 0) > MAX_WINDOW_TAPS:
        raise WindowTooLarge(f"a window of {kernel} taps over {out} outputs is too large to "
                             "prove the padding exact")
    starts = np.arange(max(out, 0)) * stride - begin
    taps = starts[:, None] + np.arange(kernel)[None, :] * dilation
    real = (taps >= 0) & (taps < size)
    if extent is None:
        divisor = real.sum(axis=1)
    else:
        lo, hi = extent
        divisor = ((taps >= lo) & (taps < hi)).sum(axis=1)
    return AxisWindows(taps, real, divisor)


def source_windows(src: AxisSource, kind: str) -> AxisWindows:
    extent = (-src.begin, src.size + src.end) if kind == AVG and src.count_include_pad else None
    return _windows(src.out, src.begin, src.size, src.kernel, src.stride, src.dilation, extent)


@dataclass(frozen=True)
class AxisForm:
    """A dialect formulation of one axis: SAME, VALID, or an explicit zero Pad then VALID."""

    mode: str  # "SAME" | "VALID" | "PAD"
    pad_begin: int = 0
    pad_end: int = 0
    touches_pad: bool = False  # PAD: some window reads a padded zero


def dialect_windows(src: AxisSource, form: AxisForm, dialect_dilation: int) -> AxisWindows:
    """Windows the dialect op computes on this axis for ``form`` (pads as the dialect defines)."""
    k, s, d, i = src.kernel, src.stride, dialect_dilation, src.size
    if form.mode == "SAME":
        out, begin, _ = same_tf(i, k, s, d)
        return _windows(out, begin, i, k, s, d, None)  # divides by real cells
    if form.mode == "VALID":
        out = valid_tf(i, k, s, d)
        return _windows(out, 0, i, k, s, d, (0, i))
    padded = i + form.pad_begin + form.pad_end
    out = valid_tf(padded, k, s, d)
    # VALID on the padded tensor: every tap is a cell of it, so the divisor is the kernel.
    return _windows(out, form.pad_begin, i, k, s, d, (-form.pad_begin, i + form.pad_end))


def _same_reads(a: AxisWindows, b: AxisWindows, kind: str) -> str | None:
    """None when the two windowings compute the same outputs, else why not."""
    if a.taps.shape[0] != b.taps.shape[0]:
        return f"output size {a.taps.shape[0]} != {b.taps.shape[0]}"
    if kind == CONV:
        if not np.array_equal(a.taps, b.taps):
            return "windows start at different positions"
        return None
    for j in range(a.taps.shape[0]):
        ra = set(a.taps[j][a.real[j]].tolist())
        rb = set(b.taps[j][b.real[j]].tolist())
        if ra != rb:
            return f"output {j} reads input cells {sorted(ra)} in the source, {sorted(rb)} here"
    if kind == AVG:
        bad = np.nonzero(a.divisor != b.divisor)[0]
        if bad.size:
            j = int(bad[0])
            return (f"output {j} divides by {int(a.divisor[j])} in the source, "
                    f"{int(b.divisor[j])} here")
    return None


@dataclass(frozen=True)
class AxisVerdict:
    """Which dialect forms equal the source on one axis, and why the others do not."""

    source: AxisSource
    same: bool
    valid: bool
    pad: AxisForm | None  # the Pad + VALID form when it reads the same cells
    reasons: dict[str, str]
    empty_window: bool  # some source window reads no real cell at all


@lru_cache(maxsize=1024)
def analyse_axis(src: AxisSource, kind: str, dialect_dilation: int = 1) -> AxisVerdict:
    """Compare the source's windows with each dialect form on one axis.

    ``dialect_dilation`` is the dilation the dialect op would use (pools have none: 1).
    For MAX the PAD form is reported even when it reads padded zeros; the caller decides with
    a range analysis whether zeros can win.

    A pure function of its (frozen) arguments, remembered: a network repeats the same few
    axes (a ResNet-50 has ~110 padded axes of ~10 kinds). Callers only read the verdict.
    """
    ref = source_windows(src, kind)
    reasons: dict[str, str] = {}
    empty = bool(ref.taps.shape[0]) and bool((~ref.real.any(axis=1)).any())
    if src.out < 1:
        why = (f"the source computes no output on this axis (size {src.size}, "
               f"window {src.effective})")
        return AxisVerdict(src, False, False, None, {"SAME": why, "VALID": why, "PAD": why}, empty)
    if kind != CONV and dialect_dilation != src.dilation and src.kernel > 1:
        why = f"dilation {src.dilation} has no dialect pooling equivalent"
        return AxisVerdict(src, False, False, None, {"SAME": why, "VALID": why, "PAD": why}, empty)
    results = {}
    for mode in ("SAME", "VALID"):
        differs = _same_reads(ref, dialect_windows(src, AxisForm(mode), dialect_dilation), kind)
        results[mode] = differs is None
        if differs:
            reasons[mode] = differs
    pad_form = _pad_form(src, ref, kind, dialect_dilation, reasons)
    if empty and kind == MAX:
        reasons["SAME"] = reasons["VALID"] = reasons["PAD"] = (
            "a source window lies entirely in the padding (its maximum is undefined)")
        return AxisVerdict(src, False, False, None, reasons, empty)
    return AxisVerdict(src, results["SAME"], results["VALID"], pad_form, reasons, empty)


def _pad_form(src: AxisSource, ref: AxisWindows, kind: str, dilation: int,
              reasons: dict[str, str]) -> AxisForm | None:
    """The explicit zero padding whose VALID windows equal the source's, if any."""
    if src.begin < 0:
        reasons["PAD"] = f"negative begin pad {src.begin}"
        return None
    e = (src.kernel - 1) * dilation + 1
    end = max(0, (src.out - 1) * src.stride + e - src.size - src.begin)
    form = AxisForm("PAD", src.begin, end)
    cand = dialect_windows(src, form, dilation)
    why = _same_reads(ref, cand, kind)
    if why:
        reasons["PAD"] = why
        return None
    touches = bool((~cand.real).any())
    return AxisForm("PAD", src.begin, end, touches)


def whole_axis(src: AxisSource, kind: str) -> bool:
    """One pooling window that reads every input cell (and, for AVG, divides by their count):
    the same as a VALID window as large as the axis (e.g. a 7x7 pool with padding on 6x6)."""
    if kind == CONV or src.out != 1:
        return False
    ref = source_windows(src, kind)
    cells = set(ref.taps[0][ref.real[0]].tolist())
    if cells != set(range(src.size)):
        return False
    return kind == MAX or int(ref.divisor[0]) == src.size


@dataclass(frozen=True)
class PaddingDecision:
    """The dialect form of a 2-D windowed op, or why there is none.

    ``mode`` is "SAME", "VALID" or "PAD" (an explicit zero Pad then VALID); ``pads`` are
    (h_begin, h_end, w_begin, w_end) for PAD. ``needs_nonnegative``: a MaxPool whose padded zeros
    are read; exact only when the input is proven >= 0.
    """

    mode: str | None
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)
    needs_nonnegative: bool = False
    reason: str = ""


def decide(axes: tuple[AxisVerdict, ...], kind: str,
           prefer_valid: bool = False) -> PaddingDecision:
    """Pick one dialect form valid on both axes: SAME, else VALID, else Pad + VALID.

    ``prefer_valid`` keeps VALID when both SAME and VALID are exact (e.g. a 1x1 kernel).
    """
    h, w = axes
    if prefer_valid and h.valid and w.valid:
        return PaddingDecision("VALID", reason="both axes read exactly TF VALID windows")
    if h.same and w.same:
        return PaddingDecision("SAME", reason="both axes read exactly TF SAME windows")
    if h.valid and w.valid:
        return PaddingDecision("VALID", reason="both axes read exactly TF VALID windows")
    if h.pad is not None and w.pad is not None:
        touches = h.pad.touches_pad or w.pad.touches_pad
        pads = (h.pad.pad_begin, h.pad.pad_end, w.pad.pad_begin, w.pad.pad_end)
        return PaddingDecision("PAD", pads, kind == MAX and touches,
                               "explicit zero Pad then VALID reads the source windows exactly")
    parts = []
    for name, ax in (("H", h), ("W", w)):
        s = ax.source
        desc = (f"{name}: size {s.size}, kernel {s.kernel}, stride {s.stride}, dilation "
                f"{s.dilation}, pads ({s.begin},{s.end}) -> {s.out} outputs")
        why = "; ".join(f"{m}: {r}" for m, r in ax.reasons.items())
        parts.append(f"{desc} [{why}]" if why else desc)
    return PaddingDecision(None, reason="no exact SAME/VALID/Pad+VALID form; " + " | ".join(parts))
