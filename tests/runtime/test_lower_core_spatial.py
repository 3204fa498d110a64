"""Core spatial ops written as standard ONNX: Conv and ConvTranspose in both data formats and
weight layouts, every auto_pad, pooling with ceil_mode and count_include_pad, BatchNormalization
on any axis, Resize's modes, depth/space. The core evaluator against onnxruntime."""
from __future__ import annotations

import pytest

from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.schemas.core import evaluate_node
from tests.runtime.core_lowering_cases import (
    Case,
    assert_matches,
    check_case,
    const,
    fed,
    one_node_model,
    rand,
    run_lowered,
)

NCHW = rand(2, 3, 9, 8)
NHWC = rand(2, 9, 8, 3)
AUTO_PADS = ["SAME_UPPER", "SAME_LOWER", "VALID"]


def _conv(name, x, w, fmt, layout, b=None, weight=const, **attrs) -> Case:
    kernel = list(w.shape[2:]) if layout == "OIHW" else list(w.shape[:2])
    return Case(name, "Conv", [fed(x), weight(w), None if b is None else const(b)],
                {"kernel_shape": kernel, "data_format": fmt, "weight_layout": layout, **attrs})


CONV = [
    _conv("Conv_NCHW_OIHW_pads", NCHW, rand(4, 3, 3, 2), "NCHW", "OIHW", rand(4),
          pads=[1, 0, 2, 1], strides=[2, 1], dilations=[1, 2]),
    _conv("Conv_NHWC_HWIO_pads", NHWC, rand(3, 2, 3, 4), "NHWC", "HWIO", rand(4),
          pads=[0, 1, 1, 0]),
    _conv("Conv_NHWC_HWIO_fed_weight", NHWC, rand(3, 2, 3, 4), "NHWC", "HWIO", weight=fed,
          auto_pad="SAME_UPPER", strides=[2, 2]),
    _conv("Conv_NCHW_group", rand(2, 6, 7, 8), rand(4, 3, 3, 3), "NCHW", "OIHW", group=2,
          auto_pad="SAME_UPPER"),
    _conv("Conv_NHWC_depthwise", rand(2, 7, 8, 3), rand(3, 3, 1, 6), "NHWC", "HWIO",
          rand(6), group=3, auto_pad="SAME_UPPER", strides=[2, 1], dilations=[1, 2]),
]
CONV += [_conv(f"Conv_{fmt}_{auto_pad}", x, rand(4, 3, 4, 3) if fmt == "NCHW" else
               rand(4, 3, 3, 4), fmt, "OIHW" if fmt == "NCHW" else "HWIO", rand(4),
               auto_pad=auto_pad, strides=[2, 3], dilations=[2, 1])
         for auto_pad in AUTO_PADS for fmt, x in (("NCHW", NCHW), ("NHWC", NHWC))]


def _deconv(name, x, w, fmt, layout, b=None, weight=const, **attrs) -> Case:
    kernel = list(w.shape[2:]) if layout == "IOHW" else list(w.shape[:2])
    return Case(name, "ConvTranspose", [fed(x), weight(w), None if b is None else const(b)],
                {"kernel_shape": kernel, "data_format": fmt, "weight_layout": layout, **attrs})


CONV_TRANSPOSE = [
    _deconv("ConvTranspose_NCHW_IOHW_pads_output_padding", NCHW, rand(3, 2, 3, 4), "NCHW",
            "IOHW", rand(2), pads=[1, 0, 2, 1], strides=[2, 3], output_padding=[1, 2]),
    _deconv("ConvTranspose_NCHW_group_dilated", rand(2, 4, 5, 6), rand(4, 3, 3, 2), "NCHW",
            "IOHW", rand(6), group=2, dilations=[2, 1], strides=[1, 2]),
    _deconv("ConvTranspose_NHWC_HWOI_fed_weight", NHWC, rand(3, 3, 5, 3), "NHWC", "HWOI",
            weight=fed, auto_pad="SAME_UPPER", strides=[2, 2]),
    _deconv("ConvTranspose_NHWC_SAME_output_shape", NHWC, rand(4, 3, 5, 3), "NHWC", "HWOI",
            rand(5), auto_pad="SAME_UPPER", strides=[2, 2], output_shape=[17, 16]),
    _deconv("ConvTranspose_SAME_LOWER_output_shape", NCHW, rand(3, 5, 4, 3), "NCHW", "IOHW",
            rand(5), auto_pad="SAME_LOWER", strides=[3, 2], output_shape=[27, 15]),
    _deconv("ConvTranspose_VALID_zero_fill", NCHW, rand(3, 5, 2, 2), "NCHW", "IOHW", rand(5),
            auto_pad="VALID", strides=[3, 3], output_shape=[28, 25]),
    _deconv("ConvTranspose_SAME_short_kernel", NHWC, rand(1, 1, 2, 3), "NHWC", "HWOI",
            rand(2), auto_pad="SAME_UPPER", strides=[3, 2]),
]


def _pool(name, op, x, fmt, **attrs) -> Case:
    return Case(name, op, [fed(x)], {"data_format": fmt, **attrs})


POOL = []
for _op in ("MaxPool", "AveragePool"):
    for _fmt, _x in (("NCHW", NCHW), ("NHWC", NHWC)):
        POOL += [_pool(f"{_op}_{_fmt}_{auto_pad}", _op, _x, _fmt, kernel_shape=[3, 2],
                       strides=[2, 3], auto_pad=auto_pad) for auto_pad in AUTO_PADS]
        POOL += [_pool(f"{_op}_{_fmt}_ceil{ceil}", _op, _x, _fmt, kernel_shape=[3, 2],
                       strides=[2, 2], pads=[0, 1, 1, 0], ceil_mode=ceil) for ceil in (0, 1)]
POOL += [
    _pool("MaxPool_dilated", "MaxPool", NCHW, "NCHW", kernel_shape=[2, 2], dilations=[2, 3],
          pads=[1, 0, 0, 1]),
    _pool("MaxPool_NHWC_dilated_SAME", "MaxPool", NHWC, "NHWC", kernel_shape=[2, 3],
          dilations=[3, 2], strides=[2, 1], auto_pad="SAME_UPPER"),
    _pool("MaxPool_last_window_starts_in_the_end_pad", "MaxPool", rand(2, 3, 7, 7), "NCHW",
          kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
    _pool("MaxPool_pads_as_wide_as_the_kernel_ceil", "MaxPool", NHWC, "NHWC",
          kernel_shape=[2, 2], strides=[3, 2], dilations=[2, 1], pads=[2, 1, 2, 2], ceil_mode=1),
]
for _incl in (0, 1):
    POOL += [
        _pool(f"AveragePool_count_include_pad{_incl}_pads", "AveragePool", NCHW, "NCHW",
              kernel_shape=[3, 3], strides=[2, 2], pads=[1, 2, 1, 0], count_include_pad=_incl),
        _pool(f"AveragePool_count_include_pad{_incl}_ceil", "AveragePool", NHWC, "NHWC",
              kernel_shape=[3, 2], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1,
              count_include_pad=_incl),
        _pool(f"AveragePool_count_include_pad{_incl}_SAME", "AveragePool", NHWC, "NHWC",
              kernel_shape=[3, 3], strides=[2, 3], auto_pad="SAME_LOWER",
              count_include_pad=_incl),
    ]
# the last window of W (8, kernel 3, stride 2) reaches a column past the pads: not counted
POOL.append(_pool("AveragePool_count_include_pad1_window_past_the_pads", "AveragePool", NCHW,
                  "NCHW", kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 0, 0], ceil_mode=1,
                  count_include_pad=1))
POOL += [_pool(f"{op}_{fmt}", op, x, fmt) for op in ("GlobalAveragePool", "GlobalMaxPool")
         for fmt, x in (("NCHW", NCHW), ("NHWC", NHWC))]


def _batchnorm(name, x, axis, **attrs) -> Case:
    c = x.shape[axis]
    return Case(name, "BatchNormalization", [fed(x), const(rand(c)), const(rand(c)),
                                             const(rand(c)), const(rand(c, low=0.1, high=2))],
                {"axis": axis, **attrs})


BATCHNORM = [
    _batchnorm("BatchNormalization_NCHW", NCHW, 1),
    _batchnorm("BatchNormalization_NHWC_negative_axis", NHWC, -1, epsilon=1e-3),
    _batchnorm("BatchNormalization_NHWC_axis3", NHWC, 3),
    _batchnorm("BatchNormalization_rank2", rand(5, 3), 1),
    _batchnorm("BatchNormalization_rank3_axis0", rand(4, 3, 5), 0, epsilon=0.01),
]


def _resize(name, x, mode, ctm, nearest="round_prefer_floor", **given) -> Case:
    return Case(name, "Resize", [fed(x)], {"mode": mode, "coordinate_transformation_mode": ctm,
                                           "nearest_mode": nearest, **given})


RESIZE = [
    _resize("Resize_nearest_NHWC_half_pixel", NHWC, "nearest", "half_pixel",
            scales=[1.0, 2.0, 3.0, 1.0]),
    _resize("Resize_nearest_asymmetric_floor", NCHW, "nearest", "asymmetric", "floor",
            scales=[1.0, 1.0, 2.0, 2.0]),
    _resize("Resize_nearest_align_corners_prefer_ceil", NHWC, "nearest", "align_corners",
            "round_prefer_ceil", sizes=[2, 17, 13, 3]),
    _resize("Resize_nearest_tf_half_pixel_floor", NHWC, "nearest", "tf_half_pixel_for_nn",
            "floor", sizes=[2, 18, 5, 3]),
    # (4 + 0.5) * 7 / 9 - 0.5 is 3 in float32 and just below in float64: the evaluator reads 2
    _resize("Resize_nearest_half_pixel_floor_on_a_float_tie", rand(2, 3, 7, 8), "nearest",
            "half_pixel", "floor", sizes=[2, 3, 9, 8]),
    _resize("Resize_nearest_ceil_downsample", NCHW, "nearest", "asymmetric", "ceil",
            scales=[1.0, 1.0, 0.5, 0.5]),
    _resize("Resize_linear_NHWC_half_pixel", NHWC, "linear", "half_pixel",
            scales=[1.0, 2.0, 2.0, 1.0]),
    _resize("Resize_linear_NCHW_align_corners", NCHW, "linear", "align_corners",
            sizes=[2, 3, 13, 17]),
    _resize("Resize_linear_pytorch_half_pixel", NCHW, "linear", "pytorch_half_pixel",
            sizes=[2, 3, 1, 5]),
    _resize("Resize_linear_asymmetric_one_axis", NHWC, "linear", "asymmetric",
            scales=[1.0, 1.0, 2.5, 1.0]),
    _resize("Resize_linear_rank2", rand(5, 6), "linear", "half_pixel", scales=[2.0, 0.5]),
    _resize("Resize_linear_outer_and_inner_axes", NCHW, "linear", "half_pixel",
            scales=[2.0, 1.0, 1.0, 1.5]),
    _resize("Resize_linear_rank3", rand(3, 4, 5), "linear", "align_corners",
            scales=[2.0, 1.0, 2.0]),
    _resize("Resize_linear_rank1", rand(7), "linear", "asymmetric", sizes=[11]),
]

DEPTH_SPACE = [
    Case(f"DepthToSpace_{fmt}_{mode}", "DepthToSpace",
         [fed(rand(2, 12, 3, 4) if fmt == "NCHW" else rand(2, 3, 4, 12))],
         {"blocksize": 2, "mode": mode, "data_format": fmt})
    for fmt in ("NCHW", "NHWC") for mode in ("DCR", "CRD")
] + [
    Case(f"SpaceToDepth_{fmt}", "SpaceToDepth",
         [fed(rand(2, 3, 6, 4) if fmt == "NCHW" else rand(2, 6, 4, 3))],
         {"blocksize": 2, "data_format": fmt})
    for fmt in ("NCHW", "NHWC")
]

CASES = CONV + CONV_TRANSPOSE + POOL + BATCHNORM + RESIZE + DEPTH_SPACE


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_lowered_op_matches_the_core_evaluator(case):
    check_case(case)


def _dilated(case: Case) -> bool:
    return any(d != 1 for d in case.attrs.get("dilations", [1, 1]))


def _without_height_and_width(case: Case):
    model, feeds, arrays = one_node_model(case)
    x = model.graph.inputs[0]
    fmt = case.attrs["data_format"]
    x.shape = (x.shape[0], None, None, x.shape[3]) if fmt == "NHWC" else x.shape[:2] + (
        None, None)
    return model, feeds, arrays


SAME = [c for c in CONV + POOL if "SAME" in c.name]


@pytest.mark.parametrize("case", [c for c in SAME if not _dilated(c)], ids=lambda c: c.name)
def test_same_padding_with_unknown_height_and_width(case):
    """Without H and W the lowering cannot resolve SAME into pads: ONNX's auto_pad does it."""
    model, feeds, arrays = _without_height_and_width(case)
    want = evaluate_node(model.graph.nodes[0], arrays)
    assert_matches(run_lowered(model, feeds)[0], want[0])


@pytest.mark.parametrize("case", [c for c in SAME if _dilated(c)], ids=lambda c: c.name)
def test_dilated_same_padding_needs_height_and_width(case):
    # onnxruntime's auto_pad ignores dilations (Conv refuses, MaxPool pads too little)
    model, feeds, _ = _without_height_and_width(case)
    with pytest.raises(UnsupportedOpError, match="attribute 'dilations'"):
        run_lowered(model, feeds)


@pytest.mark.parametrize("case", [c for c in RESIZE if c.attrs["mode"] == "nearest"
                                  and "scales" in c.attrs], ids=lambda c: c.name)
def test_nearest_resize_with_an_unknown_batch(case):
    """Without every dimension the Gathers cannot be sized: ONNX Resize does it."""
    model, feeds, arrays = one_node_model(case)
    model.graph.inputs[0].shape = (None, *model.graph.inputs[0].shape[1:])
    assert_matches(run_lowered(model, feeds)[0], evaluate_node(model.graph.nodes[0], arrays)[0])


def test_half_pixel_for_nn_on_a_kept_axis_is_refused():
    # ONNX samples a kept axis at x + 0.5, which interpolation moves; the evaluator keeps it
    case = _resize("kept", NHWC, "linear", "tf_half_pixel_for_nn", scales=[1.0, 2.0, 2.0, 1.0])
    with pytest.raises(UnsupportedOpError, match="coordinate_transformation_mode"):
        check_case(case)


def test_average_pool_pads_as_wide_as_the_kernel_are_refused():
    case = _pool("wide", "AveragePool", NCHW, "NCHW", kernel_shape=[2, 2], pads=[2, 0, 0, 0])
    with pytest.raises(UnsupportedOpError, match="attribute 'pads'"):
        check_case(case)


def test_linear_resize_of_three_axes_of_four_is_refused():
    # onnxruntime interpolates at most the last two axes of a rank-4 tensor
    case = _resize("three", NCHW, "linear", "half_pixel", scales=[1.0, 2.0, 2.0, 2.0])
    with pytest.raises(UnsupportedOpError, match="attribute 'scales'"):
        check_case(case)


def test_conv_transpose_needs_height_and_width():
    case = CONV_TRANSPOSE[0]
    model, _, _ = one_node_model(case)
    model.graph.inputs[0].shape = (2, 3, None, None)
    with pytest.raises(UnsupportedOpError, match="output_shape"):
        run_lowered(model, {})


def test_hwio_constant_weight_is_transposed_once_when_lowering():
    """A constant weight in TensorFlow's layout becomes one constant in ONNX's: no runtime
    Transpose, and the unread original is not carried along."""
    from nhwc_onnx.runtime.standard_onnx import lower_core_model

    model, _, _ = one_node_model(CONV[1])
    proto = lower_core_model(model)
    assert [n.op_type for n in proto.graph.node] == ["Transpose", "Conv", "Transpose"]
    weights = [t for t in proto.graph.initializer if len(t.dims) == 4]
    assert [list(t.dims) for t in weights] == [[4, 3, 3, 2]]


@pytest.mark.parametrize("op, extra", [("MaxPool", {}), ("AveragePool", {"count_include_pad": 1}),
                                       ("AveragePool", {"count_include_pad": 0})])
def test_ceil_pool_feeding_a_fixed_size_layer(op, extra):
    """Width 5, kernel 2, stride 2, pads 1: a naive ceil gives 4 windows, Caffe's rule 3 (the
    fourth would start in the end pad). A Gemm sized for 3 must accept the lowered pool's
    output, which onnxruntime checks when it loads the model."""
    from nhwc_onnx.ir import Graph, Model, Value
    from tests.core_reference import run_core

    graph = Graph("ceil")
    x = graph.add_input(Value("x", shape=(2, 3, 6, 5)))
    pool = graph.make_node(op, [x], {"kernel_shape": [2, 2], "strides": [2, 2],
                                     "pads": [1, 1, 1, 1], "ceil_mode": 1, **extra})
    flat = graph.make_node("Flatten", [pool.output])
    gemm = graph.make_node("Gemm", [flat.output, graph.constant(rand(3 * 4 * 3, 5), "w")])
    graph.outputs.append(gemm.output)
    model = Model(graph)
    feeds = {"x": rand(2, 3, 6, 5)}
    (got,) = run_lowered(model, feeds)
    assert_matches(got, run_core(model, feeds)[gemm.output.name])


def _lowered_ops(case: Case) -> list[str]:
    from nhwc_onnx.runtime.standard_onnx import lower_core_model

    return [n.op_type for n in lower_core_model(one_node_model(case)[0]).graph.node]


def test_nearest_resize_is_onnx_resize_where_float32_reads_the_same_indices():
    """Integer factors (TensorFlow's legacy rule, half pixel) stay one Resize, which the
    split's dialect segments read as UpSampling2D; a float32 tie becomes Gathers."""
    legacy = _resize("x2", NHWC, "nearest", "asymmetric", "floor", scales=[1.0, 2.0, 2.0, 1.0])
    assert _lowered_ops(legacy) == ["Resize"]
    assert _lowered_ops(RESIZE[0]) == ["Resize"]
    tie = [c for c in RESIZE if c.name == "Resize_nearest_half_pixel_floor_on_a_float_tie"]
    assert _lowered_ops(tie[0]) == ["Gather"]


@pytest.mark.slow
@pytest.mark.parametrize("ctm", ["asymmetric", "half_pixel", "pytorch_half_pixel",
                                 "align_corners", "tf_half_pixel_for_nn"])
def test_nearest_resize_reads_the_evaluators_indices(ctm):
    """Every rounding rule, sizes and scales, up and down, on sizes whose coordinates fall
    on .5 or on integers: Resize where float32 agrees, Gathers elsewhere, never a refusal."""
    for rule in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
        for n_in in (1, 5, 7, 10):
            for n_out in (1, 3, 9, 13, 14, 20):
                for given in ({"sizes": [2, n_out]}, {"scales": [1.0, n_out / n_in]}):
                    check_case(_resize("sweep", rand(2, n_in), "nearest", ctm, rule, **given))
