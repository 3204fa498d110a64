"""Caffe's two resizes against their definitions.

Interp (DeepLab) is bilinear with align-corners coordinates, x * (n - 1) / (m - 1); the
dialect's UpSampling2D linear is the half-pixel blend, so an Interp is expressible only where
the two coincide (the same size). Upsample (nearest, integer scales) is exactly
UpSampling2D nearest. Every size form of Interp (height/width, zoom_factor, shrink_factor,
a second bottom) is run in OpenCV's Caffe runtime: it must convert to one UpSampling2D with
OpenCV's numbers when OpenCV's result equals the half-pixel blend (onnxruntime's half_pixel
linear Resize) at integer factors, and be refused naming the layer otherwise - twice the size
is the near miss that a planted "align_corners is half-pixel" bug would convert.

Tolerance: 1e-5 of the output's magnitude (float32 blends); nearest bit for bit.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from nhwc_onnx import api
from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.options import ConvertOptions
from nhwc_onnx.runtime import run
from tests.frontends.caffe.caffe_testlib import layer_types, opencv_forward, write_caffemodel_pb

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "onnx"))
from onnx_helpers import make_model, run_ort

SHAPE = (2, 3, 5, 7)  # NCHW
X = np.random.default_rng(37).standard_normal(SHAPE).astype(np.float32)


def _net(body: str, extra_inputs: str = "") -> str:
    dims = " ".join(f"dim: {d}" for d in SHAPE)
    return f'input: "data"\ninput_shape {{ {dims} }}\n{extra_inputs}{body}'


def _layer(name, type_, bottoms, params=""):
    bs = " ".join(f'bottom: "{b}"' for b in bottoms)
    return f'layer {{ name: "{name}" type: "{type_}" {bs} top: "{name}" {params} }}\n'


def half_pixel_bilinear(size) -> np.ndarray:
    """What UpSampling2D linear computes (onnxruntime's half_pixel linear Resize)."""
    from onnx import helper

    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear",
                            coordinate_transformation_mode="half_pixel")
    model = make_model([node], [("x", list(SHAPE))], [("y", None)],
                       {"sizes": np.array([*SHAPE[:2], *size], np.int64)})
    return run_ort(model, {"x": X})["y"]


def _convert(tmp_path: Path, text: str, feeds: dict):
    proto = tmp_path / "net.prototxt"
    proto.write_text(text)
    weights = tmp_path / "net.caffemodel"
    write_caffemodel_pb(weights, {}, layer_types(text))
    result = api.convert(proto, options=ConvertOptions(weights=str(weights), exact_cut=False))
    perms = result.model.io_permutations
    fed = {k: np.ascontiguousarray(np.transpose(v, perms[k])) for k, v in feeds.items()}
    (out,) = result.model.graph.outputs
    got = run(result.model, fed)[out.name]
    return result, np.transpose(got, np.argsort(perms[out.name]))


INTERP = {
    # name: (interp_param, extra input of the net, the same resize as OpenCV reads it)
    "height/width x2": ("interp_param { height: 10 width: 14 }", "", None),
    "height/width x3": ("interp_param { height: 15 width: 21 }", "", None),
    "H x2, W x3": ("interp_param { height: 10 width: 21 }", "", None),
    "zoom_factor 2 (9x13)": ("interp_param { zoom_factor: 2 }", "", None),
    "same size": ("interp_param { height: 5 width: 7 }", "", None),
    # OpenCV reads neither a second bottom nor shrink_factor alone: it runs the equal
    # height/width net
    "size of a second bottom (x2)": (
        "", 'input: "like"\ninput_shape { dim: 2 dim: 1 dim: 10 dim: 14 }\n',
        "interp_param { height: 10 width: 14 }"),
    "shrink_factor 2 (3x4)": ("interp_param { shrink_factor: 2 }", "",
                              "interp_param { height: 3 width: 4 }"),
}


def check_interp(name: str, tmp_path: Path) -> bool:
    params, extra, oracle_params = INTERP[name]
    text = _net(_layer("interp", "Interp", ["data", "like"] if extra else ["data"], params),
                extra)
    feeds = {"data": X}
    if extra:
        feeds["like"] = np.zeros((2, 1, 10, 14), np.float32)
    oracle = text if oracle_params is None else _net(_layer("interp", "Interp", ["data"],
                                                            oracle_params))
    proto = tmp_path / "oracle.prototxt"
    proto.write_text(oracle)
    weights = tmp_path / "oracle.caffemodel"
    write_caffemodel_pb(weights, {}, layer_types(oracle))
    (want,) = opencv_forward(proto, weights, {"data": X}, ["interp"])
    size = want.shape[2:]
    integer = all(m % n == 0 for m, n in zip(size, SHAPE[2:]))
    scale = float(np.abs(want).max())
    expressible = integer and np.allclose(want, half_pixel_bilinear(size), rtol=0,
                                          atol=1e-5 * scale)
    try:
        result, got = _convert(tmp_path, text, feeds)
    except UnsupportedOpError as exc:
        assert not expressible, f"refused although UpSampling2D computes it: {exc}"
        assert [p.node for p in exc.problems] == ["interp"], exc
        return False
    assert expressible, "converted although UpSampling2D does not compute OpenCV's result"
    assert result.report.target_ops == {"UpSampling2D": 1}, result.report.target_ops
    assert any(d["node"] == "interp" and d["detail"] == "Resize rewritten into dialect ops"
               for d in result.report.decisions), result.report.decisions
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * scale)
    return True


@pytest.mark.parametrize("name", INTERP)
def test_interp_converts_exactly_when_it_is_the_half_pixel_blend(name, tmp_path):
    check_interp(name, tmp_path)


def test_only_the_same_size_interp_converts(tmp_path):
    """align_corners and half-pixel coincide only when nothing is resized."""
    converted = []
    for index, name in enumerate(INTERP):
        folder = tmp_path / str(index)
        folder.mkdir()
        if check_interp(name, folder):
            converted.append(name)
    assert converted == ["same size"]


@pytest.mark.parametrize("params,factors", [
    ("upsample_param { scale: 2 }", (2, 2)), ("upsample_param { scale: 3 }", (3, 3)),
    ("upsample_param { scale_h: 2 scale_w: 3 }", (2, 3)),
    ("upsample_param { scale: 2 upsample_h: 10 upsample_w: 14 }", (2, 2))])
def test_upsample_is_upsampling2d_nearest(params, factors, tmp_path):
    """Upsample's definition (the SegNet fork's nearest copy, output y reads y // s) is
    np.repeat; OpenCV has no Upsample layer."""
    text = _net(_layer("up", "Upsample", ["data"], params))
    result, got = _convert(tmp_path, text, {"data": X})
    assert result.report.target_ops == {"UpSampling2D": 1}, result.report.target_ops
    np.testing.assert_array_equal(got, np.repeat(np.repeat(X, factors[0], 2), factors[1], 3))
