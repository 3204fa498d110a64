"""Write examples/caffe/tiny_net.prototxt and tiny_net.caffemodel (seeded random weights).

A small deploy net touching the common Caffe layers (convolution, BatchNorm + Scale, in-place
ReLU, ceil-mode pooling, depthwise convolution, Eltwise, global pooling, InnerProduct,
Softmax). Run `python examples/caffe/make_example.py` to regenerate; the output is
deterministic.
"""
from __future__ import annotations

from pathlib import Path

from nhwc_onnx.frontends.caffe import random_weights
from nhwc_onnx.frontends.caffe.prototxt import parse_prototxt_text
from nhwc_onnx.frontends.caffe.writer import write_caffemodel
from nhwc_onnx.options import ConvertOptions

HERE = Path(__file__).resolve().parent

PROTOTXT = """\
name: "tiny_net"
layer { name: "data" type: "Input" top: "data"
  input_param { shape { dim: 1 dim: 3 dim: 33 dim: 31 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 8 kernel_size: 3 stride: 2 pad: 1 bias_term: false } }
layer { name: "conv1/bn" type: "BatchNorm" bottom: "conv1" top: "conv1"
  batch_norm_param { use_global_stats: true } }
layer { name: "conv1/scale" type: "Scale" bottom: "conv1" top: "conv1"
  scale_param { bias_term: true } }
layer { name: "conv1/relu" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 3 stride: 2 } }
layer { name: "conv2/dw" type: "Convolution" bottom: "pool1" top: "conv2/dw"
  convolution_param { num_output: 8 kernel_size: 3 pad: 1 group: 8 } }
layer { name: "conv2/relu" type: "ReLU" bottom: "conv2/dw" top: "conv2/dw" }
layer { name: "add" type: "Eltwise" bottom: "pool1" bottom: "conv2/dw" top: "add" }
layer { name: "pool2" type: "Pooling" bottom: "add" top: "pool2"
  pooling_param { pool: AVE global_pooling: true } }
layer { name: "fc" type: "InnerProduct" bottom: "pool2" top: "fc"
  inner_product_param { num_output: 10 } }
layer { name: "prob" type: "Softmax" bottom: "fc" top: "prob" }
"""


def main() -> None:
    proto = HERE / "tiny_net.prototxt"
    proto.write_text(PROTOTXT)
    _, blobs = random_weights(proto, ConvertOptions(seed=2024))
    types = {layer.name: layer.type for layer in parse_prototxt_text(PROTOTXT).layer}
    write_caffemodel(HERE / "tiny_net.caffemodel", [(n, types[n], b) for n, b in blobs.items()],
                     net_name="tiny_net")
    print(f"wrote {proto} and {HERE / 'tiny_net.caffemodel'}")


if __name__ == "__main__":
    main()
