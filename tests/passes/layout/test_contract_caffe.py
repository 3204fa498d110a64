"""The layout contract, Caffe: nets without any spatial layer still get NHWC inputs and
outputs (Caffe blobs are NCHW), with zero Transposes; numbers against OpenCV's Caffe importer."""
from __future__ import annotations

import pytest

from nhwc_onnx.passes.base import PassContext
from nhwc_onnx.passes.pipeline import to_dialect
from tests.frontends.caffe.caffe_testlib import (
    make_net,
    max_rel_error,
    opencv_forward,
    random_feeds,
    source_pins,
)
from tests.frontends.caffe.test_layers_opencv import layer, net

NHWC = [0, 2, 3, 1]
TWO_INPUTS = ('input: "a"\ninput_shape { dim: 2 dim: 3 dim: 5 dim: 7 }\n'
              'input: "b"\ninput_shape { dim: 2 dim: 3 dim: 5 dim: 7 }\n')

CASES = {
    # name: (prototxt, expected permutation of every output)
    "eltwise": (TWO_INPUTS + layer("e", "Eltwise", ["a", "b"], ["e"],
                                   "eltwise_param { operation: PROD }"), NHWC),
    "scale_bias": (net(layer("s", "Scale", ["data"], ["s"], "scale_param { bias_term: true }"),
                       (2, 3, 5, 7)), NHWC),
    "prelu": (net(layer("p", "PReLU", ["data"], ["p"]), (2, 3, 5, 7)), NHWC),
    "softmax_channels": (net(layer("p", "Softmax", ["data"], ["p"]), (2, 3, 5, 7)), NHWC),
    "concat_channels": (TWO_INPUTS + layer("c", "Concat", ["a", "b"], ["c"]), NHWC),
    "inner_product": (net(layer("fc", "InnerProduct", ["data"], ["fc"],
                                "inner_product_param { num_output: 4 }"), (2, 3, 5, 7)), None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_net_without_spatial_layer_has_nhwc_io(tmp_path, case):
    import numpy as np

    text, out_perm = CASES[case]
    proto, weights, model = make_net(tmp_path, text)
    feeds = random_feeds(model)
    pins = source_pins(model.graph.outputs)
    theirs = opencv_forward(proto, weights, feeds, pins)
    to_dialect(model, PassContext())
    assert model.graph.op_counts().get("Transpose", 0) == 0
    for v in model.graph.inputs:
        assert model.io_permutations.get(v.name) == NHWC, v.name
        assert v.layout == "NHWC"
    from nhwc_onnx.runtime import run

    got = run(model, {k: np.ascontiguousarray(x.transpose(NHWC)) for k, x in feeds.items()})
    for v, ref in zip(model.graph.outputs, theirs):
        assert model.io_permutations.get(v.name) == out_perm, v.name
        y = got[v.name]
        y = y.transpose(np.argsort(out_perm)) if out_perm else y
        assert y.shape == ref.shape
        assert max_rel_error(y, ref) <= 1e-4
