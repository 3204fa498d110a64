"""One whole-pipeline case per Caffe layer type (OpenCV is the source runtime).

Weights are the frontend's seeded random ones (``--weights random``), which the verification
writes to a .caffemodel for OpenCV. OpenCV lacks four layer types (Bias, Clip, Upsample, Axpy):
they are checked against a numpy formula of Caffe's definition on the same weights instead,
and the depthwise fork types against OpenCV running the same net spelled as a grouped
Convolution.
"""
from __future__ import annotations

import numpy as np

from nhwc_onnx.frontends.caffe import random_weights
from nhwc_onnx.options import ConvertOptions
from tests.frontends.caffe.test_layers_opencv import layer, net
from tests.support.op_claims.harness import NODE, Case, Source

SHAPE = (2, 3, 5, 7)


def prototxt(body, shape=SHAPE, oracle_body=None, oracle=None, context=(), own_input=False,
             **options):
    """A builder of ``net(body)`` (``own_input``: the body declares its input layer);
    ``oracle(feeds, blobs)`` a numpy formula of the outputs, ``oracle_body`` the same net
    spelled for OpenCV."""
    def build(tmp_path) -> Source:
        path = tmp_path / "net.prototxt"
        path.write_text(body if own_input else net(body, shape))
        opts = ConvertOptions(weights="random", seed=0, **options)
        formula = None
        if oracle is not None:
            _, blobs = random_weights(path, opts)

            def formula(feeds):
                return oracle(feeds, blobs)

        oracle_path = None
        if oracle_body is not None:
            oracle_path = tmp_path / "oracle.prototxt"
            oracle_path.write_text(net(oracle_body, shape))
        return Source(path, opts, context=frozenset(context), oracle=formula,
                      oracle_path=oracle_path)

    return build


def one(type_, params="", bottoms=("data",), **kw):
    return prototxt(layer(NODE, type_, list(bottoms), [NODE], params), **kw)


SIG = layer("sig", "Sigmoid", ["data"], ["sig"])


def _data_layer(type_):
    """OpenCV does not feed a data layer's top: it runs the net with a declared input."""
    relu = layer("relu", "ReLU", ["data"], ["relu"])
    body = f'layer {{ name: "{NODE}" type: "{type_}" top: "data" top: "label" }}\n' + relu
    return prototxt(body, own_input=True, input_shapes={"data": list(SHAPE)}, context=["Relu"],
                    oracle_body=relu)


def _input_layer():
    dims = " ".join(f"dim: {d}" for d in SHAPE)
    body = (f'layer {{ name: "{NODE}" type: "Input" top: "data" '
            f'input_param {{ shape {{ {dims} }} }} }}\n' + layer("relu", "ReLU", ["data"],
                                                                ["relu"]))
    return prototxt(body, own_input=True, context=["Relu"])


def _depthwise(type_):
    params = "convolution_param { num_output: 6 kernel_size: 3 stride: 2 pad: 1 }"
    return prototxt(layer(NODE, type_, ["data"], [NODE], params), shape=(2, 6, 5, 7),
                    oracle_body=layer(NODE, "Convolution", ["data"], [NODE],
                                      params.replace("pad: 1", "pad: 1 group: 6")))


N_D = "convolution_param { num_output: 4 kernel_size: 3 kernel_size: 3 kernel_size: 3 }"


def _x(feeds):
    return feeds["data"].astype(np.float64)


CASES: dict[str, Case] = {
    **{t: Case(one(t)) for t in ("AbsVal", "Sigmoid", "TanH", "ReLU6", "Dropout", "Swish",
                                 "PReLU")},
    "ReLU": Case(one("ReLU", "relu_param { negative_slope: 0.13 }")),
    "ELU": Case(one("ELU", "elu_param { alpha: 0.7 }")),
    "BNLL": Case(refused=one("BNLL")),
    "LRN": Case(refused=one("LRN", "lrn_param { local_size: 3 alpha: 0.01 beta: 0.75 }")),
    "BatchNorm": Case(one("BatchNorm", "batch_norm_param { use_global_stats: true eps: 0.001 }"),
                      refused=one("BatchNorm", "batch_norm_param { use_global_stats: false }")),
    "Bias": Case(one("Bias", oracle=lambda feeds, blobs: {
        NODE: _x(feeds) + blobs[NODE][0].reshape(1, 3, 1, 1)})),
    "Clip": Case(one("Clip", "clip_param { min: -0.5 max: 0.4 }", oracle=lambda feeds, blobs: {
        NODE: np.clip(_x(feeds), -0.5, 0.4)})),
    "Upsample": Case(one("Upsample", "upsample_param { scale: 2 }", oracle=lambda feeds, b: {
        NODE: _x(feeds).repeat(2, axis=2).repeat(2, axis=3)}),
                     refused=prototxt(layer("pool", "Pooling", ["data"], ["pool", "mask"],
                                            "pooling_param { pool: MAX kernel_size: 2 "
                                            "stride: 2 }")
                                      + layer(NODE, "Upsample", ["pool", "mask"], [NODE],
                                              "upsample_param { scale: 2 }"), shape=(2, 3, 4, 6))),
    "Axpy": Case(prototxt(layer("g", "Pooling", ["data"], ["g"],
                                "pooling_param { pool: MAX global_pooling: true }")
                          + SIG + layer(NODE, "Axpy", ["g", "data", "sig"], [NODE]),
                          context=["GlobalMaxPool", "Sigmoid"],
                          oracle=lambda feeds, blobs: {NODE: _x(feeds).max(
                              axis=(2, 3), keepdims=True) * _x(feeds) + 1 / (1 + np.exp(
                                  -_x(feeds)))})),
    "Concat": Case(prototxt(SIG + layer(NODE, "Concat", ["data", "sig"], [NODE]),
                            context=["Sigmoid"])),
    "Eltwise": Case(prototxt(SIG + layer(NODE, "Eltwise", ["data", "sig"], [NODE],
                                         "eltwise_param { operation: SUM coeff: 0.5 "
                                         "coeff: -2 }"), context=["Sigmoid"])),
    "Convolution": Case(one("Convolution", "convolution_param { num_output: 4 kernel_h: 3 "
                                           "kernel_w: 2 stride: 2 pad: 1 }"),
                        refused=one("Convolution", N_D)),
    **{t: Case(_depthwise(t), refused=one(t, N_D))
       for t in ("ConvolutionDepthwise", "DepthwiseConvolution")},
    "Deconvolution": Case(one("Deconvolution", "convolution_param { num_output: 4 "
                                               "kernel_size: 4 stride: 2 pad: 1 }"),
                          refused=one("Deconvolution", N_D)),
    "Crop": Case(prototxt(layer("pool", "Pooling", ["data"], ["pool"],
                                "pooling_param { pool: MAX kernel_size: 2 stride: 2 }")
                          + layer(NODE, "Crop", ["data", "pool"], [NODE],
                                  "crop_param { axis: 2 offset: 1 offset: 2 }"),
                          context=["MaxPool", "Pad", "Slice", "Concat"])),
    **{t: Case(_data_layer(t)) for t in ("Data", "ImageData", "MemoryData", "DummyData",
                                         "HDF5Data", "WindowData", "AnnotatedData")},
    "Input": Case(_input_layer()),
    "Flatten": Case(prototxt(layer(NODE, "Flatten", ["data"], [NODE])
                             + layer("fc", "InnerProduct", [NODE], ["fc"],
                                     "inner_product_param { num_output: 4 }"),
                             context=["Dense"])),
    "InnerProduct": Case(one("InnerProduct", "inner_product_param { num_output: 4 }")),
    "Interp": Case(one("Interp", "interp_param { height: 5 width: 7 }"),
                   refused=one("Interp", "interp_param { zoom_factor: 2 }")),
    "Permute": Case(one("Permute", "permute_param { order: 0 order: 2 order: 3 order: 1 }")),
    "Pooling": Case(one("Pooling", "pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 }"),
                    refused=one("Pooling", "pooling_param { pool: STOCHASTIC kernel_size: 2 }")),
    "Power": Case(one("Power", "power_param { power: 3 scale: 0.5 shift: 1.5 }"),
                  refused=one("Power", "power_param { power: 0.5 shift: 2 }")),
    "Reshape": Case(one("Reshape", "reshape_param { shape { dim: 0 dim: 3 dim: -1 } }")),
    "Scale": Case(one("Scale", "scale_param { bias_term: true }")),
    "ShuffleChannel": Case(one("ShuffleChannel", "shuffle_channel_param { group: 3 }",
                               shape=(2, 6, 5, 7))),
    "Silence": Case(prototxt(SIG + layer(NODE, "Silence", ["sig"], [])
                             + layer("relu", "ReLU", ["data"], ["relu"]), context=["Relu"])),
    # OpenCV fetches outputs by layer name: the tops of one multi-top layer need a formula.
    "Slice": Case(prototxt(layer(NODE, "Slice", ["data"], ["a", "b"],
                                 "slice_param { axis: 1 slice_point: 1 }"),
                           oracle=lambda feeds, blobs: {"a": _x(feeds)[:, :1],
                                                        "b": _x(feeds)[:, 1:]})),
    "Softmax": Case(one("Softmax"), refused=one("Softmax", "softmax_param { axis: 2 }")),
    # SSD layers, Log/Exp and MVN: the dialect refuses their division, logarithm, exponential
    "Normalize": Case(refused=one("Normalize", "norm_param { across_spatial: false }")),
    "PriorBox": Case(prototxt(layer(NODE, "PriorBox", ["data", "data"], [NODE],
                                    "prior_box_param { min_size: 2 max_size: 4 aspect_ratio: 2 "
                                    "clip: true variance: 0.1 }"))),
    "Log": Case(refused=prototxt(SIG + layer(NODE, "Log", ["sig"], [NODE]),
                                 context=["Sigmoid"])),
    "Exp": Case(refused=one("Exp", "exp_param { base: 2 }")),
    "MVN": Case(one("MVN", "mvn_param { normalize_variance: false }"),
                refused=one("MVN", "mvn_param { normalize_variance: true }")),
    "Split": Case(prototxt(layer("relu", "ReLU", ["data"], ["relu"])
                           + layer(NODE, "Split", ["relu"], ["a", "b"]), context=["Relu"],
                           oracle=lambda feeds, blobs: {"a": np.maximum(_x(feeds), 0),
                                                        "b": np.maximum(_x(feeds), 0)})),
}
