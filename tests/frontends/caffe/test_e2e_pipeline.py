"""End to end: Caffe files -> core model -> dialect pipeline -> onnxruntime, vs OpenCV."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.options import ConvertOptions
from nhwc_onnx.passes.base import PassContext
from nhwc_onnx.passes.pipeline import to_dialect
from nhwc_onnx.runtime import run
from tests.frontends.caffe.caffe_testlib import (
    make_net,
    max_rel_error,
    opencv_forward,
    random_feeds,
    source_pins,
)
from tests.frontends.caffe.test_layers_opencv import CASES, layer, net


def run_dialect(model, feeds: dict[str, np.ndarray], keep_layout=()) -> list[np.ndarray]:
    """Convert in place, feed NHWC inputs, return outputs permuted back to Caffe's layout."""
    to_dialect(model, PassContext(options=ConvertOptions(keep_layout=keep_layout)))
    assert all(n.domain == "nhwc" for n in model.graph.nodes)
    nhwc = {}
    for name, x in feeds.items():
        perm = model.io_permutations.get(name)
        nhwc[name] = np.ascontiguousarray(x.transpose(perm) if perm else x)
    results = run(model, nhwc)
    outs = []
    for v in model.graph.outputs:
        y = results[v.name]
        perm = model.io_permutations.get(v.name)
        outs.append(y.transpose(np.argsort(perm)) if perm else y)
    return outs


def check_e2e(tmp_path: Path, text: str, tol: float = 1e-4, keep_layout=()):
    proto, weights, model = make_net(tmp_path, text)
    feeds = random_feeds(model)
    layers = source_pins(model.graph.outputs)
    theirs = opencv_forward(proto, weights, feeds, layers)
    ours = run_dialect(model, feeds, keep_layout)
    for name, got, ref in zip(layers, ours, theirs):
        assert got.shape == ref.shape, f"{name}: {got.shape} vs OpenCV {ref.shape}"
        err = max_rel_error(got, ref)
        assert err <= tol, f"{name}: max error {err:.3g} vs OpenCV"
    return model


# Core ops the dialect has no exact form for (yet): the pipeline must refuse them by name
# (exact or refuse), or, once it learns them, match OpenCV.
MAY_BE_REFUSED = {
    "bnll": "Softplus",
    "interp_size": "Resize", "interp_zoom": "Resize",  # non-integer align-corners factors
    "softmax": "Softmax", "softmax_axis2": "Softmax",  # softmax over a non-last 4-D axis
    "batchnorm_batch_statistics": "Div Sqrt",
}


# Nets that flatten/reshape the NCHW input blob itself into the output: by the layout contract
# (the input is NHWC) they need a layout Transpose, so they are refused with a hint naming the
# input, and convert exactly with that input kept in source order (--keep-layout).
KEEP_LAYOUT = {"flatten": ["data"], "ip_axis2": ["data"], "reshape": ["data"],
               "reshape_axis_numaxes": ["data"]}


@pytest.mark.parametrize("case", sorted(CASES))
def test_layer_through_pipeline(tmp_path, case):
    text = CASES[case]
    text = text if text.startswith("input:") else net(text)
    if case in KEEP_LAYOUT:
        with pytest.raises(UnsupportedOpError) as refused:
            check_e2e(tmp_path, text)
        assert refused.value.keep_layout_suggestion == KEEP_LAYOUT[case]
        check_e2e(tmp_path, text, keep_layout=KEEP_LAYOUT[case])
        return
    if case not in MAY_BE_REFUSED:
        check_e2e(tmp_path, text)
        return
    try:
        check_e2e(tmp_path, text)
    except UnsupportedOpError as e:
        assert sorted(p.op for p in e.problems) == MAY_BE_REFUSED[case].split()


def test_small_residual_net_through_pipeline(tmp_path):
    conv = "convolution_param {{ num_output: {} kernel_size: {} pad: {} stride: {} }}"
    text = net(
        layer("conv1", "Convolution", ["data"], ["conv1"], conv.format(6, 3, 1, 2))
        + layer("bn1", "BatchNorm", ["conv1"], ["conv1"],
                "batch_norm_param { use_global_stats: true }")
        + layer("sc1", "Scale", ["conv1"], ["conv1"], "scale_param { bias_term: true }")
        + layer("relu1", "ReLU", ["conv1"], ["conv1"])
        + layer("pool1", "Pooling", ["conv1"], ["pool1"],
                "pooling_param { pool: MAX kernel_size: 3 stride: 2 }")
        + layer("dw", "ConvolutionDepthwise", ["pool1"], ["dw"], conv.format(6, 3, 1, 1))
        + layer("pw", "Convolution", ["dw"], ["pw"], conv.format(6, 1, 0, 1))
        + layer("add", "Eltwise", ["pool1", "pw"], ["add"])
        + layer("shuffle", "ShuffleChannel", ["add"], ["shuffle"],
                "shuffle_channel_param { group: 2 }")
        + layer("gap", "Pooling", ["shuffle"], ["gap"],
                "pooling_param { pool: AVE global_pooling: true }")
        + layer("fc", "InnerProduct", ["gap"], ["fc"], "inner_product_param { num_output: 5 }")
        + layer("prob", "Softmax", ["fc"], ["prob"]), shape=(2, 3, 23, 19))
    check_e2e(tmp_path, text)


@pytest.mark.parametrize("power", ["2.0001", "1.9999", "2.5"])
def test_power_near_two_is_refused_naming_the_layer(tmp_path, power):
    """Only power 1, 2 or 3 becomes products; a nearby power must not become x * x."""
    text = net(layer("r", "Power", ["data"], ["r"], f"power_param {{ power: {power} scale: 0.5 }}"))
    with pytest.raises(UnsupportedOpError) as refused:
        check_e2e(tmp_path, text)
    assert [(p.node, p.op) for p in refused.value.problems] == [("r", "Pow")], refused.value
    assert "exponent" in refused.value.problems[0].reason
