"""Seeded mutation fuzzing of both Caffe files: only the project's own errors may escape."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from nhwc_onnx.errors import NhwcOnnxError
from nhwc_onnx.frontends.caffe import load, random_weights
from nhwc_onnx.frontends.caffe.writer import write_caffemodel
from nhwc_onnx.options import ConvertOptions
from tests.frontends.caffe.test_layers_opencv import layer, net

TEXT = net(
    layer("conv1", "Convolution", ["data"], ["conv1"],
          "convolution_param { num_output: 4 kernel_size: 3 pad: 1 stride: 2 }")
    + layer("bn", "BatchNorm", ["conv1"], ["conv1"], "batch_norm_param { use_global_stats: true }")
    + layer("relu", "ReLU", ["conv1"], ["conv1"])
    + layer("pool", "Pooling", ["conv1"], ["pool"],
            "pooling_param { pool: AVE kernel_size: 3 stride: 2 }")
    + layer("sl", "Slice", ["pool"], ["a", "b"], "slice_param { slice_point: 1 }")
    + layer("cat", "Concat", ["b", "a"], ["cat"])
    + layer("fc", "InnerProduct", ["cat"], ["fc"], "inner_product_param { num_output: 5 }")
    + layer("prob", "Softmax", ["fc"], ["prob"]), shape=(1, 3, 9, 7))
CASES = 300


def _outcome(proto: Path, weights: str) -> bool:
    """True when the mutated net converted; False when the frontend refused it."""
    try:
        load(proto, ConvertOptions(weights=weights))
    except NhwcOnnxError as e:
        assert str(e).strip(), "an error without a message"
        return False
    return True


def test_the_unmutated_net_converts(tmp_path):
    proto = tmp_path / "f.prototxt"
    proto.write_text(TEXT)
    assert _outcome(proto, "random")


def test_mutated_prototxt(tmp_path):
    rng = np.random.default_rng(2024)
    proto = tmp_path / "f.prototxt"
    alphabet = list('{}:"\n #-0123456789abcdefghijklmnopqrstuvwxyz_.')
    converted = 0
    for _ in range(CASES):
        text = list(TEXT)
        for _ in range(int(rng.integers(1, 4))):
            i = int(rng.integers(0, len(text)))
            kind = rng.integers(0, 3)
            if kind == 0:
                text[i] = str(rng.choice(alphabet))
            elif kind == 1:
                del text[i]
            else:
                text.insert(i, str(rng.choice(alphabet)))
        proto.write_text("".join(text))
        converted += _outcome(proto, "random")
    # measured: 13 of 300 still convert (a refusal of everything would pass without this)
    assert converted >= 6


def test_mutated_caffemodel(tmp_path):
    proto = tmp_path / "f.prototxt"
    proto.write_text(TEXT)
    _, blobs = random_weights(proto, ConvertOptions(seed=0))
    weights = tmp_path / "f.caffemodel"
    write_caffemodel(weights, [(name, "", b) for name, b in blobs.items()])
    good = weights.read_bytes()
    rng = np.random.default_rng(7)
    converted = 0
    for _ in range(CASES):
        data = bytearray(good)
        for _ in range(int(rng.integers(1, 6))):
            i = int(rng.integers(0, len(data)))
            kind = rng.integers(0, 3)
            if kind == 0:
                data[i] = int(rng.integers(0, 256))
            elif kind == 1:
                del data[i:i + int(rng.integers(1, 9))]
            else:
                data[i:i] = rng.integers(0, 256, int(rng.integers(1, 9)), dtype=np.uint8).tobytes()
        weights.write_bytes(bytes(data))
        converted += _outcome(proto, str(weights))
    assert converted >= 12  # measured: 25 of 300 still convert
