"""Resize nodes exactly as PyTorch's two ONNX exporters write them, converted to the dialect and
compared with onnxruntime on the source graph.

TorchScript exporter (opsets 11-17): ``Resize(X, roi, scales | "", sizes?)`` with
coordinate_transformation_mode, cubic_coeff_a=-0.75, mode and nearest_mode="floor" on every
node; opset 11 feeds an empty float constant as roi (and as scales when sizes are given),
later opsets leave roi as "". Dynamo exporter (opset 18+, onnxscript's torchlib): sizes built
from ``Shape(X, start=0, end=2)`` + the requested size, every Resize attribute written out
(antialias=0, exclude_outside=0, extrapolation_value=0.0, keep_aspect_ratio_policy="stretch").
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

sys.path.insert(0, str(Path(__file__).parent))
from onnx_backend_cases import execute_pipeline
from onnx_helpers import convert, make_model, random_feeds, run_ort

from nhwc_onnx.errors import UnsupportedOpError

SHAPE = [2, 3, 5, 7]
RNG = np.random.default_rng(17)

# F.interpolate -> (mode, coordinate_transformation_mode) as the exporters map it
INTERPOLATE = {
    "nearest": ("nearest", "asymmetric"),
    "bilinear": ("linear", "pytorch_half_pixel"),
    "bilinear_half_pixel": ("linear", "half_pixel"),  # older TorchScript exports
    "bilinear_align_corners": ("linear", "align_corners"),
}


def _torchscript(kind: str, opset: int, factor: int, by_size: bool, x="x", y="y", tag="",
                 in_hw=tuple(SHAPE[2:])):
    """Nodes and initializers of one TorchScript-exported F.interpolate."""
    mode, ctm = INTERPOLATE[kind]
    attrs = {"coordinate_transformation_mode": ctm, "cubic_coeff_a": -0.75, "mode": mode,
                 "nearest_mode": "floor"}
    nodes, inits = [], {}
    empty = f"{tag}empty"
    if opset == 11:
        nodes.append(helper.make_node("Constant", [], [empty], value=helper.make_tensor(
            empty, 1, [0], [])))
    roi = empty if opset == 11 else ""
    if by_size:
        # size=(h*f, w*f): sizes = Concat(Slice(Shape(x), 0, 2), constant size)
        inits.update({f"{tag}start": np.array([0]), f"{tag}end": np.array([2]),
                      f"{tag}hw": np.array([in_hw[0] * factor, in_hw[1] * factor])})
        nodes += [
            helper.make_node("Shape", [x], [f"{tag}shape"]),
            helper.make_node("Slice", [f"{tag}shape", f"{tag}start", f"{tag}end"],
                             [f"{tag}nc"]),
            helper.make_node("Concat", [f"{tag}nc", f"{tag}hw"], [f"{tag}sizes"], axis=0),
            helper.make_node("Resize", [x, roi, empty if opset == 11 else "", f"{tag}sizes"],
                             [y], **attrs)]
    else:
        inits[f"{tag}scales"] = np.array([1, 1, factor, factor], np.float32)
        nodes.append(helper.make_node("Resize", [x, roi, f"{tag}scales"], [y], **attrs))
    return nodes, inits


def _dynamo(kind: str, factor: int, by_size: bool, axes: bool, x="x", y="y", tag="",
            in_hw=tuple(SHAPE[2:])):
    """Nodes and initializers of one dynamo-exported F.interpolate (opset 18+)."""
    mode, ctm = INTERPOLATE[kind]
    attrs = {"antialias": 0, "coordinate_transformation_mode": ctm, "cubic_coeff_a": -0.75,
                 "exclude_outside": 0, "extrapolation_value": 0.0,
                 "keep_aspect_ratio_policy": "stretch", "mode": mode, "nearest_mode": "floor"}
    if axes:
        attrs["axes"] = [2, 3]
    hw = [in_hw[0] * factor, in_hw[1] * factor]
    nodes, inits = [], {}
    if by_size and axes:
        inits[f"{tag}sizes"] = np.array(hw)
        nodes.append(helper.make_node("Resize", [x, "", "", f"{tag}sizes"], [y], **attrs))
    elif by_size:
        inits[f"{tag}hw"] = np.array(hw)
        nodes += [
            helper.make_node("Shape", [x], [f"{tag}nc"], start=0, end=2),
            helper.make_node("Cast", [f"{tag}hw"], [f"{tag}hw64"], to=7),
            helper.make_node("Concat", [f"{tag}nc", f"{tag}hw64"], [f"{tag}sizes"], axis=0),
            helper.make_node("Resize", [x, "", "", f"{tag}sizes"], [y], **attrs)]
    else:
        scales = [factor, factor] if axes else [1, 1, factor, factor]
        inits[f"{tag}scales"] = np.array(scales, np.float32)
        nodes.append(helper.make_node("Resize", [x, "", f"{tag}scales"], [y], **attrs))
    return nodes, inits


def _convert_and_compare(model) -> float:
    feeds = random_feeds(model)
    want = run_ort(model, feeds)
    got = execute_pipeline(convert(model), feeds)
    worst = 0.0
    for name, expected in want.items():
        assert got[name].shape == expected.shape, name
        np.testing.assert_allclose(got[name], expected, rtol=1e-4, atol=1e-4, err_msg=name)
        worst = max(worst, float(np.abs(got[name] - expected).max()))
    return worst


TORCHSCRIPT_CASES = [(kind, opset, by_size)
                     for kind in INTERPOLATE for opset in (11, 13, 16, 17)
                     for by_size in (False, True)]
DYNAMO_CASES = [(kind, opset, by_size, axes)
                for kind in INTERPOLATE for opset in (18, 19, 20)
                for by_size, axes in ((True, False), (False, False), (True, True), (False, True))]


def _all_cases():
    for kind, opset, by_size in TORCHSCRIPT_CASES:
        nodes, inits = _torchscript(kind, opset, 2, by_size)
        yield f"torchscript-{kind}-opset{opset}-{'sizes' if by_size else 'scales'}", nodes, \
            inits, opset
    for kind, opset, by_size, axes in DYNAMO_CASES:
        nodes, inits = _dynamo(kind, 2, by_size, axes)
        yield (f"dynamo-{kind}-opset{opset}-{'sizes' if by_size else 'scales'}"
               f"{'-axes' if axes else ''}"), nodes, inits, opset


def test_every_pytorch_interpolate_export_converts_and_matches_onnxruntime():
    """All 80 exports: align_corners=True (20) is refused for its real reason - its
    coordinates x*(n-1)/(m-1) are not UpSampling2D's - never for an attribute."""
    converted, refused = [], []
    for name, nodes, inits, opset in _all_cases():
        model = make_model(nodes, [("x", SHAPE)], [("y", None)], inits, opset=opset)
        try:
            _convert_and_compare(model)
        except UnsupportedOpError as exc:
            refused.append((name, str(exc)))
            continue
        converted.append(name)
    assert len(converted) == 60, refused
    assert all("align_corners" in name for name, _ in refused), refused
    assert all("linear resize with align_corners" in why and "attribute" not in why
               for _, why in refused), refused
    assert len(converted) + len(refused) == len(TORCHSCRIPT_CASES) + len(DYNAMO_CASES) == 80


def test_segmentation_head_conv_then_bilinear_x2_and_x4():
    """Conv -> Relu -> Resize bilinear x2 (TorchScript) -> 1x1 Conv -> Resize x4 (dynamo)."""
    up2, inits2 = _torchscript("bilinear", 11, 2, False, x="r", y="u2", tag="a_")
    up4, inits4 = _dynamo("bilinear", 4, True, False, x="logits", y="out", tag="b_",
                          in_hw=(SHAPE[2] * 2, SHAPE[3] * 2))
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]), *up2,
             helper.make_node("Conv", ["u2", "w2", "b2"], ["logits"], kernel_shape=[1, 1]),
             *up4]
    inits = {"w1": RNG.standard_normal((4, 3, 3, 3)).astype(np.float32),
             "b1": RNG.standard_normal(4).astype(np.float32),
             "w2": RNG.standard_normal((4, 4, 1, 1)).astype(np.float32),
             "b2": RNG.standard_normal(4).astype(np.float32), **inits2, **inits4}
    # opset 18 so that both exporters' forms are valid in one graph (roi as a constant works)
    model = make_model(nodes, [("x", SHAPE)], [("out", [2, 4, 40, 56])], inits, opset=18)
    _convert_and_compare(model)


def _single(attrs, scales=(1, 1, 2, 2), sizes=None, opset=19):
    inputs = ["x", "", "scales"] if sizes is None else ["x", "", "", "sizes"]
    inits = ({"scales": np.array(scales, np.float32)} if sizes is None
             else {"sizes": np.array(sizes)})
    node = helper.make_node("Resize", inputs, ["y"], name="rs", **attrs)
    return make_model([node], [("x", SHAPE)], [("y", None)], inits, opset=opset)


@pytest.mark.parametrize("attrs,scales", [
    ({"mode": "linear", "antialias": 1}, (1, 1, 2, 2)),  # upsampling: the plain filter
    ({"mode": "linear", "antialias": 1, "exclude_outside": 1}, (1, 1, 2, 3)),
    ({"mode": "linear", "cubic_coeff_a": -0.5, "extrapolation_value": 3.0}, (1, 1, 3, 2)),
])
def test_attribute_without_effect_in_this_mode_converts(attrs, scales):
    _convert_and_compare(_single(attrs, scales))


@pytest.mark.parametrize("attrs,scales,sizes,named,fix", [
    ({"mode": "linear", "antialias": 1}, (1, 1, 0.5, 0.5), None, "antialias=1",
     "antialias=0 would convert"),
    ({"mode": "nearest", "antialias": 1}, (1, 1, 2, 2), None, "antialias=1",
     "antialias=0 would convert"),
    ({"mode": "nearest", "exclude_outside": 1}, (1, 1, 2, 2), None, "exclude_outside=1",
     "exclude_outside=0 would convert"),
    ({"mode": "linear", "exclude_outside": 1}, (1, 1, 2, 2), None, "exclude_outside=1",
     "exclude_outside=0 would convert"),
    ({"mode": "nearest", "keep_aspect_ratio_policy": "not_larger"}, None, (2, 3, 10, 21),
     "keep_aspect_ratio_policy 'not_larger'", "'stretch' (the default) would convert"),
    ({"mode": "nearest", "keep_aspect_ratio_policy": "not_smaller"}, (1, 1, 2, 2), None,
     "keep_aspect_ratio_policy 'not_smaller'", "'stretch' (the default) would convert"),
    ({"mode": "cubic", "cubic_coeff_a": -0.75}, (1, 1, 2, 2), None, "mode 'cubic'",
     "nearest and linear are"),
])
def test_attribute_value_that_changes_the_result_is_refused_by_name(attrs, scales, sizes,
                                                                    named, fix):
    model = _single(attrs, scales, sizes)
    with pytest.raises(UnsupportedOpError) as info:
        convert(model)
    message = str(info.value)
    assert "'rs'" in message and named in message and fix in message, message
