"""The one rounding policy: which rewrites may change the last bits of a result.

A rewrite is *bit-exact* when the dialect graph computes the source's float32 operations
(negation, a - b as a + (-b), a multiply by 2^k ...). A *rounding-level* rewrite computes the
same real-valued formula with one or two extra float32 roundings; each kind below has a proven
bound, in float32 ulps of the result, on its distance from the exact (real) value of the
formula applied to the same float32 operands. These are on by default, recorded in the report
(decision kind "rounding") and refused, every one, under the ``strict`` option (``--strict``).

Bounds (u = 2^-24, the float32 unit roundoff; a result y in [2^e, 2^(e+1)) has ulp 2^(e-23) > u|y|):
- reciprocal_multiply, x / c as x * fl(1/c): (1+u)^2 - 1 < 2.000001u relative -> below 2 ulps
  (bit-exact when c is a power of two).
- mean_scale, Mean of n inputs as Sum * fl(1/n): the same two roundings on top of the sum the
  source also computes -> below 2 ulps of the exact sum / n.
- reduce_sum_scale, ReduceSum as ReduceMean * n: the mean's division (rounded once, or twice
  when the runtime multiplies by fl(1/n)) and the product -> (1+u)^3 - 1 < 3.00001u -> below
  3 ulps of the sum (bit-exact when n is a power of two).
- average_divisor_ratio, an average whose divisor the dialect's SAME/VALID forms do not count
  the same way (count_include_pad=0 with asymmetric padding, Caffe's clipped ceil windows):
  the dialect average of the same cells times a constant map fl(d_dialect / d_source): the
  average (one or two roundings), the ratio (one) and the product (one) -> (1+u)^4 - 1 < 4.0001u
  -> below 4 ulps.
- cube_multiply, Pow(x, 3) as (x * x) * x: two roundings, (1+u)^2 - 1 < 2.000001u relative
  -> below 2 ulps of the exact cube (onnxruntime, for an exponent of one value, and TensorFlow's
  graph optimiser compute the same two products; a pow() library call rounds once, almost).
"""
from __future__ import annotations

from ...ir import Node
from ..base import PassContext

ROUNDING_REWRITES: dict[str, tuple[str, int]] = {
    "reciprocal_multiply": ("x / c computed as x * (1/c)", 2),
    "mean_scale": ("Mean of n inputs computed as Sum * (1/n)", 2),
    "reduce_sum_scale": ("ReduceSum computed as ReduceMean * n", 3),
    "average_divisor_ratio": ("average pool divisor corrected by a constant ratio map", 4),
    "cube_multiply": ("x^3 computed as (x * x) * x", 2),
}


def strict(ctx: PassContext) -> bool:
    return ctx.options.strict


def refusal(kind: str) -> str:
    """Why --strict refuses a rewrite of this kind, and what converts it."""
    what, ulps = ROUNDING_REWRITES[kind]
    return (f"{what} is a rounding-level rewrite (within {ulps} float32 ulps of the exact "
            "value); --strict refuses every rewrite that is not bit-exact, without it this "
            "converts")


def record(ctx: PassContext, node: Node, kind: str, detail: str = "") -> None:
    """List a rounding-level rewrite in the report (decision kind "rounding")."""
    what, ulps = ROUNDING_REWRITES[kind]
    ctx.record("rounding", node.name, f"{node.op}: {what}" + (f" ({detail})" if detail else "")
               + f": within {ulps} float32 ulps", rewrite=kind, bound_ulps=ulps, op=node.op)
