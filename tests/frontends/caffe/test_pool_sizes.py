"""Caffe Pooling top sizes come from the core op's inference; Caffe's own rule (written here
from pooling_layer.cpp as the oracle) must agree, or the layer must be refused."""
from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from nhwc_onnx.frontends.caffe.ops_conv import _window_outside
from nhwc_onnx.schemas.core import infer_output_shapes


def caffe_pooled_size(size: int, k: int, s: int, pad: int, ceil: bool) -> int:
    """PoolingLayer::Reshape: ceil (or floor) rounding; the last window is dropped when it
    starts past the input, but only if the layer is padded."""
    rounding = math.ceil if ceil else math.floor
    out = int(rounding((size + 2 * pad - k) / s)) + 1
    if pad and (out - 1) * s >= size + pad:
        out -= 1
    return out


@settings(max_examples=300, deadline=None, derandomize=True)
@given(size=st.integers(1, 20), k=st.integers(1, 6), s=st.integers(1, 5),
       pad=st.integers(0, 5), ceil=st.booleans())
def test_core_pool_size_is_caffe_size_or_refused(size, k, s, pad, ceil):
    if pad >= k or size + 2 * pad < k:
        return  # the converter refuses these before asking for a size
    attrs = {"kernel_shape": [k, 1], "strides": [s, 1], "pads": [pad, 0, pad, 0],
             "ceil_mode": int(ceil), "data_format": "NCHW"}
    ((_, _, out, _),) = infer_output_shapes("MaxPool", attrs, [(1, 1, size, 1)])
    want = caffe_pooled_size(size, k, s, pad, ceil)
    caffe_outside = (want - 1) * s >= size + pad
    assert _window_outside(size, k, s, pad, out, ceil) == caffe_outside
    if not caffe_outside:
        assert out == want


def test_some_cases_are_refused_and_some_converted():
    """Exhaustive small grid: the refusals are exactly Caffe's outside windows, and both
    branches occur (a guard against a vacuous property above)."""
    refused, converted, caffe_refuses = 0, 0, 0
    for size in range(1, 12):
        for k in range(1, 4):
            for s in range(1, 5):
                for pad in range(k):
                    if size + 2 * pad < k:
                        continue
                    attrs = {"kernel_shape": [k, 1], "strides": [s, 1],
                             "pads": [pad, 0, pad, 0], "ceil_mode": 1}
                    ((_, _, out, _),) = infer_output_shapes("MaxPool", attrs, [(1, 1, size, 1)])
                    want = caffe_pooled_size(size, k, s, pad, True)
                    caffe_refuses += (want - 1) * s >= size + pad
                    if _window_outside(size, k, s, pad, out, True):
                        refused += 1
                    else:
                        converted += 1
                        assert out == want
    assert refused == caffe_refuses > 0 and converted > 100
