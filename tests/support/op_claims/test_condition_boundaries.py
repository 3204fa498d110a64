"""The exact boundary of every condition of the op table (``passes/op_table.py``) that has
one: the last case inside converts and computes onnxruntime's numbers, the first one outside
is refused naming the node. A condition off by one (``<`` written ``<=``) fails here.

Conditions without a boundary to step over (a weight computed at run time or not, an
idiom or not) are held by the op-claim cases (``onnx_cases.py``). Conv and the pools convert a
1-D map too (more than they claim, never less): only the rank above is a boundary.
"""
from __future__ import annotations

import numpy as np
import pytest

from nhwc_onnx.passes.to_dialect.legalize import MAX_MATERIALISED_BYTES
from tests.support.op_claims.harness import Source, check_converts, check_refused
from tests.support.op_claims.onnx_cases import graph, node, one, rand


def _rank(op: str, rank: int):
    """op on a tensor of ``rank`` (distinct sizes) that a Gemm computes when it is 2-D, as a
    classifier head would feed it."""
    if rank == 2:
        return graph([node("Gemm", ["x", "w"], ["h"], name="dense", transB=1),
                      node(op, ["h"])], {"x": (2, 6)}, inits={"w": rand(5, 6)},
                     opset=14, context=["Dense", "Gemm"])
    return one(op, shapes={"x": (2, 3, 5, 7, 4, 6)[:rank]}, opset=14)


def _pow(exponent: float):
    return one("Pow", ["x", "e"], {"e": np.float32(exponent)})


def _add_broadcast(channels: int):
    """x (1, C, 256, 256) + a (1, 1, 256, 256) constant that is neither per channel nor of
    size-1 axes to replicate: materialised, C * 256 * 256 float32 values."""
    return one("Add", ["x", "c"], {"c": rand(1, 1, 256, 256)},
               shapes={"x": (1, channels, 256, 256)})


def _reduce_max(axes):
    return one("ReduceMax", axes=list(axes))


def _slice_step(axis: int, step: int):
    return one("Slice", ["x", "st", "en", "ax", "sp"], {
        "st": np.array([0], np.int64), "en": np.array([7], np.int64),
        "ax": np.array([axis], np.int64), "sp": np.array([step], np.int64)})


def _resize(scale: float):
    return one("Resize", ["x", "", "s"], {"s": np.array([1, 1, scale, 2], np.float32)},
               mode="nearest")


def _strict(build):
    """The case converted with --strict: rounding-level rewrites refused."""
    def strict(tmp_path) -> Source:
        source = build(tmp_path)
        source.options = source.options.replace(strict=True)
        return source

    return strict


def _div(divisor: float):
    return _strict(one("Div", ["x", "d"], {"d": np.float32(divisor)}))


def _mean(count: int):
    names = [f"x{i}" for i in range(count)]
    return _strict(one("Mean", names, shapes={n: (2, 3, 5, 7) for n in names}))


def _pad_reflect(before_h: int):
    """Reflect padding on H (5 rows): mirrored rows exist for at most 4."""
    return one("Pad", ["x", "p"], {"p": np.array([0, 0, before_h, 0, 0, 0, 0, 6], np.int64)},
               mode="reflect")


def _conv(rank: int):
    dims = (5, 7, 6)[:rank - 2]
    return one("Conv", ["x", "w"], {"w": rand(4, 3, *(3,) * len(dims))},
               shapes={"x": (2, 3, *dims)})


def _average_pool(rank: int):
    dims = (5, 7, 6)[:rank - 2]
    return one("AveragePool", kernel_shape=[2] * len(dims), shapes={"x": (2, 3, *dims)})


# the largest constant broadcast that may be materialised: C * 256 * 256 * 4 bytes
_MAX_CHANNELS = MAX_MATERIALISED_BYTES // (256 * 256 * 4)

BOUNDARIES = {
    # HardSwish: "the input has rank 2 or more (a channel axis)"
    "HardSwish rank 2": ("HardSwish", _rank("HardSwish", 2), True),
    "HardSwish rank 1": ("HardSwish", _rank("HardSwish", 1), False),
    # GlobalAveragePool / GlobalMaxPool: "the input is a 4-D map"
    **{f"{op} rank {r}": (op, _rank(op, r), r == 4)
       for op in ("GlobalAveragePool", "GlobalMaxPool") for r in (3, 4, 5)},
    # Pow: "the exponent is a constant 1, 2 or 3"
    **{f"Pow {e}": ("Pow", _pow(e), e in (1.0, 2.0, 3.0))
       for e in (0.0, 1.0, 3.0, 4.0, 0.5, float(np.nextafter(np.float32(3), np.float32(4))))},
    # Add (and every _BROADCAST op): "any other constant of at most 16 MB once broadcast"
    "Add 16 MB constant": ("Add", _add_broadcast(_MAX_CHANNELS), True),
    "Add 16 MB + 1 channel": ("Add", _add_broadcast(_MAX_CHANNELS + 1), False),
    # ReduceMax: "it reduces the H and W axes of a 4-D map"
    "ReduceMax H W": ("ReduceMax", _reduce_max((2, 3)), True),
    "ReduceMax H": ("ReduceMax", _reduce_max((2,)), False),
    "ReduceMax C H W": ("ReduceMax", _reduce_max((1, 2, 3)), False),
    # Slice: "steps are 1, or positive on the H and W axes of a 4-D map"
    "Slice step 1 on C": ("Slice", _slice_step(1, 1), True),
    "Slice step 2 on W": ("Slice", _slice_step(3, 2), True),
    "Slice step -1 on W": ("Slice", _slice_step(3, -1), False),
    # Div: "x * (1/c): exact for powers of two, else within one rounding, refused by --strict"
    "Div 4 strict": ("Div", _div(4.0), True),
    "Div 3 strict": ("Div", _div(3.0), False),
    # Mean: "x * (1/n): exact for n a power of two, else refused by --strict"
    "Mean of 2 strict": ("Mean", _mean(2), True),
    "Mean of 3 strict": ("Mean", _mean(3), False),
    # Pad: "reflect ... padding when no pad is negative and mirrored cells exist"
    "Pad reflect 4 of 5 rows": ("Pad", _pad_reflect(4), True),
    "Pad reflect 5 of 5 rows": ("Pad", _pad_reflect(5), False),
    # Conv, AveragePool: "a 2-D convolution (pool) of a 4-D map"
    "Conv rank 4": ("Conv", _conv(4), True),
    "Conv rank 5": ("Conv", _conv(5), False),
    "AveragePool rank 4": ("AveragePool", _average_pool(4), True),
    "AveragePool rank 5": ("AveragePool", _average_pool(5), False),
    # Softmax: "it normalises the last axis ... (after the NHWC layout)"
    "Softmax channels": ("Softmax", one("Softmax", axis=1), True),
    "Softmax width": ("Softmax", one("Softmax", axis=3), False),
    # Resize: "every axis grows by an integer factor"
    "Resize x2 H": ("Resize", _resize(2.0), True),
    "Resize x1.5 H": ("Resize", _resize(1.5), False),
}


@pytest.mark.parametrize("case", sorted(BOUNDARIES))
def test_op_table_condition_at_its_boundary(tmp_path, case):
    op, build, converts = BOUNDARIES[case]
    source: Source = build(tmp_path)
    if converts:
        check_converts("onnx", op, source)
    else:
        check_refused("onnx", op, source)


def test_boundary_cases_straddle_each_condition():
    """Each condition has a case inside and a case outside; 16 of the 36 convert."""
    inside: dict[str, set[bool]] = {}
    for op, _, converts in BOUNDARIES.values():
        inside.setdefault(op, set()).add(converts)
    assert all(sides == {True, False} for sides in inside.values()), inside
    assert sum(converts for _, _, converts in BOUNDARIES.values()) == 16
    assert len(BOUNDARIES) == 36
