"""Every Resize mode rule against an independent oracle.

The dialect has one resize, UpSampling2D: output pixel d reads source d // f (nearest) or the
half-pixel bilinear blend (linear), for integer factors f. So an ONNX Resize is expressible
exactly when onnxruntime's own result on the source equals that: ``np.repeat`` for nearest,
onnxruntime's half_pixel linear Resize for linear. Every combination of mode, coordinate
transformation (half_pixel, asymmetric, align_corners, pytorch_half_pixel,
tf_half_pixel_for_nn) and nearest rounding (round_prefer_floor/ceil, floor, ceil), at factors 2
and 3, plus near misses (a scale of 2.1 that still doubles the size, downsampling, a
non-integer factor, the attribute defaults, Upsample-9), is converted: an expressible one must
become exactly one UpSampling2D, record the rewrite and give onnxruntime's numbers; any other
must be refused naming the node and its mode - never converted to something close. A planted
bug that treated linear align_corners as half-pixel was caught only by an ONNX conformance
case before.

Tolerance: nearest is compared bit for bit; linear with 1e-6 of the output's magnitude
(the same blend, weights rounded in another order).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import helper

sys.path.insert(0, str(Path(__file__).parent))
from onnx_helpers import make_model, run_ort

from nhwc_onnx import api
from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.options import ConvertOptions
from nhwc_onnx.runtime import run

onnxruntime.set_default_logger_severity(3)  # tf_half_pixel_for_nn is deprecated at opset 13

SHAPE = [2, 3, 5, 7]  # NCHW; H 5 and W 7 so a mix-up of the two axes shows
X = np.random.default_rng(29).standard_normal(SHAPE).astype(np.float32)
COORDINATES = ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
               "tf_half_pixel_for_nn")
ROUNDINGS = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


@dataclass
class Resize:
    mode: str | None  # None: attribute left out (the default, nearest)
    coordinates: str | None = None  # None: left out (half_pixel)
    rounding: str | None = None  # None: left out (round_prefer_floor)
    scales: tuple | None = None
    sizes: tuple | None = None
    op: str = "Resize"
    opset: int = 13

    def model(self) -> onnx.ModelProto:
        attrs = {k: v for k, v in (("mode", self.mode),
                                   ("coordinate_transformation_mode", self.coordinates),
                                   ("nearest_mode", self.rounding)) if v is not None}
        inits = {}
        if self.op == "Upsample":
            inits["scales"] = np.array(self.scales, np.float32)
            node = helper.make_node("Upsample", ["x", "scales"], ["y"], name="resize", **attrs)
        else:
            inits["roi"] = np.zeros(0, np.float32)
            inputs = ["x", "roi"]
            if self.scales is not None:
                inits["scales"] = np.array(self.scales, np.float32)
                inputs.append("scales")
            else:
                inits["sizes"] = np.array(self.sizes, np.int64)
                inputs += ["", "sizes"]
            node = helper.make_node("Resize", inputs, ["y"], name="resize", **attrs)
        return make_model([node], [("x", SHAPE)], [("y", None)], inits, opset=self.opset)


def dialect_form(case: Resize, want: np.ndarray) -> bool:
    """Whether onnxruntime's result is what UpSampling2D computes (the oracle's verdict)."""
    if want.ndim != 4 or want.shape[:2] != X.shape[:2]:
        return False
    factors = [m / n for m, n in zip(want.shape[2:], X.shape[2:])]
    if any(f != int(f) or f < 1 for f in factors):
        return False
    fh, fw = (int(f) for f in factors)
    if (case.mode or "nearest") == "nearest":
        return np.array_equal(want, np.repeat(np.repeat(X, fh, axis=2), fw, axis=3))
    half_pixel = Resize("linear", "half_pixel", sizes=want.shape)
    reference = run_ort(half_pixel.model(), {"x": X})["y"]
    return np.allclose(want, reference, rtol=0, atol=1e-6 * float(np.abs(reference).max()))


def check_against_oracle(case: Resize, tmp_path: Path) -> bool:
    """Convert ``case``; assert the outcome the oracle calls for. True when it converted."""
    model = case.model()
    want = run_ort(model, {"x": X})["y"]
    expressible = dialect_form(case, want)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    try:
        result = api.convert(path, options=ConvertOptions(exact_cut=False))
    except UnsupportedOpError as exc:
        assert not expressible, f"refused although UpSampling2D computes it: {exc}"
        (problem,) = exc.problems
        assert (problem.node, problem.op) == ("resize", "Resize"), exc  # the core Resize
        assert case.op == "Resize" or f"source op {case.op}" in problem.reason, exc
        if case.coordinates and case.op == "Resize" and np.all(want.shape >= X.shape):
            assert case.coordinates in problem.reason or "factor" in problem.reason, exc
        return False
    assert expressible, "converted although no UpSampling2D computes onnxruntime's result"
    assert result.report.target_ops == {"UpSampling2D": 1}, result.report.target_ops
    assert any(d["node"] == "resize" and d["detail"] == "Resize rewritten into dialect ops"
               for d in result.report.decisions), result.report.decisions
    perms = result.model.io_permutations
    got = run(result.model, {"x": np.ascontiguousarray(np.transpose(X, perms["x"]))})["y"]
    got = np.transpose(got, np.argsort(perms["y"]))
    if (case.mode or "nearest") == "nearest":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * float(np.abs(want).max()))
    return True


GRID = {
    **{f"nearest {c} {r} x{f}": Resize("nearest", c, r, scales=(1, 1, f, f))
       for f in (2, 3) for c in COORDINATES for r in ROUNDINGS},
    **{f"linear {c} x{f}": Resize("linear", c, scales=(1, 1, f, f))
       for f in (2, 3) for c in COORDINATES},
}
NEAR_MISSES = {
    # 5 * 2.1 = 10.5 -> 10 rows: exactly twice the size, but sampled at d / 2.1
    "nearest asymmetric floor, scale 2.1 doubling H": Resize(
        "nearest", "asymmetric", "floor", scales=(1, 1, 2.1, 2)),
    "linear half_pixel, scale 2.1 doubling H": Resize("linear", "half_pixel",
                                                       scales=(1, 1, 2.1, 2)),
    "nearest half_pixel, H x2 and W x3 by sizes": Resize("nearest", "half_pixel",
                                                         "round_prefer_floor",
                                                         sizes=(2, 3, 10, 21)),
    "linear half_pixel, H x3 and W x2 by sizes": Resize("linear", "half_pixel",
                                                        sizes=(2, 3, 15, 14)),
    "linear align_corners by sizes": Resize("linear", "align_corners", sizes=(2, 3, 10, 14)),
    "nearest asymmetric floor, downsampling": Resize("nearest", "asymmetric", "floor",
                                                     scales=(1, 1, 0.5, 0.5)),
    "nearest asymmetric floor, factor 1.5": Resize("nearest", "asymmetric", "floor",
                                                   scales=(1, 1, 1.5, 1.5)),
    "linear half_pixel, factor 1.5": Resize("linear", "half_pixel", scales=(1, 1, 1.5, 1.5)),
    # defaults: half_pixel and round_prefer_floor (x3: asymmetric would read other cells)
    "nearest by default, x3": Resize(None, scales=(1, 1, 3, 3)),
    "linear with default coordinates, x3": Resize("linear", scales=(1, 1, 3, 3)),
    # Upsample-9: asymmetric coordinates, floor for nearest
    "Upsample-9 nearest x3": Resize("nearest", scales=(1, 1, 3, 3), op="Upsample", opset=9),
    "Upsample-9 linear x2": Resize("linear", scales=(1, 1, 2, 2), op="Upsample", opset=9),
}


@pytest.mark.parametrize("name", list(GRID) + list(NEAR_MISSES))
def test_resize_converts_exactly_when_upsampling2d_computes_it(name, tmp_path):
    check_against_oracle({**GRID, **NEAR_MISSES}[name], tmp_path)


def test_how_many_resize_forms_convert(tmp_path):
    """The split the oracle gives, fixed: nearest x2 converts for half_pixel and
    pytorch_half_pixel with round_prefer_*, asymmetric with floor or round_prefer_floor,
    align_corners with round_prefer_* (5 -> 10 and 7 -> 14 land on d // 2), and
    tf_half_pixel_for_nn with floor; x3 drops asymmetric round_prefer_floor and align_corners;
    linear converts for the two half-pixel modes only."""
    converted = [name for name, case in GRID.items()
                 if check_against_oracle(case, tmp_path)]
    assert len(converted) == 19, converted
    near = [name for name, case in NEAR_MISSES.items() if check_against_oracle(case, tmp_path)]
    assert near == ["nearest half_pixel, H x2 and W x3 by sizes",
                    "linear half_pixel, H x3 and W x2 by sizes", "nearest by default, x3",
                    "linear with default coordinates, x3", "Upsample-9 nearest x3"], near
