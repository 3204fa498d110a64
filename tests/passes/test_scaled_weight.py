"""affine.scaled_weight: float64 scaling through numpy's small buffers gives exactly the bits
of the whole-array formula (float64 product, one rounding to float32), for every grid shape
folding uses, and never holds a float64 copy of the weight."""
from __future__ import annotations

import numpy as np
import pytest

from nhwc_onnx.passes.affine import scaled_weight

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered")


@pytest.fixture
def small_buffers():
    """numpy's ufunc buffer at 16 elements: many chunks per weight, a ragged last one."""
    old = np.setbufsize(16)
    yield
    np.setbufsize(old)


def plain(w, grid):
    return np.multiply(w, grid, dtype=np.float64).astype(np.float32)


def awkward_values(rng, shape):
    """Normal numbers, subnormals, zeros of both signs, huge values and float32 ties."""
    w = rng.standard_normal(shape).astype(np.float32)
    flat = w.reshape(-1)
    tiny = np.float32(np.finfo(np.float32).tiny)
    flat[::7] = tiny * rng.random(flat[::7].shape).astype(np.float32)  # subnormal range
    flat[::11] = -0.0
    flat[::13] = np.float32(3e38)
    flat[::17] = np.float32(1 + 2**-23)  # times 1.5: exactly half way between two floats
    return w


@pytest.mark.parametrize("layout", ["OHWI-grid-last", "OIHW-grid-first", "gemm-rows",
                                    "gemm-cols", "transposed-view"])
def test_chunked_scaling_equals_the_plain_formula(small_buffers, layout):
    rng = np.random.default_rng(7)
    a = rng.standard_normal(6) * 3.0
    a[0] = 1.5  # with the 1 + 2**-23 weights: float64 exact, float32 rounding is a tie
    a[1] = 2.0**-140  # products deep in the float32 subnormal range
    if layout == "OHWI-grid-last":
        w = awkward_values(rng, (5, 3, 2, 6))
        grid = a[None, None, None, :]
    elif layout == "OIHW-grid-first":
        w = awkward_values(rng, (6, 4, 3, 3))
        grid = np.broadcast_to(a[:, None, None, None], w.shape)
    elif layout == "gemm-rows":
        w = awkward_values(rng, (6, 9))
        grid = a[:, None]
    elif layout == "gemm-cols":
        w = awkward_values(rng, (11, 6))
        grid = a[None, :]
    else:
        w = awkward_values(rng, (6, 13)).T  # a non-contiguous view, as layout passes leave
        grid = a[None, :]
    got = scaled_weight(w, grid)
    want = plain(w, grid)
    assert got.dtype == np.float32 and got.shape == want.shape
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("float32_scale", [True, False])
def test_float32_scales_and_float64_scales_both_match(float32_scale):
    """Keras graphs carry the scale as float32 constants (the direct float32 product is then
    exact); ONNX/Caffe BatchNorm scales are float64 (the chunked float64 path)."""
    rng = np.random.default_rng(11)
    w = awkward_values(rng, (7, 3, 3, 16))
    a = rng.standard_normal(16) * 2.0
    if float32_scale:
        a = a.astype(np.float32).astype(np.float64)
    a[:3] = [1.5, 2.0**-140, -3.0]
    grid = a[None, None, None, :]
    assert np.array_equal(scaled_weight(w, grid).view(np.uint32), plain(w, grid).view(np.uint32))


def test_scalar_and_empty_weights():
    assert scaled_weight(np.float32(2.0), np.float64(0.1)) == np.float32(0.2)
    empty = scaled_weight(np.zeros((0, 3), np.float32), np.ones((1, 3)))
    assert empty.shape == (0, 3) and empty.dtype == np.float32


def test_scaling_holds_no_float64_copy_of_the_weight():
    import tracemalloc

    w = np.ones((256, 64, 3, 3), np.float32)  # 576 KB; a float64 copy would be 1.2 MB
    grid = np.linspace(0.5, 2.0, 256)[:, None, None, None]
    tracemalloc.start()
    try:
        out = scaled_weight(w, grid)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.nbytes <= peak < out.nbytes + 256 * 1024, peak
