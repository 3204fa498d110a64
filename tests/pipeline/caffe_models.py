"""Caffe nets the dialect refuses in part, for the split's tests: deploy prototxts with seeded
random weights written beside them (OpenCV runs both files as the source runtime)."""
from __future__ import annotations

from pathlib import Path

from tests.frontends.caffe.caffe_testlib import make_net

N, C, H, W = 2, 3, 10, 9  # distinct sizes, so a wrong axis cannot pass


def _input(name: str = "data", shape=(N, C, H, W)) -> str:
    dims = " ".join(f"dim: {d}" for d in shape)
    return f'name: "net"\ninput: "{name}"\ninput_shape {{ {dims} }}\n'


def _conv(name: str, bottom: str, out: int, k: int = 3, stride: int = 1) -> str:
    return (f'layer {{ name: "{name}" type: "Convolution" bottom: "{bottom}" top: "{name}" '
            f'convolution_param {{ num_output: {out} kernel_size: {k} pad: {k // 2} '
            f'stride: {stride} }} }}\n')


def _relu(name: str, blob: str) -> str:
    return f'layer {{ name: "{name}" type: "ReLU" bottom: "{blob}" top: "{blob}" }}\n'


def _head(bottom: str, classes: int, top: str = "logits") -> str:
    return (f'layer {{ name: "pool" type: "Pooling" bottom: "{bottom}" top: "pool" '
            'pooling_param { pool: AVE global_pooling: true } }\n'
            f'layer {{ name: "{top}" type: "InnerProduct" bottom: "pool" top: "{top}" '
            f'inner_product_param {{ num_output: {classes} }} }}\n')


def _lrn(name: str, bottom: str, size: int) -> str:
    # k left at 1: OpenCV, the oracle, reads no k from lrn_param
    return (f'layer {{ name: "{name}" type: "LRN" bottom: "{bottom}" top: "{name}" '
            f'lrn_param {{ local_size: {size} alpha: 0.0001 beta: 0.75 }} }}\n')


def write(folder: Path, prototxt: str, name: str) -> tuple[Path, Path]:
    """The prototxt and its random-weight caffemodel, written in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    proto, weights, _ = make_net(folder, prototxt, seed=len(name), name=name)
    return proto, weights


def lrn_net(folder: Path, shape=(N, C, H, W)) -> tuple[Path, Path]:
    """An AlexNet-style net: conv, relu, LRN, pool, conv, relu, LRN, a head, softmax."""
    text = (_input(shape=shape) + _conv("conv1", "data", 8) + _relu("relu1", "conv1")
            + _lrn("norm1", "conv1", 5)
            + 'layer { name: "pool1" type: "Pooling" bottom: "norm1" top: "pool1" '
              'pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n'
            + _conv("conv2", "pool1", 12) + _relu("relu2", "conv2")
            + _lrn("norm2", "conv2", 3) + _head("norm2", 6, "scores")
            + 'layer { name: "prob" type: "Softmax" bottom: "scores" top: "prob" }\n')
    return write(folder, text, "lrn_net")


def whole_net(folder: Path) -> tuple[Path, Path]:
    """A net the dialect converts whole."""
    text = _input() + _conv("conv1", "data", 8) + _relu("relu1", "conv1") + _head("conv1", 4)
    return write(folder, text, "whole_net")


def l2_embedder(folder: Path) -> tuple[Path, Path]:
    """Convs, a global pool, a 1x1 convolution to 7 features, then SSD's Normalize over
    channels (x / sqrt(sum x^2 + eps) * scale): an embedder ending in an L2 normalisation."""
    text = (_input() + _conv("conv1", "data", 8) + _relu("relu1", "conv1")
            + _conv("conv2", "conv1", 12, stride=2) + _relu("relu2", "conv2")
            + 'layer { name: "pool" type: "Pooling" bottom: "conv2" top: "pool" '
              'pooling_param { pool: AVE global_pooling: true } }\n'
            + _conv("embed", "pool", 7, k=1)
            + 'layer { name: "embedding" type: "Normalize" bottom: "embed" top: "embedding" '
              'norm_param { across_spatial: false channel_shared: true } }\n')
    return write(folder, text, "l2_embedder")


def log_mel_cnn(folder: Path) -> tuple[Path, Path]:
    """A spectrogram front (N,1,F,T): power (|x| + 0.01)^2 and its natural Log (OpenCV reads
    no log_param, so the defaults), then a CNN classifier."""
    text = (_input("spectrogram", (N, 1, 12, 9))
            + 'layer { name: "magnitude" type: "AbsVal" bottom: "spectrogram" '
              'top: "magnitude" }\n'
            + 'layer { name: "power" type: "Power" bottom: "magnitude" top: "power" '
              'power_param { power: 2 shift: 0.01 } }\n'
            + 'layer { name: "log" type: "Log" bottom: "power" top: "log" }\n'
            + _conv("conv1", "log", 6) + _relu("relu1", "conv1")
            + _conv("conv2", "conv1", 8, stride=2) + _head("conv2", 4))
    return write(folder, text, "log_mel_cnn")


def conv_lstm(folder: Path) -> Path:
    """A conv front then Caffe's LSTM layer (no converter: the prototxt alone is enough to
    be refused)."""
    text = (_input("data", (N, 1, 12, 9)) + _conv("conv1", "data", 4)
            + 'layer { name: "cont" type: "DummyData" top: "cont" dummy_data_param { '
              "shape { dim: 9 dim: 2 } } }\n"
            + 'layer { name: "seq" type: "Reshape" bottom: "conv1" top: "seq" '
              "reshape_param { shape { dim: 9 dim: 2 dim: -1 } } }\n"
            + 'layer { name: "lstm" type: "LSTM" bottom: "seq" bottom: "cont" top: "lstm" '
              "recurrent_param { num_output: 6 } }\n")
    folder.mkdir(parents=True, exist_ok=True)
    proto = folder / "conv_lstm.prototxt"
    proto.write_text(text)
    return proto


def convnext_block(folder: Path) -> tuple[Path, Path]:
    """A ConvNeXt-style block from Caffe layers: a stem conv, a depthwise 7x7, a LayerNorm
    over channels at each position (channels moved onto H by Reshape and Permute, then MVN,
    whose per-"channel" statistics are then per position), two 1x1 convs around a tanh GELU
    (0.5 x (1 + tanh(0.79788 (x + 0.044715 x^3)))), a residual sum, then a head."""
    dim, hw = 8, H * W
    text = (_input() + _conv("stem", "data", dim)
            + f'layer {{ name: "dw" type: "Convolution" bottom: "stem" top: "dw" '
              f'convolution_param {{ num_output: {dim} kernel_size: 7 pad: 3 group: {dim} }} }}\n'
            + f'layer {{ name: "tokens" type: "Reshape" bottom: "dw" top: "tokens" '
              f'reshape_param {{ shape {{ dim: 0 dim: {dim} dim: {hw} dim: 1 }} }} }}\n'
            + 'layer { name: "by_position" type: "Permute" bottom: "tokens" '
              'top: "by_position" permute_param { order: 0 order: 2 order: 1 order: 3 } }\n'
            + 'layer { name: "norm" type: "MVN" bottom: "by_position" top: "norm" }\n'
            + 'layer { name: "by_channel" type: "Permute" bottom: "norm" top: "by_channel" '
              'permute_param { order: 0 order: 2 order: 1 order: 3 } }\n'
            + f'layer {{ name: "maps" type: "Reshape" bottom: "by_channel" top: "maps" '
              f'reshape_param {{ shape {{ dim: 0 dim: {dim} dim: {H} dim: {W} }} }} }}\n'
            + _conv("pw1", "maps", 4 * dim, k=1) + _gelu("act", "pw1")
            + _conv("pw2", "act", dim, k=1)
            + 'layer { name: "residual" type: "Eltwise" bottom: "stem" bottom: "pw2" '
              'top: "residual" }\n' + _head("residual", 5))
    return write(folder, text, "convnext_block")


def _gelu(name: str, bottom: str) -> str:
    """GELU's tanh form in Caffe layers; its top is ``name``."""
    return (f'layer {{ name: "{name}/cube" type: "Power" bottom: "{bottom}" '
            f'top: "{name}/cube" power_param {{ power: 3 scale: 1 }} }}\n'
            f'layer {{ name: "{name}/inner" type: "Eltwise" bottom: "{bottom}" '
            f'bottom: "{name}/cube" top: "{name}/inner" eltwise_param {{ operation: SUM '
            'coeff: 1 coeff: 0.044715 } }\n'
            f'layer {{ name: "{name}/scaled" type: "Power" bottom: "{name}/inner" '
            f'top: "{name}/scaled" power_param {{ power: 1 scale: 0.7978846 }} }}\n'
            f'layer {{ name: "{name}/tanh" type: "TanH" bottom: "{name}/scaled" '
            f'top: "{name}/tanh" }}\n'
            f'layer {{ name: "{name}/half" type: "Power" bottom: "{name}/tanh" '
            f'top: "{name}/half" power_param {{ power: 1 scale: 0.5 shift: 0.5 }} }}\n'
            f'layer {{ name: "{name}" type: "Eltwise" bottom: "{bottom}" bottom: "{name}/half" '
            f'top: "{name}" eltwise_param {{ operation: PROD }} }}\n')


def _layer_norm(name: str, bottom: str, dim: int, tokens: int) -> str:
    """LayerNorm over ``dim`` features of each of ``tokens`` tokens held (N, dim, tokens, 1):
    tokens moved to the channel axis, MVN (per channel: per token), moved back."""
    return (f'layer {{ name: "{name}/by_token" type: "Permute" bottom: "{bottom}" '
            f'top: "{name}/by_token" permute_param {{ order: 0 order: 2 order: 1 order: 3 }} }}\n'
            f'layer {{ name: "{name}/mvn" type: "MVN" bottom: "{name}/by_token" '
            f'top: "{name}/mvn" }}\n'
            f'layer {{ name: "{name}" type: "Permute" bottom: "{name}/mvn" top: "{name}" '
            'permute_param { order: 0 order: 2 order: 1 order: 3 } }\n')


def vit_block(folder: Path) -> tuple[Path, Path]:
    """Patch embedding (a strided conv), tokens held (N, D, T, 1), a pre-norm MLP block (a
    LayerNorm, per-token linear layers as 1x1 convs around a tanh GELU) with a residual, a
    final LayerNorm, a mean over tokens and a head."""
    dim, tokens = 16, 5 * 5
    text = (_input() + _conv("patch", "data", dim, stride=2)  # N,16,5,5
            + f'layer {{ name: "tokens" type: "Reshape" bottom: "patch" top: "tokens" '
              f'reshape_param {{ shape {{ dim: 0 dim: {dim} dim: {tokens} dim: 1 }} }} }}\n'
            + _layer_norm("norm1", "tokens", dim, tokens)
            + _conv("fc1", "norm1", 2 * dim, k=1) + _gelu("gelu", "fc1")
            + _conv("fc2", "gelu", dim, k=1)
            + 'layer { name: "residual" type: "Eltwise" bottom: "tokens" bottom: "fc2" '
              'top: "residual" }\n'
            + _layer_norm("norm2", "residual", dim, tokens) + _head("norm2", 5))
    return write(folder, text, "vit_block")
