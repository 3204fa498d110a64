"""A max (or min) reduction over any axes but a symbolic batch converts exactly: H and W of a
4-D map as a global pool, other axes - H alone, W alone, the channels, an N,C,L map's length -
as a MaxPool with a one-wide window over each run of adjacent reduced axes, on the same bytes
reshaped. Before, only the global pool converted ("only the spatial axes (a global pool) have
a dialect form"). Numbers against onnxruntime and TensorFlow, static and symbolic batch."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from nhwc_onnx import convert
from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.options import ConvertOptions
from tests.frontends.exactness import converts_exactly

N, C, H, W = 2, 5, 6, 7


def _onnx_reduction(tmp_path, op, axes, keepdims, batch, rank=4):
    """Conv (so the map is a real NCHW feature map) then the reduction."""
    rng = np.random.default_rng(len(axes) + 3 * keepdims)
    if rank == 4:
        conv = helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3],
                                pads=[1, 1, 1, 1])
        x_shape, weight = [batch, 3, H, W], rng.standard_normal((C, 3, 3, 3))
    else:
        conv = helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3], pads=[1, 1])
        x_shape, weight = [batch, 3, W], rng.standard_normal((C, 3, 3))
    reduce = helper.make_node(op, ["c"], ["y"], axes=list(axes), keepdims=keepdims, name="red")
    graph = helper.make_graph(
        [conv, reduce], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(weight.astype(np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path / "reduce.onnx"
    onnx.save(model, path)
    return path


ONNX_AXES = [(2,), (3,), (1,), (1, 3), (2, 3), (1, 2), (-1,)]


@pytest.mark.parametrize("batch", [N, "N"], ids=["static", "symbolic"])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("axes", ONNX_AXES, ids=str)
def test_onnx_reduce_max_over_any_map_axes_converts_exactly(tmp_path, axes, keepdims, batch):
    path = _onnx_reduction(tmp_path, "ReduceMax", axes, keepdims, batch)
    _, model = converts_exactly(path, tmp_path, symbolic=batch == "N")
    pools = {"GlobalMaxPool"} if sorted(a % 4 for a in axes) == [2, 3] else {"MaxPool"}
    assert set(model.graph.op_counts()) == {"Conv", "Reshape"} | pools


@pytest.mark.parametrize("batch", [N, "N"], ids=["static", "symbolic"])
@pytest.mark.parametrize(("axes", "rank"), [((2,), 4), ((1, 3), 4), ((2,), 3), ((1,), 3)],
                         ids=str)
def test_onnx_reduce_min_and_rank_3_maps_convert_exactly(tmp_path, axes, rank, batch):
    for op in ("ReduceMin", "ReduceMax"):
        path = _onnx_reduction(tmp_path, op, axes, 0, batch, rank)
        converts_exactly(path, tmp_path, symbolic=batch == "N")


def test_reducing_the_batch_axis_converts_at_a_fixed_batch_only(tmp_path):
    converts_exactly(_onnx_reduction(tmp_path, "ReduceMax", (0, 2), 1, N), tmp_path)
    path = _onnx_reduction(tmp_path, "ReduceMax", (0, 2), 1, "N")
    with pytest.raises(UnsupportedOpError) as info:
        convert(path, options=ConvertOptions(exact_cut=False))
    [problem] = info.value.problems
    assert problem.node == "red" and "--batch N" in problem.reason


@pytest.mark.slow
@pytest.mark.parametrize("batch", [N, None], ids=["static", "symbolic"])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [1, 2, 3, (1, 3)], ids=str)
def test_tf_reduce_max_over_one_axis_converts_exactly(tmp_path, axis, keepdims, batch):
    from tests.frontends.tensorflow.tf_helpers import freeze, spec, tf

    weight = np.random.default_rng(4).standard_normal((3, 3, 3, C)).astype(np.float32)

    def fn(x):
        y = tf().nn.conv2d(x, weight, 1, "SAME")
        return tf().reduce_max(y, axis=axis, keepdims=keepdims) - \
            tf().reduce_min(y, axis=axis, keepdims=keepdims)

    data, _ = freeze(fn, [spec([batch, H, W, 3])])
    path = tmp_path / "reduce.pb"
    path.write_bytes(data)
    _, model = converts_exactly(path, tmp_path, symbolic=batch is None)
    runs = 2 if axis == (1, 3) else 1  # H and C are not adjacent in NHWC: two pools
    assert model.graph.op_counts()["MaxPool"] == 2 * runs
