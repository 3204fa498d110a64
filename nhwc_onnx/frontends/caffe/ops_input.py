"""Input layers and data layers (whose first top becomes a graph input)."""
from __future__ import annotations

from ...errors import InvalidModelError
from . import caffe_pb2 as pb
from .builder import CaffeBuilder
from .registry import REGISTRY


@REGISTRY.register("Input", emits=(), doc="graph inputs with input_param shapes")
def convert_input(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    shapes = [list(s.dim) for s in layer.input_param.shape]
    if shapes and len(shapes) not in (1, len(layer.top)):
        raise InvalidModelError(
            f"{len(shapes)} shapes for {len(layer.top)} tops")
    for i, top in enumerate(layer.top):
        declared = shapes[0] if len(shapes) == 1 else (shapes[i] if shapes else None)
        b.define_input(top, b.resolve_input_shape(top, declared))


def _data_shape(layer: pb.LayerParameter) -> list[int] | None:
    """What a data layer says about the shape of its first top, if anything."""
    t = layer.type
    if t == "MemoryData":
        p = layer.memory_data_param
        return [p.batch_size, p.channels, p.height, p.width]
    if t == "DummyData":
        p = layer.dummy_data_param
        if len(p.shape):
            return list(p.shape[0].dim)
        if len(p.num):
            return [p.num[0], p.channels[0], p.height[0], p.width[0]]
        return None
    crop = layer.transform_param.crop_size
    if t == "ImageData":
        p = layer.image_data_param
        h, w = (crop, crop) if crop else (p.new_height, p.new_width)
        if h and w:
            return [p.batch_size, 3 if p.is_color else 1, h, w]
    return None


def _preprocessing(layer: pb.LayerParameter) -> dict:
    tp = layer.transform_param
    info: dict = {"input": layer.top[0], "layer": layer.name}
    if tp.HasField("scale"):
        info["scale"] = float(tp.scale)
    if len(tp.mean_value):
        info["mean_value"] = [float(v) for v in tp.mean_value]
    if tp.mean_file:
        info["mean_file"] = tp.mean_file
    if tp.mirror:
        info["mirror"] = True
    if tp.crop_size:
        info["crop_size"] = int(tp.crop_size)
    if tp.crop_h or tp.crop_w:
        info["crop_h"], info["crop_w"] = int(tp.crop_h), int(tp.crop_w)
    if tp.force_color or tp.force_gray:
        info["force_color" if tp.force_color else "force_gray"] = True
    return info


@REGISTRY.register("Data", "ImageData", "MemoryData", "DummyData", "HDF5Data", "WindowData",
           "AnnotatedData", emits=(),
           doc="the first top becomes a graph input; transform_param is recorded")
def convert_data(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    if not layer.top:
        raise InvalidModelError("has no top")
    top = layer.top[0]
    b.define_input(top, b.resolve_input_shape(top, _data_shape(layer)))
    if layer.HasField("transform_param"):
        b.preprocessing.append(_preprocessing(layer))
    # Further tops (labels) exist only for training; layers that read them are refused.
