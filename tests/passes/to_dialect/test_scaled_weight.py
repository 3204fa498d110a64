"""affine.scaled_weight: float64 scaling through numpy's small buffers gives exactly the bits
of the whole-array formula (float64 product, one rounding to float32), for every grid shape
folding uses, and never holds a float64 copy of the weight."""
from __future__ import annotations

import numpy as np
import pytest

from nhwc_onnx.passes.to_dialect.affine import scaled_weight

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


# -- folding deferred to the writer (ir.ScaledWeight) ---------------------------------------------


def _written(array, chunk_bytes: int) -> bytes:
    import io

    from nhwc_onnx.serialize.stream import ArrayWriter

    handle = io.BytesIO()
    ArrayWriter(handle, chunk_bytes=chunk_bytes).write(array)
    return handle.getvalue()


@pytest.mark.parametrize("chunk_bytes", [64, 1000, 1 << 20])
def test_a_deferred_folded_weight_is_written_with_the_bits_of_scaled_weight(small_buffers,
                                                                          chunk_bytes):
    from nhwc_onnx.ir import ScaledWeight
    from nhwc_onnx.passes.to_dialect.affine import folded_weight

    rng = np.random.default_rng(5)
    hwio = awkward_values(rng, (3, 3, 4, 6))  # TF layout; folding scales the last axis
    a = rng.standard_normal(6) * 3.0
    a[:2] = [1.5, 2.0**-140]
    b = rng.standard_normal(6).astype(np.float32).astype(np.float64)  # a float32 second scale
    once = folded_weight(hwio, a[None, None, None, :])
    twice = folded_weight(once, b[None, None, None, :])  # Caffe: BatchNorm, then Scale
    assert isinstance(twice, ScaledWeight) and repr(twice).endswith("not read)")
    want = scaled_weight(scaled_weight(hwio, a[None, None, None, :]), b[None, None, None, :])
    ohwi = twice.transpose(3, 2, 0, 1).transpose(0, 2, 3, 1)  # what select_spatial stores
    assert isinstance(ohwi, ScaledWeight)
    expected = np.ascontiguousarray(want.transpose(3, 0, 1, 2)).tobytes()
    assert _written(ohwi, chunk_bytes) == expected
    # the writer computed it in its buffer, except when one output row (144 bytes) is more
    # than a chunk: then it reads the values once
    assert repr(ohwi).endswith("not read)") == (chunk_bytes >= 144)
    assert np.asarray(ohwi).tobytes() == expected  # and reading it gives the same values
    assert np.array_equal(np.asarray(twice).view(np.uint32), want.view(np.uint32))


def test_weights_that_are_not_float32_or_that_factors_reshape_fold_at_once():
    from nhwc_onnx.ir import ScaledWeight
    from nhwc_onnx.passes.to_dialect.affine import folded_weight

    w64 = np.ones((2, 3))
    assert not isinstance(folded_weight(w64, np.full((2, 1), 0.5)), ScaledWeight)
    widened = folded_weight(np.ones((1, 3), np.float32), np.ones((2, 1)))
    assert not isinstance(widened, ScaledWeight) and widened.shape == (2, 3)


def test_a_conversion_writes_folded_weights_without_reading_them(tmp_path, monkeypatch):
    """Conv + BatchNorm (a PyTorch-style export): the folded weight reaches the file without
    being computed in memory, and the file is the one eager folding writes."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from nhwc_onnx import api
    from nhwc_onnx.ir import deferred
    from nhwc_onnx.passes.to_dialect import affine

    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 4, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array((rng.random(8) + 0.5).astype(np.float32), "scale"),
             numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "bias"),
             numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "mean"),
             numpy_helper.from_array((rng.random(8) + 0.1).astype(np.float32), "var")]
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["y"],
                          epsilon=1e-3)],
        "conv_bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 9, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 9, 7])], inits)
    source = tmp_path / "conv_bn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                                ir_version=8), source)
    made, computed = [], []
    compute, folded = deferred._scaled, affine.folded_weight
    monkeypatch.setattr(deferred, "_scaled",
                        lambda base, factors: computed.append(1) or compute(base, factors))
    monkeypatch.setattr(affine, "folded_weight", lambda w, g: made.append(1) or folded(w, g))
    api.convert(source, tmp_path / "deferred.onnx")
    assert (len(made), computed) == (1, [])
    monkeypatch.setattr(affine, "folded_weight", affine.scaled_weight)
    api.convert(source, tmp_path / "eager.onnx")
    deferred = (tmp_path / "deferred.onnx").read_bytes()
    eager = (tmp_path / "eager.onnx").read_bytes()
    assert deferred == eager and len(eager) > 8 * 4 * 3 * 3 * 4


def test_a_deferred_folded_weight_goes_to_external_data_with_its_values(tmp_path):
    from nhwc_onnx.ir import DIALECT, Graph, Model, ScaledWeight, Value
    from nhwc_onnx.serialize import load, save

    rng = np.random.default_rng(9)
    hwio = rng.standard_normal((3, 3, 4, 64)).astype(np.float32)
    weight = ScaledWeight.of(hwio, rng.standard_normal(64)[None, None, None, :])
    g = Graph()
    x = g.add_input(Value("x", shape=(1, 9, 9, 4)))
    node = g.make_node("Conv", [x, g.constant(weight.transpose(3, 0, 1, 2), "w")],
                       {"kernel_shape": [3, 3], "pads": "SAME"}, name="n", domain=DIALECT)
    g.outputs = list(node.outputs)
    path = save(Model(g), tmp_path / "m.onnx", external_threshold=0)
    assert (tmp_path / "m.onnx.data").stat().st_size >= weight.nbytes
    assert repr(node.inputs[1].const).endswith("not read)")  # computed by the writer
    stored = load(path).graph.nodes[0].inputs[1].const
    want = scaled_weight(hwio, weight.factors[0]).transpose(3, 0, 1, 2)
    assert np.array_equal(np.asarray(stored).view(np.uint32), want.view(np.uint32))
