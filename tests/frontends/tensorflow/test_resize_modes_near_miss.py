"""TensorFlow's resize rules against TensorFlow itself.

ResizeNearestNeighbor and ResizeBilinear, with align_corners, half_pixel_centers or neither,
at factors 2, 3, mixed (H x2, W x3) and non-integer sizes: the frontend maps each to a core
Resize coordinate rule, and the dialect expresses it only as UpSampling2D (nearest: output d
reads d // f; bilinear: the half-pixel blend). The oracle is TensorFlow's own output: the case
is expressible exactly when it equals ``np.repeat`` (nearest) or TensorFlow's half-pixel
bilinear resize to the same size (bilinear). An expressible case must become one UpSampling2D,
record the rewrite and give TensorFlow's numbers; any other must be refused naming the node.

Tolerance: nearest bit for bit; bilinear 1e-5 of the output's magnitude (TensorFlow blends in
float32 with its own weights).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from tf_helpers import freeze, spec, tf

from nhwc_onnx import api
from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.options import ConvertOptions
from nhwc_onnx.runtime import run

SHAPE = (2, 5, 7, 3)  # NHWC, all dimensions different
X = np.random.default_rng(31).standard_normal(SHAPE).astype(np.float32)
RULES = {"align_corners": (True, False), "half_pixel_centers": (False, True),
         "neither": (False, False)}
SIZES = {"x2": (10, 14), "x3": (15, 21), "H x2, W x3": (10, 21), "x1.4": (7, 10)}


def _resize(method: str, size, align: bool, half: bool):
    t = tf()
    op = (t.compat.v1.image.resize_bilinear if method == "bilinear"
          else t.compat.v1.image.resize_nearest_neighbor)
    return lambda x: op(x, list(size), align_corners=align, half_pixel_centers=half,
                        name="resize")


def dialect_form(method: str, size, want: np.ndarray) -> bool:
    """Whether TensorFlow's result is what UpSampling2D computes (the oracle's verdict)."""
    fh, fw = size[0] / SHAPE[1], size[1] / SHAPE[2]
    if fh != int(fh) or fw != int(fw):
        return False
    if method == "nearest":
        return np.array_equal(want, np.repeat(np.repeat(X, int(fh), 1), int(fw), 2))
    half_pixel = np.asarray(_resize("bilinear", size, False, True)(X))
    return np.allclose(want, half_pixel, rtol=0, atol=1e-5 * float(np.abs(want).max()))


def check_against_tensorflow(method: str, rule: str, size_name: str, tmp_path: Path) -> bool:
    """Convert one case; assert the outcome TensorFlow's result calls for. True: converted."""
    align, half = RULES[rule]
    size = SIZES[size_name]
    fn = _resize(method, size, align, half)
    want = np.asarray(fn(X))
    expressible = dialect_form(method, size, want)
    data, frozen = freeze(fn, [spec(SHAPE)])
    path = tmp_path / f"{method}_{rule}_{size_name.replace(' ', '')}.pb"
    path.write_bytes(data)
    options = ConvertOptions(outputs=[t.name for t in frozen.outputs], exact_cut=False)
    try:
        result = api.convert(path, options=options)
    except UnsupportedOpError as exc:
        assert not expressible, f"refused although UpSampling2D computes it: {exc}"
        (problem,) = exc.problems
        assert problem.node == "resize" and problem.op == "Resize", exc
        return False
    assert expressible, "converted although no UpSampling2D computes TensorFlow's result"
    assert result.report.target_ops == {"UpSampling2D": 1}, result.report.target_ops
    assert any(d["node"] == "resize" and d["detail"] == "Resize rewritten into dialect ops"
               for d in result.report.decisions), result.report.decisions
    (name,) = [v.name for v in result.model.graph.inputs]
    (got,) = run(result.model, {name: X}).values()  # NHWC in and out: no permutation
    if method == "nearest":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * float(np.abs(want).max()))
    return True


CASES = [(m, r, s) for m in ("nearest", "bilinear") for r in RULES for s in SIZES]


@pytest.mark.parametrize(("method", "rule", "size"), CASES)
def test_tf_resize_converts_exactly_when_upsampling2d_computes_it(method, rule, size,
                                                                   tmp_path):
    check_against_tensorflow(method, rule, size, tmp_path)


def test_how_many_tf_resize_forms_convert(tmp_path):
    """Nearest without align_corners (neither: floor(d / f); half_pixel_centers:
    floor((d + 0.5) / f)) and bilinear with half_pixel_centers, at the three integer
    factors; nearest align_corners only at x2 (5 -> 10 and 7 -> 14 happen to round onto
    d // 2), bilinear align_corners never, x1.4 never."""
    converted = [case for case in CASES if check_against_tensorflow(*case, tmp_path)]
    assert sorted(converted) == sorted(
        [("nearest", r, s) for r in ("neither", "half_pixel_centers")
         for s in ("x2", "x3", "H x2, W x3")] + [("nearest", "align_corners", "x2")]
        + [("bilinear", "half_pixel_centers", s) for s in ("x2", "x3", "H x2, W x3")]), converted


@pytest.mark.parametrize("method", ["nearest", "bilinear"])
@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("size", [(9, 13), (3, 4)], ids=["ties 5->9 7->13", "downsampling"])
def test_tf_resize_core_rule_is_tensorflows_where_the_dialect_refuses(method, rule, size,
                                                                      tmp_path):
    """The frontend's mapping is checked where it matters most: sizes whose source
    coordinates fall exactly on .5 (align_corners 5 -> 9: d / 2), where only the rounding
    rule decides, and downsampling. The dialect refuses them; the core model (what ``cut``
    and the reference executor run) must still be TensorFlow's, bit for bit for nearest."""
    from tf_helpers import load_bytes

    from tests.core_reference import run_core

    align, half = RULES[rule]
    fn = _resize(method, size, align, half)
    data, frozen = freeze(fn, [spec(SHAPE)])
    core = load_bytes(tmp_path, data, outputs=[t.name for t in frozen.outputs])
    (got,) = run_core(core, {core.graph.inputs[0].name: X}).values()
    want = np.asarray(fn(X))
    if method == "nearest":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * float(np.abs(want).max()))
