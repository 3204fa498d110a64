"""A Reshape that only moves size-1 axes is the permutation it computes: tf2onnx writes the
NHWC -> NCHW Transpose of a one-channel input as Reshape (N, H, W, 1) -> (N, 1, H, W), and the
input is then NHWC at the source, as when a Transpose(0, 3, 1, 2) reads it. Before, the Conv
after it was refused ("Conv in NCHW reads '...', which is not an NCHW feature map") unless
--keep-layout was given. A Reshape that moves an axis of size > 1 keeps its own meaning."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from nhwc_onnx import convert
from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.options import ConvertOptions
from tests.frontends.exactness import converts_exactly

N, H, W, M = 2, 6, 7, 5


def _model(tmp_path, batch, channels=1, reader="Conv"):
    rng = np.random.default_rng(channels)
    nchw = [-1 if batch == "N" else N, channels, H, W]
    nodes = [helper.make_node("Reshape", ["x", "to_nchw"], ["r"], name="to_nchw")]
    if reader == "Conv":
        nodes.append(helper.make_node("Conv", ["r", "w"], ["y"], kernel_shape=[3, 3],
                                      pads=[1, 1, 1, 1], name="conv"))
    else:  # Conv, then the tf2onnx output Reshape back to NHWC (one channel)
        nodes += [helper.make_node("Conv", ["r", "w1"], ["c"], kernel_shape=[3, 3],
                                   pads=[1, 1, 1, 1], name="conv"),
                  helper.make_node("Reshape", ["c", "to_nhwc"], ["y"], name="to_nhwc")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                   [batch, H, W, channels])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(nchw, np.int64), "to_nchw"),
         numpy_helper.from_array(np.array([nchw[0], H, W, 1], np.int64), "to_nhwc"),
         numpy_helper.from_array(
             rng.standard_normal((M, channels, 3, 3)).astype(np.float32), "w"),
         numpy_helper.from_array(
             rng.standard_normal((1, channels, 3, 3)).astype(np.float32), "w1")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path / "tf2onnx.onnx"
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("batch", [N, "N"], ids=["static", "symbolic"])
@pytest.mark.parametrize("reader", ["Conv", "Conv then back to NHWC"])
def test_a_reshape_moving_the_unit_channel_is_the_nchw_transpose(tmp_path, batch, reader):
    _, model = converts_exactly(_model(tmp_path, batch, reader=reader), tmp_path,
                                symbolic=batch == "N")
    assert "x" not in model.io_permutations  # NHWC at the source: fed as it is
    assert model.graph.op_counts()["Conv"] == 1
    assert "Transpose" not in model.graph.op_counts()


def test_a_reshape_moving_a_real_axis_keeps_its_meaning(tmp_path):
    """(N, H, W, 2) -> (N, 2, H, W) regroups the data: it is no transpose, so it is not read
    as one (refused as before: its NHWC form needs a layout Transpose)."""
    with pytest.raises(UnsupportedOpError) as info:
        convert(_model(tmp_path, N, channels=2), options=ConvertOptions(exact_cut=False))
    assert "conv" in {p.node for p in info.value.problems}
