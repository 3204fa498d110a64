"""The rounding policy (nhwc_onnx/passes/to_dialect/rounding.py): every rounding-level rewrite stays
within its stated float32 ulp bound of a float64 reference, is listed in the report, and is refused
under ``strict``; bit-exact forms (powers of two) are neither listed nor refused.

Inputs for sums are integers times one power of two, so every sum is exact in float32 and the
measured error is the rewrite's own (the source's summation rounding is not the rewrite's).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.passes.to_dialect.rounding import ROUNDING_REWRITES
from tests.passes.dialect_oracles import Builder, convert, pool_ref, run_dialect

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SHAPE = (1, 3, 5, 4)
SIZE = int(np.prod(SHAPE))


def bound(kind: str) -> int:
    return ROUNDING_REWRITES[kind][1]


def ulps(got: np.ndarray, exact: np.ndarray) -> float:
    """Largest |got - exact| in float32 ulps at the exact value."""
    exact = np.asarray(exact, np.float64)
    unit = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return float((np.abs(got.astype(np.float64) - exact) / unit).max())


def rounding_kinds(ctx) -> list[str]:
    return [d.data["rewrite"] for d in ctx.decisions if d.kind == "rounding"]


floats = st.floats(-1e6, 1e6, allow_nan=False, allow_subnormal=False, width=32).filter(
    lambda v: v == 0 or abs(v) > 1e-20)
divisors = st.floats(0.0009765625, 1024.0, width=32).filter(
    lambda v: np.frexp(v)[0] != 0.5).flatmap(lambda v: st.sampled_from([v, -v]))
scaled_ints = st.tuples(st.lists(st.integers(-1000, 1000), min_size=SIZE, max_size=SIZE),
                        st.integers(-30, 30))


def _scaled(values_and_exponent) -> np.ndarray:
    values, exponent = values_and_exponent
    return (np.array(values, np.float64) * 2.0 ** exponent).reshape(SHAPE).astype(np.float32)


# -- x / c as x * (1/c) ------------------------------------------------------------------------
def _div_model(c):
    b = Builder(SHAPE)
    return b.model(b.op("Div", [b.x, b.const(np.asarray(c, np.float32))], SHAPE, name="div"))


@SETTINGS
@given(x=st.lists(floats, min_size=SIZE, max_size=SIZE), c=divisors, per_channel=st.booleans())
def test_division_by_a_constant_within_its_bound(x, c, per_channel):
    x = np.array(x, np.float32).reshape(SHAPE)
    cv = np.float32(c) * np.array([1, 3, 0.7, 5], np.float32) if per_channel else np.float32(c)
    model = _div_model(cv)
    ctx = convert(model)
    assert rounding_kinds(ctx) == ["reciprocal_multiply"]
    exact = x.astype(np.float64) / np.asarray(cv, np.float64)
    assert ulps(run_dialect(model, x), exact) < bound("reciprocal_multiply")


def test_division_by_a_power_of_two_is_bit_exact_and_allowed_under_strict():
    model = _div_model(np.float32(0.25))
    ctx = convert(model, strict=True)
    assert rounding_kinds(ctx) == []
    x = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)
    assert np.array_equal(run_dialect(model, x), x / np.float32(0.25))


# -- Mean of n inputs as Sum * (1/n) -----------------------------------------------------------
def _mean_model(n):
    b = Builder(SHAPE)
    relu = b.op("Relu", [b.x], SHAPE, name="relu")
    return b.model(b.op("Mean", [b.x if i % 2 else relu for i in range(n)], SHAPE, name="mean"))


@SETTINGS
@given(data=scaled_ints, n=st.sampled_from([3, 5, 6, 7]))
def test_mean_of_n_inputs_within_its_bound(data, n):
    x = _scaled(data)
    model = _mean_model(n)
    assert rounding_kinds(convert(model)) == ["mean_scale"]
    terms = [x if i % 2 else np.maximum(x, 0) for i in range(n)]
    exact = np.sum([t.astype(np.float64) for t in terms], axis=0) / n
    assert ulps(run_dialect(model, x), exact) < bound("mean_scale")


# -- ReduceSum as ReduceMean * n ---------------------------------------------------------------
def _reduce_sum_model():
    b = Builder(SHAPE)
    out = (1, 1, 1, SHAPE[3])
    return b.model(b.op("ReduceSum", [b.x], out, axes=[1, 2], keepdims=1, name="rsum"))


@SETTINGS
@given(data=scaled_ints)
def test_reduce_sum_within_its_bound(data):
    x = _scaled(data)
    model = _reduce_sum_model()
    assert rounding_kinds(convert(model)) == ["reduce_sum_scale"]  # 15 cells
    exact = x.astype(np.float64).sum(axis=(1, 2), keepdims=True)
    assert ulps(run_dialect(model, x), exact) < bound("reduce_sum_scale")


# -- Pow(x, 3) as (x * x) * x; Pow(x, 2) as x * x is bit-exact ------------------------------------
def _pow_model(exponent):
    b = Builder(SHAPE)
    return b.model(b.op("Pow", [b.x, b.const(np.float32(exponent), "e")], SHAPE, name="pow"))


cube_bases = st.floats(-2.0 ** 40, 2.0 ** 40, allow_nan=False, allow_subnormal=False,
                       width=32).filter(
    lambda v: v == 0 or abs(v) > 2.0 ** -40)  # the cube stays a normal float32


@SETTINGS
@given(x=st.lists(cube_bases, min_size=SIZE, max_size=SIZE))
def test_cube_within_its_bound(x):
    x = np.array(x, np.float32).reshape(SHAPE)
    model = _pow_model(3)
    assert rounding_kinds(convert(model)) == ["cube_multiply"]
    exact = x.astype(np.float64) ** 3
    assert ulps(run_dialect(model, x), exact) < bound("cube_multiply")


@SETTINGS
@given(x=st.lists(floats, min_size=SIZE, max_size=SIZE))
def test_square_is_bit_exact_and_allowed_under_strict(x):
    x = np.array(x, np.float32).reshape(SHAPE)
    model = _pow_model(2)
    assert rounding_kinds(convert(model, strict=True)) == []
    correctly_rounded = (x.astype(np.float64) ** 2).astype(np.float32)  # exact in float64
    assert np.array_equal(run_dialect(model, x), correctly_rounded)


# -- average excluding padding, asymmetric windows: Pad + VALID average * ratio map ------------
POOL_IN, POOL_OUT = (1, 6, 7, 4), (1, 3, 4, 4)


def _avg_model():
    b = Builder(POOL_IN)
    return b.model(b.op("AveragePool", [b.x], POOL_OUT, name="avg", data_format="NHWC",
                        kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                        count_include_pad=0))


@SETTINGS
@given(values=st.lists(st.integers(-1000, 1000), min_size=168, max_size=168),
       exponent=st.integers(-30, 30))
def test_exclude_padding_average_within_its_bound(values, exponent):
    x = (np.array(values, np.float64) * 2.0 ** exponent).reshape(POOL_IN).astype(np.float32)
    model = _avg_model()
    assert rounding_kinds(convert(model)) == ["average_divisor_ratio"]
    exact = pool_ref(x.astype(np.float64), "avg", (3, 3), (2, 2), (1, 1), POOL_OUT[1:3])
    assert ulps(run_dialect(model, x), exact) < bound("average_divisor_ratio")


# -- strict refuses each rounding-level rewrite, naming it ---------------------------------------
@pytest.mark.parametrize("build,kind", [
    (lambda: _div_model(np.float32(3)), "reciprocal_multiply"),
    (lambda: _mean_model(3), "mean_scale"),
    (_reduce_sum_model, "reduce_sum_scale"),
    (_avg_model, "average_divisor_ratio"),
    (lambda: _pow_model(3), "cube_multiply"),
])
def test_strict_refuses_every_rounding_level_rewrite(build, kind):
    with pytest.raises(UnsupportedOpError) as info:
        convert(build(), strict=True)
    assert len(info.value.problems) == 1
    reason = info.value.problems[0].reason
    assert ROUNDING_REWRITES[kind][0] in reason and "--strict" in reason, reason
    assert rounding_kinds(convert(build())) == [kind]


def test_every_rewrite_kind_is_tested_here():
    assert set(ROUNDING_REWRITES) == {"reciprocal_multiply", "mean_scale", "reduce_sum_scale",
                                      "average_divisor_ratio", "cube_multiply"}
