"""convert --split of a small SSD head cut before its DetectionOutput: Normalize runs in a
standard segment, the convolutions in dialect ones, and PriorBox (a constant computed from
static shapes) is a pipeline output of its own; against OpenCV (1e-4), at a fixed and a
symbolic batch."""
from __future__ import annotations

from nhwc_onnx.frontends.caffe import random_weights
from nhwc_onnx.options import ConvertOptions
from tests.cli_runner import run_cli
from tests.frontends.caffe.caffe_testlib import layer_types, write_caffemodel_pb
from tests.pipeline.caffe_models import _conv, _input, _relu
from tests.pipeline.test_split_caffe import assert_matches_opencv, kinds, split_cli

CUT = "loc,conf,priors"


def _ssd_head(folder):
    prototxt = (
        _input() + _conv("conv1", "data", 4) + _relu("relu1", "conv1")
        + 'layer { name: "norm" type: "Normalize" bottom: "conv1" top: "norm" '
          "norm_param { across_spatial: false channel_shared: false } }\n"
        + _conv("loc_conv", "norm", 12)
        + 'layer { name: "loc_perm" type: "Permute" bottom: "loc_conv" '
          'top: "loc_perm" permute_param { order: 0 order: 2 order: 3 order: 1 } }\n'
        + 'layer { name: "loc" type: "Flatten" bottom: "loc_perm" top: "loc" }\n'
        + _conv("conf_conv", "conv1", 6)
        + 'layer { name: "conf_perm" type: "Permute" bottom: "conf_conv" '
          'top: "conf_perm" permute_param { order: 0 order: 2 order: 3 order: 1 } }\n'
        + 'layer { name: "conf" type: "Flatten" bottom: "conf_perm" top: "conf" }\n'
        + 'layer { name: "priors" type: "PriorBox" bottom: "norm" bottom: "data" '
          'top: "priors" prior_box_param { min_size: 3 aspect_ratio: 2 flip: true '
          "clip: false variance: 0.1 variance: 0.1 variance: 0.2 variance: 0.2 } }\n"
        + 'layer { name: "detection" type: "DetectionOutput" bottom: "loc" bottom: "conf" '
          'bottom: "priors" top: "detection" detection_output_param { num_classes: 2 '
          "share_location: true background_label_id: 0 "
          "nms_param { nms_threshold: 0.45 top_k: 20 } code_type: CENTER_SIZE "
          "keep_top_k: 10 confidence_threshold: 0.01 } }\n")
    proto, weights = folder / "ssd.prototxt", folder / "ssd.caffemodel"
    proto.write_text(prototxt)
    # the weights of the layers the cut needs (DetectionOutput has none)
    _, blobs = random_weights(proto, ConvertOptions(seed=3, outputs=tuple(CUT.split(","))))
    write_caffemodel_pb(weights, blobs, layer_types(prototxt))
    return proto, weights


def test_ssd_head_cut_before_detection_output_splits_and_matches_opencv(tmp_path):
    proto, weights = _ssd_head(tmp_path)
    out = tmp_path / "split"
    manifest, result = split_cli(proto, weights, out, "--outputs", CUT, "--verify")
    assert kinds(manifest) == ["dialect", "onnx", "dialect"]
    assert [e["name"] for e in manifest["outputs"]] == CUT.split(",")
    assert "verification: MATCH" in result.stdout
    assert_matches_opencv(out, proto, weights)


def test_ssd_head_with_symbolic_batch_runs_at_batch_1_and_3(tmp_path):
    proto, weights = _ssd_head(tmp_path)
    out = tmp_path / "split"
    manifest, _ = split_cli(proto, weights, out, "--outputs", CUT,
                            "--input-shape", "data=-1,3,10,9")
    priors = next(e for e in manifest["outputs"] if e["name"] == "priors")
    assert priors["shape"][0] == 1  # the boxes do not depend on the batch
    for batch in (1, 3):
        assert_matches_opencv(out, proto, weights, batch)


def test_detection_output_still_refuses_the_split(tmp_path):
    proto, weights = _ssd_head(tmp_path)
    result = run_cli("convert", proto, "--weights", weights, "--split", "-o", tmp_path / "x")
    assert result.exit_code != 0
    assert "DetectionOutput" in result.output and "Normalize" not in result.output
