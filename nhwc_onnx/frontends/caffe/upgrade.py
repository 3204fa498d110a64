"""Upgrade legacy Caffe nets in-process: V1 (`layers { type: CONVOLUTION }`) and V0
(`layers { layer { type: "conv" } }`, with separate "padding" layers) become modern
LayerParameters, so the converters only ever see one format.
"""
from __future__ import annotations

from ...errors import InvalidModelError
from . import caffe_pb2 as pb
from .wire import V1_TYPE_NAMES

# V0 type strings -> modern type names.
_V0_TYPES = {
    "accuracy": "Accuracy", "bnll": "BNLL", "concat": "Concat", "conv": "Convolution",
    "data": "Data", "dropout": "Dropout", "euclidean_loss": "EuclideanLoss",
    "flatten": "Flatten", "hdf5_data": "HDF5Data", "hdf5_output": "HDF5Output",
    "im2col": "Im2col", "images": "ImageData", "infogain_loss": "InfogainLoss",
    "innerproduct": "InnerProduct", "lrn": "LRN",
    "multinomial_logistic_loss": "MultinomialLogisticLoss", "pool": "Pooling", "relu": "ReLU",
    "sigmoid": "Sigmoid", "softmax": "Softmax", "softmax_loss": "SoftmaxWithLoss",
    "split": "Split", "tanh": "TanH", "window_data": "WindowData", "padding": "padding",
}

# Parameter fields whose names are the same in V1LayerParameter and LayerParameter.
_SHARED_PARAMS = (
    "accuracy_param", "argmax_param", "concat_param", "contrastive_loss_param",
    "convolution_param", "data_param", "dropout_param", "dummy_data_param", "eltwise_param",
    "exp_param", "hdf5_data_param", "hdf5_output_param", "hinge_loss_param",
    "image_data_param", "infogain_loss_param", "inner_product_param", "lrn_param",
    "memory_data_param", "mvn_param", "pooling_param", "power_param", "relu_param",
    "sigmoid_param", "softmax_param", "slice_param", "tanh_param", "threshold_param",
    "window_data_param", "transform_param", "loss_param",
)


def needs_upgrade(net: pb.NetParameter) -> bool:
    return len(net.layers) > 0


def upgrade_net(net: pb.NetParameter) -> pb.NetParameter:
    """A copy of ``net`` whose layers are all in ``net.layer`` (modern form)."""
    if net.layer and net.layers:
        raise InvalidModelError(
            "the prototxt mixes modern `layer` and legacy `layers` entries; use one format")
    out = pb.NetParameter()
    out.CopyFrom(net)
    del out.layers[:]
    v0_nodes = [_from_v0(v1) if v1.HasField("layer") else None for v1 in net.layers]
    for v1, v0 in zip(net.layers, v0_nodes):
        out.layer.append(v0 if v0 is not None else _from_v1(v1))
    if any(v0 is not None for v0 in v0_nodes):
        _merge_padding_layers(out)
    return out


def _from_v1(v1: pb.V1LayerParameter) -> pb.LayerParameter:
    layer = pb.LayerParameter()
    layer.name = v1.name
    layer.type = V1_TYPE_NAMES.get(v1.type, f"V1Type{v1.type}")
    layer.bottom.extend(v1.bottom)
    layer.top.extend(v1.top)
    layer.include.extend(v1.include)
    layer.exclude.extend(v1.exclude)
    layer.blobs.extend(v1.blobs)
    for name in _SHARED_PARAMS:
        if v1.HasField(name):
            getattr(layer, name).CopyFrom(getattr(v1, name))
    return layer


def _from_v0(v1: pb.V1LayerParameter) -> pb.LayerParameter:
    v0 = v1.layer
    layer = pb.LayerParameter()
    layer.name = v0.name or v1.name
    layer.type = _V0_TYPES.get(v0.type, v0.type)
    layer.bottom.extend(v1.bottom)
    layer.top.extend(v1.top)
    layer.blobs.extend(v0.blobs)
    t = layer.type
    if t == "Convolution":
        p = layer.convolution_param
        p.num_output = v0.num_output
        p.bias_term = v0.biasterm
        if v0.HasField("pad"):
            p.pad.append(v0.pad)
        p.kernel_size.append(v0.kernelsize)
        p.group = v0.group
        p.stride.append(v0.stride)
    elif t == "Pooling":
        p = layer.pooling_param
        p.pool = v0.pool
        p.kernel_size.append(v0.kernelsize)
        p.stride.append(v0.stride)
        if v0.HasField("pad"):
            p.pad.append(v0.pad)
    elif t == "InnerProduct":
        layer.inner_product_param.num_output = v0.num_output
        layer.inner_product_param.bias_term = v0.biasterm
    elif t == "Dropout":
        layer.dropout_param.dropout_ratio = v0.dropout_ratio
    elif t == "LRN":
        p = layer.lrn_param
        p.local_size, p.alpha, p.beta, p.k = v0.local_size, v0.alpha, v0.beta, v0.k
    elif t == "Concat":
        layer.concat_param.concat_dim = v0.concat_dim
    elif t == "padding":
        # Kept as a marker; _merge_padding_layers folds it into the next convolution.
        layer.convolution_param.pad.append(v0.pad)
    elif t in ("Data", "ImageData", "WindowData"):
        tp = layer.transform_param
        tp.scale, tp.mirror, tp.crop_size = v0.scale, v0.mirror, v0.cropsize
        if v0.meanfile:
            tp.mean_file = v0.meanfile
    return layer


def _merge_padding_layers(net: pb.NetParameter) -> None:
    """V0 nets pad with a separate layer feeding a convolution/pooling: fold it in."""
    producers = {}
    keep = []
    for layer in net.layer:
        if layer.type == "padding":
            if len(layer.bottom) != 1 or len(layer.top) != 1:
                raise InvalidModelError(f"V0 padding layer '{layer.name}' needs one bottom and top")
            producers[layer.top[0]] = layer
            continue
        for i, bottom in enumerate(layer.bottom):
            pad_layer = producers.get(bottom)
            if pad_layer is None:
                continue
            pad = pad_layer.convolution_param.pad[0]
            if layer.type == "Convolution":
                del layer.convolution_param.pad[:]
                layer.convolution_param.pad.append(pad)
            elif layer.type == "Pooling":
                del layer.pooling_param.pad[:]
                layer.pooling_param.pad.append(pad)
            else:
                raise InvalidModelError(
                    f"V0 padding layer '{pad_layer.name}' feeds '{layer.name}' ({layer.type}); "
                    "only convolution and pooling can absorb it")
            layer.bottom[i] = pad_layer.bottom[0]
        keep.append(layer)
    if producers:
        del net.layer[:]
        net.layer.extend(keep)
