"""SSD's Normalize and PriorBox against OpenCV's Caffe runtime.

Normalize becomes core ops (the dialect refuses its division by a tensor, as for an ONNX L2
normalisation); PriorBox is a constant computed from the static shapes, bit-exact with OpenCV.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from caffe_testlib import (
    compare_with_opencv,
    make_net,
    opencv_forward,
    random_feeds,
    run_with_blobs,
)
from test_layers_opencv import layer, net

from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.passes.base import PassContext
from nhwc_onnx.passes.pipeline import to_dialect
from tests.core_reference import run_core

SHAPE = (2, 5, 7, 6)


def _normalize(params: str) -> str:
    return net(layer("norm", "Normalize", ["data"], ["norm"], f"norm_param {{ {params} }}"),
               SHAPE)


NORMALIZE_CASES = {
    "across_spatial_shared": "across_spatial: true channel_shared: true",
    "per_position_per_channel": "across_spatial: false channel_shared: false",
    "per_position_shared": "across_spatial: false channel_shared: true",
    "across_spatial_large_eps": "across_spatial: true channel_shared: true eps: 30",
    "per_position_large_eps": "across_spatial: false channel_shared: false eps: 0.5",
    # as SSD's deploy prototxts write it: a filler only training reads (the scale comes from
    # the caffemodel), which the unread-attribute check must let pass
    "with_scale_filler": "across_spatial: false scale_filler { type: \"constant\" value: 20 }",
}  # an eps of the order of the sums of squares: only eps inside the square root matches


@pytest.mark.parametrize("params", NORMALIZE_CASES.values(), ids=NORMALIZE_CASES.keys())
def test_normalize_core_graph_matches_opencv(tmp_path, params):
    model, results = compare_with_opencv(tmp_path, _normalize(params), tol=1e-5)
    assert len(results) == 1
    assert model.graph.op_counts()["Div"] == 1


def test_normalize_across_spatial_with_per_channel_scale_matches_caffe_formula(tmp_path):
    """OpenCV refuses this combination (it wants one scale per normalised plane): checked
    against SSD Caffe's formula in float64 instead."""
    prototxt = _normalize("across_spatial: true channel_shared: false eps: 30")
    _, blobs, feeds, outs = run_with_blobs(tmp_path, prototxt)
    x = feeds["data"].astype(np.float64)
    norm = np.sqrt((x * x).sum(axis=(1, 2, 3), keepdims=True) + 30)
    want = x / norm * blobs["norm"][0].reshape(1, -1, 1, 1)
    np.testing.assert_allclose(outs["norm"], want, rtol=1e-5, atol=1e-6)


def test_normalize_is_refused_by_the_dialect_for_its_division(tmp_path):
    _, _, model = make_net(tmp_path, _normalize("across_spatial: false"))
    with pytest.raises(UnsupportedOpError) as refusal:
        to_dialect(model, PassContext())
    ops = sorted({p.op for p in refusal.value.problems})
    assert "Div" in ops and all(p.node.startswith("norm") for p in refusal.value.problems)


def _prior_box(params: str, feature=(2, 4, 5, 7), image=(2, 3, 41, 59)) -> str:
    fdims = " ".join(f"dim: {d}" for d in feature)
    idims = " ".join(f"dim: {d}" for d in image)
    return (f'input: "feature"\ninput_shape {{ {fdims} }}\n'
            f'input: "image"\ninput_shape {{ {idims} }}\n'
            + layer("prior", "PriorBox", ["feature", "image"], ["prior"],
                    f"prior_box_param {{ {params} }}"))


PRIOR_BOX_CASES = {
    "one_size": "min_size: 8 variance: 0.3 clip: false",
    "max_size_flip": "min_size: 10 max_size: 25 aspect_ratio: 2 flip: true clip: false "
                     "variance: 0.1 variance: 0.1 variance: 0.2 variance: 0.2",
    "no_flip_two_ratios_clip": "min_size: 30 max_size: 60 aspect_ratio: 2 aspect_ratio: 3 "
                               "flip: false clip: true variance: 0.2",
    "duplicate_ratios": "min_size: 12 aspect_ratio: 2 aspect_ratio: 0.5 aspect_ratio: 1 "
                        "aspect_ratio: 2 flip: true clip: false variance: 0.5",
    "two_sizes_step_offset": "min_size: 6 min_size: 14 max_size: 9 max_size: 20 "
                             "aspect_ratio: 3 step: 8 offset: 0.25 clip: true variance: 0.1 "
                             "variance: 0.2 variance: 0.3 variance: 0.4",
    "step_hw": "min_size: 21 aspect_ratio: 1.5 step_h: 7 step_w: 9 clip: false variance: 0.2",
}


@pytest.mark.parametrize("params", PRIOR_BOX_CASES.values(), ids=PRIOR_BOX_CASES.keys())
@pytest.mark.parametrize("feature", [(2, 4, 5, 7), (1, 3, 1, 1), (3, 2, 9, 4)])
def test_prior_box_constant_is_bit_exact_with_opencv(tmp_path, params, feature):
    model, results = compare_with_opencv(tmp_path, _prior_box(params, feature), tol=0.0)
    ((ours, theirs),) = results.values()
    assert ours.shape[:2] == (1, 2) and ours.shape[2] % (feature[2] * feature[3] * 4) == 0
    assert "Identity" in model.graph.op_counts()  # of a constant: no run-time input read


@pytest.mark.parametrize("given,image", [
    ("img_size: 64", (1, 3, 64, 64)), ("img_h: 50 img_w: 70", (1, 3, 50, 70)),
    ("img_h: 50 img_w: 70 step: 6", (1, 3, 50, 70))])
def test_prior_box_image_size_parameter_replaces_the_image_bottom(tmp_path, given, image):
    """Caffe-SSD takes img_size / img_h, img_w over the image bottom's size; OpenCV reads
    neither, so it runs the net with an image bottom of that size instead."""
    params = "min_size: 16 max_size: 32 aspect_ratio: 2 clip: true variance: 0.1"
    step = " step: 6" if "step" in given else ""
    (tmp_path / "ours").mkdir()
    (tmp_path / "opencv").mkdir()
    _, _, model = make_net(tmp_path / "ours", _prior_box(f"{params} {given}"))
    ours = run_core(model, random_feeds(model))[model.graph.outputs[0].name]
    proto, weights, oracle = make_net(tmp_path / "opencv", _prior_box(params + step, image=image))
    (theirs,) = opencv_forward(proto, weights, random_feeds(oracle), ["prior"])
    np.testing.assert_array_equal(ours, theirs)


def test_prior_box_truncates_fractional_sizes_like_caffe_ssd(tmp_path):
    """Caffe-SSD reads min_size/max_size into ints; OpenCV keeps the fraction, so OpenCV runs
    the same net with the sizes truncated by hand."""
    params = "min_size: 35.84 max_size: 76.8 aspect_ratio: 2 clip: false variance: 0.1"
    oracle = _prior_box("min_size: 35 max_size: 76 aspect_ratio: 2 clip: false variance: 0.1")
    compare_with_opencv(tmp_path, _prior_box(params), tol=0.0, oracle_prototxt=oracle)
    with pytest.raises(AssertionError, match="max error"):
        compare_with_opencv(tmp_path, _prior_box(params), tol=1e-4)  # OpenCV's own reading


def test_prior_box_defaults_are_caffe_ssds(tmp_path):
    """Caffe-SSD fills a missing variance with 0.1 and does not clip by default; OpenCV wants
    a variance written and clips unless told not to."""
    compare_with_opencv(tmp_path, _prior_box("min_size: 8 max_size: 12"), tol=0.0,
                        oracle_prototxt=_prior_box("min_size: 8 max_size: 12 variance: 0.1 "
                                                   "clip: false"))


def test_prior_box_output_converts_to_a_dialect_constant(tmp_path):
    from nhwc_onnx import convert

    proto = tmp_path / "net.prototxt"
    proto.write_text(_prior_box(PRIOR_BOX_CASES["max_size_flip"]))
    result = convert(proto)
    assert set(result.model.graph.op_counts()) <= {"Constant", "Reshape"}
