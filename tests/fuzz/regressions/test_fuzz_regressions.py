"""Each failure the fuzzer found, as a named graph: converts exactly, or is refused only as
the ``ops`` table says. A class another change is fixing is a strict xfail while its
generator switch is off (tests/fuzz/onnx_graphs.py ENABLED): it fails loudly once fixed."""
from __future__ import annotations

import pytest

from tests.fuzz.onnx_check import check_onnx_graph
from tests.fuzz.onnx_graphs import ENABLED
from tests.fuzz.regressions import onnx_cases


def _pending(cases, name: str, enabled) -> list:
    switch = cases.PENDING.get(name)
    if switch and switch not in enabled:
        return [pytest.mark.xfail(strict=True, reason=f"pending fix: '{switch}'")]
    return []


def _params():
    for name in onnx_cases.CASES:
        yield pytest.param(name, marks=_pending(onnx_cases, name, ENABLED), id=name)


def _tf_params():
    from tests.fuzz import tf_graphs
    from tests.fuzz.regressions import tf_cases

    for name in tf_cases.CASES:
        marks = [pytest.mark.tf, *_pending(tf_cases, name, tf_graphs.ENABLED)]
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", list(_params()))
def test_fuzz_regression_converts_exactly_or_is_refused_as_claimed(tmp_path, name):
    verdict = check_onnx_graph(onnx_cases.CASES[name](), tmp_path)
    assert not verdict.failures, "\n".join(verdict.failures)


@pytest.mark.parametrize("name", ["batchnorm_of_channel_reduced_map",
                                  "ceil_pool_whose_last_window_starts_past_the_input",
                                  "ir3_initializers_not_listed_as_inputs",
                                  "strided_slice_of_a_transposed_map",
                                  "linear_resize_of_a_transposed_map"])
def test_fuzz_regression_now_converts(tmp_path, name):
    verdict = check_onnx_graph(onnx_cases.CASES[name](), tmp_path)
    assert verdict.converted and not verdict.failures, verdict


@pytest.mark.parametrize("name", ["nonzero_pad_under_symbolic_batch",
                                  "full_map_constant_divisor_under_symbolic_batch",
                                  "average_pool_divisor_fix_under_symbolic_batch"])
def test_symbolic_batch_refusal_is_the_tables_note_and_batch_converts(tmp_path, name):
    from tests.fuzz.oracle import SYMBOLIC_BATCH_NOTE

    verdict = check_onnx_graph(onnx_cases.CASES[name](), tmp_path)
    assert not verdict.converted and not verdict.failures, verdict
    assert verdict.explained and all(w.startswith(SYMBOLIC_BATCH_NOTE)
                                     for w in verdict.explained)


@pytest.mark.parametrize("name, node", [("batch_size_minimum_as_data", "min"),
                                        ("batch_size_halved_as_data", "mul")])
def test_batch_arithmetic_is_a_batch_refusal_naming_its_node(tmp_path, name, node):
    """Data computed from a symbolic batch size is refused as [batch] naming the node where it
    stops folding (the table's note on a symbolic batch's size), and --batch 3 converts the
    graph exactly (the judge runs it against onnxruntime)."""
    from tests.fuzz.oracle import BATCH_SIZE_AS_DATA_NOTE

    verdict = check_onnx_graph(onnx_cases.CASES[name](), tmp_path)
    assert not verdict.converted and not verdict.failures, verdict
    assert f"{BATCH_SIZE_AS_DATA_NOTE}: {node}" in verdict.explained, verdict.explained


@pytest.mark.parametrize("name", list(_tf_params()))
def test_tf_fuzz_regression_converts_exactly_or_is_refused_as_claimed(tmp_path, name):
    from tests.fuzz.regressions import tf_cases
    from tests.fuzz.tf_graphs import check_tf_graph

    verdict = check_tf_graph(tf_cases.CASES[name](), tmp_path)
    assert not verdict.failures, "\n".join(verdict.failures)


def test_batchnorm_of_an_axis_not_stored_last_needs_allow_transpose(tmp_path):
    """Without --allow-transpose the moved BatchNormalization is refused, naming the node."""
    from nhwc_onnx import convert
    from nhwc_onnx.errors import UnsupportedOpError
    from nhwc_onnx.options import ConvertOptions

    path = tmp_path / "bn.onnx"
    path.write_bytes(onnx_cases.batchnorm_of_channel_reduced_map().model.SerializeToString())
    with pytest.raises(UnsupportedOpError) as refusal:
        convert(path, options=ConvertOptions(framework="onnx", exact_cut=False))
    assert [p.node for p in refusal.value.problems] == ["bn"]
    assert "layout Transpose" in str(refusal.value)


def test_caffe_dilated_depthwise_convolution_matches_a_numpy_reference(tmp_path):
    """Found as an OpenCV mismatch: OpenCV's dilated grouped Caffe convolution is wrong (off
    by 2.8 here); the conversion equals the formula, so the fuzzer draws no such layer."""
    import numpy as np

    from nhwc_onnx import convert
    from nhwc_onnx.frontends.caffe import random_weights
    from nhwc_onnx.options import ConvertOptions
    from nhwc_onnx.runtime import run
    from tests.frontends.caffe.caffe_testlib import layer_types, write_caffemodel_pb

    text = ('input: "data"\ninput_shape { dim: 1 dim: 2 dim: 7 dim: 8 }\n'
            'layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" '
            'convolution_param { num_output: 2 kernel_size: 3 pad: 1 dilation: 2 group: 2 } }')
    proto = tmp_path / "net.prototxt"
    proto.write_text(text)
    _, blobs = random_weights(proto, ConvertOptions(seed=0))
    write_caffemodel_pb(tmp_path / "net.caffemodel", blobs, layer_types(text))
    w, b = blobs["conv"]
    x = np.random.default_rng(1).uniform(-1, 1, (1, 2, 7, 8)).astype(np.float32)
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((1, 2, 5, 6))
    for i in range(3):
        for j in range(3):  # each tap reads every second cell
            want += w[None, :, 0, i, j, None, None] * padded[:, :, 2 * i:2 * i + 5, 2 * j:2 * j + 6]
    want += b[None, :, None, None]
    model = convert(proto, options=ConvertOptions(weights=str(tmp_path / "net.caffemodel"))).model
    got = next(iter(run(model, {model.graph.inputs[0].name: x.transpose(0, 2, 3, 1)}).values()))
    assert np.abs(got.transpose(0, 3, 1, 2) - want).max() < 1e-5


def test_valid_ceil_pool_with_a_partial_window_is_refused_as_claimed(tmp_path):
    verdict = check_onnx_graph(onnx_cases.valid_ceil_pool_with_a_partial_last_window(),
                               tmp_path)
    assert not verdict.converted and not verdict.failures, verdict
    assert [w.split(":")[0] for w in verdict.explained] == ["MaxPool outside its condition"]
