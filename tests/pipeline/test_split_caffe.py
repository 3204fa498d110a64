"""convert --split on Caffe sources the dialect refuses in part: the core ops written as
standard ONNX, split as an ONNX source is; each pipeline run on random inputs against OpenCV
running the prototxt and caffemodel (1e-4), checked by ``check``."""
from __future__ import annotations

import cv2
import numpy as np
import pytest

from nhwc_onnx import pipeline as pipelines
from nhwc_onnx.api import convert
from nhwc_onnx.options import ConvertOptions
from tests.cli_runner import run_cli
from tests.pipeline import caffe_models as models
from tests.pipeline.splitting import kinds, split_and_check

TOL = 1e-4


def opencv_outputs(proto, weights, feeds: dict, outputs: list[str]) -> list[np.ndarray]:
    net = cv2.dnn.readNetFromCaffe(str(proto), str(weights))
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    for name, x in feeds.items():
        net.setInput(np.ascontiguousarray(x), name)
    return [np.asarray(y) for y in net.forward(outputs)]


def assert_matches_opencv(folder, proto, weights, batch: int | None = None) -> None:
    """The saved pipeline (inputs and outputs permuted as the manifest says) and OpenCV on the
    same random NCHW inputs."""
    loaded = pipelines.load(folder)
    rng = np.random.default_rng(5)
    feeds = {}
    for e in loaded.manifest.inputs:
        stored = [batch if isinstance(d, str) else d for d in e.shape]
        source_shape = [stored[i] for i in np.argsort(e.permutation)] if e.permutation \
            else stored
        feeds[e.name] = rng.standard_normal(source_shape).astype(np.float32)
    got = loaded.run({n: np.ascontiguousarray(x.transpose(e.permutation)) if e.permutation
                      else x for (n, x), e in zip(feeds.items(), loaded.manifest.inputs)})
    names = [e.name for e in loaded.manifest.outputs]
    want = opencv_outputs(proto, weights, feeds, names)
    for e, expected in zip(loaded.manifest.outputs, want):
        have = got[e.name]
        if e.permutation:
            have = have.transpose(np.argsort(e.permutation))
        assert have.shape == expected.shape, e.name
        np.testing.assert_allclose(have, expected, rtol=TOL,
                                   atol=TOL * max(1.0, float(np.abs(expected).max())),
                                   err_msg=e.name)


def split_cli(proto, weights, out, *extra):
    return split_and_check([proto, "--weights", weights], out, *extra)


def test_lrn_net_alternates_five_segments_and_matches_opencv(tmp_path):
    proto, weights = models.lrn_net(tmp_path)
    out = tmp_path / "split"
    manifest, result = split_cli(proto, weights, out, "--verify", "--layers")
    assert kinds(manifest) == ["dialect", "onnx", "dialect", "onnx", "dialect"]
    assert manifest["inputs"][0]["permutation"] == [0, 2, 3, 1]  # Caffe's NCHW, stored NHWC
    assert "verification: MATCH" in result.stdout
    assert_matches_opencv(out, proto, weights)


def test_symbolic_batch_split_runs_at_batch_1_and_3(tmp_path):
    proto, weights = models.lrn_net(tmp_path)
    out = tmp_path / "split"
    manifest, _ = split_cli(proto, weights, out, "--input-shape", "data=-1,3,10,9")
    assert isinstance(manifest["inputs"][0]["shape"][0], str)
    for batch in (1, 3):
        assert_matches_opencv(out, proto, weights, batch)


def test_model_that_converts_whole_is_one_dialect_segment_with_plain_convert_bytes(tmp_path):
    proto, weights = models.whole_net(tmp_path)
    out = tmp_path / "split"
    manifest, _ = split_cli(proto, weights, out)
    assert kinds(manifest) == ["dialect"]
    plain = tmp_path / "plain.onnx"
    convert(proto, plain, ConvertOptions(weights=str(weights)))
    assert (out / manifest["segments"][0]["file"]).read_bytes() == plain.read_bytes()


def test_python_api_splits_a_caffe_source(tmp_path):
    proto, weights = models.lrn_net(tmp_path)
    pipeline = convert(proto, options=ConvertOptions(weights=str(weights)), split=True)
    assert [s.kind for s in pipeline.segments] == ["dialect", "onnx", "dialect", "onnx",
                                                   "dialect"]
    report = pipeline.verify(proto)
    assert report.ok
    pipeline.save(tmp_path / "saved")
    assert_matches_opencv(tmp_path / "saved", proto, weights)


def test_refusal_and_info_say_how_a_caffe_net_would_split_and_what_it_costs(tmp_path):
    proto, weights = models.lrn_net(tmp_path)
    refused = run_cli("convert", proto, "--weights", weights, "-o", tmp_path / "x.onnx")
    assert refused.exit_code == 1
    assert ("with --split (estimated from these refusals): 5 segment(s) (3 dialect, 2 "
            "standard ONNX), 100.0% of MACs in dialect segments") in refused.stderr
    info = run_cli("info", proto, "--weights", weights)
    assert info.exit_code == 0, info.output
    # conv1 10x9x8 x 27 + conv2 5x5x12 x 72, the LRN band sums 10x9x8 x 8 + 5x5x12 x 12,
    # the head 12 x 6
    assert "cost: 50,472 MACs per sample" in info.stdout


def test_layer_without_a_converter_is_still_refused_with_split(tmp_path):
    """Caffe's LSTM has no converter: no core op to run, so the split is refused naming it,
    and nothing is written."""
    proto = models.conv_lstm(tmp_path)
    out = tmp_path / "split"
    result = run_cli("convert", proto, "--weights", "random", "--split", "-o", out)
    assert result.exit_code == 1
    assert "node 'lstm' (LSTM): no caffe converter for op 'LSTM'" in result.stderr
    assert not out.exists()


FAMILIES = {
    # SSD's Normalize divides by a tensor: the tail runs standard
    "l2_embedder": (models.l2_embedder, ["dialect", "onnx"]),
    # the magnitude and power before the Log move no multiply-accumulate: standard with it
    "log_mel": (models.log_mel_cnn, ["onnx", "dialect"]),
    # Caffe has no LayerNorm or GELU layer: the blocks write them with Reshape, Permute, MVN,
    # Power, TanH and Eltwise; each MVN's square root and division run standard, the convs
    # and the tanh GELU in the dialect
    "convnext": (models.convnext_block, ["dialect", "onnx", "dialect"]),
    "vit": (models.vit_block, ["dialect", "onnx", "dialect", "onnx", "dialect"]),
}


@pytest.mark.parametrize("family", FAMILIES)
def test_family_splits_where_the_dialect_refuses_and_matches_opencv(tmp_path, family):
    build, expected = FAMILIES[family]
    proto, weights = build(tmp_path)
    out = tmp_path / "split"
    manifest, result = split_cli(proto, weights, out, "--verify")
    assert kinds(manifest) == expected
    assert "verification: MATCH" in result.stdout
    assert_matches_opencv(out, proto, weights)
