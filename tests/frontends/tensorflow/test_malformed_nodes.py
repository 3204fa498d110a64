"""Malformed TensorFlow nodes end in the project's errors naming the node (CRASHES.md #17 and
the fuzzer's repeated reduction axes), built as GraphDefs without TensorFlow."""
from __future__ import annotations

import numpy as np
import pytest

from nhwc_onnx.errors import InvalidModelError
from nhwc_onnx.frontends.tensorflow.proto import tf_graph_pb2 as pb
from tests.core_reference import run_core
from tests.frontends.tensorflow.test_reader import _const, _node, _placeholder
from tests.frontends.tensorflow.tf_helpers import load_bytes, rand

T = {"T": pb.AttrValue(type=pb.DT_FLOAT)}


def _mean_graph(axes):
    graph = pb.GraphDef()
    _placeholder(graph, "x", [2, 3, 4])
    _const(graph, "axes", np.array(axes, np.int32))
    _node(graph, "mean", "Mean", ["x", "axes"], keep_dims=pb.AttrValue(b=False), **T)
    return graph


@pytest.mark.parametrize("inputs", [[], ["x"]])
def test_concat_without_values_or_axis_is_an_invalid_model(tmp_path, inputs):
    graph = pb.GraphDef()
    _placeholder(graph, "x", [2, 3])
    _node(graph, "cat", "ConcatV2", inputs, N=pb.AttrValue(i=len(inputs)), **T)
    with pytest.raises(InvalidModelError, match="'cat' \\(ConcatV2"):
        load_bytes(tmp_path, graph.SerializeToString())


@pytest.mark.parametrize("axes, message", [([0, 0, 1, 1], "repeat an axis"),
                                           ([1, -2], "repeat an axis"),
                                           ([3], "out of range for rank 3")])
def test_bad_reduction_axes_are_an_invalid_model(tmp_path, axes, message):
    with pytest.raises(InvalidModelError, match=f"^node 'mean' \\(Mean\\): .*{message}"):
        load_bytes(tmp_path, _mean_graph(axes).SerializeToString())


def test_distinct_reduction_axes_still_convert_with_numpy_numbers(tmp_path):
    model = load_bytes(tmp_path, _mean_graph([0, -1]).SerializeToString())
    x = rand(2, 3, 4)
    (got,) = run_core(model, {model.graph.inputs[0].name: x}).values()
    assert np.allclose(got, x.mean(axis=(0, 2)), atol=1e-6)


def _small(op, second_input, **attrs):
    graph = pb.GraphDef()
    _placeholder(graph, "x", [2, 3])
    _const(graph, "k", second_input)
    _node(graph, "n", op, ["x", "k"], **T, **attrs)
    return graph


@pytest.mark.parametrize("op, second, message", [
    ("Pad", np.array([1], np.int32), "paddings must be a \\[2, 2\\] table"),
    ("Pad", np.zeros((3, 2), np.int32), "paddings must be a \\[2, 2\\] table"),
    ("ArgMin", np.zeros((2, 2), np.int32), "dimension .* must be a scalar"),
    ("ArgMax", np.zeros((2,), np.int32), "dimension .* must be a scalar"),
])
def test_constant_inputs_of_the_wrong_shape_are_invalid_models(tmp_path, op, second, message):
    graph = _small(op, second)
    with pytest.raises(InvalidModelError, match=f"^node 'n' \\({op}\\): .*{message}"):
        load_bytes(tmp_path, graph.SerializeToString())


def test_fill_value_must_be_a_scalar(tmp_path):
    graph = pb.GraphDef()
    _placeholder(graph, "x", [2, 3])
    _const(graph, "dims", np.array([2, 3], np.int32))
    _const(graph, "value", np.ones((2, 2), np.float32))
    _node(graph, "fill", "Fill", ["dims", "value"], **T)
    _node(graph, "y", "AddV2", ["x", "fill"], **T)
    with pytest.raises(InvalidModelError,
                       match="^node 'fill' \\(Fill\\): value .* must be a scalar"):
        load_bytes(tmp_path, graph.SerializeToString())


@pytest.mark.parametrize("ksize", [[1, 0, 2, 1], [1, 1 << 40, 2, 1]])
def test_pool_window_entries_must_be_sane(tmp_path, ksize):
    graph = pb.GraphDef()
    _placeholder(graph, "x", [1, 5, 5, 2])
    lst = pb.AttrValue()
    lst.list.i.extend(ksize)
    strides = pb.AttrValue()
    strides.list.i.extend([1, 1, 1, 1])
    _node(graph, "pool", "MaxPool", ["x"], ksize=lst, strides=strides,
          padding=pb.AttrValue(s=b"SAME"), **T)
    with pytest.raises(InvalidModelError, match="^node 'pool' \\(MaxPool\\): .*ksize"):
        load_bytes(tmp_path, graph.SerializeToString())
