"""Structure of the converted graph: names, SSA renaming of in-place layers, metadata, the
up-front unsupported-layer scan, BatchNorm statistics, legacy (V1/V0) nets."""
from __future__ import annotations

import json

import numpy as np
import pytest

from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.frontends.caffe import REGISTRY, load
from nhwc_onnx.frontends.caffe.writer import encode_v1_layer, write_caffemodel
from nhwc_onnx.options import ConvertOptions
from tests.core_reference import run_core
from tests.frontends.caffe.caffe_testlib import (
    compare_with_opencv,
    opencv_forward,
    random_feeds,
    write_caffemodel_pb,
)
from tests.frontends.caffe.test_layers_opencv import layer, net

CONV = "convolution_param { num_output: 4 kernel_size: 3 pad: 1 }"


def test_in_place_layers_become_ssa_values(tmp_path):
    text = net(layer("conv1", "Convolution", ["data"], ["conv1"], CONV)
               + layer("conv1/relu", "ReLU", ["conv1"], ["conv1"])
               + layer("conv1/scale", "Power", ["conv1"], ["conv1"], "power_param { scale: 2 }"))
    model, _ = compare_with_opencv(tmp_path, text)
    g = model.graph
    assert [n.name for n in g.nodes] == ["conv1", "conv1/relu", "conv1/scale"]
    assert [n.doc for n in g.nodes] == ["Convolution", "ReLU", "Power"]
    names = [n.outputs[0].name for n in g.nodes]
    assert names == ["conv1", "conv1/relu", "conv1/scale"]
    assert len(set(names)) == 3
    assert all(n.outputs[0].meta["source_name"] == "conv1" for n in g.nodes)
    assert [v.name for v in g.outputs] == ["conv1/scale"]


def test_core_graph_contract(tmp_path):
    text = net(layer("conv1", "Convolution", ["data"], ["conv1"], CONV)
               + layer("pool1", "Pooling", ["conv1"], ["pool1"],
                       "pooling_param { pool: AVE kernel_size: 3 stride: 2 }")
               + layer("fc", "InnerProduct", ["pool1"], ["fc"],
                       "inner_product_param { num_output: 5 }"))
    model, _ = compare_with_opencv(tmp_path, text)
    g = model.graph
    conv, pool, flat, gemm = g.nodes
    assert all(n.domain == "core" for n in g.nodes)
    assert conv.attrs["data_format"] == "NCHW" and conv.attrs["weight_layout"] == "OIHW"
    assert conv.attrs["pads"] == [1, 1, 1, 1]
    assert pool.op == "AveragePool" and pool.attrs["ceil_mode"] == 1
    assert pool.attrs["count_include_pad"] == 1
    assert (flat.op, gemm.op, gemm.attrs["transB"]) == ("Flatten", "Gemm", 1)
    assert gemm.name == "fc" and flat.name == "fc/flatten"
    assert g.inputs[0].layout == "NCHW" and g.inputs[0].shape == (2, 3, 11, 9)
    assert model.metadata["source_framework"] == "caffe"
    assert model.metadata["source_file"].endswith("net.prototxt")


def test_unsupported_layers_are_listed_at_once(tmp_path):
    text = net(layer("spp1", "SPP", ["data"], ["spp1"])
               + layer("conv1", "Convolution", ["spp1"], ["conv1"], CONV)
               + layer("spp2", "SPP", ["conv1"], ["spp2"])
               + layer("py", "Python", ["spp2"], ["py"])
               + layer("pool", "Pooling", ["py"], ["pool", "mask"],
                       "pooling_param { kernel_size: 2 stride: 2 }")
               + layer("up", "Upsample", ["pool", "mask"], ["up"]))
    path = tmp_path / "bad.prototxt"
    path.write_text(text)
    with pytest.raises(UnsupportedOpError) as info:
        load(path, ConvertOptions(weights="random"))
    problems = info.value.problems
    assert [p.node for p in problems] == ["spp1", "spp2", "py", "pool", "up"]
    message = str(info.value)
    assert "SPP x2" in message and "Python x1" in message and "max-unpooling" in message


def test_registry_covers_the_issue_layer_list():
    wanted = ["Input", "Convolution", "Deconvolution", "Pooling", "InnerProduct", "ReLU", "ReLU6",
              "PReLU", "ELU", "Sigmoid", "TanH", "AbsVal", "Power", "BatchNorm", "Scale", "Bias",
              "Eltwise", "Concat", "Slice", "Split", "Softmax", "Flatten", "Reshape", "Dropout",
              "Permute", "Upsample", "Interp", "Crop", "ShuffleChannel", "ConvolutionDepthwise",
              "DepthwiseConvolution"]
    assert [w for w in wanted if w not in REGISTRY] == []
    assert "LRN" in REGISTRY  # decomposed like ONNX LRN, refused by the passes for x^-beta


def _bn_net(tmp_path, factor: float):
    text = net(layer("bn", "BatchNorm", ["data"], ["bn"], "batch_norm_param { eps: 0.001 }"))
    proto = tmp_path / "bn.prototxt"
    proto.write_text(text)
    rng = np.random.default_rng(3)
    mean = rng.standard_normal(3).astype(np.float32)
    var = rng.uniform(0.5, 2.0, 3).astype(np.float32)
    weights = tmp_path / "bn.caffemodel"
    write_caffemodel_pb(weights, {"bn": [mean, var, np.array([factor], np.float32)]},
                        {"data": "Input", "bn": "BatchNorm"})
    model = load(proto, ConvertOptions(weights=str(weights)))
    feeds = random_feeds(model)
    (out,) = run_core(model, feeds).values()
    return proto, weights, feeds, out, mean, var


@pytest.mark.parametrize("factor", [2.5, 0.0])
def test_batchnorm_scale_factor(tmp_path, factor):
    proto, weights, feeds, out, mean, var = _bn_net(tmp_path, factor)
    k = 0.0 if factor == 0 else 1.0 / factor  # Caffe: a zero factor means "do not rescale"
    x = feeds["data"]
    expected = (x - (mean * k).reshape(1, 3, 1, 1)) / np.sqrt((var * k).reshape(1, 3, 1, 1) + 1e-3)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    if factor:
        (ref,) = opencv_forward(proto, weights, feeds, ["bn"])
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


V1_NET = """
name: "legacy"
input: "data"
input_dim: 2 input_dim: 3 input_dim: 11 input_dim: 9
layers { name: "conv1" type: CONVOLUTION bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 stride: 2 pad: 1 } }
layers { name: "relu1" type: RELU bottom: "conv1" top: "conv1" }
layers { name: "pool1" type: POOLING bottom: "conv1" top: "pool1"
  pooling_param { pool: AVE kernel_size: 3 stride: 2 } }
layers { name: "fc" type: INNER_PRODUCT bottom: "pool1" top: "fc"
  inner_product_param { num_output: 5 } }
layers { name: "prob" type: SOFTMAX bottom: "fc" top: "prob" }
"""

MODERN_NET = """
name: "legacy"
input: "data"
input_dim: 2 input_dim: 3 input_dim: 11 input_dim: 9
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 stride: 2 pad: 1 } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: AVE kernel_size: 3 stride: 2 } }
layer { name: "fc" type: "InnerProduct" bottom: "pool1" top: "fc"
  inner_product_param { num_output: 5 } }
layer { name: "prob" type: "Softmax" bottom: "fc" top: "prob" }
"""

V0_NET = """
name: "legacy"
input: "data"
input_dim: 2 input_dim: 3 input_dim: 11 input_dim: 9
layers { layer { name: "pad1" type: "padding" pad: 1 } bottom: "data" top: "pad1" }
layers { layer { name: "conv1" type: "conv" num_output: 4 kernelsize: 3 stride: 2 }
  bottom: "pad1" top: "conv1" }
layers { layer { name: "relu1" type: "relu" } bottom: "conv1" top: "conv1" }
layers { layer { name: "pool1" type: "pool" pool: AVE kernelsize: 3 stride: 2 }
  bottom: "conv1" top: "pool1" }
layers { layer { name: "fc" type: "innerproduct" num_output: 5 } bottom: "pool1" top: "fc" }
layers { layer { name: "prob" type: "softmax" } bottom: "fc" top: "prob" }
"""


def _signature(model):
    g = model.graph
    return [(n.name, n.op, sorted(n.attrs.items()), [v.name for v in n.inputs if v is not None],
             [v.name for v in n.outputs]) for n in g.nodes]


@pytest.mark.parametrize("legacy", ["v1", "v0"])
def test_legacy_nets_convert_to_the_modern_model(tmp_path, legacy):
    rng = np.random.default_rng(5)
    conv_w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    conv_b = rng.standard_normal(4).astype(np.float32)
    fc_w = rng.standard_normal((5, 4 * 3 * 2)).astype(np.float32)
    fc_b = rng.standard_normal(5).astype(np.float32)
    modern_proto = tmp_path / "modern.prototxt"
    modern_proto.write_text(MODERN_NET)
    modern_weights = tmp_path / "modern.caffemodel"
    write_caffemodel(modern_weights, [("conv1", "Convolution", [conv_w, conv_b]),
                                      ("fc", "InnerProduct", [fc_w, fc_b])])
    old_proto = tmp_path / "old.prototxt"
    old_proto.write_text(V1_NET if legacy == "v1" else V0_NET)
    old_weights = tmp_path / "old.caffemodel"
    # Old snapshots store 4-D blobs through the legacy num/channels/height/width fields.
    old_weights.write_bytes(encode_v1_layer("conv1", 4, [conv_w, conv_b])
                            + encode_v1_layer("fc", 14, [fc_w, fc_b]))
    modern = load(modern_proto, ConvertOptions(weights=str(modern_weights)))
    old = load(old_proto, ConvertOptions(weights=str(old_weights)))
    assert _signature(old) == _signature(modern)
    feeds = random_feeds(modern)
    a, b = run_core(modern, feeds), run_core(old, feeds)
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    (ref,) = opencv_forward(modern_proto, modern_weights, feeds, ["prob"])
    np.testing.assert_allclose(a["prob"], ref, rtol=1e-4, atol=1e-5)


def test_data_layer_transform_param_is_recorded(tmp_path):
    text = ('layer { name: "data" type: "Data" top: "data" top: "label" include { phase: TEST }\n'
            '  transform_param { scale: 0.017 mirror: true crop_size: 7 mean_value: 104 '
            'mean_value: 117 mean_value: 123 }\n  data_param { source: "x" batch_size: 2 } }\n'
            'layer { name: "train_only" type: "Data" top: "data" top: "label" '
            'include { phase: TRAIN } }\n'
            + layer("conv1", "Convolution", ["data"], ["conv1"], CONV))
    path = tmp_path / "train_val.prototxt"
    path.write_text(text)
    model = load(path, ConvertOptions(weights="random", input_shapes={"data": [2, 3, 7, 7]}))
    (pre,) = json.loads(model.metadata["source_transform_param"])
    assert "preprocessing" not in model.metadata  # that key means embedded preprocessing
    assert pre["scale"] == pytest.approx(0.017) and pre["mirror"] is True
    assert pre["mean_value"] == [104, 117, 123] and pre["crop_size"] == 7
    assert [v.name for v in model.graph.inputs] == ["data"]


def test_random_weights_are_seeded(tmp_path):
    path = tmp_path / "n.prototxt"
    path.write_text(net(layer("conv1", "Convolution", ["data"], ["conv1"], CONV)))
    def weights(seed):
        m = load(path, ConvertOptions(weights="random", seed=seed))
        return m.graph.nodes[0].inputs[1].const
    np.testing.assert_array_equal(weights(3), weights(3))
    assert not np.array_equal(weights(3), weights(4))


def test_input_shape_override_and_batch(tmp_path):
    path = tmp_path / "n.prototxt"
    path.write_text(net(layer("conv1", "Convolution", ["data"], ["conv1"], CONV)))
    m = load(path, ConvertOptions(weights="random", input_shapes={"data": [1, 3, 13, 17]}))
    assert m.graph.inputs[0].shape == (1, 3, 13, 17)
    assert m.graph.outputs[0].shape == (1, 4, 13, 17)
    m = load(path, ConvertOptions(weights="random", batch=5))
    assert m.graph.inputs[0].shape == (5, 3, 11, 9)


def test_pooling_window_outside_the_input_is_refused(tmp_path):
    path = tmp_path / "n.prototxt"
    path.write_text(net(layer("p", "Pooling", ["data"], ["p"],
                              "pooling_param { pool: MAX kernel_size: 1 stride: 4 }"),
                        shape=(1, 3, 6, 9)))
    with pytest.raises(UnsupportedOpError, match="outside the input"):
        load(path, ConvertOptions(weights="random"))
