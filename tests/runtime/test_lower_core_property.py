"""Property test: core windowed ops (Conv, ConvTranspose, MaxPool, AveragePool) and core
Slice, Pad and Resize written as standard ONNX, against the core evaluator.

Hypothesis sweeps input sizes (1 included), kernels, strides, dilations, explicit pads,
every auto_pad, ceil_mode, count_include_pad, both data formats and weight layouts; Slice
bounds past either end and negative steps; Pad crops and all four modes; every Resize rule.
A node the lowering refuses must name an attribute; every other must match (float32 1e-5).
"""
from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from nhwc_onnx.errors import InvalidAttributeError, UnsupportedOpError
from nhwc_onnx.schemas.core import evaluate_node, infer_node_shapes
from tests.runtime.core_lowering_cases import Case, check_case, const, fed, one_node_model, rand

pairs = st.lists(st.integers(1, 3), min_size=2, max_size=2)


@st.composite
def windowed(draw) -> Case:
    op = draw(st.sampled_from(["Conv", "ConvTranspose", "MaxPool", "AveragePool"]))
    fmt = draw(st.sampled_from(["NCHW", "NHWC"]))
    h, w = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    kernel = draw(st.lists(st.integers(1, 4), min_size=2, max_size=2))
    attrs = {"kernel_shape": kernel, "strides": draw(pairs), "data_format": fmt,
             "auto_pad": draw(st.sampled_from(["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]))}
    if attrs["auto_pad"] == "NOTSET":
        attrs["pads"] = [draw(st.integers(0, kernel[i % 2] - 1)) for i in range(4)]
    if op != "AveragePool":
        attrs["dilations"] = draw(st.lists(st.integers(1, 2), min_size=2, max_size=2))
    x = rand(2, 3, h, w) if fmt == "NCHW" else rand(2, h, w, 3)
    inputs = [fed(x)]
    if op in ("MaxPool", "AveragePool"):
        attrs["ceil_mode"] = draw(st.integers(0, 1))
        if op == "AveragePool":
            attrs["count_include_pad"] = draw(st.integers(0, 1))
    elif op == "Conv":
        attrs["weight_layout"] = draw(st.sampled_from(["OIHW", "HWIO"]))
        weight = rand(4, 3, *kernel) if attrs["weight_layout"] == "OIHW" else rand(*kernel, 3, 4)
        inputs += [const(weight), const(rand(4))]
    else:
        attrs["weight_layout"] = draw(st.sampled_from(["IOHW", "HWOI"]))
        limits = [max(s, d) - 1 for s, d in zip(attrs["strides"], attrs["dilations"])]
        attrs["output_padding"] = [draw(st.integers(0, limit)) for limit in limits]
        weight = rand(3, 2, *kernel) if attrs["weight_layout"] == "IOHW" else rand(*kernel, 2, 3)
        inputs += [const(weight), const(rand(2))]
    return Case("windowed", op, inputs, attrs)


@st.composite
def tensor_ops(draw) -> Case:
    shape = draw(st.lists(st.integers(1, 6), min_size=1, max_size=4))
    rank = len(shape)
    op = draw(st.sampled_from(["Slice", "Pad", "Resize"]))
    if op == "Slice":
        axes = draw(st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank,
                             unique_by=lambda a: a % rank))
        bound = st.one_of(st.integers(-8, 8), st.sampled_from([1 << 62, -(1 << 62)]))
        attrs = {"starts": [draw(st.integers(-8, 8)) for _ in axes],
                 "ends": [draw(bound) for _ in axes], "axes": axes,
                 "steps": [draw(st.sampled_from([-3, -2, -1, 1, 2, 3])) for _ in axes]}
    elif op == "Pad":
        attrs = {"pads": draw(st.lists(st.integers(-2, 4), min_size=2 * rank,
                                       max_size=2 * rank)),
                 "mode": draw(st.sampled_from(["constant", "reflect", "edge", "symmetric"])),
                 "value": 0.5}
    else:
        attrs = {"mode": draw(st.sampled_from(["nearest", "linear"])),
                 "coordinate_transformation_mode": draw(st.sampled_from([
                     "half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                     "tf_half_pixel_for_nn"])),
                 "nearest_mode": draw(st.sampled_from(["round_prefer_floor", "round_prefer_ceil",
                                                       "floor", "ceil"]))}
        if draw(st.booleans()):
            attrs["sizes"] = [draw(st.integers(1, 12)) for _ in shape]
        else:
            attrs["scales"] = [draw(st.sampled_from([1.0, 0.5, 0.75, 1.5, 2.0, 2.5, 3.0]))
                               for _ in shape]
    return Case("tensor", op, [fed(rand(*shape))], attrs)


def _lowered_or_refused(case: Case) -> None:
    model, _, arrays = one_node_model(case)
    try:
        want = evaluate_node(model.graph.nodes[0], arrays)
    except (InvalidAttributeError, ValueError):
        assume(False)  # not a node the core op defines
    assume(all(array.size for array in want))
    # the op's shape rule must agree with its evaluator (a Pad cropping more than an axis
    # holds is sized below zero by the rule, at zero by the evaluator)
    inferred = infer_node_shapes(model.graph.nodes[0], [a.shape for a in arrays], arrays)
    assume([tuple(s) for s in inferred] == [array.shape for array in want])
    try:
        check_case(case)
    except UnsupportedOpError as refusal:
        assert "attribute '" in str(refusal), refusal


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(windowed())
def test_windowed_op_lowering_matches_the_evaluator(case):
    _lowered_or_refused(case)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tensor_ops())
def test_slice_pad_resize_lowering_matches_the_evaluator(case):
    _lowered_or_refused(case)
