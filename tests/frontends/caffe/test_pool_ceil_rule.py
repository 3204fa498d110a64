"""Caffe's ceil-mode pooling drops a last window that would start at or past input + pad
. Without that rule the frontend computes one output too many and refuses
models that convert exactly. The rule lives in the core ops' shape arithmetic
(schemas/core/spatial_math.axis_plan), which the Caffe frontend sizes its pools with; OpenCV's
Caffe runtime is the oracle."""
from __future__ import annotations

import cv2
import numpy as np
import pytest

from nhwc_onnx.schemas.core.spatial_math import axis_plan
from tests.frontends.caffe.caffe_testlib import compare_with_opencv


def _opencv_pool_sizes(h: int, w: int, k: int, s: int, pad: int) -> tuple[int, int]:
    """Output height and width of one Caffe Pooling layer, as OpenCV computes them."""
    proto = (f'input: "data"\ninput_shape {{ dim: 1 dim: 1 dim: {h} dim: {w} }}\n'
             'layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param { '
             f'pool: MAX kernel_size: {k} stride: {s} pad: {pad} }} }}\n')
    net = cv2.dnn.readNetFromCaffe(bytearray(proto.encode()))
    net.setInput(np.zeros((1, 1, h, w), np.float32))
    out = net.forward()
    return out.shape[2], out.shape[3]


def pool_output_size(size: int, k: int, s: int, pad: int, ceil: bool) -> int:
    return axis_plan(size, k, s, 1, pad, pad, "NOTSET", int(ceil))[0]


def test_pool_output_size_agrees_with_opencv_on_every_small_configuration():
    checked = dropped = 0
    mismatches = []
    for k in range(1, 5):
        for s in range(1, 4):
            for pad in range(k):
                sizes = [n for n in range(1, 10) if n + 2 * pad >= k]
                # one net per (k, s, pad): height and width sweep two sizes at a time
                for h, w in zip(sizes, sizes[1:] + sizes[:1]):
                    got = (pool_output_size(h, k, s, pad, True),
                           pool_output_size(w, k, s, pad, True))
                    want = _opencv_pool_sizes(h, w, k, s, pad)
                    if got != want and pad > 0:  # unpadded: Caffe keeps it, we refuse
                        mismatches.append(((h, w, k, s, pad), got, want))
                    checked += 1
                    ceil_count = -(-(h + 2 * pad - k) // s) + 1
                    dropped += got[0] == ceil_count - 1
    assert not mismatches, mismatches[:10]
    assert checked > 200
    assert dropped >= 15  # the grid really exercises the dropped last window


# (height, width, kernel, stride, pad): the plain ceil count keeps a window that starts in the
# end pad on both axes; Caffe drops it.
DROPPED_LAST_WINDOW = [(5, 7, 2, 2, 1), (4, 10, 2, 3, 1), (7, 6, 3, 3, 2), (10, 13, 4, 3, 2),
                       (11, 8, 3, 3, 1)]


@pytest.mark.parametrize("h, w, k, s, pad", DROPPED_LAST_WINDOW)
def test_the_rule_matters_for_each_case(h, w, k, s, pad):
    for size in (h, w):
        ceil_count = -(-(size + 2 * pad - k) // s) + 1
        assert (ceil_count - 1) * s >= size + pad
        assert pool_output_size(size, k, s, pad, True) == ceil_count - 1


def test_pools_whose_last_window_caffe_drops_convert_exactly(tmp_path):
    converted = 0
    for i, (h, w, k, s, pad) in enumerate(DROPPED_LAST_WINDOW):
        for kind in ("MAX", "AVE"):
            proto = (f'input: "data"\ninput_shape {{ dim: 2 dim: 3 dim: {h} dim: {w} }}\n'
                     'layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param '
                     f'{{ pool: {kind} kernel_size: {k} stride: {s} pad: {pad} }} }}\n')
            case = tmp_path / f"{i}_{kind}"
            case.mkdir()
            _, results = compare_with_opencv(case, proto, seed=i, tol=1e-5)
            [(ours, _)] = results.values()
            assert ours.shape[2:] == (pool_output_size(h, k, s, pad, True),
                                      pool_output_size(w, k, s, pad, True))
            converted += 1
    assert converted == 2 * len(DROPPED_LAST_WINDOW)
