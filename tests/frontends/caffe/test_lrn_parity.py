"""Caffe LRN decomposes into the core ops ONNX LRN becomes: the core graph matches OpenCV's
Caffe runtime, and the dialect refuses it for the same reason, with the same message, as the
ONNX LRN (x^-beta of a tensor has no dialect form), instead of "no caffe converter"."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from onnx import helper

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "onnx"))
from caffe_testlib import compare_with_opencv
from onnx_helpers import convert as convert_onnx
from onnx_helpers import make_model

from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.passes.base import PassContext
from nhwc_onnx.passes.pipeline import to_dialect

SHAPE = (2, 6, 11, 9)


def _prototxt(region: str, size: int, k: float = 1.0) -> str:
    dims = " ".join(f"dim: {d}" for d in SHAPE)
    return (f'input: "data"\ninput_shape {{ {dims} }}\n'
            f'layer {{ name: "norm" type: "LRN" bottom: "data" top: "norm" lrn_param {{ '
            f"norm_region: {region} local_size: {size} alpha: 0.3 beta: 0.75 k: {k} }} }}\n")


def _reasons(exc: UnsupportedOpError) -> list[tuple[str, str]]:
    """(op, reason) of every problem, the node names left out."""
    return sorted((p.op, p.reason) for p in exc.problems)


# OpenCV reads no k from lrn_param (it always uses 1), so k != 1 is checked against ONNX LRN
CASES = [("ACROSS_CHANNELS", 5, 1.0), ("ACROSS_CHANNELS", 3, 1.0), ("WITHIN_CHANNEL", 3, 1.0),
         ("WITHIN_CHANNEL", 5, 1.0)]


@pytest.mark.parametrize("region,size,k", CASES)
def test_caffe_lrn_core_graph_matches_opencv_and_is_refused_like_onnx(tmp_path, region, size, k):
    model, results = compare_with_opencv(tmp_path, _prototxt(region, size, k))
    assert len(results) == 1
    assert model.graph.op_counts()["Pow"] == 1
    with pytest.raises(UnsupportedOpError) as caffe_refusal:
        to_dialect(model, PassContext())

    onnx_lrn = make_model([helper.make_node("LRN", ["x"], ["y"], name="norm", size=size,
                                            alpha=0.3, beta=0.75, bias=k)],
                          [("x", list(SHAPE))], [("y", None)])
    with pytest.raises(UnsupportedOpError) as onnx_refusal:
        to_dialect(convert_onnx(onnx_lrn), PassContext())
    assert _reasons(caffe_refusal.value) == _reasons(onnx_refusal.value)
    assert [op for op, _ in _reasons(caffe_refusal.value)] == ["Div", "Pow"]



@pytest.mark.parametrize("size,k", [(5, 2.0), (3, 0.5)])
def test_caffe_lrn_with_k_matches_onnx_lrn_in_onnxruntime(tmp_path, size, k):
    import numpy as np
    from caffe_testlib import make_net, random_feeds
    from onnx_helpers import run_ort

    from tests.core_reference import run_core

    _, _, model = make_net(tmp_path, _prototxt("ACROSS_CHANNELS", size, k))
    feeds = random_feeds(model)
    ours = run_core(model, feeds)[model.graph.outputs[0].name]
    onnx_lrn = make_model([helper.make_node("LRN", ["x"], ["y"], size=size, alpha=0.3,
                                            beta=0.75, bias=k)],
                          [("x", list(SHAPE))], [("y", None)])
    want = run_ort(onnx_lrn, {"x": next(iter(feeds.values()))})["y"]
    np.testing.assert_allclose(ours, want, rtol=1e-4, atol=1e-5)
