"""A node refused only for an attribute value names the value that would convert."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

sys.path.insert(0, str(Path(__file__).parent))
from onnx_helpers import convert, make_model

from nhwc_onnx.errors import UnsupportedOpError

X = [2, 3, 7, 5]


def _case(node, inits=None, opset=13, out=None):
    return make_model([node], [("x", X)], [("y", out)], inits or {}, opset=opset)


CASES = {
    "argmax_last_index": (_case(helper.make_node("ArgMax", ["x"], ["y"], axis=1,
                                                 select_last_index=1)),
                          "select_last_index=0 would convert"),
    "dilated_average": (_case(helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2],
                                               dilations=[2, 2]), opset=19),
                        "dilations [1, 1] would convert"),
    "batchnorm_training": (_case(helper.make_node(
        "BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], training_mode=1),
        {k: np.ones(3, np.float32) for k in "sbmv"}, opset=15), "training_mode=0 would convert"),
    "pad_wrap": (_case(helper.make_node("Pad", ["x", "pads"], ["y"], mode="wrap"),
                       {"pads": np.array([0, 0, 1, 1, 0, 0, 1, 1])}, opset=19),
                 "(constant, reflect and edge are)"),
    "resize_crop_and_resize": (_case(helper.make_node(
        "Resize", ["x", "", "scales"], ["y"], mode="linear",
        coordinate_transformation_mode="tf_crop_and_resize"),
        {"scales": np.array([1, 1, 2, 2], np.float32)}), "half_pixel, asymmetric"),
    "resize_nearest_mode": (_case(helper.make_node(
        "Resize", ["x", "", "scales"], ["y"], mode="nearest", nearest_mode="banker"),
        {"scales": np.array([1, 1, 2, 2], np.float32)}), "round_prefer_floor, "),
    "unknown_attribute": (_case(helper.make_node("Relu", ["x"], ["y"], flavour=3)),
                          "the node converts without them"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_attribute_value_refusal_names_what_converts(name):
    model, fix = CASES[name]
    with pytest.raises(UnsupportedOpError) as info:
        convert(model)
    assert len(info.value.problems) == 1
    assert fix in info.value.problems[0].reason, info.value.problems[0].reason
