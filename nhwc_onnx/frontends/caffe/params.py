"""A Caffe layer's attributes: the fields set in its own ``*_param`` message (and in any
other its converter opens), named ``convolution_param.kernel_size``. A converter reads them
through ``TrackedLayer`` (what ``CaffeBuilder.begin`` hands it), which records every field
read, so that a set field nobody read is found (frontends/context.py), unless it has no effect
on inference.

A layer's own message is named after its type (Pooling: pooling_param, InnerProduct:
inner_product_param); Caffe ignores the messages of other types a layer may carry, and so
do we.
"""
from __future__ import annotations

import re
from typing import Any

from . import caffe_pb2 as pb

# Fields that leave a layer's inference result unchanged, in any ``*_param`` message: the
# implementation Caffe picks (engine, force_nd_im2col), how training initialises or updates
# parameters (fillers: the weights come from the caffemodel; BatchNorm's running-average
# fraction; Eltwise's gradient form), and Dropout's ratio (at test time Dropout passes its
# input on unchanged).
FIELDS_WITHOUT_EFFECT = frozenset({
    "engine", "force_nd_im2col", "filler", "weight_filler", "bias_filler",
    "moving_average_fraction", "stable_prod_grad", "dropout_ratio",
})
# Whole messages that describe where a data layer's input comes from and how it was prepared
# before it enters the net: the converted model takes that input as its graph input (the
# preparation is recorded in the metadata, not computed).
SOURCE_PARAMS = frozenset({
    "data_param", "image_data_param", "hdf5_data_param", "window_data_param",
    "memory_data_param", "dummy_data_param", "transform_param",
})


# Types whose message is not named after them.
_OWN_PARAM = {"Deconvolution": "convolution_param", "ConvolutionDepthwise": "convolution_param",
              "DepthwiseConvolution": "convolution_param", "HDF5Data": "hdf5_data_param",
              "Normalize": "norm_param"}


def own_param(layer_type: str) -> str:
    """The ``*_param`` message a layer of this type reads (Caffe's naming: the type in lower
    case, words joined by '_' when that is a field, as for InnerProduct)."""
    if layer_type in _OWN_PARAM:
        return _OWN_PARAM[layer_type]
    joined = f"{layer_type.lower()}_param"
    if joined in pb.LayerParameter.DESCRIPTOR.fields_by_name:
        return joined
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", layer_type).lower() + "_param"


def set_fields(layer: pb.LayerParameter, opened: set[str]) -> list[str]:
    """The layer's attributes: every field set in its own ``*_param`` message or in one its
    converter ``opened`` (a TrackedLayer records those names)."""
    own = own_param(layer.type)
    names = []
    for param, message in layer.ListFields():
        if param.name == own or param.name in opened:
            names += [f"{param.name}.{field.name}" for field, _ in message.ListFields()]
    return names


def field_value(layer: pb.LayerParameter, name: str) -> Any:
    """The value of attribute ``param.field`` when it is set, else None."""
    param, _, field = name.partition(".")
    if not param.endswith("_param") or not layer.HasField(param):
        return None
    message = getattr(layer, param)
    descriptor = message.DESCRIPTOR.fields_by_name.get(field)
    if descriptor is None:
        return None
    value = getattr(message, field)
    if descriptor.label == descriptor.LABEL_REPEATED:
        return list(value) if len(value) else None
    return value if message.HasField(field) else None


def without_effect(name: str) -> bool:
    """Whether ``param.field`` leaves inference unchanged; every filler does (Normalize's
    scale_filler, BN's slope_filler ...: the caffemodel holds the trained values)."""
    param, _, field = name.partition(".")
    return (param in SOURCE_PARAMS or field in FIELDS_WITHOUT_EFFECT
            or field.endswith("_filler"))


class TrackedLayer:
    """A LayerParameter whose ``*_param`` messages record the fields a converter reads
    (into ``read``, as ``param.field``); everything else reads through unchanged."""

    __slots__ = ("_layer", "_read")

    def __init__(self, layer: pb.LayerParameter, read: set[str]):
        self._layer = layer
        self._read = read

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._layer, name)
        if name.endswith("_param") and hasattr(value, "DESCRIPTOR"):
            self._read.add(name)  # opened: its set fields are attributes (see set_fields)
            return _TrackedParam(value, name, self._read)
        return value


class _TrackedParam:
    """One ``*_param`` message whose field reads (attribute access, ``HasField``) are
    recorded."""

    __slots__ = ("_fields", "_message", "_prefix", "_read")

    def __init__(self, message, prefix: str, read: set[str]):
        self._message = message
        self._prefix = prefix
        self._read = read
        self._fields = message.DESCRIPTOR.fields_by_name

    def __getattr__(self, name: str) -> Any:
        if name in self._fields:
            self._read.add(f"{self._prefix}.{name}")
        return getattr(self._message, name)

    def HasField(self, name: str) -> bool:  # noqa: N802 - the protobuf method it stands for
        self._read.add(f"{self._prefix}.{name}")
        return self._message.HasField(name)
