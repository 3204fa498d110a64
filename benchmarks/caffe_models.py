"""Caffe benchmark models: a public deploy prototxt plus a .caffemodel of seeded random blobs.

The prototxt text is copied at run time from a corpus folder (it is not committed here). Blob
shapes come from a small shape walk over the layers these two nets use; the packed float data
is written as raw bytes after a header serialized with the Caffe frontend's generated proto
module, so a 550 MB VGG16 file takes seconds rather than minutes.
"""
from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np

from nhwc_onnx.schemas.core.spatial_math import axis_plan

CAFFE_PROTOTXTS = {
    "caffe_resnet50": ("resnet50", "ResNet-50-deploy.prototxt"),
    "caffe_vgg16": ("vgg16", "VGG_ILSVRC_16_layers_deploy.prototxt"),
}

# Layers whose output has the shape of their (first) input.
_SAME_SHAPE = {"ReLU", "Dropout", "Softmax", "Eltwise", "BatchNorm", "Scale", "Sigmoid", "TanH"}


class ModelUnavailable(Exception):
    """This machine lacks what the model needs (a corpus prototxt, the Caffe proto module)."""


def _proto_module():
    try:
        from nhwc_onnx.frontends.caffe import caffe_pb2
    except ImportError as exc:
        raise ModelUnavailable(f"the Caffe frontend's proto module is missing ({exc})") from exc
    return caffe_pb2


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _len_field(number: int, payload_len: int) -> bytes:
    """Tag and length of a length-delimited field; the payload follows."""
    return _varint((number << 3) | 2) + _varint(payload_len)


def blob_bytes(pb, array: np.ndarray) -> bytes:
    """A serialized BlobProto: shape via the proto module, data (field 5) as packed raw bytes."""
    head = pb.BlobProto()
    head.shape.dim.extend(int(d) for d in array.shape)
    raw = np.ascontiguousarray(array, dtype="<f4").tobytes()
    return head.SerializeToString() + _len_field(5, len(raw)) + raw


def layer_bytes(pb, name: str, type_: str, blobs: list[np.ndarray]) -> bytes:
    """One NetParameter.layer (field 100) entry: name, type and blobs (LayerParameter field 7)."""
    body = [pb.LayerParameter(name=name, type=type_).SerializeToString()]
    for blob in blobs:
        data = blob_bytes(pb, blob)
        body.append(_len_field(7, len(data)) + data)
    joined = b"".join(body)
    return _len_field(100, len(joined)) + joined


def _pair(values, single_h: int, single_w: int, default: int) -> tuple[int, int]:
    """(h, w) from a field that is repeated in newer caffe.proto versions and scalar in older."""
    if single_h or single_w:
        return single_h, single_w
    if isinstance(values, int):
        values = [values] if values else []
    values = list(values) or [default]
    return values[0], values[-1]


def _net_inputs(net) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}
    dims = list(net.input_dim)
    for i, name in enumerate(net.input):
        if net.input_shape:
            shapes[name] = tuple(net.input_shape[i].dim)
        else:
            shapes[name] = tuple(dims[4 * i:4 * i + 4])
    for layer in net.layer:
        if layer.type == "Input":
            for top, shape in zip(layer.top, layer.input_param.shape):
                shapes[top] = tuple(shape.dim)
    return shapes


def blob_shapes(net) -> list[tuple[str, str, list[tuple[tuple[int, ...], str]]]]:
    """(layer name, type, [(blob shape, kind)]) for every layer with weights, in order."""
    shapes = _net_inputs(net)
    out = []
    for layer in net.layer:
        if layer.type == "Input":
            continue
        n, c, h, w = (list(shapes[layer.bottom[0]]) + [1, 1, 1])[:4]
        blobs: list[tuple[tuple[int, ...], str]] = []
        if layer.type == "Convolution":
            p = layer.convolution_param
            kh, kw = _pair(p.kernel_size, p.kernel_h, p.kernel_w, 1)
            sh, sw = _pair(p.stride, p.stride_h, p.stride_w, 1)
            ph, pw = _pair(p.pad, p.pad_h, p.pad_w, 0)
            dh, dw = _pair(p.dilation, 0, 0, 1)
            blobs.append(((p.num_output, c // p.group, kh, kw), "weight"))
            if p.bias_term:
                blobs.append(((p.num_output,), "bias"))
            top = (n, p.num_output, (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1,
                   (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1)
        elif layer.type == "Pooling":
            p = layer.pooling_param
            if p.global_pooling:
                top = (n, c, 1, 1)
            else:
                kh, kw = _pair(p.kernel_size, p.kernel_h, p.kernel_w, 1)
                sh, sw = _pair(p.stride, p.stride_h, p.stride_w, 1)
                ph, pw = _pair(p.pad, p.pad_h, p.pad_w, 0)
                ceil = p.round_mode == p.CEIL and p.ceil_mode
                # the core ops' rule, which the Caffe frontend sizes its pools with
                top = (n, c, axis_plan(h, kh, sh, 1, ph, ph, "NOTSET", int(ceil))[0],
                       axis_plan(w, kw, sw, 1, pw, pw, "NOTSET", int(ceil))[0])
        elif layer.type == "InnerProduct":
            p = layer.inner_product_param
            fan_in = math.prod(shapes[layer.bottom[0]][1:])
            blobs.append(((p.num_output, fan_in), "weight"))
            if p.bias_term:
                blobs.append(((p.num_output,), "bias"))
            top = (n, p.num_output)
        elif layer.type == "BatchNorm":
            blobs += [((c,), "mean"), ((c,), "var"), ((1,), "scale_factor")]
            top = shapes[layer.bottom[0]]
        elif layer.type == "Scale":
            blobs.append(((c,), "gamma"))
            if layer.scale_param.bias_term:
                blobs.append(((c,), "beta"))
            top = shapes[layer.bottom[0]]
        elif layer.type in _SAME_SHAPE:
            top = shapes[layer.bottom[0]]
        else:
            raise ModelUnavailable(f"layer type {layer.type} is not known to the benchmark maker")
        for name in layer.top:
            shapes[name] = tuple(top)
        if blobs:
            out.append((layer.name, layer.type, blobs))
    return out


def random_blob(rng: np.random.Generator, shape: tuple[int, ...], kind: str) -> np.ndarray:
    if kind == "weight":
        fan_in = math.prod(shape[1:])
        blob = rng.standard_normal(shape, dtype=np.float32)
        blob *= np.float32(math.sqrt(2.0 / fan_in))
        return blob
    if kind in ("var", "gamma"):
        return rng.uniform(0.5, 1.5, shape).astype(np.float32)
    if kind == "scale_factor":
        return np.ones(shape, np.float32)
    return (rng.standard_normal(shape) * 0.1).astype(np.float32)  # bias, mean, beta


def make_caffe(name: str, folder: Path, corpus: Path, seed: int) -> dict:
    """Copy the prototxt, write the caffemodel; the fields of a BenchModel."""
    pb = _proto_module()
    from google.protobuf import text_format

    sub, file = CAFFE_PROTOTXTS[name]
    origin = corpus / "caffe" / sub / file
    if not origin.exists():
        raise ModelUnavailable(f"{origin} not found (set NHWC_BENCH_CORPUS or --corpus)")
    prototxt = folder / file
    shutil.copyfile(origin, prototxt)
    net = text_format.Parse(prototxt.read_text(), pb.NetParameter())
    if net.layers:
        raise ModelUnavailable(f"{file} uses V1 layers; the maker reads only modern prototxts")
    rng = np.random.default_rng(seed)
    weights = folder / f"{name}.caffemodel"
    weight_bytes = 0
    with open(weights, "wb") as f:
        f.write(pb.NetParameter(name=net.name).SerializeToString())
        for layer_name, type_, specs in blob_shapes(net):
            arrays = [random_blob(rng, shape, kind) for shape, kind in specs]
            weight_bytes += sum(a.nbytes for a in arrays)
            f.write(layer_bytes(pb, layer_name, type_, arrays))
    outputs = [net.layer[-1].top[0]]
    inputs = list(_net_inputs(net))
    return {"source": str(prototxt), "weights": str(weights), "inputs": inputs,
            "outputs": outputs, "weight_bytes": weight_bytes}
